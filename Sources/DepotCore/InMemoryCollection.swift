/// One collection held in memory: its schema, records, unique indexes and the highest integer
/// id ever used. The shared building block of drivers that keep their data in memory
/// (MemoryDriver, JSONFileDriver); pure values, no I/O.
public struct InMemoryCollection: Sendable {
    public var schema: CollectionSchema
    public var records: [RecordID: [String: FieldValue]] = [:]
    /// Per unique constraint name: normalized key → owning id.
    public var uniqueIndexes: [String: [[FieldValue]: RecordID]] = [:]
    /// The highest integer id the collection has ever held (persisted in the metadata).
    public var lastAssignedID: Int64 = 0

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

    public func checkUnique(_ record: Record) throws {
        for constraint in schema.uniqueConstraints {
            guard let key = constraint.key(for: record), let owner = uniqueIndexes[constraint.name]?[key], owner != record.id else { continue }
            throw DepotError(
                .uniqueViolation, "Another record already has these values for unique constraint '\(constraint.name)' (\(constraint.fields.joined(separator: ", "))).",
                collection: schema.name.rawValue, id: record.id, constraint: constraint.name)
        }
    }

    public mutating func put(_ record: Record) {
        if let old = records[record.id] { removeKeys(Record(id: record.id, fields: old)) }
        records[record.id] = record.fields
        for constraint in schema.uniqueConstraints {
            if let key = constraint.key(for: record) { uniqueIndexes[constraint.name, default: [:]][key] = record.id }
        }
        if case .int(let i) = record.id, i > lastAssignedID { lastAssignedID = i }
    }

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
