import DepotCore
import Foundation

/// A driver that keeps a store in one plain JSON file a person can read and edit.
///
/// The file is the shape of a json-server `db.json`: one key per collection, each an array
/// of records with their `id`, plus Depot's metadata under `"_depot"`
/// (see Docs/JSONFileDriver.md for the exact format and representations).
///
/// ```swift
/// var registry = DriverRegistry()
/// JSONFileDriver.register(in: &registry)
/// let driver = try await registry.makeDriver("json:/var/data/db.json?durability=full&pretty=true")
/// ```
///
/// - The whole store is held in memory and queried with the shared ``DepotCore/QueryEvaluator``.
/// - Each write transaction that changes something rewrites the whole file atomically:
///   a temporary file beside it, fsync, rename over the store, fsync of the directory
///   (durability `full`; `normal` skips both fsyncs). Nothing is acknowledged before that.
///   Any failure leaves the previous file in place, throws `.io`, and rolls back.
/// - Writers in other processes are kept out by an advisory `flock` on `PATH.lock`;
///   waiting longer than the lock timeout throws `.locked`.
/// - Before every read or write the file's identity (device, inode, size, modification and
///   change times) is checked; a file changed by a person or another program is reloaded.
/// - A file that cannot be parsed is never written over: reads and writes throw its
///   `.corrupted` or `.decoding` error until the file is fixed.
/// - All blocking work (reading and writing the file, fsync, waiting for the lock) and every
///   write closure runs on the driver's own thread, never on the cooperative pool. A read
///   takes the published committed snapshot after one `stat` on the caller's thread and
///   runs its closure there, so readers never wait for a writer; only a changed file sends
///   a read to the driver's thread.
public final class JSONFileDriver: StorageDriver {
    public let backendName = "json"
    public var capabilities: DriverCapabilities { .complete }

    /// The store file's absolute path.
    public let path: String
    /// The settings the driver was opened with.
    public let configuration: Configuration

    private let thread: BlockingExecutor
    /// The store's state and commit machinery (internal for tests).
    let store: JSONFileStore

    /// How a JSON store behaves.
    public struct Configuration: Sendable, Hashable {
        /// `full`: commits fsync the file and the directory (survive power loss).
        /// `normal`: no fsync (survive a process crash; may lose the newest commits on power loss).
        public var durability: Durability
        /// `true`: indent with two spaces, one member per line. `false`: one record per line.
        public var pretty: Bool
        /// How long a writer waits for another process's lock before throwing `.locked`.
        public var lockTimeout: Duration
        /// The largest file the driver reads; a larger one throws `.decoding`.
        public var maximumFileSize: Int
        /// `true`: a read trusts the kernel's change notification for the store's folder
        /// (inotify, Linux) and `stat`s the file only after something in the folder
        /// changed. `false`, or where there is no notification: every read `stat`s the file.
        /// Docs/JSONFileDriver.md, "Reads".
        public var changeNotification: Bool

        /// Makes a configuration; the defaults are those of `json:PATH` without options.
        public init(
            durability: Durability = .full, pretty: Bool = true, lockTimeout: Duration = .seconds(5), maximumFileSize: Int = 1 << 30,
            changeNotification: Bool = true
        ) {
            self.durability = durability
            self.pretty = pretty
            self.lockTimeout = lockTimeout
            self.maximumFileSize = maximumFileSize
            self.changeNotification = changeNotification
        }
    }

    /// Opens (or prepares to create) the store file at `path` and loads it.
    ///
    /// A missing file is an empty store; the file is created by the first commit.
    /// - Parameters:
    ///   - path: the store file; relative paths are resolved against the current directory.
    ///   - configuration: durability, formatting, lock timeout and size limit.
    /// - Throws: `.invalidStore` for an empty path or a missing directory, `.io` when the
    ///   file cannot be read, `.corrupted`/`.decoding`/`.schemaMismatch` when it cannot be
    ///   understood (it is left untouched).
    public convenience init(path: String, configuration: Configuration = Configuration()) async throws {
        try await self.init(path: path, configuration: configuration, fileSystem: PosixFileSystem())
    }

