import Foundation

/// An open store: a driver plus everything the core builds on it (validation, change
/// events, read caches, migrations, and the write observers through which sync and the
/// server keep their bookkeeping). Every write goes through a store: see
/// Docs/Architecture.md, "One gateway".
///
/// Open one from a store string, so the backend comes from configuration:
///
/// ```swift
/// let store = try await Store.open("sqlite:app.db")          // registry from `import Depot`
/// let users = try await store.repository(User.self)
/// try await users.save(User(id: 1, name: "Ada"))
/// let adults = try await users.query().filter(Field("age") >= 18).all()
/// ```
///
/// A `Store` is `Sendable`: share one across tasks. Close it when done.
public final class Store: Sendable {
    /// The driver under this store.
    public let driver: any StorageDriver
    /// The store string it was opened from, secrets hidden (or the backend name).
    public let name: String

    let subscribers = Locked<[UUID: AsyncStream<ChangeBatch>.Continuation]>([:])
    let caches = Locked<[ObjectIdentifier: WeakCache]>([:])
    let preparedModels = Locked<Set<String>>([])
    /// What runs inside every write transaction (``addWriteObserver(_:)``).
    let observers = Locked<[any StoreWriteObserver]>([])
    /// The collections' references, required fields and defaults (Rules.swift).
    let rules = RulesCache()
    /// Opt-in query results (QueryResultCache.swift).
    let queryCache = QueryResultCache()

    /// Wraps an open driver.
    public init(driver: any StorageDriver, name: String? = nil) async throws {
        self.driver = driver
        self.name = name ?? driver.backendName
    }

    /// Opens a store from a store string through `registry`, and runs the registry's
    /// ``DriverRegistry/onOpen(_:)`` setups on it.
    /// - Throws: ``DepotError`` `.invalidStore` for an unknown scheme or bad option, or the driver's error.
    public static func open(_ string: String, registry: DriverRegistry) async throws -> Store {
        let driver = try await registry.makeDriver(string)
        let shown = (try? StoreLocation(string).description) ?? driver.backendName
        do {
            let store = try await Store(driver: driver, name: shown)
            for setup in registry.storeSetups { setup(store) }
            return store
        } catch {
            try? await driver.close()
            throw error
        }
    }

    /// Closes the driver and ends every change subscription.
    public func close() async throws {
        let continuations = subscribers.withLock { subscribers in
            defer { subscribers.removeAll() }
            return Array(subscribers.values)
        }
        for continuation in continuations { continuation.finish() }
        try await driver.close()
    }

    /// The untyped collection named `name`.
    /// - Throws: `.invalidName` for a name that is not allowed.
    public func collection(_ name: String) throws -> Collection {
        Collection(store: self, name: try CollectionName(name))
    }

    /// An untyped view of any collection, reserved ones included.
    public func collection(_ name: CollectionName) -> Collection {
        Collection(store: self, name: name)
    }

    /// The names of the store's collections (reserved `_depot_` ones excluded unless asked).
    public func collectionNames(includingReserved: Bool = false) async throws -> [CollectionName] {
        let names = try await driver.read { tx in try tx.collectionNames() }
        return includingReserved ? names : names.filter { !$0.isReserved }
    }

    // MARK: Transactions

    /// Runs `body` in a read transaction over one consistent snapshot.
    public func read<T: Sendable>(_ body: @escaping @Sendable (StoreReadTransaction) throws -> T) async throws -> T {
        try await driver.read { tx in try TransactionMarker.inside(self) { try body(StoreReadTransaction(tx, store: self)) } }
    }

    /// Runs `body` in one atomic write transaction across any collections; a throw rolls
    /// everything back. The store's write observers run inside the same transaction;
    /// change events go out and read caches are invalidated after the commit, before this
    /// returns.
    ///
    /// - Parameter excluded: observers not to run for this transaction (the sync
    ///   coordinator applies pulled records without recording them in its own outbox).
    @discardableResult
    public func write<T: Sendable>(excluding excluded: [any StoreWriteObserver] = [], _ body: @escaping @Sendable (StoreWriteTransaction) throws -> T) async throws -> T {
        let active = activeObservers(excluding: excluded)
        let box = ChangeBox()
        let result = try await driver.write { [active] tx in try self.run(body, in: tx, observers: active, recordingInto: box) }
        finishWrite(observers: active, box)
        return result
    }

