import DepotCore
import Foundation
import Synchronization

/// A driver over GNU dbm (libgdbm) files: a store is a directory of genuine GDBM
/// databases, one pair per collection, plus a redo journal that makes transactions atomic
/// and crash-safe.
///
/// Open it by store string or directly:
///
/// ```swift
/// let driver = try await GDBMDriver(path: "/var/lib/app/store")      // durability full
/// var registry = DriverRegistry()
/// GDBMDriver.register(in: &registry)
/// let other = try await registry.makeDriver("gdbm:/tmp/store?durability=normal")
/// ```
///
/// - Records are a compact binary encoding with a CRC-32; a record failing it is a
///   `.corrupted` error naming the collection and id.
/// - Queries scan the collection's own file and run through the shared ``QueryEvaluator``;
///   equality and `in` on `id`, on a unique constraint or on an index fetch directly.
///   ``ReadTransaction/explain(_:in:)`` says which.
/// - A write transaction waits in memory until it returns, then is written to the journal
///   (fsynced with durability `full`), applied to the GDBM files, and later folded into the
///   backup files. After a crash the store rebuilds its files from the backup and the journal.
/// - One process opens a store for writing at a time; another gets `.locked` after
///   `lock_timeout_ms`. Drivers of the same process on the same directory share one store.
///
/// The layout and the recovery rules are in Docs/GDBMDriver.md.
public final class GDBMDriver: StorageDriver {
    /// `"gdbm"`.
    public let backendName = "gdbm"
    /// Everything: ``DriverCapabilities/complete``.
    public var capabilities: DriverCapabilities { .complete }

    let engine: GDBMEngine
    /// An atomic, not a lock: every read checks it, and a lock word written by two threads
    /// reading at once would bounce between their cores (Docs/GDBMDriver.md, "Concurrent reads").
    private let closed = Atomic<Bool>(false)

    /// The store's writer thread as a task executor.
    ///
    /// Small transactions already run on the caller's thread (see ``read(_:)`` and
    /// ``write(_:)``); larger ones run on the store's own threads (writes on the writer
    /// thread, reads on a reader pool), and a task that awaits them from elsewhere pays two
    /// thread switches per transaction. A hot loop of such transactions can run on the
    /// writer thread itself and pay none:
    ///
    /// ```swift
    /// try await withTaskExecutorPreference(driver.taskExecutor) {
    ///     for id in ids { _ = try await driver.read { tx in try tx.get(id, from: users) } }
    /// }
    /// ```
    ///
    /// While such a task runs, writes from other tasks wait for its next suspension point.
    public var taskExecutor: any TaskExecutor { engine.thread }

    /// The store directory (absolute).
    public var directory: String { engine.directory }

    /// The commits that waited for background folds since the store was opened in this
    /// process. A commit waits only when the closed journal segments waiting for a fold pass
    /// their bound (Docs/GDBMDriver.md, "Bounds"): a count that grows says the writers outrun
    /// the folds, and `longest` is the worst pause they caused.
    public var foldWaits: FoldWaits { engine.foldWaits }

    /// Returns once the journal segments closed so far are folded into a backup: the
    /// background work that the commits made before the call left behind (Docs/GDBMDriver.md,
    /// "Journal segments, backups and folds"). An app never needs it (folds run on their own,
    /// and a commit waits for them only at the bound); a benchmark calls it so that a load's
    /// folds count in the load's time instead of slowing whatever it measures next. Returns
    /// at once on a closed store.
    public func waitForFolds() async { await engine.waitForFolds() }