    /// Opens the store file at `path` through `fileSystem`: the tests' way to inject faults
    /// (``FaultInjectingFileSystem``) and count operations. Otherwise as
    /// ``init(path:configuration:)``.
    package init(path: String, configuration: Configuration = Configuration(), fileSystem: any JSONFileSystem) async throws {
        guard !path.isEmpty, !path.hasSuffix("/"), !path.utf8.contains(0) else {
            throw DepotError(.invalidStore, "A JSON store needs a file path: write 'json:PATH', for example 'json:data/db.json'.")
        }
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        self.path = absolute
        self.configuration = configuration
        let store = JSONFileStore(path: absolute, configuration: configuration, fileSystem: fileSystem)
        self.store = store
        let thread = BlockingExecutor(name: "depot.json", closedMessage: "The JSON store is closed.")
        self.thread = thread
        do {
            try await thread.run {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: store.directory, isDirectory: &isDirectory), isDirectory.boolValue else {
                    throw DepotError(.invalidStore, "The directory of the JSON store \(absolute) does not exist.")
                }
                try store.refresh()
            }
        } catch {
            thread.stop()
            throw error
        }
    }

    deinit {
        thread.stop()
    }

    /// Registers the `json` scheme: `json:PATH?durability=full|normal&pretty=true|false&lock_timeout_ms=N&notify=true|false`.
    ///
    /// - `durability` (default `full`): see ``Configuration/durability``.
    /// - `pretty` (default `true`): see ``Configuration/pretty``.
    /// - `lock_timeout_ms` (default 5000): see ``Configuration/lockTimeout``.
    /// - `notify` (default `true`): see ``Configuration/changeNotification``.
    ///
    /// Unknown options and malformed values throw `.invalidStore`.
    public static func register(in registry: inout DriverRegistry) {
        registry.register("json") { location in
            try await JSONFileDriver(path: location.path, configuration: try configuration(from: location))
        }
    }

    /// The configuration a store string asks for.
    /// - Throws: `.invalidStore` for unknown options or malformed values.
    public static func configuration(from location: StoreLocation) throws -> Configuration {
        try location.rejectUnknownOptions(["durability", "pretty", "lock_timeout_ms", "notify"])
        var configuration = Configuration(durability: try location.durability())
        switch location.options["notify"] {
        case nil, "true"?: configuration.changeNotification = true
        case "false"?: configuration.changeNotification = false
        default: throw DepotError(.invalidStore, "Option notify must be 'true' or 'false'.")
        }
        switch location.options["pretty"] {
        case nil, "true"?: configuration.pretty = true
        case "false"?: configuration.pretty = false
        default: throw DepotError(.invalidStore, "Option pretty must be 'true' or 'false'.")
        }
        if let text = location.options["lock_timeout_ms"] {
            guard let ms = Int(text), ms >= 0, ms <= 86_400_000 else {
                throw DepotError(.invalidStore, "Option lock_timeout_ms must be a whole number of milliseconds from 0 to 86400000.")
            }
            configuration.lockTimeout = .milliseconds(ms)
        }
        return configuration
    }

    /// Takes the committed snapshot the driver's thread last published, checks with one
    /// `stat` on the caller's thread that the file is still the one it was made from, and
    /// runs `body` over it on the caller's executor: the snapshot is an immutable value in
    /// memory, so the closure does no I/O, and a writer can commit while it runs. Only when
    /// the file changed (or cannot be trusted) does the read go to the driver's thread,
    /// which reloads it first.
    public func read<T: Sendable>(_ body: @escaping @Sendable (any ReadTransaction) throws -> T) async throws -> T {
        let store = self.store
        let snapshot: JSONStoreState
        if let unchanged = try store.unchangedSnapshot() {
            snapshot = unchanged
        } else {
            snapshot = try await thread.run { try store.snapshot() }
        }
        let transaction = JSONFileTransaction(state: snapshot, writable: false)
        defer { transaction.isValid = false }
        return try body(transaction)
    }

    public func write<T: Sendable>(_ body: @escaping @Sendable (any WriteTransaction) throws -> T) async throws -> T {
        let store = self.store
        return try await thread.run { try store.write(body) }
    }

    /// Runs `body` on the calling thread over the published state when the file is still the
    /// one it holds (``read(_:)``'s path without the driver's thread); `false` when the
    /// driver's thread must look at the file first.
    public func readWithoutWaiting(_ body: (any ReadTransaction) throws -> Void) throws -> Bool {
        guard let snapshot = try store.unchangedSnapshot() else { return false }
        let transaction = JSONFileTransaction(state: snapshot, writable: false)
        defer { transaction.isValid = false }
        try body(transaction)
        return true
    }

    /// ``read(_:)`` on the calling thread; a changed file is reloaded on the driver's
    /// thread while the caller waits.
    public func readBlocking<T>(_ body: (any ReadTransaction) throws -> T) throws -> T {
        let store = self.store
        let snapshot: JSONStoreState
        if let unchanged = try store.unchangedSnapshot() {
            snapshot = unchanged
        } else {
            snapshot = try thread.runBlocking { try store.snapshot() }
        }
        let transaction = JSONFileTransaction(state: snapshot, writable: false)
        defer { transaction.isValid = false }
        return try body(transaction)
    }

    /// ``write(_:)`` on the driver's thread while the caller waits.
    @discardableResult
    public func writeBlocking<T>(_ body: (any WriteTransaction) throws -> T) throws -> T {
        let store = self.store
        return try thread.runBlocking(nonEscaping: { try store.write(body) })
    }

    /// Streams query results: the results are taken from one snapshot on the driver's
    /// thread, then handed to the consumer from a separate thread (the hand-off blocks
    /// while the consumer is behind, so it never runs on the cooperative pool).
    public func stream(_ query: Query, from collection: CollectionName) -> RecordStream {
        RecordStream { [self] sink in
            let records = try await self.read { tx in try tx.query(query, in: collection) }
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let sender = Thread {
                    do {
                        for record in records { try sink.send(record) }
                        continuation.resume()
                    } catch {
                        continuation.resume(throwing: error)
                    }
                }
                sender.name = "depot.json.stream"
                sender.start()
            }
        }
    }

    public func integrityCheck() async throws -> [String] {
        let store = self.store
        return try await thread.run { try store.integrityCheck() }
    }

    public func close() async throws {
        let store = self.store
        do { try await thread.run { store.close() } } catch let error as DepotError where error.code == .closed {}
        thread.stop()
    }
}
