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
    public let store: Store
    public let name: CollectionName

    init(store: Store, name: CollectionName) {
        self.store = store
        self.name = name
    }

    public func get(_ id: RecordID) async throws -> Record? {
        let name = self.name
        return try await store.read { tx in try tx.get(id, from: name) }
    }

    public func insert(_ record: Record) async throws {
        let name = self.name
        try await store.write { tx in try tx.insert(record, into: name) }
    }

    /// Inserts under a store-assigned integer id and returns it.
    public func insert(fields: [String: FieldValue]) async throws -> RecordID {
        let name = self.name
        return try await store.write { tx in try tx.insert(fields: fields, into: name) }
    }

    public func update(_ record: Record) async throws {
        let name = self.name
        try await store.write { tx in try tx.update(record, in: name) }
    }

    @discardableResult
    public func save(_ record: Record) async throws -> WriteOutcome {
        let name = self.name
        return try await store.write { tx in try tx.save(record, into: name) }
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

    @discardableResult
    public func delete(_ id: RecordID) async throws -> Bool {
        let name = self.name
        return try await store.write { tx in try tx.delete(id, from: name) }
    }

    @discardableResult
    public func delete(matching filter: Filter) async throws -> Int {
        let name = self.name
        return try await store.write { tx in try tx.delete(matching: filter, from: name) }
    }

    @discardableResult
    public func deleteAll() async throws -> Int { try await delete(matching: .all) }

    public func query(_ query: Query = Query()) async throws -> [Record] {
        let name = self.name
        return try await store.read { tx in try tx.query(query, in: name) }
    }

    /// Streams the results without loading them all.
    public func stream(_ query: Query = Query()) throws -> RecordStream {
        try query.validate()
        return store.driver.stream(query, from: name)
    }

    public func count(_ filter: Filter = .all) async throws -> Int {
        let name = self.name
        return try await store.read { tx in try tx.count(filter, in: name) }
    }

    public func exists(_ filter: Filter) async throws -> Bool {
        let name = self.name
        return try await store.read { tx in try tx.exists(filter, in: name) }
    }

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

    @discardableResult
    public func drop() async throws -> Bool {
        let name = self.name
        return try await store.write { tx in try tx.dropCollection(name) }
    }
}
