/// The protocol every backend implements.
///
/// A driver offers transactions over named collections. Everything else (typed models,
/// upsert by natural key, change events, migrations, sync) is built by the core on top of
/// these few requirements, so a new backend is small. The contract, executable in
/// `DepotConformance`, is written in Docs/ImplementingAStorageDriver.md.
///
/// Transactions take synchronous closures that the driver runs where it chooses (its own
/// thread for blocking engines), one writer at a time:
///
/// ```swift
/// let count = try await driver.read { tx in try tx.count(.all, in: users) }
/// try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["n": 1]), into: users) }
/// ```
///
/// A closure that throws rolls its transaction back; nothing it did is visible afterwards.
public protocol StorageDriver: AnyObject, Sendable {
    /// A short backend name: `"memory"`, `"sqlite"`, `"gdbm"`, `"json"`.
    var backendName: String { get }

    /// What the driver supports; a conformance check for a missing capability reports
    /// "not supported" instead of passing.
    var capabilities: DriverCapabilities { get }

    /// Runs `body` in a read transaction that sees one consistent snapshot.
    /// - Throws: what `body` throws, or ``DepotError`` (`.closed`, `.locked`, `.io`, `.corrupted`).
    func read<T: Sendable>(_ body: @escaping @Sendable (any ReadTransaction) throws -> T) async throws -> T

    /// Runs `body` in a write transaction: atomic across collections, serializable, durable
    /// per the store's durability when it returns. A throw rolls everything back.
    /// - Throws: what `body` throws, or ``DepotError``.
    @discardableResult
    func write<T: Sendable>(_ body: @escaping @Sendable (any WriteTransaction) throws -> T) async throws -> T

    /// Streams the results of `query` without holding them all in memory.
    func stream(_ query: Query, from collection: CollectionName) -> RecordStream

    /// Checks the stored data; returns the problems found (empty when sound).
    func integrityCheck() async throws -> [String]

    /// Releases files and threads. Later calls throw `.closed`. Closing twice is harmless.
    func close() async throws
}

/// Features a driver may or may not have.
public struct DriverCapabilities: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// Data survives closing and reopening the store.
    public static let persistence = DriverCapabilities(rawValue: 1 << 0)
    /// Write transactions are atomic across collections and roll back on throw.
    public static let transactions = DriverCapabilities(rawValue: 1 << 1)
    /// A read transaction sees one snapshot while writers commit.
    public static let snapshotReads = DriverCapabilities(rawValue: 1 << 2)
    /// Unique constraints are enforced.
    public static let uniqueConstraints = DriverCapabilities(rawValue: 1 << 3)
    /// The store assigns integer ids.
    public static let assignedIDs = DriverCapabilities(rawValue: 1 << 4)
    /// Queries stream without loading every result.
    public static let streaming = DriverCapabilities(rawValue: 1 << 5)
    /// Several processes may open the store (waiting or failing with `.locked`, never corrupting).
    public static let multiProcess = DriverCapabilities(rawValue: 1 << 6)

    /// Everything a complete driver offers, persistence included.
    public static let complete: DriverCapabilities = [.persistence, .transactions, .snapshotReads, .uniqueConstraints, .assignedIDs, .streaming, .multiProcess]

    static let names: [(DriverCapabilities, String)] = [
        (.persistence, "persistence"), (.transactions, "transactions"), (.snapshotReads, "snapshotReads"),
        (.uniqueConstraints, "uniqueConstraints"), (.assignedIDs, "assignedIDs"), (.streaming, "streaming"),
        (.multiProcess, "multiProcess"),
    ]

    public var description: String { DriverCapabilities.names.filter { contains($0.0) }.map(\.1).joined(separator: ", ") }
}

/// Reading inside a transaction. Valid only inside the closure it was given to.
public protocol ReadTransaction: AnyObject {
    /// The collections that exist, reserved ones included, sorted by name.
    func collectionNames() throws -> [CollectionName]

    /// The schema of a collection, `nil` if it does not exist.
    func schema(of collection: CollectionName) throws -> CollectionSchema?

    /// The record with `id`, `nil` if there is none (also when the collection does not exist).
    func get(_ id: RecordID, from collection: CollectionName) throws -> Record?

    /// Calls `body` with each result of `query` in order until it returns `false`.
    /// A missing collection has no records.
    func forEach(_ query: Query, in collection: CollectionName, _ body: (Record) throws -> Bool) throws

    /// Like ``forEach(_:in:_:)``, but each result is offered as a ``FieldSource`` read in
    /// place, so that models decode without an intermediate ``Record``. Same results, same
    /// order, same snapshot rules as `forEach`.
    ///
    /// The default implementation wraps ``forEach(_:in:_:)``; a driver overrides it when it
    /// can read fields in place.
    func forEachFields(_ query: Query, in collection: CollectionName, _ body: (any FieldSource) throws -> Bool) throws

