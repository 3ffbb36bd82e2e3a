import DepotCore
import Foundation

/// A driver that keeps everything in memory: the reference semantics every other
/// driver is compared with, and a fast store for tests and caches.
///
/// One copy of the state, guarded by a readers-writer lock. A read transaction holds it in
/// read mode while its closure runs; a write transaction holds it in write mode and changes
/// the state in place, noting in an undo log what each change replaced, and a closure that
/// throws is undone from the log. So a write costs what it changes, not a copy of the
/// collection (which copy-on-write snapshots would cost), readers wait for a running write
/// closure instead of reading beside it, and a stream takes its results when it is made.
/// Nothing survives the process (no ``DriverCapabilities/persistence``).
///
/// ```swift
/// let store = try await Store(driver: MemoryDriver())
/// ```
public final class MemoryDriver: StorageDriver {
    public let backendName = "memory"
    public var capabilities: DriverCapabilities { DriverCapabilities.complete.subtracting([.persistence, .multiProcess]) }

    /// The state; read and written only while `lock` is held (see the type's comment).
    private let box = MemoryStateBox()
    private let lock = ReadWriteLock()
    private let closed = Locked(false)

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
        try readBlocking(body)
    }

    /// ``readBlocking(_:)``, as ``read(_:)`` does: the memory driver has no thread of its own
    /// to hand work to, and its lock is only ever held for work in memory. Always `true`.
    public func readWithoutWaiting(_ body: (any ReadTransaction) throws -> Void) throws -> Bool {
        try readBlocking(body)
        return true
    }

    /// Runs `body` under the store's read lock on the calling thread.
    public func readBlocking<T>(_ body: (any ReadTransaction) throws -> T) throws -> T {
        try checkOpen()
        lock.readLock()
        defer { lock.unlock() }
        let transaction = MemoryTransaction(box: box, writable: false)
        defer { transaction.isValid = false }
        return try body(transaction)
    }

    @discardableResult
    public func write<T: Sendable>(_ body: @escaping @Sendable (any WriteTransaction) throws -> T) async throws -> T {
        try writeBlocking(body)
    }

    /// Runs `body` under the store's write lock on the calling thread.
    @discardableResult
    public func writeBlocking<T>(_ body: (any WriteTransaction) throws -> T) throws -> T {
        try checkOpen()
        lock.writeLock()
        defer { lock.unlock() }
        let transaction = MemoryTransaction(box: box, writable: true)
        defer { transaction.isValid = false }
        do {
            return try body(transaction)
        } catch {
            transaction.rollBack()
            throw error
        }
    }

    public func stream(_ query: Query, from collection: CollectionName) -> RecordStream {
        do {
            try checkOpen()
            try query.validate()
            // A write closure holds the lock, perhaps on this very thread (a stream made
            // inside a write closure): then the stream reads when iteration starts.
            guard lock.tryReadLock() else {
                return RecordStream(deferred: { try await self.read { tx in try tx.query(query, in: collection) } })
            }
            defer { lock.unlock() }
            let snapshot = MemoryTransaction(box: box, writable: false)
            defer { snapshot.isValid = false }
            return RecordStream(try snapshot.query(query, in: collection))
        } catch {
            return RecordStream(failing: DepotError.wrap(error))
        }
    }

    public func integrityCheck() async throws -> [String] {
        try checkOpen()
        lock.readLock()
        defer { lock.unlock() }
        return box.state.problems()
    }

    public func close() async throws {
        closed.withLock { $0 = true }
    }

    private func checkOpen() throws {
        if closed.withLock({ $0 }) { throw DepotError(.closed, "The memory store is closed.") }
    }
}

/// The contents of a memory store.
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

/// Holds a memory store's one state, so transactions change it in place.
final class MemoryStateBox: @unchecked Sendable {
    // @unchecked: `state` is read and written only under the driver's readers-writer lock.
    var state = MemoryState()
}

