
/// The store's opt-in cache of query results (``RepositoryQuery/cached(_:)``,
/// ``Collection/query(_:cached:)``): results by collection, query and result type, each
/// entry dropped when a commit of this store writes to its collection, before that
/// commit's `write` returns (Docs/Semantics.md, "Result cache").
///
/// A result read while a write to its collection commits is never stored: each entry
/// is stored only if no commit touched the collection since its read began. Writes by
/// other processes are not seen; neither are raw SQL writes, which drop every entry.
final class QueryResultCache: Sendable {
    struct Key: Hashable, Sendable {
        var collection: CollectionName
        var query: Query
        /// What the result is: a model type's name, `records`, `count`.
        var kind: String
    }

    private struct Entry {
        var value: any Sendable
        var tick: UInt64
    }

    private struct State {
        var entries: [Key: Entry] = [:]
        var generations: [CollectionName: UInt64] = [:]
        var globalGeneration: UInt64 = 0
        var tick: UInt64 = 0
        var hits = 0
        var misses = 0
    }

    private let state = Locked(State())
    /// The most entries kept; the least recently used goes first.
    let capacity: Int

    init(capacity: Int = 512) { self.capacity = capacity }

    /// The generation a read of `collection` starts at.
    func generation(of collection: CollectionName) -> UInt64 {
        state.withLock { $0.globalGeneration &+ ($0.generations[collection] ?? 0) }
    }

    /// The cached value for `key`, if any.
    func get<T: Sendable>(_ key: Key, as type: T.Type) -> T? {
        state.withLock { state in
            guard var entry = state.entries[key], let value = entry.value as? T else {
                state.misses += 1
                return nil
            }
            state.hits += 1
            state.tick += 1
            entry.tick = state.tick
            state.entries[key] = entry
            return value
        }
    }

    /// Stores `value` read at `generation`, unless a commit touched the collection since.
    func put(_ key: Key, _ value: some Sendable, ifGeneration generation: UInt64) {
        state.withLock { state in
            guard state.globalGeneration &+ (state.generations[key.collection] ?? 0) == generation else { return }
            state.tick += 1
            state.entries[key] = Entry(value: value, tick: state.tick)
            if state.entries.count > capacity, let oldest = state.entries.min(by: { $0.value.tick < $1.value.tick })?.key {
                state.entries[oldest] = nil
            }
        }
    }

    /// Drops the entries of `collections` (every entry when `all`).
    func invalidate(_ collections: Set<CollectionName>, all: Bool) {
        guard all || !collections.isEmpty else { return }
        state.withLock { state in
            if all {
                state.globalGeneration &+= 1
                state.entries.removeAll()
                return
            }
            for collection in collections { state.generations[collection, default: 0] &+= 1 }
            state.entries = state.entries.filter { !collections.contains($0.key.collection) }
        }
    }

    /// How many lookups found an entry, and how many did not.
    var statistics: (hits: Int, misses: Int) { state.withLock { ($0.hits, $0.misses) } }
}

extension Store {
    /// Runs a read through the result cache when `cached`, keyed by `collection`, `query`
    /// and `kind`.
    @usableFromInline
    func cachedRead<T: Sendable>(
        _ cached: Bool, collection: CollectionName, query: Query, kind: String,
        _ read: @escaping @Sendable (StoreReadTransaction) throws -> T
    ) async throws -> T {
        guard cached else { return try await self.read(read) }
        let key = QueryResultCache.Key(collection: collection, query: query, kind: kind)
        if let hit = queryCache.get(key, as: T.self) { return hit }
        let generation = queryCache.generation(of: collection)
        let value = try await self.read(read)
        queryCache.put(key, value, ifGeneration: generation)
        return value
    }

    /// How many cached query reads were answered from the result cache, and how many read
    /// the store.
    public var resultCacheStatistics: (hits: Int, misses: Int) { queryCache.statistics }
}
