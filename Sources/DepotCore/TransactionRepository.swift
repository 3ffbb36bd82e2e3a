/// Typed access to a model's collection inside one transaction.
///
/// ```swift
/// try await store.write { tx in
///     let accounts = try tx.repository(Account.self)
///     var from = try accounts.find(id: 1)!
///     ...
///     try accounts.save(from)
///     try tx.repository(Transfer.self).insert(transfer)
/// }
/// ```
public struct TransactionRepository<M: StoredModel> {
    let transaction: StoreReadTransaction
    /// The model's collection.
    public let collection: CollectionName

    var writer: StoreWriteTransaction {
        get throws {
            guard let writer = transaction as? StoreWriteTransaction else {
                throw DepotError(.unsupported, "Writes need a write transaction.", collection: collection.rawValue)
            }
            return writer
        }
    }

    /// The model with `id` as this transaction sees it, or `nil` (also for a `nil` id).
    /// - Throws: `.decoding` when the stored record does not fit `M`.
    public func find(id: M.ID) throws -> M? {
        guard let recordID = id.recordID else { return nil }
        return try transaction.model(M.self, id: recordID, alternates: id.alternateRecordIDs, in: collection)
    }

    /// The models `query` selects, in its order.
    public func all(_ query: Query = Query()) throws -> [M] {
        try transaction.models(M.self, query, in: collection)
    }

    /// The first model in id order that `filter` matches, or `nil`.
    public func first(_ filter: Filter = .all) throws -> M? {
        try transaction.models(M.self, Query(filter: filter, limit: 1), in: collection).first
    }

    /// The number of models `filter` matches, including this transaction's own writes.
    public func count(_ filter: Filter = .all) throws -> Int { try transaction.count(filter, in: collection) }

    /// Inserts `model`; a `nil` optional integer id is assigned by the store.
    /// Returns the model as stored (with its id).
    /// - Throws: `.alreadyExists`, `.uniqueViolation`, `.invalidValue`.
    @discardableResult
    public func insert(_ model: M) throws -> M {
        if model.storedRecordID != nil {
            try writer.write(model, .insert, into: collection)
            return model
        }
        let (id, fields) = try model.fieldsAndID()
        if let id {
            try writer.insert(Record(id: id, fields: fields), into: collection)
            return model
        }
        guard M.ID.idKind == .int else {
            throw DepotError(.invalidValue, "Only integer ids can be assigned by the store.", collection: collection.rawValue)
        }
        let assigned = try writer.insert(fields: fields, into: collection)
        return try model.assigningID(assigned)
    }

    /// Replaces an existing model. - Throws: `.notFound`, `.uniqueViolation`.
    public func update(_ model: M) throws {
        try writer.write(model, .update, into: collection)
    }

    /// Inserts or replaces. A model without an id is inserted under an assigned id.
    @discardableResult
    public func save(_ model: M) throws -> WriteOutcome {
        guard model.storedRecordID != nil else {
            try insert(model)
            return .inserted
        }
        return try writer.write(model, .save, into: collection)
    }

    /// Saves, keyed by the unique constraint named `constraint`: replaces the record with the
    /// same natural key (keeping its id) or inserts. Returns the model as stored.
    @discardableResult
    public func upsert(_ model: M, uniqueOn constraint: String) throws -> M {
        let (_, fields) = try model.fieldsAndID()
        let writer = try self.writer
        let existing: RecordID?
        do {
            existing = try writer.recordHolding(fields, uniqueOn: constraint, in: collection)
        } catch var error as DepotError where error.code == .notFound {
            error.message = "\(M.self) has no unique constraint '\(constraint)'."
            throw error
        }
        if let existing {
            try writer.update(Record(id: existing, fields: fields), in: collection)
            return try model.assigningID(existing)
        }
        return try insert(model)
    }

    /// Deletes the model with `id`; `false` when there was none.
    /// - Throws: `.unsupported` inside a read transaction.
    @discardableResult
    public func delete(id: M.ID) throws -> Bool {
        guard let recordID = id.recordID else { return false }
        return try writer.delete(recordID, from: collection)
    }

    /// Deletes every model `filter` matches; returns how many.
    /// - Throws: `.unsupported` inside a read transaction, `.invalidQuery`.
    @discardableResult
    public func delete(matching filter: Filter) throws -> Int {
        try writer.delete(matching: filter, from: collection)
    }
}