/// A transaction over the store's state, made and used while the driver's lock is held.
///
/// A writable one changes the state in place. Before each change of a record it notes the
/// record's previous fields (or that there was none), and before its first change in a
/// collection that collection's last assigned id; before creating, dropping or re-preparing a
/// collection it notes the whole collection (or that there was none), after which that
/// collection's records need no notes. ``rollBack()`` puts back what the notes say: whole
/// collections first, then single records, newest note first, each with its unique-index
/// entries.
final class MemoryTransaction: WriteTransaction {
    // Not Sendable in use: made and used on one thread while the driver's lock is held.
    private let box: MemoryStateBox
    let writable: Bool
    var isValid = true
    /// Collections as they were before this transaction first created, dropped or
    /// re-prepared them (`nil`: there was none).
    private var savedCollections: [CollectionName: InMemoryCollection?] = [:]
    /// Per collection, the undo notes of its record changes.
    private var savedRecords: [CollectionName: SavedRecords] = [:]
    /// The entry of `savedRecords` used last (writes come in runs on one collection).
    private var lastSaved: SavedRecords?

    /// The undo notes of one collection's record changes in a transaction.
    private final class SavedRecords {
        let name: CollectionName
        /// The collection's last assigned id before the transaction.
        let lastAssignedID: Int64
        /// Every change in order: the id and its fields before that change (`nil`: absent).
        var records: [(id: RecordID, fields: [String: FieldValue]?)] = []

        init(name: CollectionName, lastAssignedID: Int64) {
            self.name = name
            self.lastAssignedID = lastAssignedID
        }
    }

    /// The record ``withFields(of:from:_:)`` is offering, as a ``FieldSource``. Unchecked
    /// exclusivity: set only by `withFields` before it calls its body and read only by the
    /// source's methods inside that body, on the one thread that uses the transaction; the
    /// dynamic check cost a tenth of a typed read's decode (Docs/measurements/2026-11-29-night.md).
    @exclusivity(unchecked) private var sourceID: RecordID = .int(0)
    /// Its fields, short names found without hashing (``OfferedFields``).
    @exclusivity(unchecked) private var offered = OfferedFields()
    /// `true` while `withFields` is offering a record.
    @exclusivity(unchecked) private var offering = false

    init(box: MemoryStateBox, writable: Bool) {
        self.box = box
        self.writable = writable
    }

    private var state: MemoryState {
        get { box.state }
        _modify { yield &box.state }
    }

    /// Notes `collection` whole before a change of its existence or schema.
    private func saveCollection(_ collection: CollectionName) {
        guard savedCollections.index(forKey: collection) == nil else { return }
        savedCollections[collection] = .some(state.collections[collection])
        // Its records need no more notes (see the type's comment).
        if lastSaved?.name == collection { lastSaved = nil }
    }

    /// Notes the record `id` of `collection` before a change of it.
    private func saveRecord(_ id: RecordID, in collection: CollectionName) {
        guard let existing = state.collections[collection] else { return }
        saveRecord(id, of: existing)
    }

    private func saveRecord(_ id: RecordID, of collection: InMemoryCollection) {
        let name = collection.schema.name
        let saved: SavedRecords
        if let last = lastSaved, last.name == name {
            saved = last
        } else {
            guard savedCollections.index(forKey: name) == nil else { return }
            if let existing = savedRecords[name] {
                saved = existing
            } else {
                saved = SavedRecords(name: name, lastAssignedID: collection.lastAssignedID)
                savedRecords[name] = saved
            }
            lastSaved = saved
        }
        saved.records.append((id, collection.records[id]))
    }

