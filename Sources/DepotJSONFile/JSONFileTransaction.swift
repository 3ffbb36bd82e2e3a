import DepotCore

/// A transaction over a private copy of the store's state; the driver writes the copy to
/// the file when a write closure returns, and discards it when the closure throws.
final class JSONFileTransaction: WriteTransaction {
    var state: JSONStoreState
    let writable: Bool
    var isValid = true
    /// Set by every write that may have changed the state; a write transaction that
    /// changed nothing does not rewrite the file.
    private(set) var changed = false
    /// Records that may have changed (written or deleted), by collection: the commit
    /// serializes these again and reuses the bytes of every other record.
    private(set) var touched: [CollectionName: Set<RecordID>] = [:]
    /// Collections dropped (and perhaps created again): nothing of theirs is reused.
    private(set) var replaced: Set<CollectionName> = []

    /// The record ``withFields(of:from:_:)`` is offering, as a ``FieldSource``. Unchecked
    /// exclusivity: set only by `withFields` before it calls its body and read only by the
    /// source's methods inside that body, on the one thread that uses the transaction.
    @exclusivity(unchecked) private var sourceID: RecordID = .int(0)
    /// Its fields, short names found without hashing (``OfferedFields``).
    @exclusivity(unchecked) private var offered = OfferedFields()
    /// `true` while `withFields` is offering a record.
    @exclusivity(unchecked) private var offering = false

    init(state: JSONStoreState, writable: Bool) {
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

    /// The record's fields offered with the transaction itself as the ``FieldSource`` (see
    /// the conformance below): a typed point read allocates no source and builds no `Record`.
    func withFields<T>(of id: RecordID, from collection: CollectionName, _ body: (any FieldSource) throws -> T) throws -> T? {
        try checkValid()
        // A read nested in `body` gets a source of its own: this one is in use.
        if offering { return try getRecordAsFields(of: id, from: collection, body) }
        guard let fields = state.collections[collection]?.fields(of: id) else { return nil }
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
        guard let stored = state.collections[collection] else { return }
        guard let order = state.order[collection], let descending = IDOrderWalk.direction(query.sort) else {
            try stored.forEach(query, body)
            return
        }
        try IDOrderWalk.walk(count: order.count, descending: descending, query, id: { order[$0].id }, record: { order[$0] }, body)
    }

    func count(_ filter: Filter, in collection: CollectionName) throws -> Int {
        try checkValid()
        try filter.validate()
        return state.collections[collection]?.count(filter) ?? 0
    }

    func explain(_ query: Query, in collection: CollectionName) throws -> QueryPlan {
        try checkValid()
        try query.validate()
        return QueryPlan(backend: "json", filterInEngine: false, sortInEngine: false, pagingInEngine: false, detail: "scan of \(collection) held in memory, with the shared evaluator")
    }

    func prepare(_ schema: CollectionSchema) throws {
        try checkWritable()
        try schema.validate()
        guard var existing = state.collections[schema.name] else {
            state.collections[schema.name] = InMemoryCollection(schema: schema)
            changed = true
            return
        }
        guard existing.schema.idKind == schema.idKind else {
            throw DepotError(.schemaMismatch, "Collection '\(schema.name)' uses \(existing.schema.idKind) ids, not \(schema.idKind).", collection: schema.name.rawValue)
        }
        if existing.schema == schema { return }
        existing.schema = schema
        try existing.rebuildUniqueIndexes()
        state.collections[schema.name] = existing
        changed = true
    }

    func dropCollection(_ collection: CollectionName) throws -> Bool {
        try checkWritable()
        let dropped = state.collections.removeValue(forKey: collection) != nil
        state.order[collection] = nil
        if dropped {
            changed = true
            replaced.insert(collection)
        }
        return dropped
    }

    /// Runs `body` on the collection for a write of an id of `kind` (created if missing),
    /// taken out of the state while it runs so its storage is not copied again on every
    /// write (the first write of a transaction copies it once: that copy is the snapshot
    /// isolation). It goes back into the state whether `body` throws or not; it only
    /// counts as a change when `body` returns.
    private func modify<T>(_ name: CollectionName, kind: IDKind, _ body: (inout InMemoryCollection) throws -> T) throws -> T {
        try checkWritable()
        state.order[name] = nil
        var target: InMemoryCollection
        let existed: Bool
        if let existing = state.collections.removeValue(forKey: name) {
            guard existing.schema.idKind == kind else {
                state.collections[name] = existing
                throw DepotError(.invalidValue, "Collection '\(name)' uses \(existing.schema.idKind) ids; got a \(kind) id.", collection: name.rawValue)
            }
            target = existing
            existed = true
        } else {
            target = InMemoryCollection(schema: CollectionSchema(name: name, idKind: kind))
            existed = false
        }
        do {
            let result = try body(&target)
            state.collections[name] = target
            changed = true
            return result
        } catch {
            if existed { state.collections[name] = target }
            throw error
        }
    }

    /// Stores a record as `mode` says (``InMemoryCollection/write(_:as:)``).
    func write(_ record: Record, as mode: RecordWriteMode, into collection: CollectionName) throws -> WriteOutcome {
        let record = record.withoutNulls
        touched[collection, default: []].insert(record.id)
        return try modify(collection, kind: record.id.kind) { try $0.write(record, as: mode) }
    }

    func insert(fields: [String: FieldValue], into collection: CollectionName) throws -> RecordID {
        let id = try modify(collection, kind: .int) { try $0.insertAssigningID(fields) }
        touched[collection, default: []].insert(id)
        return id
    }

    func delete(_ id: RecordID, from collection: CollectionName) throws -> Bool {
        try checkWritable()
        guard state.collections[collection]?.records[id] != nil else { return false }
        touched[collection, default: []].insert(id)
        return try modify(collection, kind: id.kind) { $0.remove(id) }
    }
}

/// A transaction is the ``FieldSource`` of the record its ``JSONFileTransaction/withFields(of:from:_:)``
/// is offering (valid only inside that call, as every source is), as the memory driver's is.
extension JSONFileTransaction: FieldSource {
    var recordID: RecordID { sourceID }
    func value(forField name: String) -> FieldValue? { offered.value(name) }
    func fieldNames() -> [String] { Array(offered.fields.keys) }
}
