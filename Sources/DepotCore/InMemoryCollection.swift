
/// One collection held in memory: its schema, records, unique indexes and the highest integer
/// id ever used. The shared building block of drivers that keep their data in memory
/// (MemoryDriver, JSONFileDriver); pure values, no I/O.
public struct InMemoryCollection: Sendable {
    /// The collection's name, id kind, constraints and indexes.
    public var schema: CollectionSchema
    /// Every record's fields by id; the source of truth the unique indexes are built from.
    /// Changing it directly (rather than through ``put(_:)``, ``remove(_:)`` and the write
    /// methods) drops the id order, which the next query in id order rebuilds.
    public var records: [RecordID: [String: FieldValue]] {
        get { storage }
        set {
            storage = newValue
            order = OrderedIDs()
        }
        _modify {
            order = OrderedIDs()
            yield &storage
        }
    }
    private var storage: [RecordID: [String: FieldValue]] = [:]
    /// The ids in order, for queries in id order (``forEach(_:_:)``): built by the first such
    /// query, then kept up to date by every write.
    private var order = OrderedIDs()
    /// Per unique constraint name: normalized key → owning id.
    public var uniqueIndexes: [String: [[FieldValue]: RecordID]] = [:]
    /// The highest integer id the collection has ever held (persisted in the metadata).
    public var lastAssignedID: Int64 = 0

    /// An empty collection with `schema`'s constraints (and their empty indexes).
    public init(schema: CollectionSchema) {
        self.schema = schema
        for constraint in schema.uniqueConstraints { uniqueIndexes[constraint.name] = [:] }
    }

    /// Rebuilds every unique index from the records.
    /// - Throws: `.uniqueViolation` naming the constraint when two records collide.
    public mutating func rebuildUniqueIndexes() throws {
        var indexes: [String: [[FieldValue]: RecordID]] = [:]
        for constraint in schema.uniqueConstraints {
            var index: [[FieldValue]: RecordID] = [:]
            for (id, fields) in records {
                guard let key = constraint.key(for: Record(id: id, fields: fields)) else { continue }
                if index[key] != nil {
                    throw DepotError(.uniqueViolation, "Existing records break unique constraint '\(constraint.name)'.", collection: schema.name.rawValue, id: id, constraint: constraint.name)
                }
                index[key] = id
            }
            indexes[constraint.name] = index
        }
        uniqueIndexes = indexes
    }

    /// Checks that storing `record` would break no unique constraint; a record may keep its own
    /// key.
    /// - Throws: `.uniqueViolation` naming the first constraint another record already holds.
    public func checkUnique(_ record: Record) throws {
        for constraint in schema.uniqueConstraints {
            guard let key = constraint.key(for: record), let owner = uniqueIndexes[constraint.name]?[key], owner != record.id else { continue }
            throw DepotError(
                .uniqueViolation, "Another record already has these values for unique constraint '\(constraint.name)' (\(constraint.fields.joined(separator: ", "))).",
                collection: schema.name.rawValue, id: record.id, constraint: constraint.name)
        }
    }

    /// Stores `record` without checks, updating the unique indexes and ``lastAssignedID``; call
    /// ``checkUnique(_:)`` first.
    public mutating func put(_ record: Record) {
        if let old = storage[record.id] {
            removeKeys(Record(id: record.id, fields: old))
        } else {
            ownOrder()
            order.added(record.id)
        }
        storage[record.id] = record.fields
        for constraint in schema.uniqueConstraints {
            if let key = constraint.key(for: record) { uniqueIndexes[constraint.name, default: [:]][key] = record.id }
        }
        if case .int(let i) = record.id, i > lastAssignedID { lastAssignedID = i }
    }

    // MARK: Reads and writes, as a driver transaction answers them

    /// The fields of the record with `id`, if any: ``get(_:)`` without building a ``Record``.
    public func fields(of id: RecordID) -> [String: FieldValue]? { storage[id] }

    /// The record with `id`, if any.
    public func get(_ id: RecordID) -> Record? {
        storage[id].map { Record(id: id, fields: $0) }
    }

    /// Calls `body` with each result of `query` until it returns `false`: a query in id
    /// order (no sort keys, or `id` first) walks the ids in order (``IDOrderWalk``), any
    /// other runs through the shared evaluator.
    public func forEach(_ query: Query, _ body: (Record) throws -> Bool) rethrows {
        if let descending = IDOrderWalk.direction(query.sort) {
            let (sorted, pending) = order.ascending(storage)
            let storage = self.storage
            try IDOrderWalk.walk(sorted, pending, descending: descending, query, record: { id in storage[id].map { Record(id: id, fields: $0) } }, body)
            return
        }
        let results = QueryEvaluator.execute(query, over: storage.lazy.map { Record(id: $0.key, fields: $0.value) })
        for record in results where try !body(record) { break }
    }

    /// Makes ``order`` this collection's own before a change (copies share it until then).
    private mutating func ownOrder() {
        if !isKnownUniquelyReferenced(&order) { order = order.copy() }
    }

    /// The number of records matching `filter`.
    public func count(_ filter: Filter) -> Int {
        if case .all = filter { return storage.count }
        return storage.reduce(0) { $0 + (QueryEvaluator.matches(filter, Record(id: $1.key, fields: $1.value)) ? 1 : 0) }
    }

    /// Stores `record` (without top-level nulls) as `mode` says: the semantics of
    /// ``WriteTransaction/write(_:as:into:)`` for a collection held in memory.
    /// - Throws: `.alreadyExists` (insert), `.notFound` (update), `.uniqueViolation`;
    ///   nothing changes then.
    @discardableResult
    public mutating func write(_ record: Record, as mode: RecordWriteMode) throws -> WriteOutcome {
        let exists = storage[record.id] != nil
        switch (mode, exists) {
        case (.insert, true):
            throw DepotError(.alreadyExists, "A record with id \(record.id) exists.", collection: schema.name.rawValue, id: record.id)
        case (.update, false):
            throw DepotError(.notFound, "No record with id \(record.id).", collection: schema.name.rawValue, id: record.id)
        default:
            try checkUnique(record)
            put(record)
            return exists ? .updated : .inserted
        }
    }