    /// Undoes every change of this transaction (its closure threw).
    func rollBack() {
        for (name, saved) in savedCollections {
            state.collections[name] = saved
        }
        for (name, saved) in savedRecords {
            guard state.collections[name] != nil else { continue }
            // Newest change first: each step goes back to a state the transaction had (so
            // unique values never collide on the way) and the last to the one before it.
            for (id, fields) in saved.records.reversed() {
                _ = state.collections[name]?.remove(id)
                if let fields { state.collections[name]?.put(Record(id: id, fields: fields)) }
            }
            state.collections[name]?.lastAssignedID = saved.lastAssignedID
        }
        savedCollections = [:]
        savedRecords = [:]
        lastSaved = nil
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

    /// The record's fields offered with the transaction itself as the ``FieldSource`` (see
    /// the conformance below): a typed point read allocates no source and builds no `Record`.
    func withFields<T>(of id: RecordID, from collection: CollectionName, _ body: (any FieldSource) throws -> T) throws -> T? {
        try checkValid()
        // A read nested in `body` gets a source of its own: this one is in use.
        if offering { return try getRecordAsFields(of: id, from: collection, body) }
        guard let fields = box.state.collections[collection]?.fields(of: id) else { return nil }
        sourceID = id
        offered.offer(fields)
        offering = true
        defer {
            offered.clear()
            offering = false
        }
        return try body(self)
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
            saveCollection(schema.name)
            state.collections[schema.name] = InMemoryCollection(schema: schema)
            return
        }
        guard existing.schema.idKind == schema.idKind else {
            throw DepotError(.schemaMismatch, "Collection '\(schema.name)' uses \(existing.schema.idKind) ids, not \(schema.idKind).", collection: schema.name.rawValue)
        }
        existing.schema = schema
        try existing.rebuildUniqueIndexes()
        saveCollection(schema.name)
        state.collections[schema.name] = existing
    }

    func dropCollection(_ collection: CollectionName) throws -> Bool {
        try checkWritable()
        guard state.collections[collection] != nil else { return false }
        saveCollection(collection)
        state.collections[collection] = nil
        return true
    }

    /// Runs `body` on the collection for a write of the record `id` (or of a new id, when
    /// `id` is `nil`) of `kind`; the collection is created if missing.
    ///
    /// The collection is changed in place (the state is the only holder of its storage, so a
    /// write costs O(1), not a copy of the whole collection). `body` must throw only before
    /// it changes anything; a collection created for a write that throws is not kept.
    private func withCollection<T>(_ name: CollectionName, kind: IDKind, id: RecordID?, _ body: (inout InMemoryCollection) throws -> T) throws -> T {
        try checkWritable()
        guard var target = state.collections.removeValue(forKey: name) else {
            var created = InMemoryCollection(schema: CollectionSchema(name: name, idKind: kind))
            let result = try body(&created)
            saveCollection(name)
            state.collections[name] = created
            return result
        }
        // Taken out of the state while `body` runs, so `body` changes the only reference to
        // its storage; put back on every path.
        defer { state.collections[name] = target }
        guard target.schema.idKind == kind else {
            throw DepotError(.invalidValue, "Collection '\(name)' uses \(target.schema.idKind) ids; got a \(kind) id.", collection: name.rawValue)
        }
        saveRecord(id ?? .int(max(target.lastAssignedID, 0) &+ 1), of: target)
        return try body(&target)
    }

    /// Stores a record as `mode` says (``InMemoryCollection/write(_:as:)``).
    func write(_ record: Record, as mode: RecordWriteMode, into collection: CollectionName) throws -> WriteOutcome {
        let record = record.withoutNulls
        return try withCollection(collection, kind: record.id.kind, id: record.id) { try $0.write(record, as: mode) }
    }

    func insert(fields: [String: FieldValue], into collection: CollectionName) throws -> RecordID {
        try withCollection(collection, kind: .int, id: nil) { try $0.insertAssigningID(fields) }
    }

    func delete(_ id: RecordID, from collection: CollectionName) throws -> Bool {
        try checkWritable()
        guard state.collections[collection]?.records[id] != nil else { return false }
        saveRecord(id, in: collection)
        return state.collections[collection]?.remove(id) ?? false
    }
}

/// A transaction is the ``FieldSource`` of the record its ``MemoryTransaction/withFields(of:from:_:)``
/// is offering (valid only inside that call, as every source is): the transaction object
/// exists anyway, so a typed point read needs no other.
extension MemoryTransaction: FieldSource {
    var recordID: RecordID { sourceID }
    func value(forField name: String) -> FieldValue? { offered.value(name) }
    func fieldNames() -> [String] { Array(offered.fields.keys) }
}
