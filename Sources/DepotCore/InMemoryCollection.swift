/// One collection held in memory: its schema, records, unique indexes and the highest integer
/// id ever used. The shared building block of drivers that keep their data in memory
/// (MemoryDriver, JSONFileDriver); pure values, no I/O.
public struct InMemoryCollection: Sendable {
    /// The collection's name, id kind, constraints and indexes.
    public var schema: CollectionSchema
    /// Every record's fields by id; the source of truth the unique indexes are built from.
    public var records: [RecordID: [String: FieldValue]] = [:]
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
        if let old = records[record.id] { removeKeys(Record(id: record.id, fields: old)) }
        records[record.id] = record.fields
        for constraint in schema.uniqueConstraints {
            if let key = constraint.key(for: record) { uniqueIndexes[constraint.name, default: [:]][key] = record.id }
        }
        if case .int(let i) = record.id, i > lastAssignedID { lastAssignedID = i }
    }

    // MARK: Reads and writes, as a driver transaction answers them

    /// The record with `id`, if any.
    public func get(_ id: RecordID) -> Record? {
        records[id].map { Record(id: id, fields: $0) }
    }

    /// Calls `body` with each result of `query` (the shared evaluator) until it returns `false`.
    public func forEach(_ query: Query, _ body: (Record) throws -> Bool) rethrows {
        let results = QueryEvaluator.execute(query, over: records.lazy.map { Record(id: $0.key, fields: $0.value) })
        for record in results where try !body(record) { break }
    }

    /// The number of records matching `filter`.
    public func count(_ filter: Filter) -> Int {
        if case .all = filter { return records.count }
        return records.reduce(0) { $0 + (QueryEvaluator.matches(filter, Record(id: $1.key, fields: $1.value)) ? 1 : 0) }
    }

    /// Stores `record` (without top-level nulls) as `mode` says: the semantics of
    /// ``WriteTransaction/write(_:as:into:)`` for a collection held in memory.
    /// - Throws: `.alreadyExists` (insert), `.notFound` (update), `.uniqueViolation`;
    ///   nothing changes then.
    @discardableResult
    public mutating func write(_ record: Record, as mode: RecordWriteMode) throws -> WriteOutcome {
        let exists = records[record.id] != nil
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
        guard let old = records.removeValue(forKey: id) else { return false }
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
