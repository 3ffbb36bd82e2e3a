import Foundation

// Aggregates, projections and partial updates for the untyped and typed APIs
// (Docs/Aggregates.md, Docs/Semantics.md "Partial updates").

extension Collection {
    /// The rows of a grouped query over this collection (Docs/Aggregates.md).
    /// - Throws: `.invalidQuery`, `.invalidValue` for an int sum that overflows.
    public func aggregate(_ query: AggregateQuery) async throws -> [AggregateRow] {
        let name = self.name
        return try await store.read { tx in try tx.aggregate(query, in: name) }
    }

    /// How the driver would run a grouped query.
    public func explain(_ query: AggregateQuery) async throws -> QueryPlan {
        let name = self.name
        return try await store.read { tx in try tx.explain(query, in: name) }
    }

    /// The records `query` selects with only the fields named in `fields` (and the id).
    public func query(_ query: Query = Query(), selecting fields: [String]) async throws -> [Record] {
        let name = self.name
        return try await store.read { tx in try tx.query(query, selecting: fields, in: name) }
    }

    /// Applies `change` to the record with `id`; `false` when there is none.
    @discardableResult
    public func update(_ id: RecordID, _ change: FieldChange) async throws -> Bool {
        let name = self.name
        return try await store.writeOne(sameOnEveryRun: true) { tx in try tx.update(id, in: name, change) }
    }

    /// Applies `change` to every record `filter` matches, in one transaction; returns how many.
    @discardableResult
    public func update(matching filter: Filter, _ change: FieldChange) async throws -> Int {
        let name = self.name
        return try await store.write { tx in try tx.update(matching: filter, in: name, change) }
    }
}

extension TransactionRepository {
    /// Applies `change` to the model with `id`; `false` when there is none (or `id` is `nil`).
    /// - Throws: `.unsupported` inside a read transaction, `.uniqueViolation`.
    @discardableResult
    public func update(id: M.ID, _ change: FieldChange) throws -> Bool {
        guard let recordID = id.recordID else { return false }
        return try writer.update(recordID, in: collection, change)
    }

    /// Applies `change` to every model `filter` matches; returns how many.
    @discardableResult
    public func update(matching filter: Filter, _ change: FieldChange) throws -> Int {
        try writer.update(matching: filter, in: collection, change)
    }

    /// The rows of a grouped query over the model's collection.
    public func aggregate(_ query: AggregateQuery) throws -> [AggregateRow] {
        try transaction.aggregate(query, in: collection)
    }
}

extension Repository {
    /// Applies `change` to the model with `id` in one transaction; `false` when there is none.
    /// - Throws: `.uniqueViolation`, `.invalidName`/`.invalidValue` for the change.
    @discardableResult
    public func update(id: M.ID, _ change: FieldChange) async throws -> Bool {
        try await store.writeOne { tx in try tx.repository(M.self).update(id: id, change) }
    }

    /// Applies `change` to every model `filter` matches, in one transaction; returns how many.
    @discardableResult
    public func update(matching filter: Filter, _ change: FieldChange) async throws -> Int {
        try await store.write { tx in try tx.repository(M.self).update(matching: filter, change) }
    }

    /// Update by example: applies `change` to every model whose fields equal the fields set
    /// on `example` (its id excepted; see ``find(matching:)``); returns how many.
    @discardableResult
    public func update(matching example: M, _ change: FieldChange) async throws -> Int {
        try await update(matching: try filter(matching: example), change)
    }

    /// Delete by example: deletes every model whose fields equal the fields set on
    /// `example` (its id excepted); returns how many.
    @discardableResult
    public func delete(matching example: M) async throws -> Int {
        try await delete(matching: try filter(matching: example))
    }

    /// The rows of a grouped query over the model's collection (Docs/Aggregates.md).
    public func aggregate(_ query: AggregateQuery) async throws -> [AggregateRow] {
        try await store.collection(collection).aggregate(query)
    }
}

extension RepositoryQuery {
    /// The grouped rows of the records this query's filter matches (its sort, offset and
    /// limit are not used: give the rows' own in the arguments).
    /// - Parameters:
    ///   - aggregates: the aggregates of each row.
    ///   - groupBy: the fields whose values key the groups; none for one row.
    ///   - having: a filter over the rows' names.
    ///   - sort: sort keys over the rows' names.
    public func aggregate(_ aggregates: [Aggregate], groupBy: [String] = [], having: Filter = .all, sort: [SortKey] = []) async throws -> [AggregateRow] {
        try await repository.aggregate(AggregateQuery(filter: query.filter, groupBy: groupBy, aggregates: aggregates, having: having, sort: sort))
    }

    /// One aggregate over every matching record: null when there is no value to read.
    private func single(_ aggregate: Aggregate) async throws -> FieldValue {
        try await self.aggregate([aggregate]).first?[aggregate.name] ?? .null
    }

    /// The sum of `field`'s numbers over the matching records (null when there are none):
    /// an int when all are ints, a double otherwise.
    /// - Throws: `.invalidValue` when an int sum overflows.
    public func sum(_ field: String) async throws -> FieldValue { try await single(.sum(field)) }
    /// The smallest value of `field` among the matching records, null when there is none.
    public func min(_ field: String) async throws -> FieldValue { try await single(.min(field)) }
    /// The largest value of `field` among the matching records, null when there is none.
    public func max(_ field: String) async throws -> FieldValue { try await single(.max(field)) }
    /// The mean of `field`'s numbers among the matching records, `nil` when there are none.
    public func average(_ field: String) async throws -> Double? { try await single(.average(field)).doubleValue }

    /// The query's records with only the fields named in `fields` (and the id), in order.
    public func records(selecting fields: [String]) async throws -> [Record] {
        try await repository.store.collection(repository.collection).query(query, selecting: fields)
    }

    /// The query's results with only `fields` read, each decoded as `T` (a type holding
    /// just those fields, or with defaults for the others).
    /// - Throws: `.decoding` when a record does not fit `T`.
    public func select<T: Decodable>(_ fields: [String], as type: T.Type) async throws -> [T] {
        let collection = repository.collection
        return try await records(selecting: fields).map { record in
            do {
                return try RecordDecoder().decode(T.self, from: record)
            } catch let error as DepotError {
                throw error
            } catch {
                throw DepotError(.decoding, "A record does not fit \(T.self).", collection: collection.rawValue, id: record.id, cause: DepotError.wrap(error))
            }
        }
    }

    /// Applies `change` to every model this query's filter matches; returns how many.
    @discardableResult
    public func update(_ change: FieldChange) async throws -> Int { try await repository.update(matching: query.filter, change) }
}