    /// ``write(excluding:_:)`` for a closure that is exactly one write of one record by id
    /// (insert, update, save or partial update): the driver may run that write as a
    /// transaction of its own (``WriteTransaction/nextCallEndsTransaction()``). Used by the
    /// one-record methods of ``Collection`` and ``Repository``; the closure must not catch the
    /// write's error and go on. `sameOnEveryRun`: every run of the closure asks for the same
    /// write with the same values (a record or change made before it; not a model encoded
    /// inside it), which lets a driver learn the write from one run and answer the next
    /// (``WriteTransaction/nextCallEndsTransaction(sameOnEveryRun:)``).
    func writeOne<T: Sendable>(sameOnEveryRun: Bool = false, _ body: @escaping @Sendable (StoreWriteTransaction) throws -> T) async throws -> T {
        try await write { tx in
            tx.isOneWrite = true
            tx.oneWriteIsSameOnEveryRun = sameOnEveryRun
            return try body(tx)
        }
    }

    /// The observers a write transaction runs: all but `excluded`.
    func activeObservers(excluding excluded: [any StoreWriteObserver]) -> [any StoreWriteObserver] {
        var active = observers.withLock { $0 }
        if !excluded.isEmpty {
            let skip = Set(excluded.map { ObjectIdentifier($0) })
            active.removeAll { skip.contains(ObjectIdentifier($0)) }
        }
        return active
    }

    /// Runs `body` over the driver's write transaction wrapped with validation, change
    /// events and `observers`, and leaves what it recorded in `box` for ``finishWrite(observers:_:)``.
    func run<T>(_ body: (StoreWriteTransaction) throws -> T, in tx: any WriteTransaction, observers: [any StoreWriteObserver], recordingInto box: ChangeBox) throws -> T {
        let wrapped = StoreWriteTransaction(tx, store: self, observers: observers)
        let value = try TransactionMarker.inside(self) {
            let value = try body(wrapped)
            try wrapped.checkReferences()
            return value
        }
        wrapped.isValid = false
        box.set(wrapped.changes, wrapped.preparedModels, rulesChanged: wrapped.rulesChanged)
        box.touch(wrapped.touched, all: wrapped.touchedAll)
        return value
    }

    /// After the commit: remembers the prepared models, tells the observers, invalidates
    /// read caches and publishes the change events.
    func finishWrite(observers active: [any StoreWriteObserver], _ box: ChangeBox) {
        let (changes, prepared) = box.get()
        if box.rulesChanged { rules.invalidate() }
        let (touched, all) = box.touched
        queryCache.invalidate(touched, all: all)
        if !prepared.isEmpty { preparedModels.withLock { $0.formUnion(prepared) } }
        if !changes.isEmpty {
            let batch = ChangeBatch(changes: changes)
            for observer in active { observer.didCommit(batch) }
            publish(batch)
        }
    }

    /// Adds `observer` to the work every later write transaction does (see
    /// ``StoreWriteObserver``). Observers run in the order they were added.
    public func addWriteObserver(_ observer: any StoreWriteObserver) {
        observers.withLock { $0.append(observer) }
    }

    /// The store's observer of type `O`, added by `make` if the store has none yet: for
    /// layers that need exactly one observer per store (the sync outbox, a server's change
    /// log) however many of their objects share the store.
    public func writeObserver<O: StoreWriteObserver>(_ type: O.Type, orAdd make: () -> O) -> O {
        observers.withLock { list in
            for case let existing as O in list { return existing }
            let made = make()
            list.append(made)
            return made
        }
    }

    /// The observers every write transaction runs, in order.
    public var writeObservers: [any StoreWriteObserver] { observers.withLock { $0 } }

