import Foundation

/// Typed access to a model's collection: save, find, query, delete, observe.
///
/// ```swift
/// let users = try await store.repository(User.self)
/// let ada = try await users.insert(User(id: nil, email: "ada@example.com", name: "Ada"))
/// let found = try await users.find(id: ada.id)
/// let page = try await users.query().filter(Field("name").hasPrefix("A")).sort("name").limit(20).all()
/// for try await current in users.observe(users.query().filter(Field("active") == true)) { render(current) }
/// ```
///
/// Each call is one transaction; group several with ``Store/write(excluding:_:)`` and
/// ``StoreWriteTransaction/repository(_:)``.
public struct Repository<M: StoredModel>: Sendable {
    /// The store the repository reads and writes.
    public let store: Store
    /// The model's collection (``StoredModel/collectionName``).
    public let collection: CollectionName
    @usableFromInline let cache: ModelCache<M>?

    init(store: Store, collection: CollectionName, cache: ModelCache<M>?) {
        self.store = store
        self.collection = collection
        self.cache = cache
    }

    /// Inserts `model` in its own transaction and returns it as stored; a `nil` optional integer
    /// id is replaced by the id the store assigned.
    /// - Throws: `.alreadyExists`, `.uniqueViolation`, `.invalidValue`, `.encoding`.
    public func insert(_ model: M) async throws -> M {
        try await store.writeOne { tx in try tx.repository(M.self).insert(model) }
    }

    /// Replaces the stored model with the same id.
    /// - Throws: `.notFound` when there is none, `.uniqueViolation`.
    public func update(_ model: M) async throws {
        try await store.writeOne { tx in try tx.repository(M.self).update(model) }
    }

    /// Inserts `model` or replaces the one with its id; returns which it did. A model without an
    /// id is inserted under an assigned id.
    /// - Throws: `.uniqueViolation`, `.invalidValue`, `.encoding`.
    @discardableResult
    public func save(_ model: M) async throws -> WriteOutcome {
        try await store.writeOne { tx in try tx.repository(M.self).save(model) }
    }

    /// Saves many models in one transaction (all or none).
    public func save(_ models: [M]) async throws {
        try await store.write { tx in
            let repository = try tx.repository(M.self)
            for model in models { try repository.save(model) }
        }
    }

    /// Upsert by natural key: see ``TransactionRepository/upsert(_:uniqueOn:)``.
    @discardableResult
    public func upsert(_ model: M, uniqueOn constraint: String) async throws -> M {
        try await store.write { tx in try tx.repository(M.self).upsert(model, uniqueOn: constraint) }
    }

    /// The model with `id`, from the read cache when it has it.
    ///
    /// Inlinable so that it is compiled for the app's model type: unspecialized, each call
    /// looks up the runtime metadata of the generic types it uses (Docs/Models.md, "Cost of a
    /// typed read").
    @inlinable
    public func find(id: M.ID) async throws -> M? {
        guard let recordID = id.recordID else { return nil }
        if let cache, let hit = cache.get(recordID) { return hit }
        let generation = cache?.generation
        let collection = self.collection
        let alternates = id.alternateRecordIDs
        let store = self.store
        // Straight to the driver, as `Collection.get` does: `Store.read`'s wrapper transaction
        // and its closure cost two allocations a read. The nesting marker stays, because
        // decoding runs the model's code (its value transformers).
        let driver = store.driver
        var model: M?
        if try !driver.readWithoutWaiting({ tx in
            model = try TransactionMarker.inside(store) { try StoreReadTransaction.model(M.self, id: recordID, alternates: alternates, in: collection, of: tx) }
        }) {
            model = try await driver.read { tx in
                try TransactionMarker.inside(store) { try StoreReadTransaction.model(M.self, id: recordID, alternates: alternates, in: collection, of: tx) }
            }
        }
        if let cache, let model, let generation { cache.put(recordID, model, ifGeneration: generation) }
        return model
    }

    /// Starts a query over the collection.
    public func query() -> RepositoryQuery<M> { RepositoryQuery(repository: self, query: Query()) }

    /// Every model, in id order.
    @inlinable
    public func all() async throws -> [M] { try await query().all() }