    /// Adds a record without top-level nulls. - Throws: `.alreadyExists`, `.uniqueViolation`; nothing changes then.
    public mutating func insert(_ record: Record) throws {
        try write(record, as: .insert)
    }

    /// Adds `fields` under the next integer id (above every id the collection has held) and returns it.
    /// - Throws: `.invalidValue` when no id is left, `.uniqueViolation`; nothing changes then.
    public mutating func insertAssigningID(_ fields: [String: FieldValue]) throws -> RecordID {
        let base = max(lastAssignedID, 0)
        guard base < Int64.max else {
            throw DepotError(.invalidValue, "No integer ids are left in '\(schema.name)'.", collection: schema.name.rawValue)
        }
        let record = Record(id: .int(base + 1), fields: fields).withoutNulls
        try checkUnique(record)
        put(record)
        return record.id
    }

    /// Replaces an existing record. - Throws: `.notFound`, `.uniqueViolation`; nothing changes then.
    public mutating func update(_ record: Record) throws {
        try write(record, as: .update)
    }

    /// Inserts or replaces a record. - Throws: `.uniqueViolation`; nothing changes then.
    public mutating func save(_ record: Record) throws -> WriteOutcome {
        try write(record, as: .save)
    }

    /// Removes the record with `id` and its unique keys; `false` if there was none.
    public mutating func remove(_ id: RecordID) -> Bool {
        guard let old = storage.removeValue(forKey: id) else { return false }
        ownOrder()
        order.removed()
        removeKeys(Record(id: id, fields: old))
        return true
    }

    private mutating func removeKeys(_ record: Record) {
        for constraint in schema.uniqueConstraints {
            if let key = constraint.key(for: record), uniqueIndexes[constraint.name]?[key] == record.id {
                uniqueIndexes[constraint.name]?[key] = nil
            }
        }
    }
}

/// The ids of an ``InMemoryCollection`` in ascending order, for queries in id order.
///
/// Built (by sorting) on the first such query, then kept up to date at small cost: an id
/// added above the largest is appended; any other is inserted in a second, small sorted
/// array (`pending`) that a query walks together with the first, and that is merged into it
/// once it holds more than ``mergeThreshold`` ids (so the cost of a merge, which copies every
/// id, is spread over that many writes). A removed id stays until more than a quarter of the
/// ids are such; walks skip ids without a record. Shared by copies of the collection until
/// one of them writes (``InMemoryCollection/put(_:)`` copies it first); a mutex guards the
/// lazy build and merges, which happen during reads that may run on several threads.
final class OrderedIDs: Sendable {
    struct State {
        /// Ascending, no repeats; may hold ids since removed (`stale` of them, at most).
        var sorted: [RecordID] = []
        /// Ids added out of order since the last merge: ascending, no repeats; may repeat
        /// ids of `sorted` (an id removed and added again).
        var pending: [RecordID] = []
        var stale = 0
        /// `false` until the first query in id order: until then writes note nothing.
        var built = false
    }

    /// Pending ids merged into the main array.
    static let mergeThreshold = 1024

    private let state: Locked<State>

    init(_ state: State = State()) { self.state = Locked(state) }

    /// A copy with its own state.
    func copy() -> OrderedIDs { OrderedIDs(state.withLock { $0 }) }

    /// Notes a record added under `id` (absent before).
    func added(_ id: RecordID) {
        state.withLock { s in
            guard s.built else { return }
            if s.sorted.last.map({ $0 < id }) ?? true, s.pending.last.map({ $0 < id }) ?? true {
                s.sorted.append(id)
                return
            }
            var low = 0, high = s.pending.count
            while low < high {
                let mid = (low + high) / 2
                if s.pending[mid] < id { low = mid + 1 } else { high = mid }
            }
            if low == s.pending.count || s.pending[low] != id { s.pending.insert(id, at: low) }
        }
    }

    /// Notes a record removed.
    func removed() {
        state.withLock { s in if s.built { s.stale += 1 } }
    }

    /// The ids in ascending order, as two ascending arrays to walk together, possibly with
    /// some ids of removed records (`records` tells): built, merged or compacted first as due.
    func ascending(_ records: [RecordID: [String: FieldValue]]) -> (sorted: [RecordID], pending: [RecordID]) {
        state.withLock { s in
            if !s.built {
                s = State(sorted: records.keys.sorted(), pending: [], stale: 0, built: true)
                return (s.sorted, [])
            }
            if s.pending.count > OrderedIDs.mergeThreshold {
                var merged: [RecordID] = []
                merged.reserveCapacity(s.sorted.count + s.pending.count)
                var i = 0, j = 0
                while i < s.sorted.count || j < s.pending.count {
                    if j == s.pending.count || (i < s.sorted.count && s.sorted[i] < s.pending[j]) {
                        merged.append(s.sorted[i])
                        i += 1
                    } else {
                        if i < s.sorted.count, s.sorted[i] == s.pending[j] { i += 1 }
                        merged.append(s.pending[j])
                        j += 1
                    }
                }
                s.sorted = merged
                s.pending = []
            }
            if s.stale > 0, s.stale * 4 > s.sorted.count + s.pending.count {
                s.sorted.removeAll { records[$0] == nil }
                s.pending.removeAll { records[$0] == nil }
                s.stale = 0
            }
            return (s.sorted, s.pending)
        }
    }
}
