import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// The synchronous API: the same transactions and semantics as the async one, for code that
// is not `async` (command-line tools, legacy code, property getters). Docs/Models.md and
// Docs/Semantics.md ("Synchronous calls") describe it.

extension Store {
    /// The store's synchronous API: every call blocks the calling thread until it is done.
    ///
    /// ```swift
    /// let books = try store.blocking.repository(Book.self)
    /// let dune = try books.insert(Book(id: nil, isbn: "978-0441013593", title: "Dune", year: 1965))
    /// let sixties = try books.query().filter(Field("year") >= 1960).sort("title").all()
    /// try store.blocking.write { tx in try tx.repository(Book.self).delete(id: dune.id) }
    /// ```
    ///
    /// Use it from plain threads, not from async code (it holds the thread while it waits).
    /// Calling it inside a transaction of the same store throws `.unsupported`: it would
    /// wait for that very transaction; use the transaction itself.
    public var blocking: BlockingStore { BlockingStore(store: self) }
}

/// The synchronous twin of ``Store``'s transactions and repositories (``Store/blocking``).
public struct BlockingStore: Sendable {
    /// The store this view reads and writes.
    public let store: Store

    private func checkNotNested() throws {
        if TransactionMarker.isInside(store) {
            throw DepotError(.unsupported, "A blocking call inside a transaction of the same store would wait for that transaction; use the transaction instead.")
        }
    }

    /// Runs `body` in a read transaction over one consistent snapshot (``Store/read(_:)``).
    /// - Throws: what `body` throws, the driver's errors, `.unsupported` inside a
    ///   transaction of the same store.
    public func read<T>(_ body: (StoreReadTransaction) throws -> T) throws -> T {
        try checkNotNested()
        let store = self.store
        return try store.driver.readBlocking { tx in try TransactionMarker.inside(store) { try body(StoreReadTransaction(tx, store: store)) } }
    }

    /// Runs `body` in one atomic write transaction (``Store/write(excluding:_:)``): the
    /// observers run inside it, change events go out after the commit, before this returns.
    /// - Throws: what `body` throws (nothing is written then), the driver's errors,
    ///   `.unsupported` inside a transaction of the same store.
    @discardableResult
    public func write<T>(excluding excluded: [any StoreWriteObserver] = [], _ body: (StoreWriteTransaction) throws -> T) throws -> T {
        try checkNotNested()
        let store = self.store
        let active = store.activeObservers(excluding: excluded)
        let box = ChangeBox()
        let result = try store.driver.writeBlocking { tx in try store.run(body, in: tx, observers: active, recordingInto: box) }
        store.finishWrite(observers: active, box)
        return result
    }

    /// The synchronous repository for `M`, preparing its collection first
    /// (``Store/repository(_:cacheCapacity:)``).
    /// - Throws: `.invalidName`, `.schemaMismatch`, `.uniqueViolation`.
    public func repository<M: StoredModel>(_ type: M.Type, cacheCapacity: Int = 0) throws -> BlockingRepository<M> {
        let schema = try M.schema()
        if !store.preparedModels.withLock({ $0.contains(String(reflecting: M.self)) }) {
            try write { tx in _ = try tx.repository(M.self) }
        }
        return BlockingRepository(Repository(store: store, collection: schema.name, cache: store.makeCache(M.self, capacity: cacheCapacity, collection: schema.name)))
    }
}

extension Repository {
    /// This repository's synchronous twin: the same calls without `await`.
    public var blocking: BlockingRepository<M> { BlockingRepository(self) }
}

/// The synchronous twin of ``Repository``: each call is one transaction and blocks the
/// calling thread until it is done.
public struct BlockingRepository<M: StoredModel>: Sendable {
    /// The async repository this one mirrors (same store, collection and cache).
    public let repository: Repository<M>

    init(_ repository: Repository<M>) { self.repository = repository }

    private var store: BlockingStore { repository.store.blocking }
    private var collection: CollectionName { repository.collection }

    /// ``Repository/insert(_:)``.
    public func insert(_ model: M) throws -> M { try store.write { tx in try tx.repository(M.self).insert(model) } }
    /// ``Repository/update(_:)``.
    public func update(_ model: M) throws { try store.write { tx in try tx.repository(M.self).update(model) } }
    /// ``Repository/save(_:)-(M)``.
    @discardableResult
    public func save(_ model: M) throws -> WriteOutcome { try store.write { tx in try tx.repository(M.self).save(model) } }
    /// ``Repository/save(_:)-([M])``: all in one transaction.
    public func save(_ models: [M]) throws {
        try store.write { tx in
            let repository = try tx.repository(M.self)
            for model in models { try repository.save(model) }
        }
    }
    /// ``Repository/upsert(_:uniqueOn:)``.
    @discardableResult
    public func upsert(_ model: M, uniqueOn constraint: String) throws -> M {
        try store.write { tx in try tx.repository(M.self).upsert(model, uniqueOn: constraint) }
    }

