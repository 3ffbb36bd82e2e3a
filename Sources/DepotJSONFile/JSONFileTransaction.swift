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

    func forEach(_ query: Query, in collection: CollectionName, _ body: (Record) throws -> Bool) throws {
        try checkValid()
        try query.validate()
        guard let stored = state.collections[collection] else { return }
        guard let order = state.order[collection], let descending = JSONFileTransaction.idDirection(query.sort) else {
            try stored.forEach(query, body)
            return
        }
        try JSONFileTransaction.walk(order, descending: descending, query, body)
    }

    /// `false` (ascending) or `true` (descending) when `sort` orders by id alone: no keys,
    /// or `id` first (ids are unique, so later keys never decide); `nil` otherwise.
    static func idDirection(_ sort: [SortKey]) -> Bool? {
        guard let first = sort.first else { return false }
        return first.field == "id" ? first.descending : nil
    }

    /// The results of `query` over `order` (all of a collection's records, in id order) in
    /// the requested direction: the same results, in the same order, as the shared evaluator
    /// gives, without sorting. Bounds on `id` in the filter's top-level conjuncts narrow the
    /// walk by binary search; every record walked is still matched against the whole filter.
    static func walk(_ order: [Record], descending: Bool, _ query: Query, _ body: (Record) throws -> Bool) throws {
        let (lower, upper) = idRange(order, query.filter)
        guard lower < upper else { return }
        var skip = query.offset
        var left = query.limit ?? Int.max
        guard left > 0 else { return }
        let matchesAll: Bool
        if case .all = query.filter { matchesAll = true } else { matchesAll = false }
        func visit(_ record: Record) throws -> Bool {
            guard matchesAll || QueryEvaluator.matches(query.filter, record) else { return true }
            if skip > 0 {
                skip -= 1
                return true
            }
            left -= 1
            return try body(record) && left > 0
        }
        if descending {
            for i in stride(from: upper - 1, through: lower, by: -1) where try !visit(order[i]) { return }
        } else {
            for i in lower..<upper where try !visit(order[i]) { return }
        }
    }

    /// The positions in `order` that can match `filter`, from its top-level bounds on `id`
    /// of the ids' own kind (a bound of another kind matches nothing, and is left to the
    /// per-record match). Everything outside the range certainly fails the filter.
    static func idRange(_ order: [Record], _ filter: Filter) -> (Int, Int) {
        var lower = 0, upper = order.count
        guard let sample = order.first?.id.fieldValue else { return (0, 0) }
        let conjuncts: [Filter]
        switch filter {
        case .and(let filters): conjuncts = filters
        default: conjuncts = [filter]
        }
        /// The first position whose id compares with `operand` so that `satisfied` holds for
        /// it and every later id (the comparison is monotonic along `order`).
        func partition(_ operand: FieldValue, _ satisfied: (Int) -> Bool) -> Int {
            var low = 0, high = order.count
            while low < high {
                let mid = (low + high) / 2
                if let c = QueryEvaluator.rangeCompare(order[mid].id.fieldValue, operand), satisfied(c) { high = mid } else { low = mid + 1 }
            }
            return low
        }
        for conjunct in conjuncts {
            switch conjunct {
            case .greater("id", let v) where QueryEvaluator.rangeCompare(sample, v) != nil:
                lower = max(lower, partition(v) { $0 > 0 })
            case .greaterOrEqual("id", let v) where QueryEvaluator.rangeCompare(sample, v) != nil:
                lower = max(lower, partition(v) { $0 >= 0 })
            case .less("id", let v) where QueryEvaluator.rangeCompare(sample, v) != nil:
                upper = min(upper, partition(v) { $0 >= 0 })
            case .lessOrEqual("id", let v) where QueryEvaluator.rangeCompare(sample, v) != nil:
                upper = min(upper, partition(v) { $0 > 0 })
            default:
                break
            }
        }
        return (lower, upper)
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
