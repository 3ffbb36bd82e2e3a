
/// Open stores registered under names, one of them the default: for an app that keeps
/// several stores open at once (a main database, a cache, a settings file) and reaches them
/// from anywhere without passing them around (Docs/Semantics.md, "Several stores and a
/// default").
///
/// ```swift
/// let main = try await Store.open("sqlite:@data/app.db")
/// let cache = try await Store.open("gdbm:@data/cache")
/// try Store.register(main, as: "main")          // the first one registered is the default
/// try Store.register(cache, as: "cache")
///
/// let books = try await Store.default.repository(Book.self)
/// let thumbnails = try Store.named("cache").collection("thumbnails")
/// ```
///
/// The registry only keeps references: registering does not open a store and
/// unregistering does not close one. It is `Sendable`, and every method is safe to call from
/// any thread or task at once. ``shared`` is the process's registry, which the static
/// methods of ``Store`` use; make a `StoreRegistry()` of your own to keep a set apart
/// (in tests, say).
public final class StoreRegistry: Sendable {
    /// The process-wide registry behind ``Store/default``, ``Store/named(_:)`` and
    /// ``Store/register(_:as:makeDefault:)``.
    public static let shared = StoreRegistry()

    private struct State {
        var stores: [String: Store] = [:]
        var defaultName: String?
    }

    private let state = Locked(State())

    /// An empty registry, with no default.
    public init() {}

    /// Registers `store` under `name`. It becomes the default when `makeDefault` is `true`,
    /// or when the registry has no default yet (so the first store registered is the
    /// default until another is made so).
    /// - Throws: `.alreadyExists` when a store is already registered under `name` (unregister
    ///   it first); `.invalidName` for an empty name.
    public func register(_ store: Store, as name: String, makeDefault: Bool = false) throws {
        guard !name.isEmpty else { throw DepotError(.invalidName, "A store is registered under a non-empty name.") }
        try state.withLock { state in
            guard state.stores[name] == nil else {
                throw DepotError(.alreadyExists, "A store is already registered as '\(name)'; unregister it first.")
            }
            state.stores[name] = store
            if makeDefault || state.defaultName == nil { state.defaultName = name }
        }
    }

    /// Removes the store registered under `name` and returns it (still open), `nil` if none
    /// was. If it was the default, there is no default afterwards: another store never
    /// becomes the default unasked.
    @discardableResult
    public func unregister(_ name: String) -> Store? {
        state.withLock { state in
            if state.defaultName == name { state.defaultName = nil }
            return state.stores.removeValue(forKey: name)
        }
    }

    /// Makes the store registered under `name` the default.
    /// - Throws: `.notFound` when no store is registered under `name`.
    public func setDefault(_ name: String) throws {
        try state.withLock { state in
            guard state.stores[name] != nil else {
                throw DepotError(.notFound, "No store is registered as '\(name)'; registered: \(Self.list(state.stores.keys)).")
            }
            state.defaultName = name
        }
    }

    /// The store registered under `name`.
    /// - Throws: `.notFound` naming the stores that are registered.
    public func store(named name: String) throws -> Store {
        try state.withLock { state in
            guard let store = state.stores[name] else {
                throw DepotError(.notFound, "No store is registered as '\(name)'; registered: \(Self.list(state.stores.keys)).")
            }
            return store
        }
    }

    /// The default store.
    /// - Throws: `.notFound` when no store is the default (none registered, or the default
    ///   was unregistered), saying how to register one.
    public var defaultStore: Store {
        get throws {
            try state.withLock { state in
                guard let name = state.defaultName, let store = state.stores[name] else {
                    throw DepotError(.notFound, "No default store is registered; call Store.register(store, as: NAME) or StoreRegistry.setDefault(NAME) first.")
                }
                return store
            }
        }
    }

    /// The name of the default store, `nil` when there is none.
    public var defaultName: String? { state.withLock { $0.defaultName } }

    /// The registered names, sorted.
    public var names: [String] { state.withLock { $0.stores.keys.sorted() } }

    private static func list(_ names: Dictionary<String, Store>.Keys) -> String {
        names.isEmpty ? "none" : names.sorted().joined(separator: ", ")
    }
}

extension Store {
    /// The default store of ``StoreRegistry/shared``: the first store registered, or the one
    /// registered with `makeDefault: true`.
    /// - Throws: `.notFound` when no default store is registered.
    public static var `default`: Store {
        get throws { try StoreRegistry.shared.defaultStore }
    }

    /// The store registered in ``StoreRegistry/shared`` under `name`.
    /// - Throws: `.notFound` naming the stores that are registered.
    public static func named(_ name: String) throws -> Store {
        try StoreRegistry.shared.store(named: name)
    }

    /// Registers `store` in ``StoreRegistry/shared`` under `name`
    /// (``StoreRegistry/register(_:as:makeDefault:)``): the default when `makeDefault` is
    /// `true` or no store is the default yet.
    /// - Throws: `.alreadyExists` when the name is taken; `.invalidName` for an empty name.
    public static func register(_ store: Store, as name: String, makeDefault: Bool = false) throws {
        try StoreRegistry.shared.register(store, as: name, makeDefault: makeDefault)
    }

    /// Removes the store registered in ``StoreRegistry/shared`` under `name` and returns it,
    /// still open (``StoreRegistry/unregister(_:)``).
    @discardableResult
    public static func unregister(_ name: String) -> Store? {
        StoreRegistry.shared.unregister(name)
    }
}