    /// The number of models `filter` matches.
    public func count(_ filter: Filter = .all) async throws -> Int { try await query().filter(filter).count() }

    /// Query by example: the fields set (non-nil) on `example`, except its id, must all match.
    public func find(matching example: M) async throws -> [M] {
        try await query().filter(try filter(matching: example)).all()
    }

    /// The filter of ``find(matching:)``: every field set on `example`, except its id.
    func filter(matching example: M) throws -> Filter {
        let (_, fields) = try example.fieldsAndID()
        return fields.keys.sorted().reduce(Filter.all) { $0 && Filter.equal($1, fields[$1] ?? .null) }
    }

    /// Deletes the model with `id`; `false` when there was none (or `id` is `nil`).
    @discardableResult
    public func delete(id: M.ID) async throws -> Bool {
        try await store.write { tx in try tx.repository(M.self).delete(id: id) }
    }

    /// Deletes every model `filter` matches; returns how many.
    @discardableResult
    public func delete(matching filter: Filter) async throws -> Int {
        try await store.write { tx in try tx.repository(M.self).delete(matching: filter) }
    }

    /// Deletes every model of the collection; returns how many.
    @discardableResult
    public func deleteAll() async throws -> Int { try await delete(matching: .all) }

    /// Yields the query's results now and again after every commit of this process that
    /// changes the collection. Ending the loop ends the observation.
    public func observe(_ query: RepositoryQuery<M>) -> AsyncThrowingStream<[M], any Error> {
        let changes = store.changes()
        let collection = self.collection
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    continuation.yield(try await query.all())
                    for await batch in changes where batch.collections.contains(collection) {
                        continuation.yield(try await query.all())
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

extension Store {
    /// The repository for `M`, preparing its collection (constraints, indexes) first.
    /// - Parameters:
    ///   - type: the model type whose collection the repository reads and writes.
    ///   - cacheCapacity: keep up to this many models by id in a read cache that every commit
    ///     of this store invalidates before it returns; `0` for none.
    /// - Throws: `.invalidName`, `.schemaMismatch`, `.uniqueViolation` (existing data breaks a new constraint).
    public func repository<M: StoredModel>(_ type: M.Type, cacheCapacity: Int = 0) async throws -> Repository<M> {
        let schema = try M.schema()
        let key = String(reflecting: M.self)
        if !preparedModels.withLock({ $0.contains(key) }) {
            try await write { tx in try tx.prepare(schema) }
            preparedModels.withLock { _ = $0.insert(key) }
        }
        return Repository(store: self, collection: schema.name, cache: makeCache(M.self, capacity: cacheCapacity, collection: schema.name))
    }

    /// A registered read cache for `M` of `capacity` models, or `nil` for a capacity of 0.
    func makeCache<M: StoredModel>(_ type: M.Type, capacity: Int, collection: CollectionName) -> ModelCache<M>? {
        guard capacity > 0 else { return nil }
        let cache = ModelCache<M>(capacity: capacity, collection: collection)
        register(cache: cache)
        return cache
    }
}

/// A query being built over a repository; every step returns a new value.
public struct RepositoryQuery<M: StoredModel>: Sendable {
    /// The repository the query runs against.
    public let repository: Repository<M>
    /// The query built so far.
    public var query: Query
    /// `true` when results come from the store's result cache when it has them.
    public var usesCache = false

    /// A query over `repository`.
    public init(repository: Repository<M>, query: Query) {
        self.repository = repository
        self.query = query
    }

    /// Reads through the store's result cache (opt-in per query): a result is kept until a
    /// commit of this store writes to the collection, and is never returned after such a
    /// commit's `write` has returned. Writes by other processes are not seen
    /// (Docs/Semantics.md, "Result cache").
    public func cached(_ enabled: Bool = true) -> RepositoryQuery {
        var copy = self
        copy.usesCache = enabled
        return copy
    }

    /// Adds a condition (ANDed with earlier ones).
    public func filter(_ filter: Filter) -> RepositoryQuery {
        var copy = self
        copy.query.filter = query.filter && filter
        return copy
    }

    /// Adds a sort key.
    public func sort(_ field: String, descending: Bool = false) -> RepositoryQuery {
        var copy = self
        copy.query.sort.append(SortKey(field, descending: descending))
        return copy
    }

    /// Adds a sort key after the existing ones.
    public func sort(_ key: SortKey) -> RepositoryQuery {
        var copy = self
        copy.query.sort.append(key)
        return copy
    }

    /// Skips the first `offset` results (replacing any earlier offset).
    public func offset(_ offset: Int) -> RepositoryQuery {
        var copy = self
        copy.query.offset = offset
        return copy
    }

    /// Returns at most `limit` results (replacing any earlier limit).
    public func limit(_ limit: Int) -> RepositoryQuery {
        var copy = self
        copy.query.limit = limit
        return copy
    }

    /// Runs the query and decodes every result.
    /// - Throws: `.invalidQuery`, or `.decoding` naming the record that does not fit `M`.
    @inlinable
    public func all() async throws -> [M] {
        let query = self.query, collection = repository.collection
        return try await repository.store.cachedRead(usesCache, collection: collection, query: query, kind: String(reflecting: M.self)) { tx in
            try tx.models(M.self, query, in: collection)
        }
    }

    /// The first result in the query's order, or `nil`.
    public func first() async throws -> M? { try await limit(1).all().first }

    /// The number of models the filter matches (offset and limit are ignored).
    public func count() async throws -> Int {
        let filter = query.filter, collection = repository.collection
        return try await repository.store.cachedRead(usesCache, collection: collection, query: Query(filter: filter), kind: "count") { tx in
            try tx.count(filter, in: collection)
        }
    }

    /// `true` when at least one model matches the filter.
    public func exists() async throws -> Bool {
        let filter = query.filter, collection = repository.collection
        return try await repository.store.read { tx in try tx.exists(filter, in: collection) }
    }

    /// Streams the models one at a time without loading them all.
    public func stream() throws -> AsyncThrowingMapSequence<RecordStream, M> {
        try query.validate()
        return repository.store.driver.stream(query, from: repository.collection).map { try M.decode($0) }
    }

    /// How the driver would run the query.
    public func explain() async throws -> QueryPlan {
        try await repository.store.collection(repository.collection).explain(query)
    }

    /// Deletes every model the filter matches (offset, limit and sort are ignored); returns how many.
    public func delete() async throws -> Int { try await repository.delete(matching: query.filter) }
}

/// A bounded read cache by id, invalidated synchronously by every commit of its store.
@usableFromInline
final class ModelCache<M: StoredModel>: ChangeInvalidated, @unchecked Sendable {
    // @unchecked: all mutable state lives in `state`, a Locked.
    struct State {
        var entries: [RecordID: (model: M, tick: UInt64)] = [:]
        var tick: UInt64 = 0
        var generation: UInt64 = 0
    }
    let state = Locked(State())
    let capacity: Int
    let collection: CollectionName

    init(capacity: Int, collection: CollectionName) {
        self.capacity = capacity
        self.collection = collection
    }

    @usableFromInline
    var generation: UInt64 { state.withLock { $0.generation } }

    @usableFromInline
    func get(_ id: RecordID) -> M? {
        state.withLock { state in
            guard let entry = state.entries[id] else { return nil }
            state.tick += 1
            state.entries[id] = (entry.model, state.tick)
            return entry.model
        }
    }

    /// Stores a model read at `generation`, unless a commit has invalidated since.
    @usableFromInline
    func put(_ id: RecordID, _ model: M, ifGeneration generation: UInt64) {
        state.withLock { state in
            guard state.generation == generation else { return }
            state.tick += 1
            state.entries[id] = (model, state.tick)
            if state.entries.count > capacity, let oldest = state.entries.min(by: { $0.value.tick < $1.value.tick })?.key {
                state.entries[oldest] = nil
            }
        }
    }

    func invalidate(_ batch: ChangeBatch) {
        let ids = batch.changes.filter { $0.collection == collection }.map(\.id)
        guard !ids.isEmpty else { return }
        state.withLock { state in
            state.generation += 1
            for id in ids { state.entries[id] = nil }
        }
    }

    var count: Int { state.withLock { $0.entries.count } }
}
