import Foundation
import Synchronization

/// An open store: a driver plus everything the core builds on it (validation, change
/// events, read caches, the sync outbox, migrations).
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

    let subscribers = Mutex<[UUID: AsyncStream<ChangeBatch>.Continuation]>([:])
    let caches = Mutex<[ObjectIdentifier: WeakCache]>([:])
    let preparedModels = Mutex<Set<String>>([])
    /// Collections attached to a remote: writes to them add outbox entries.
    let attachments = Mutex<Set<String>>([])

    /// Wraps an open driver.
    public init(driver: any StorageDriver, name: String? = nil) async throws {
        self.driver = driver
        self.name = name ?? driver.backendName
        try await reloadAttachments()
    }

    /// Opens a store from a store string through `registry`.
    /// - Throws: ``DepotError`` `.invalidStore` for an unknown scheme or bad option, or the driver's error.
    public static func open(_ string: String, registry: DriverRegistry) async throws -> Store {
        let driver = try await registry.makeDriver(string)
        let shown = (try? StoreLocation(string).description) ?? driver.backendName
        do {
            return try await Store(driver: driver, name: shown)
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
        try await driver.read { tx in try body(StoreReadTransaction(tx, store: self)) }
    }

    /// Runs `body` in one atomic write transaction across any collections; a throw rolls
    /// everything back. Change events go out and read caches are invalidated after the commit,
    /// before this returns.
    ///
    /// - Parameter recordingOutbox: `false` to skip outbox entries for attached collections
    ///   (the sync coordinator applies pulled records this way).
    @discardableResult
    public func write<T: Sendable>(recordingOutbox: Bool = true, _ body: @escaping @Sendable (StoreWriteTransaction) throws -> T) async throws -> T {
        let attached = recordingOutbox ? attachments.withLock { $0 } : []
        let box = ChangeBox()
        let result = try await driver.write { tx in
            let wrapped = StoreWriteTransaction(tx, store: self, attached: attached)
            let value = try body(wrapped)
            wrapped.isValid = false
            box.set(wrapped.changes, wrapped.touchedAttachments, wrapped.preparedModels)
            return value
        }
        let (changes, touchedAttachments, prepared) = box.get()
        if !prepared.isEmpty { preparedModels.withLock { $0.formUnion(prepared) } }
        if touchedAttachments { try await reloadAttachments() }
        if !changes.isEmpty { publish(ChangeBatch(changes: changes)) }
        return result
    }

    /// Re-reads which collections are attached to a remote (`_depot_sync`).
    public func reloadAttachments() async throws {
        let sync = try CollectionName(reserved: "_depot_sync")
        let names = try await driver.read { tx in try tx.query(Query(), in: sync).compactMap { record -> String? in
            if case .string(let name) = record.id { return name }
            return nil
        } }
        attachments.withLock { $0 = Set(names) }
    }

    // MARK: Observation

    /// Every committed write transaction of this process, as a batch of changes.
    /// Ending the loop ends the subscription. Writes by other processes are not seen.
    public func changes() -> AsyncStream<ChangeBatch> {
        let (stream, continuation) = AsyncStream<ChangeBatch>.makeStream(bufferingPolicy: .unbounded)
        let id = UUID()
        subscribers.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.removeValue(forKey: id) }
        }
        return stream
    }

    func publish(_ batch: ChangeBatch) {
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
    private var touched = false
    private var prepared: Set<String> = []

    func set(_ changes: [ChangeEvent], _ touched: Bool, _ prepared: Set<String>) {
        lock.withLock {
            self.changes = changes
            self.touched = touched
            self.prepared = prepared
        }
    }

    func get() -> ([ChangeEvent], Bool, Set<String>) { lock.withLock { (changes, touched, prepared) } }
}

/// One change made by a committed transaction.
public struct ChangeEvent: Hashable, Sendable {
    public enum Kind: String, Sendable, Hashable {
        case inserted, updated, deleted
    }
    public var collection: CollectionName
    public var kind: Kind
    public var id: RecordID

    public init(collection: CollectionName, kind: Kind, id: RecordID) {
        self.collection = collection
        self.kind = kind
        self.id = id
    }
}

/// The changes of one committed write transaction, in the order they were made.
public struct ChangeBatch: Sendable, Hashable {
    public var changes: [ChangeEvent]
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