    /// Opens (creating if needed) the store in directory `path`.
    ///
    /// - Parameters:
    ///   - path: the store directory; created with its parents' permission if missing.
    ///   - durability: `.full` fsyncs the journal on every commit; `.normal` only writes it
    ///     (survives kill -9, may lose the newest commits on power loss).
    ///   - lockTimeoutMilliseconds: how long to retry while another process holds the store.
    ///   - readOnly: share the store with other read-only processes; writes throw `.unsupported`.
    /// - Throws: `.locked` when another process keeps the store, `.corrupted` for damaged
    ///   files that cannot be rebuilt, `.invalidStore` for a path that is not a directory, `.io`.
    public init(path: String, durability: Durability = .full, lockTimeoutMilliseconds: Int = 2000, readOnly: Bool = false) async throws {
        var options = EngineOptions()
        options.durability = durability
        options.lockTimeoutMilliseconds = lockTimeoutMilliseconds
        options.readOnly = readOnly
        self.engine = try await GDBMEngine.acquire(directory: try GDBMDriver.absolute(path), options: options)
    }

    init(directory: String, options: EngineOptions) async throws {
        self.engine = try await GDBMEngine.acquire(directory: try GDBMDriver.absolute(directory), options: options)
    }

    /// The options `gdbm:PATH?...` accepts.
    public static let optionNames: Set<String> = ["durability", "lock_timeout_ms", "checkpoint_kb", "sync_every", "sync_interval_ms", "readonly"]

    /// Registers the `gdbm` scheme: `gdbm:PATH[?durability=full|normal&lock_timeout_ms=N&checkpoint_kb=N&sync_every=N&sync_interval_ms=N&readonly=true]`.
    ///
    /// PATH is the store directory (created if missing). `checkpoint_kb` is the journal size
    /// that triggers folding it into the backup files (default 8192); `sync_every` the number
    /// of commits between syncs of the GDBM files (default 256), `sync_interval_ms` the least
    /// time between two such syncs (default 1000; the journal keeps every commit meanwhile).
    /// - Throws (from the factory): `.invalidStore` for an empty path or an unknown or malformed option.
    public static func register(in registry: inout DriverRegistry) {
        registry.register("gdbm") { location in
            try await GDBMDriver(location: location)
        }
    }

    /// Opens the store a parsed `gdbm:` string names.
    /// - Throws: `.invalidStore` for a bad path or option, then what ``init(path:durability:lockTimeoutMilliseconds:readOnly:)`` throws.
    public convenience init(location: StoreLocation) async throws {
        try location.rejectUnknownOptions(GDBMDriver.optionNames)
        guard !location.path.isEmpty else {
            throw DepotError(.invalidStore, "A GDBM store needs a directory path: write 'gdbm:PATH'.")
        }
        var options = EngineOptions()
        options.durability = try location.durability()
        func integer(_ key: String, _ range: ClosedRange<Int>) throws -> Int? {
            guard let text = location.options[key] else { return nil }
            guard let value = Int(text), range.contains(value) else {
                throw DepotError(.invalidStore, "Option \(key) must be an integer from \(range.lowerBound) to \(range.upperBound).")
            }
            return value
        }
        options.lockTimeoutMilliseconds = try integer("lock_timeout_ms", 0...600_000) ?? options.lockTimeoutMilliseconds
        options.checkpointBytes = (try integer("checkpoint_kb", 1...(1 << 30)) ?? (options.checkpointBytes >> 10)) << 10
        options.syncEveryCommits = try integer("sync_every", 1...1_000_000) ?? options.syncEveryCommits
        options.syncIntervalMilliseconds = try integer("sync_interval_ms", 0...3_600_000) ?? options.syncIntervalMilliseconds
        switch location.options["readonly"] {
        case nil, "false": options.readOnly = false
        case "true": options.readOnly = true
        default: throw DepotError(.invalidStore, "Option readonly must be 'true' or 'false'.")
        }
        try await self.init(directory: location.path, options: options)
    }

    static func absolute(_ path: String) throws -> String {
        guard !path.isEmpty, !path.utf8.contains(0) else {
            throw DepotError(.invalidStore, "A GDBM store needs a directory path.")
        }
        let url = path.hasPrefix("/") ? URL(fileURLWithPath: path) : URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(path)
        return url.standardizedFileURL.path
    }