    /// Calls `body` with the record with `id` as a ``FieldSource``; `nil` (and `body` is not
    /// called) when there is no such record. Same answer as ``get(_:from:)``.
    ///
    /// The default implementation wraps ``get(_:from:)``.
    func withFields<T>(of id: RecordID, from collection: CollectionName, _ body: (any FieldSource) throws -> T) throws -> T?

    /// The number of records matching `filter`, without decoding them where the engine can.
    func count(_ filter: Filter, in collection: CollectionName) throws -> Int

    /// How the driver would run `query`.
    func explain(_ query: Query, in collection: CollectionName) throws -> QueryPlan
}

/// Writing inside a transaction. Reads see the transaction's own writes.
///
/// Writing to a collection that does not exist creates it with the id kind of the record
/// written and no constraints. Records are validated (``Record/validate(collection:)``)
/// by the caller; top-level `.null` fields are removed before they reach the driver.
public protocol WriteTransaction: ReadTransaction {
    /// Creates the collection or makes its constraints and indexes exactly those of `schema`.
    /// - Throws: `.schemaMismatch` if the id kind differs, `.uniqueViolation` if existing
    ///   records break a new unique constraint.
    func prepare(_ schema: CollectionSchema) throws

    /// Removes a collection and all its records; `false` if it did not exist.
    @discardableResult
    func dropCollection(_ collection: CollectionName) throws -> Bool

    /// Adds a record. - Throws: `.alreadyExists`, `.uniqueViolation`, `.invalidValue` (id kind).
    func insert(_ record: Record, into collection: CollectionName) throws

    /// Adds a record under a new integer id, greater than every id the collection has had.
    /// - Throws: `.invalidValue` if the collection uses string ids, `.uniqueViolation`.
    func insert(fields: [String: FieldValue], into collection: CollectionName) throws -> RecordID

    /// Replaces a record's fields. - Throws: `.notFound`, `.uniqueViolation`.
    func update(_ record: Record, in collection: CollectionName) throws

    /// Inserts or replaces. - Throws: `.uniqueViolation`.
    @discardableResult
    func save(_ record: Record, into collection: CollectionName) throws -> WriteOutcome

    /// Deletes by id; `false` if there was no such record.
    @discardableResult
    func delete(_ id: RecordID, from collection: CollectionName) throws -> Bool

    /// Deletes every record matching `filter`; returns how many.
    @discardableResult
    func delete(matching filter: Filter, from collection: CollectionName) throws -> Int

    /// Inserts, updates or saves (as `mode` says) the one record whose fields `encode` hands
    /// to a ``FieldSink`` and whose id it returns: the same result and errors as the record
    /// method of that mode, without building the ``Record`` when the driver can place fields
    /// as they come. The default collects them in a dictionary (``writeRecord(_:into:_:)``).
    /// `encode` is called exactly once.
    /// - Throws: what `encode` throws, and the errors of ``insert(_:into:)``,
    ///   ``update(_:in:)`` or ``save(_:into:)``.
    @discardableResult
    func write(_ mode: RecordWriteMode, into collection: CollectionName, _ encode: (any FieldSink) throws -> RecordID) throws -> WriteOutcome
}

/// What a save did.
public enum WriteOutcome: String, Sendable, Hashable {
    case inserted
    case updated
}

extension ReadTransaction {
    /// All results of `query` as an array.
    public func query(_ query: Query, in collection: CollectionName) throws -> [Record] {
        var out: [Record] = []
        try forEach(query, in: collection) { out.append($0); return true }
        return out
    }

    /// The first result of `query`, or `nil`.
    public func first(_ query: Query, in collection: CollectionName) throws -> Record? {
        var found: Record?
        var q = query
        q.limit = 1
        try forEach(q, in: collection) { found = $0; return false }
        return found
    }

    /// `true` when some record matches `filter`.
    public func exists(_ filter: Filter, in collection: CollectionName) throws -> Bool {
        try first(Query(filter: filter), in: collection) != nil
    }
}

extension WriteTransaction {
    /// The default for ``WriteTransaction/delete(matching:from:)``: find the ids, delete each.
    public func deleteEach(matching filter: Filter, from collection: CollectionName) throws -> Int {
        var ids: [RecordID] = []
        try forEach(Query(filter: filter), in: collection) { ids.append($0.id); return true }
        var deleted = 0
        for id in ids where try delete(id, from: collection) { deleted += 1 }
        return deleted
    }
}
