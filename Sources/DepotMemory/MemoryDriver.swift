import DepotCore
import Foundation
import Synchronization

/// A driver that keeps everything in memory: the reference semantics every other
/// driver is compared with, and a fast store for tests and caches.
///
/// Reads see a copy-on-write snapshot of the committed state; writers run one at a time
/// on a private copy that replaces the committed state when the closure returns. Nothing
/// survives the process (no ``DriverCapabilities/persistence``).
///
/// ```swift
/// let store = try await Store(driver: MemoryDriver())
/// ```
public final class MemoryDriver: StorageDriver {
    public let backendName = "memory"
    public var capabilities: DriverCapabilities { DriverCapabilities.complete.subtracting([.persistence, .multiProcess]) }

    private let committed = Mutex(MemoryState())
    private let closed = Mutex(false)
    /// Serializes writers. Held only while a synchronous write closure runs.
    private let writerLock = NSLock()

    public init() {}

    /// Registers `memory:` (no path, no options).
    public static func register(in registry: inout DriverRegistry) {
        registry.register("memory") { location in
            try location.rejectUnknownOptions([])
            guard location.path.isEmpty else {
                throw DepotError(.invalidStore, "A memory store takes no path: write 'memory:'.")
            }
            return MemoryDriver()
        }
    }

    public func read<T: Sendable>(_ body: @escaping @Sendable (any ReadTransaction) throws -> T) async throws -> T {
        try checkOpen()
        let transaction = MemoryTransaction(state: committed.withLock { $0 }, writable: false)
        defer { transaction.isValid = false }
        return try body(transaction)
    }

    @discardableResult
    public func write<T: Sendable>(_ body: @escaping @Sendable (any WriteTransaction) throws -> T) async throws -> T {
        try checkOpen()
        return try writerLock.withLock {
            let transaction = MemoryTransaction(state: committed.withLock { $0 }, writable: true)
            defer { transaction.isValid = false }
            let result = try body(transaction)
            let newState = transaction.state
            committed.withLock { $0 = newState }
            return result
        }
    }

    public func stream(_ query: Query, from collection: CollectionName) -> RecordStream {
        do {
            try checkOpen()
            let snapshot = MemoryTransaction(state: committed.withLock { $0 }, writable: false)
            return RecordStream(try snapshot.query(query, in: collection))
        } catch {
            return RecordStream(failing: DepotError.wrap(error))
        }
    }

    public func integrityCheck() async throws -> [String] {
        try checkOpen()
        return committed.withLock { $0 }.problems()
    }

    public func close() async throws {
        closed.withLock { $0 = true }
    }

    private func checkOpen() throws {
        if closed.withLock({ $0 }) { throw DepotError(.closed, "The memory store is closed.") }
    }
}

/// The committed contents of a memory store. A value: copying it is a snapshot.
struct MemoryState: Sendable {
    var collections: [CollectionName: InMemoryCollection] = [:]

    func problems() -> [String] {
        var found: [String] = []
        for (name, collection) in collections {
            var rebuilt = collection
            do { try rebuilt.rebuildUniqueIndexes() } catch { found.append("\(name): \(error)") }
            if rebuilt.uniqueIndexes != collection.uniqueIndexes { found.append("\(name): unique index out of step") }
        }
        return found
    }
}

/// A transaction over a private copy of the state.
final class MemoryTransaction: WriteTransaction {
    var state: MemoryState
    let writable: Bool
    var isValid = true

    init(state: MemoryState, writable: Bool) {
        self.state = state
        self.writable = writable
    }

    private func checkValid() throws {
        guard isValid else { throw DepotError(.closed, "A transaction was used after its closure returned.") }
    }

    private func checkWritable() throws {
        try checkValid()
        guard writable else { throw DepotError(.unsupported, "Writes need a write transaction.") }
    }

    func collectionNames() throws -> [CollectionName] {
        try checkValid()
        return state.collections.keys.sorted()
    }