    private func checkOpen() throws {
        if closed.load(ordering: .acquiring) { throw DepotError(.closed, "The GDBM store is closed.") }
    }

    /// Runs `body` in a read transaction: one snapshot, unaffected by writers that commit
    /// meanwhile.
    ///
    /// A small transaction (up to 64 gdbm reads, no scan) runs right on the calling thread
    /// when no commit is being applied to the files at that moment; others run on the
    /// store's reader pool. A transaction that turns out larger is abandoned at the point
    /// where it outgrows that budget and `body` runs again on the pool, so `body` may be
    /// called twice: keep it free of side effects other than its result.
    /// - Throws: what `body` throws, `.closed`, `.corrupted`, `.io`.
    public func read<T: Sendable>(_ body: @escaping @Sendable (any ReadTransaction) throws -> T) async throws -> T {
        try checkOpen()
        let engine = self.engine
        // A task running on the writer thread (it prefers `taskExecutor`) reads right there.
        if engine.thread.isCurrent { return try engine.read(body) }
        // After a failed apply (`.repairFirst`), the writer thread repairs the files first; the
        // read then runs on the pool.
        switch try engine.readInline(body) {
        case .done(let value): return value
        case .declined, .repairFirst:
            if engine.needsRepair { try await engine.thread.run { try engine.writerLock.withLock { try engine.repairIfFailed() } } }
        }
        return try await engine.readers.run { try engine.read(body) }
    }

    /// Runs `body` in a write transaction and commits it.
    ///
    /// With durability `normal`, a small transaction (up to 64 gdbm reads and record writes,
    /// no scan) runs and commits right on the calling thread when no other write is running
    /// (a commit then costs a journal `write(2)` and a few gdbm stores, never an fsync);
    /// others run on the store's writer thread. A transaction that turns out larger is
    /// abandoned before anything is written and `body` runs again on the writer thread, so
    /// `body` may be called twice: keep it free of side effects other than its result.
    /// - Throws: what `body` throws (nothing is written then), `.closed`, `.io`, `.unsupported` (read-only).
    public func write<T: Sendable>(_ body: @escaping @Sendable (any WriteTransaction) throws -> T) async throws -> T {
        try checkOpen()
        let engine = self.engine
        if !engine.thread.isCurrent, case .done(let value) = try engine.writeInline(body) { return value }
        return try await engine.thread.run { try engine.write(body) }
    }

    /// ``read(_:)`` for a caller that waits: small transactions inline, others on the
    /// reader pool while the caller waits.
    public func readBlocking<T>(_ body: (any ReadTransaction) throws -> T) throws -> T {
        try checkOpen()
        let engine = self.engine
        if engine.thread.isCurrent { return try engine.read(body) }
        // After a failed apply (`.repairFirst`), the writer thread repairs the files first; the
        // read then runs on the pool.
        switch try engine.readInline(body) {
        case .done(let value): return value
        case .declined, .repairFirst:
            if engine.needsRepair { try engine.thread.runBlocking(nonEscaping: { try engine.writerLock.withLock { try engine.repairIfFailed() } }) }
        }
        return try engine.readers.runBlocking(nonEscaping: { try engine.read(body) })
    }

    /// Runs a small read on the calling thread when the files lock is free right now
    /// (``read(_:)``'s inline path); `false` on the writer thread, when a commit is
    /// being applied, after a failed apply, or when `body` outgrew the inline budget.
    public func readWithoutWaiting(_ body: (any ReadTransaction) throws -> Void) throws -> Bool {
        try checkOpen()
        let engine = self.engine
        guard !engine.thread.isCurrent, case .done = try engine.readInline(body) else { return false }
        return true
    }

