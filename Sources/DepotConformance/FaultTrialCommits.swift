import DepotCore

/// The commits of the I/O fault trials (Docs/Testing.md): a store set up with one record in
/// each of two collections, then one transaction that updates, inserts and deletes across both,
/// so that a store showing part of it (a mix) is told apart from the old and the new state,
/// then one more commit once the disk works again. A fault test adopts it to share them.
public protocol FaultTrialCommits {}

/// The records of the two collections `a` and `b`, by id, as `v` values.
public struct FaultTrialState: Equatable, Sendable, CustomStringConvertible {
    /// Collection `a`'s records.
    public var a: [RecordID: String] = [:]
    /// Collection `b`'s records.
    public var b: [RecordID: String] = [:]

    /// A state.
    public init(a: [RecordID: String] = [:], b: [RecordID: String] = [:]) {
        self.a = a
        self.b = b
    }

    /// Both collections, sorted by id.
    public var description: String { "a \(a.sorted { $0.key < $1.key }) b \(b.sorted { $0.key < $1.key })" }
}

extension FaultTrialCommits {
    /// The state of both collections.
    public typealias State = FaultTrialState

    /// Collection `a`.
    public static var a: CollectionName { get throws { try CollectionName("a") } }
    /// Collection `b`.
    public static var b: CollectionName { get throws { try CollectionName("b") } }
    /// After the setup commit.
    public static var old: State { State(a: [1: "one"], b: [1: "one"]) }
    /// After the tested commit: `a` 1 updated and 2 inserted; `b` 1 deleted and 2 inserted.
    public static var new: State { State(a: [1: "uno", 2: "two"], b: [2: "two"]) }

    /// The setup commit: record 1 in each collection.
    public static func setUp(_ tx: any WriteTransaction) throws {
        try tx.insert(Record(id: 1, fields: ["v": "one"]), into: a)
        try tx.insert(Record(id: 1, fields: ["v": "one"]), into: b)
    }

    /// The tested commit, from ``old`` to ``new``.
    public static func change(_ tx: any WriteTransaction) throws {
        try tx.update(Record(id: 1, fields: ["v": "uno"]), in: a)
        try tx.insert(Record(id: 2, fields: ["v": "two"]), into: a)
        try tx.delete(1, from: b)
        try tx.insert(Record(id: 2, fields: ["v": "two"]), into: b)
    }

    /// The commit that follows once the disk works again.
    public static func next(_ tx: any WriteTransaction) throws {
        try tx.insert(Record(id: 3, fields: ["v": "three"]), into: a)
    }

    /// What `driver` shows of both collections (a record without a string `v` shows as "?").
    public static func state(_ driver: some StorageDriver) async throws -> State {
        let a = try a, b = try b
        return try await driver.read { tx in
            var state = State()
            for record in try tx.query(Query(), in: a) { state.a[record.id] = record.fields["v"]?.stringValue ?? "?" }
            for record in try tx.query(Query(), in: b) { state.b[record.id] = record.fields["v"]?.stringValue ?? "?" }
            return state
        }
    }
}
