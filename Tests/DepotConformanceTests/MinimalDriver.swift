import DepotConformance
import DepotCore
import Foundation
import Testing

/// A third-party driver that writes only the core requirements of the driver contract
/// (Docs/ImplementingAStorageDriver.md, "The core"): five of `StorageDriver`, four of
/// `ReadTransaction`, four of `WriteTransaction`. Everything else (count, explain,
/// streams, bulk deletes, the field-sink write, integrity check) comes from the defaults.
/// The whole conformance suite runs against it below.
final class MinimalDriver: StorageDriver {
    private struct State {
        var collections: [CollectionName: InMemoryCollection] = [:]
        var closed = false
    }
    private let state = Locked(State())
    /// One writer at a time; readers never wait for it (they read the last committed state).
    private let writer = Locked(())

    let backendName = "minimal"
    let capabilities: DriverCapabilities = [.transactions, .snapshotReads, .uniqueConstraints]

    private func committed() throws -> [CollectionName: InMemoryCollection] {
        try state.withLock { state in
            guard !state.closed else { throw DepotError(.closed, "The minimal driver is closed.") }
            return state.collections
        }
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (any ReadTransaction) throws -> T) async throws -> T {
        let tx = MinimalTransaction(try committed(), writable: false)
        defer { tx.isOpen = false }
        return try body(tx)
    }

    func write<T: Sendable>(_ body: @escaping @Sendable (any WriteTransaction) throws -> T) async throws -> T {
        try writer.withLock { _ in
            let tx = MinimalTransaction(try committed(), writable: true)
            defer { tx.isOpen = false }
            let result = try body(tx)
            try state.withLock { state in
                guard !state.closed else { throw DepotError(.closed, "The minimal driver is closed.") }
                state.collections = tx.collections
            }
            return result
        }
    }

    func close() async throws { state.withLock { $0.closed = true } }
}

/// A transaction over a private copy of the collections: a write commits by handing its copy back.
final class MinimalTransaction: WriteTransaction {
    var collections: [CollectionName: InMemoryCollection]
    let writable: Bool
    var isOpen = true

    init(_ collections: [CollectionName: InMemoryCollection], writable: Bool) {
        self.collections = collections
        self.writable = writable
    }

    private func usable(writing: Bool = false) throws {
        guard isOpen else { throw DepotError(.closed, "A transaction was used after its closure returned.") }
        guard !writing || writable else { throw DepotError(.unsupported, "Writes need a write transaction.") }
    }

    func collectionNames() throws -> [CollectionName] {
        try usable()
        return collections.keys.sorted { $0.rawValue.utf8.lexicographicallyPrecedes($1.rawValue.utf8) }
    }

    func schema(of collection: CollectionName) throws -> CollectionSchema? {
        try usable()
        return collections[collection]?.schema
    }

    func get(_ id: RecordID, from collection: CollectionName) throws -> Record? {
        try usable()
        return collections[collection]?.get(id)
    }

    func forEach(_ query: Query, in collection: CollectionName, _ body: (Record) throws -> Bool) throws {
        try usable()
        try query.validate()
        try collections[collection]?.forEach(query, body)
    }

    func prepare(_ schema: CollectionSchema) throws {
        try usable(writing: true)
        try schema.validate()
        guard var existing = collections[schema.name] else {
            collections[schema.name] = InMemoryCollection(schema: schema)
            return
        }
        guard existing.schema.idKind == schema.idKind else {
            throw DepotError(.schemaMismatch, "Collection '\(schema.name)' uses \(existing.schema.idKind) ids, not \(schema.idKind).", collection: schema.name.rawValue)
        }
        existing.schema = schema
        try existing.rebuildUniqueIndexes()
        collections[schema.name] = existing
    }

    func dropCollection(_ collection: CollectionName) throws -> Bool {
        try usable(writing: true)
        return collections.removeValue(forKey: collection) != nil
    }

    func write(_ record: Record, as mode: RecordWriteMode, into collection: CollectionName) throws -> WriteOutcome {
        try usable(writing: true)
        guard let kind = collections[collection]?.schema.idKind else {
            // The first record of a collection makes it; a refused one makes nothing.
            var fresh = InMemoryCollection(schema: CollectionSchema(name: collection, idKind: record.id.kind))
            let outcome = try fresh.write(record.withoutNulls, as: mode)
            collections[collection] = fresh
            return outcome
        }
        guard kind == record.id.kind else {
            throw DepotError(.invalidValue, "Collection '\(collection)' uses \(kind) ids; got a \(record.id.kind) id.", collection: collection.rawValue)
        }
        // Changed where it lies in the dictionary: a copy taken out and put back would copy
        // the whole collection on every record (copy-on-write sees two owners).
        guard let outcome = try collections[collection]?.write(record.withoutNulls, as: mode) else {
            throw DepotError(.internal, "Collection '\(collection)' went missing inside its transaction.", collection: collection.rawValue)
        }
        return outcome
    }

    func delete(_ id: RecordID, from collection: CollectionName) throws -> Bool {
        try usable(writing: true)
        return collections[collection]?.remove(id) ?? false
    }
}

/// The whole conformance library against a driver with only the core requirements: what a
/// third-party driver must write is exactly those.
@Suite struct MinimalDriverConformanceTests {
    static let factory = DriverFactory(name: "minimal") { _ in MinimalDriver() }

    @Test(arguments: Conformance.checkNames)
    func conformance(_ name: String) async throws {
        let outcome = try await Conformance.run(name, factory: Self.factory)
        if case .notSupported(let missing) = outcome {
            withKnownIssue("the minimal driver does not declare \(missing)") { throw ConformanceNotRun() }
        }
    }
}

/// A driver that does not override `readWithoutWaiting` declines every time without running
/// the closure, and `Collection.get` and `Repository.find` then answer through `read`.
@Suite struct MinimalDriverReadWithoutWaitingTests {
    struct Item: Model, Equatable {
        var id: Int64?
        var n: Int
        static let collectionName = "items"
    }

    @Test func theDefaultDeclinesAndReadsGoThroughRead() async throws {
        let driver = MinimalDriver()
        let items = try CollectionName("items")
        try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["n": 5]), into: items) }
        var ran = false
        #expect(try !driver.readWithoutWaiting { _ in ran = true })
        #expect(!ran)
        let store = try await Store(driver: driver)
        #expect(try await store.collection(items).get(1)?.fields["n"] == 5)
        #expect(try await store.collection(items).get(2) == nil)
        let repository = try await store.repository(Item.self)
        #expect(try await repository.find(id: 1) == Item(id: 1, n: 5))
        #expect(try await repository.find(id: 2) == nil)
    }
}