    /// Removes `observer`; later write transactions no longer run it.
    public func removeWriteObserver(_ observer: any StoreWriteObserver) {
        observers.withLock { $0.removeAll { $0 === observer } }
    }

    // MARK: Observation

    /// Every committed write transaction of this process, as a batch of changes.
    /// Ending the loop ends the subscription. Writes by other processes are seen only on a
    /// driver with ``DriverCapabilities/crossProcessChanges`` (PostgreSQL).
    public func changes() -> AsyncStream<ChangeBatch> {
        let (stream, continuation) = AsyncStream<ChangeBatch>.makeStream(bufferingPolicy: .unbounded)
        let id = UUID()
        subscribers.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.removeValue(forKey: id) }
        }
        return stream
    }

    /// Hands a committed batch to the subscribers of ``changes()`` and the read caches (also
    /// what a driver with ``DriverCapabilities/crossProcessChanges`` calls for other
    /// processes' commits).
    package func publish(_ batch: ChangeBatch) {
        let live = caches.withLock { caches in
            caches = caches.filter { $0.value.cache != nil }
            return caches.values.compactMap(\.cache)
        }
        for cache in live { cache.invalidate(batch) }
        let continuations = subscribers.withLock { Array($0.values) }
        for continuation in continuations { continuation.yield(batch) }
    }

    func register(cache: any ChangeInvalidated) {
        caches.withLock { $0[ObjectIdentifier(cache)] = WeakCache(cache: cache) }
    }
}

/// Carries what a write transaction recorded out of the driver's closure.
final class ChangeBox: @unchecked Sendable {
    // @unchecked: `set` runs once inside the driver's write closure and `get` after the
    // driver's `write` returned, so the two never overlap; the lock makes it explicit.
    private let lock = NSLock()
    private var changes: [ChangeEvent] = []
    private var prepared: Set<String> = []
    private var changedRules = false

    func set(_ changes: [ChangeEvent], _ prepared: Set<String>, rulesChanged: Bool) {
        lock.withLock {
            self.changes = changes
            self.prepared = prepared
            self.changedRules = rulesChanged
        }
    }

    private var touchedCollections: Set<CollectionName> = []
    private var touchedAll = false

    /// Records the collections the transaction wrote to (all of them for a raw write).
    func touch(_ collections: Set<CollectionName>, all: Bool) {
        lock.withLock {
            touchedCollections = collections
            touchedAll = all
        }
    }

    /// The collections the transaction wrote to, and whether it may have written to any.
    var touched: (Set<CollectionName>, Bool) { lock.withLock { (touchedCollections, touchedAll) } }

    /// `true` when the transaction changed a collection's rules.
    var rulesChanged: Bool { lock.withLock { changedRules } }

    func get() -> ([ChangeEvent], Set<String>) { lock.withLock { (changes, prepared) } }
}

/// One change made by a committed transaction.
public struct ChangeEvent: Hashable, Sendable {
    /// What happened to the record.
    public enum Kind: String, Sendable, Hashable {
        /// It was added; `updated`: its fields were replaced; `deleted`: it was removed.
        case inserted, updated, deleted
    }
    /// The collection changed.
    public var collection: CollectionName
    /// What happened.
    public var kind: Kind
    /// The record's id.
    public var id: RecordID

    /// Describes one change.
    public init(collection: CollectionName, kind: Kind, id: RecordID) {
        self.collection = collection
        self.kind = kind
        self.id = id
    }
}

/// The changes of one committed write transaction, in the order they were made.
public struct ChangeBatch: Sendable, Hashable {
    /// The changes, in the order the transaction made them.
    public var changes: [ChangeEvent]
    /// A batch of these changes (drivers that hear other processes' commits make them).
    package init(changes: [ChangeEvent]) { self.changes = changes }
    /// The collections the transaction changed.
    public var collections: Set<CollectionName> { Set(changes.map(\.collection)) }
}

/// Something that must forget entries when a commit changes them (read caches).
protocol ChangeInvalidated: AnyObject, Sendable {
    func invalidate(_ batch: ChangeBatch)
}

struct WeakCache: Sendable {
    weak var cache: (any ChangeInvalidated)?
}
