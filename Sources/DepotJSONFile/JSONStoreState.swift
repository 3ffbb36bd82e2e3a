import DepotCore

/// The parsed contents of a JSON store: a value, so copying it is a snapshot.
///
/// Semantics are those of the memory driver (the reference), so the same operations give
/// the same results; the driver serializes this value to the file on each commit.
struct JSONStoreState: Sendable {
    var collections: [CollectionName: JSONCollection] = [:]

    /// Problems found by rebuilding every unique index (empty when sound).
    func problems() -> [String] {
        var found: [String] = []
        for name in collections.keys.sorted() {
            guard let collection = collections[name] else { continue }
            var rebuilt = collection
            do { try rebuilt.rebuildUniqueIndexes() } catch { found.append("\(name): \(error)") }
            if rebuilt.uniqueIndexes != collection.uniqueIndexes { found.append("\(name): unique index out of step") }
            for id in collection.records.keys where id.kind != collection.schema.idKind {
                found.append("\(name): record \(id) has a \(id.kind) id in a collection of \(collection.schema.idKind) ids")
            }
        }
        return found
    }
}

/// One collection: its schema, records, unique indexes and the highest integer id ever used.
struct JSONCollection: Sendable {
    var schema: CollectionSchema
    var records: [RecordID: [String: FieldValue]] = [:]
    /// Per unique constraint name: normalized key → owning id.
    var uniqueIndexes: [String: [[FieldValue]: RecordID]] = [:]
    /// The highest integer id the collection has ever held (persisted in the metadata).
    var lastAssignedID: Int64 = 0

    init(schema: CollectionSchema) {
        self.schema = schema
        for constraint in schema.uniqueConstraints { uniqueIndexes[constraint.name] = [:] }
    }

    /// Rebuilds every unique index from the records.
    /// - Throws: `.uniqueViolation` naming the constraint when two records collide.
    mutating func rebuildUniqueIndexes() throws {
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

    func checkUnique(_ record: Record) throws {
        for constraint in schema.uniqueConstraints {
            guard let key = constraint.key(for: record), let owner = uniqueIndexes[constraint.name]?[key], owner != record.id else { continue }
            throw DepotError(
                .uniqueViolation, "Another record already has these values for unique constraint '\(constraint.name)' (\(constraint.fields.joined(separator: ", "))).",
                collection: schema.name.rawValue, id: record.id, constraint: constraint.name)
        }
    }

    mutating func put(_ record: Record) {
        if let old = records[record.id] { removeKeys(Record(id: record.id, fields: old)) }
        records[record.id] = record.fields
        for constraint in schema.uniqueConstraints {
            if let key = constraint.key(for: record) { uniqueIndexes[constraint.name, default: [:]][key] = record.id }
        }
        if case .int(let i) = record.id, i > lastAssignedID { lastAssignedID = i }
    }

    mutating func remove(_ id: RecordID) -> Bool {
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