    /// ``Repository/find(id:)``, from the read cache when it has it.
    public func find(id: M.ID) throws -> M? {
        guard let recordID = id.recordID else { return nil }
        let cache = repository.cache
        if let cache, let hit = cache.get(recordID) { return hit }
        let generation = cache?.generation
        let collection = self.collection
        let model = try store.read { tx in try tx.model(M.self, id: recordID, alternates: id.alternateRecordIDs, in: collection) }
        if let cache, let model, let generation { cache.put(recordID, model, ifGeneration: generation) }
        return model
    }

    /// ``Repository/query()``.
    public func query() -> BlockingQuery<M> { BlockingQuery(repository.query()) }
    /// ``Repository/all()``.
    public func all() throws -> [M] { try query().all() }
    /// ``Repository/count(_:)``.
    public func count(_ filter: Filter = .all) throws -> Int { try query().filter(filter).count() }
    /// ``Repository/find(matching:)``.
    public func find(matching example: M) throws -> [M] { try query().filter(try repository.filter(matching: example)).all() }

    /// ``Repository/delete(id:)``.
    @discardableResult
    public func delete(id: M.ID) throws -> Bool { try store.write { tx in try tx.repository(M.self).delete(id: id) } }
    /// ``Repository/delete(matching:)``.
    @discardableResult
    public func delete(matching filter: Filter) throws -> Int { try store.write { tx in try tx.repository(M.self).delete(matching: filter) } }
    /// ``Repository/deleteAll()``.
    @discardableResult
    public func deleteAll() throws -> Int { try delete(matching: .all) }
}

extension RepositoryQuery {
    /// This query's synchronous twin.
    public var blocking: BlockingQuery<M> { BlockingQuery(self) }
}

/// The synchronous twin of ``RepositoryQuery``: build it the same way, run it without `await`.
public struct BlockingQuery<M: StoredModel>: Sendable {
    /// The async query this one mirrors.
    public let query: RepositoryQuery<M>

    init(_ query: RepositoryQuery<M>) { self.query = query }

    /// ``RepositoryQuery/filter(_:)``.
    public func filter(_ filter: Filter) -> BlockingQuery { BlockingQuery(query.filter(filter)) }
    /// ``RepositoryQuery/sort(_:descending:)``.
    public func sort(_ field: String, descending: Bool = false) -> BlockingQuery { BlockingQuery(query.sort(field, descending: descending)) }
    /// ``RepositoryQuery/sort(_:)``.
    public func sort(_ key: SortKey) -> BlockingQuery { BlockingQuery(query.sort(key)) }
    /// ``RepositoryQuery/offset(_:)``.
    public func offset(_ offset: Int) -> BlockingQuery { BlockingQuery(query.offset(offset)) }
    /// ``RepositoryQuery/limit(_:)``.
    public func limit(_ limit: Int) -> BlockingQuery { BlockingQuery(query.limit(limit)) }

    private var store: BlockingStore { query.repository.store.blocking }

    /// ``RepositoryQuery/all()``.
    public func all() throws -> [M] {
        let built = query.query, collection = query.repository.collection
        return try store.read { tx in try tx.models(M.self, built, in: collection) }
    }
    /// ``RepositoryQuery/first()``.
    public func first() throws -> M? { try limit(1).all().first }
    /// ``RepositoryQuery/count()``.
    public func count() throws -> Int {
        let filter = query.query.filter, collection = query.repository.collection
        return try store.read { tx in try tx.count(filter, in: collection) }
    }
    /// ``RepositoryQuery/exists()``.
    public func exists() throws -> Bool {
        let filter = query.query.filter, collection = query.repository.collection
        return try store.read { tx in try tx.exists(filter, in: collection) }
    }
    /// ``RepositoryQuery/delete()``.
    @discardableResult
    public func delete() throws -> Int { try BlockingRepository(query.repository).delete(matching: query.query.filter) }
}

/// Which store's transaction the current thread is running, so that a blocking call made
/// inside it fails instead of waiting for itself. One pointer per thread (a pthread key).
@usableFromInline
enum TransactionMarker {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        // Creating a key fails only when the process has used up its keys (PTHREAD_KEYS_MAX);
        // the marker is then never found and nesting goes undetected, nothing worse.
        _ = pthread_key_create(&key, nil)
        return key
    }()

    /// Runs `body` marked as inside a transaction of `store`.
    @usableFromInline
    static func inside<T>(_ store: Store, _ body: () throws -> T) rethrows -> T {
        let previous = pthread_getspecific(key)
        pthread_setspecific(key, Unmanaged.passUnretained(store).toOpaque())
        defer { pthread_setspecific(key, previous) }
        return try body()
    }

    /// `true` when the current thread is inside a transaction of `store`.
    static func isInside(_ store: Store) -> Bool {
        pthread_getspecific(key) == Unmanaged.passUnretained(store).toOpaque()
    }
}