    func schema(of collection: CollectionName) throws -> CollectionSchema? {
        try checkValid()
        return state.collections[collection]?.schema
    }

    func get(_ id: RecordID, from collection: CollectionName) throws -> Record? {
        try checkValid()
        return state.collections[collection]?.get(id)
    }

    func forEach(_ query: Query, in collection: CollectionName, _ body: (Record) throws -> Bool) throws {
        try checkValid()
        try query.validate()
        try state.collections[collection]?.forEach(query, body)
    }

    func count(_ filter: Filter, in collection: CollectionName) throws -> Int {
        try checkValid()
        try filter.validate()
        return state.collections[collection]?.count(filter) ?? 0
    }

    func explain(_ query: Query, in collection: CollectionName) throws -> QueryPlan {
        try query.validate()
        return QueryPlan(backend: "memory", filterInEngine: false, sortInEngine: false, pagingInEngine: false, detail: "scan of \(collection) with the shared evaluator")
    }

    func prepare(_ schema: CollectionSchema) throws {
        try checkWritable()
        try schema.validate()
        guard var existing = state.collections[schema.name] else {
            state.collections[schema.name] = InMemoryCollection(schema: schema)
            return
        }
        guard existing.schema.idKind == schema.idKind else {
            throw DepotError(.schemaMismatch, "Collection '\(schema.name)' uses \(existing.schema.idKind) ids, not \(schema.idKind).", collection: schema.name.rawValue)
        }
        existing.schema = schema
        try existing.rebuildUniqueIndexes()
        state.collections[schema.name] = existing
    }

    func dropCollection(_ collection: CollectionName) throws -> Bool {
        try checkWritable()
        return state.collections.removeValue(forKey: collection) != nil
    }

    /// Runs `body` on the collection for a write of an id of `kind` (created if missing).
    ///
    /// The collection is taken out of the state while `body` runs, so `body` mutates the only
    /// reference to its storage: a write costs O(1), not a copy of the whole collection.
    /// `body` must throw only before it changes anything; on a throw the collection goes
    /// back unchanged (and a collection created for the write is not kept).
    private func withCollection<T>(_ name: CollectionName, kind: IDKind, _ body: (inout InMemoryCollection) throws -> T) throws -> T {
        try checkWritable()
        let existed = state.collections.index(forKey: name) != nil
        var target = state.collections.removeValue(forKey: name) ?? InMemoryCollection(schema: CollectionSchema(name: name, idKind: kind))
        guard target.schema.idKind == kind else {
            let existingKind = target.schema.idKind
            state.collections[name] = target
            throw DepotError(.invalidValue, "Collection '\(name)' uses \(existingKind) ids; got a \(kind) id.", collection: name.rawValue)
        }
        do {
            let result = try body(&target)
            state.collections[name] = target
            return result
        } catch {
            if existed { state.collections[name] = target }
            throw error
        }
    }

    func insert(_ record: Record, into collection: CollectionName) throws {
        let record = record.withoutNulls
        try withCollection(collection, kind: record.id.kind) { try $0.insert(record) }
    }

    func insert(fields: [String: FieldValue], into collection: CollectionName) throws -> RecordID {
        try withCollection(collection, kind: .int) { try $0.insertAssigningID(fields) }
    }

    func update(_ record: Record, in collection: CollectionName) throws {
        let record = record.withoutNulls
        try withCollection(collection, kind: record.id.kind) { try $0.update(record) }
    }

    func save(_ record: Record, into collection: CollectionName) throws -> WriteOutcome {
        let record = record.withoutNulls
        return try withCollection(collection, kind: record.id.kind) { try $0.save(record) }
    }

    func delete(_ id: RecordID, from collection: CollectionName) throws -> Bool {
        try checkWritable()
        // Mutates the collection in place (no copy of its records).
        return state.collections[collection]?.remove(id) ?? false
    }

    func delete(matching filter: Filter, from collection: CollectionName) throws -> Int {
        try checkWritable()
        try filter.validate()
        return try deleteEach(matching: filter, from: collection)
    }
}