    /// ``write(_:)`` for a caller that waits: small transactions at durability `normal`
    /// inline, others on the writer thread while the caller waits.
    @discardableResult
    public func writeBlocking<T>(_ body: (any WriteTransaction) throws -> T) throws -> T {
        try checkOpen()
        let engine = self.engine
        if !engine.thread.isCurrent, case .done(let value) = try engine.writeInline(body) { return value }
        return try engine.thread.runBlocking(nonEscaping: { try engine.write(body) })
    }

    /// Streams the results of `query` in pages of 256 records.
    ///
    /// The ids and order of the results are fixed when iteration starts (only ids and sort
    /// values are held: 8 bytes per match for integer ids in id order). Pages are read in
    /// separate jobs, so other transactions run between them: a record deleted meanwhile is
    /// skipped, one changed meanwhile is given in its new state if it still matches the
    /// filter, and skipped otherwise. While a stream runs, gdbm reads the collection's file
    /// with `pread` instead of its memory mapping (``GDBMFile/beginUnmappedReads()``), so
    /// memory stays bounded by the ids, not the file's size.
    public func stream(_ query: Query, from collection: CollectionName) -> RecordStream {
        if closed.load(ordering: .acquiring) { return RecordStream(failing: DepotError(.closed, "The GDBM store is closed.")) }
        let engine = self.engine
        return RecordStream { sink in
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let producer = Thread {
                    do {
                        try GDBMDriver.produce(query, collection, engine: engine, sink: sink)
                        continuation.resume()
                    } catch is CancellationError {
                        continuation.resume()
                    } catch {
                        continuation.resume(throwing: error)
                    }
                }
                producer.name = "depot.gdbm.stream"
                producer.start()
            }
        }
    }

    /// Runs on a stream's own thread: asks the store thread for ids, then pages, and hands
    /// the records to `sink` (blocking this thread, never the store's).
    private static func produce(_ query: Query, _ collection: CollectionName, engine: GDBMEngine, sink: RecordSink) throws {
        let (ids, generation, unmapped) = try engine.readers.runBlocking { () -> (StreamIDs, UInt64, UnmappedReads?) in
            try engine.read { tx in
                // Dropped on a throw, the hold ends itself.
                let unmapped = try tx.beginUnmappedReads(of: collection)
                return (try tx.orderedIDs(query, in: collection), tx.generation, unmapped)
            }
        }
        defer { unmapped?.end() }
        var start = 0
        while start < ids.count {
            let page = ids[start..<min(ids.count, start + 256)]
            start += page.count
            let records = try engine.readers.runBlocking { () -> [Record] in
                try engine.read { tx in
                    try tx.records(page, in: collection, recheck: tx.generation == generation ? nil : query.filter)
                }
            }
            for record in records { try sink.send(record) }
        }
    }

    /// Verifies every record's checksum and every index and unique entry against the records.
    /// - Returns: the problems found; empty when the store is sound.
    public func integrityCheck() async throws -> [String] {
        try checkOpen()
        let engine = self.engine
        return try await engine.readers.run { try engine.integrityCheck() }
    }

    /// Closes this driver. The last driver of the process on the store syncs the files,
    /// folds the journal into the backup and releases the lock. Closing twice is harmless.
    /// - Throws: `.io` when the final sync fails (the journal still holds every commit).
    public func close() async throws {
        if closed.exchange(true, ordering: .acquiringAndReleasing) { return }
        try await GDBMEngine.release(engine)
    }

    deinit {
        if !closed.load(ordering: .acquiring) {
            let engine = self.engine
            Task { try? await GDBMEngine.release(engine) }
        }
    }
}

/// Commits that waited for background folds to catch up (see ``GDBMDriver/foldWaits``).
public struct FoldWaits: Sendable, Hashable {
    /// How many commits waited.
    public private(set) var count = 0
    /// Their waits added up.
    public private(set) var total: Duration = .zero
    /// The longest one.
    public private(set) var longest: Duration = .zero

    /// No waits.
    public init() {}

    mutating func record(_ wait: Duration) {
        count += 1
        total += wait
        longest = max(longest, wait)
    }
}
