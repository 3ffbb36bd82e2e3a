/// An untyped collection of a ``Store``: records of field values, for code that does not
/// have a model type (the CLI, the server, sync, data tools).
///
/// Each call is its own transaction; use ``Store/write(excluding:_:)`` to group several.
///
/// ```swift
/// let people = try store.collection("people")
/// try await people.save(Record(id: "ada", fields: ["born": 1815]))
/// let old = try await people.query(Query(filter: Field("born") < 1900))
/// ```
public struct Collection: Sendable {
    /// The store the collection belongs to.
    public let store: Store
    /// The collection's validated name.
    public let name: CollectionName

    init(store: Store, name: CollectionName) {
        self.store = store
        self.name = name
    }

    /// The record with `id`, or `nil` when there is none (also when the collection does not exist).
    public func get(_ id: RecordID) async throws -> Record? {
        let name = self.name
        // Straight to the driver: `Store.read`'s wrapper transaction and nesting marker serve
        // closures that run caller code, and this one runs none (two allocations a read less).
        // On the calling thread first when that takes no waiting: no escaping closure, no
        // task switch into `read`.
        let driver = store.driver
        var record: Record?
        if try driver.readWithoutWaiting({ tx in record = try tx.get(id, from: name) }) { return record }
        return try await driver.read { tx in try tx.get(id, from: name) }
    }

    /// Adds `record` in its own transaction, creating the collection if needed.
    /// - Throws: `.alreadyExists` when the id is taken, `.uniqueViolation`, `.invalidName` or
    ///   `.invalidValue` for a record that cannot be stored.
    public func insert(_ record: Record) async throws {
        let name = self.name
        try await store.writeOne(sameOnEveryRun: true) { tx in try tx.insert(record, into: name) }
    }

    /// Inserts under a store-assigned integer id and returns it.
    public func insert(fields: [String: FieldValue]) async throws -> RecordID {
        let name = self.name
        return try await store.write { tx in try tx.insert(fields: fields, into: name) }
    }

    /// Replaces all fields of an existing record.
    /// - Throws: `.notFound` when there is no record with that id, `.uniqueViolation`.
    public func update(_ record: Record) async throws {
        let name = self.name
        try await store.writeOne(sameOnEveryRun: true) { tx in try tx.update(record, in: name) }
    }

    /// Inserts `record`, or replaces the record with its id; returns which it did.
    /// - Throws: `.uniqueViolation`, `.invalidName`, `.invalidValue`.
    @discardableResult
    public func save(_ record: Record) async throws -> WriteOutcome {
        let name = self.name
        return try await store.writeOne(sameOnEveryRun: true) { tx in try tx.save(record, into: name) }
    }

    /// Saves many records in one transaction.
    public func save(_ records: [Record]) async throws {
        let name = self.name
        try await store.write { tx in for record in records { try tx.save(record, into: name) } }
    }

    /// Upsert by natural key; see ``StoreWriteTransaction/upsert(_:uniqueOn:into:)``.
    @discardableResult
    public func upsert(_ record: Record, uniqueOn constraint: String) async throws -> (id: RecordID, outcome: WriteOutcome) {
        let name = self.name
        return try await store.write { tx in try tx.upsert(record, uniqueOn: constraint, into: name) }
    }

    /// Deletes the record with `id`; `false` when there was none.
    @discardableResult
    public func delete(_ id: RecordID) async throws -> Bool {
        let name = self.name
        return try await store.write { tx in try tx.delete(id, from: name) }
    }

    /// Deletes every record `filter` matches, in one transaction; returns how many.
    /// - Throws: `.invalidQuery` for a malformed filter.
    @discardableResult
    public func delete(matching filter: Filter) async throws -> Int {
        let name = self.name
        return try await store.write { tx in try tx.delete(matching: filter, from: name) }
    }

    /// Deletes every record, keeping the collection and its schema; returns how many.
    @discardableResult
    public func deleteAll() async throws -> Int { try await delete(matching: .all) }

    /// The records `query` selects, in its order, read in one snapshot.
    /// - Throws: `.invalidQuery` for a malformed query.
    public func query(_ query: Query = Query()) async throws -> [Record] {
        let name = self.name
        return try await store.read { tx in try tx.query(query, in: name) }
    }

    /// The records `query` selects, from the store's result cache when `cached` and it has
    /// them (see ``RepositoryQuery/cached(_:)``).
    public func query(_ query: Query, cached: Bool) async throws -> [Record] {
        let name = self.name
        return try await store.cachedRead(cached, collection: name, query: query, kind: "records") { tx in try tx.query(query, in: name) }
    }

    /// Streams the results without loading them all.
    public func stream(_ query: Query = Query()) throws -> RecordStream {
        try query.validate()
        return store.driver.stream(query, from: name)
    }

    /// The number of records `filter` matches; 0 for a collection that does not exist.
    public func count(_ filter: Filter = .all) async throws -> Int {
        let name = self.name
        return try await store.read { tx in try tx.count(filter, in: name) }
    }

    /// `true` when at least one record matches `filter`.
    public func exists(_ filter: Filter) async throws -> Bool {
        let name = self.name
        return try await store.read { tx in try tx.exists(filter, in: name) }
    }

    /// How the driver would run `query`: which parts run in its engine, and the indexes it uses.
    /// - Throws: `.invalidQuery` for a malformed query.
    public func explain(_ query: Query) async throws -> QueryPlan {
        let name = self.name
        try query.validate()
        return try await store.read { tx in try tx.driverTransaction.explain(query, in: name) }
    }

    /// The collection's schema, `nil` if it does not exist.
    public func schema() async throws -> CollectionSchema? {
        let name = self.name
        return try await store.read { tx in try tx.schema(of: name) }
    }

    /// Creates the collection or sets its constraints and indexes.
    public func prepare(idKind: IDKind, uniqueConstraints: [UniqueConstraint] = [], indexes: [IndexDefinition] = []) async throws {
        let schema = CollectionSchema(name: name, idKind: idKind, uniqueConstraints: uniqueConstraints, indexes: indexes)
        try await store.write { tx in try tx.prepare(schema) }
    }

    /// Removes the collection with its records and schema; `false` if it did not exist.
    @discardableResult
    public func drop() async throws -> Bool {
        let name = self.name
        return try await store.write { tx in try tx.dropCollection(name) }
    }
}
