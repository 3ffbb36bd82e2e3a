import CSQLite
import DepotCore
import Foundation
import Logging

/// A driver over one SQLite database file (libsqlite3's C API), with one table per
/// collection and one column per top-level field, so a person can read the data with the
/// `sqlite3` shell. Docs/SQLiteDriver.md describes the layout, type mapping, query
/// translation, concurrency and error mapping.
///
/// - Every query runs in SQLite: filter, sort and paging are translated to SQL with the
///   exact semantics of ``QueryEvaluator`` (see ``QueryPlan/detail`` for the SQL).
/// - WAL mode: one writer connection (`BEGIN IMMEDIATE`), a small pool of reader
///   connections that each see one snapshot. Every blocking sqlite3 call runs on the
///   driver's own threads, one per connection, never on Swift's cooperative pool.
/// - Durability `full` (the default) is `synchronous=FULL`; `normal` is `synchronous=NORMAL`.
/// - Other processes may open the same file: a writer waits up to the busy timeout
///   (5000 ms by default) for another writer, then fails with `.locked`.
///
/// ```swift
/// let driver = try await SQLiteDriver(path: "app.sqlite")
/// try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["n": 1]), into: users) }
/// ```
public final class SQLiteDriver: StorageDriver {
    /// `"sqlite"`.
    public let backendName = "sqlite"
    /// Everything: persistence, transactions, snapshot reads, unique constraints, assigned
    /// ids, streaming and several processes on one file, and raw SQL
    /// (Docs/SQLiteDriver.md, "Raw SQL").
    public var capabilities: DriverCapabilities { DriverCapabilities.complete.union(.rawSQL) }

    /// The database path, or `:memory:`.
    public let path: String
    /// The durability the store was opened with.
    public let durability: Durability
    /// Whether transactions may run on the caller's thread when their connection is free
    /// (see ``read(_:)`` and ``write(_:)``); `true` unless the store was opened with
    /// `inline=false`.
    public let inlineTransactions: Bool
    /// Where the statement log goes (Docs/SQLiteDriver.md, "Statement log"): every statement
    /// at debug level.
    public let logger: Logger
    /// Whether the statement log shows bound values; `false` (they show as `?N=<redacted>`)
    /// unless the store was opened with `log_values=true`.
    public let logsValues: Bool
    let busyTimeout: Int32
    let isMemory: Bool

    private let writer: ConnectionThread
    private let pool = Locked(ReaderPool())
    private let cachedCatalog = Locked<Catalog?>(nil)
    private let closed = Locked(false)

    struct ReaderPool {
        var idle: [ConnectionThread] = []
        var closed = false
    }

    /// The most idle reader connections kept open.
    static let idleReaderLimit = 4

    /// Opens (creating if missing) the database at `path`; `":memory:"` makes a private
    /// in-memory database.
    ///
    /// Opening runs `PRAGMA quick_check`, switches to WAL mode and creates Depot's
    /// metadata tables if they are missing.
    /// - Parameters:
    ///   - durability: `.full` (synchronous FULL) or `.normal` (synchronous NORMAL).
    ///   - busyTimeoutMilliseconds: how long a connection waits for a lock held elsewhere.
    /// - Throws: ``DepotError`` `.corrupted` for a damaged or non-SQLite file, `.io` when the
    ///   file cannot be opened or created, `.locked` when another process holds it too long,
    ///   `.schemaMismatch` when a newer Depot wrote the file, `.invalidStore` for a bad path.
    ///   - inlineTransactions: let a transaction run on the caller's thread when its
    ///     connection can be taken without waiting (Docs/SQLiteDriver.md, "Where
    ///     transactions run"); `false` runs every transaction on the connection's thread.
    ///   - logger: where every statement is logged, at debug level (Docs/SQLiteDriver.md,
    ///     "Statement log"); `depot.sqlite` by default. Nothing is built for the log while
    ///     the logger's level is above debug.
    ///   - logValues: show bound values in the statement log instead of `?N=<redacted>`.
    ///     Values may hold secrets: turn it on only to debug, never in production.
    public convenience init(
        path: String, durability: Durability = .full, busyTimeoutMilliseconds: Int = 5000, inlineTransactions: Bool = true,
        logger: Logger = Logger(label: "depot.sqlite"), logValues: Bool = false
    ) async throws {
        try await self.init(
            path: path, durability: durability, busyTimeoutMilliseconds: busyTimeoutMilliseconds,
            inlineTransactions: inlineTransactions, logger: logger, logValues: logValues, testSettings: SQLiteTestSettings())
    }

    /// ``init(path:durability:busyTimeoutMilliseconds:inlineTransactions:logger:logValues:)``
    /// with the settings only the driver's tests use (a fault-injecting VFS, the checkpoint
    /// threshold): Docs/SQLiteDriver.md, "I/O fault injection".
    init(
        path: String, durability: Durability = .full, busyTimeoutMilliseconds: Int = 5000, inlineTransactions: Bool = true,
        logger: Logger = Logger(label: "depot.sqlite"), logValues: Bool = false, testSettings: SQLiteTestSettings
    ) async throws {
        guard !path.isEmpty, !path.utf8.contains(0) else {
            throw DepotError(.invalidStore, "A SQLite store needs a file path: write 'sqlite:PATH' or 'sqlite::memory:'.")
        }
        guard busyTimeoutMilliseconds >= 0, busyTimeoutMilliseconds <= Int(Int32.max) else {
            throw DepotError(.invalidStore, "Option busy_timeout_ms must be between 0 and \(Int32.max).")
        }
        let isMemory = path == ":memory:"
        // Never let a path be read as a URI filename.
        let filePath = !isMemory && path.hasPrefix("file:") ? "./" + path : path
        self.path = path
        self.durability = durability
        self.inlineTransactions = inlineTransactions
        self.isMemory = isMemory
        self.logger = logger
        self.logsValues = logValues
        let busy = Int32(busyTimeoutMilliseconds)
        self.busyTimeout = busy
        self.filePath = filePath
        self.vfs = testSettings.vfs
        self.checkpointPages = testSettings.checkpointPages
        let vfs = testSettings.vfs
        writer = try await ConnectionThread.start(name: "depot.sqlite.writer") {
            let log = SQLiteStatementLog(logger: logger, showsValues: logValues, role: "writer")
            let connection = try SQLiteConnection(path: filePath, create: true, busyTimeoutMilliseconds: busy, log: log, vfs: vfs)
            try SQLiteDriver.setUp(writer: connection, durability: durability, isMemory: isMemory)
            return connection
        }
    }

    private let filePath: String
    /// The SQLite VFS every connection opens with; `nil` (the default) but in tests.
    private let vfs: String?
    /// The write-ahead log's size, in pages, that triggers a checkpoint after a commit:
    /// ``checkpointPages`` but in tests.
    private let checkpointPages: Int32

    /// Opens the store a parsed `sqlite:` store string names.
    ///
    /// `sqlite:PATH?durability=full|normal&busy_timeout_ms=N&inline=true|false&log_values=true|false`,
    /// or `sqlite::memory:`.
    /// - Parameter logger: where the statement log goes (see ``init(path:durability:busyTimeoutMilliseconds:inlineTransactions:logger:logValues:)``).
    /// - Throws: `.invalidStore` for unknown options or bad values, and what ``init(path:durability:busyTimeoutMilliseconds:inlineTransactions:logger:logValues:)`` throws.
    public convenience init(_ location: StoreLocation, logger: Logger = Logger(label: "depot.sqlite")) async throws {
        try location.rejectUnknownOptions(["durability", "busy_timeout_ms", "inline", "log_values"])
        let durability = try location.durability()
        var busy = 5000
        if let text = location.options["busy_timeout_ms"] {
            guard let value = Int(text), value >= 0, value <= Int(Int32.max) else {
                throw DepotError(.invalidStore, "Option busy_timeout_ms must be a whole number of milliseconds.")
            }
            busy = value
        }
        var inline = true
        switch location.options["inline"] {
        case nil, "true": break
        case "false": inline = false
        default: throw DepotError(.invalidStore, "Option inline must be true or false.")
        }
        var logValues = false
        switch location.options["log_values"] {
        case nil, "false": break
        case "true": logValues = true
        default: throw DepotError(.invalidStore, "Option log_values must be true or false.")
        }
        try await self.init(
            path: location.path, durability: durability, busyTimeoutMilliseconds: busy, inlineTransactions: inline,
            logger: logger, logValues: logValues)
    }

    /// Registers the `sqlite` scheme: `sqlite:PATH` and `sqlite::memory:`, with options
    /// `durability=full|normal`, `busy_timeout_ms=N`, `inline=true|false` and
    /// `log_values=true|false`.
    public static func register(in registry: inout DriverRegistry) {
        registry.register("sqlite") { location in try await SQLiteDriver(location) }
    }

    deinit {
        writer.stop()
        for reader in pool.withLock({ $0.idle }) { reader.stop() }
    }

    // MARK: Opening

    /// The page size of a new database file: 8 KiB, so a row of up to about 2 KB stays in
    /// its B-tree page. With SQLite's default 4 KiB a `WITHOUT ROWID` row (string ids)
    /// longer than about 1,000 bytes spills into an overflow page of its own, which makes the
    /// file up to four times larger and costs a read of that page (a system call, as SQLite
    /// reads overflow pages past its cache) per row read. Existing files keep theirs.
    static let newFilePageSize = 8192

    static func setUp(writer connection: SQLiteConnection, durability: Durability, isMemory: Bool) throws {
        // Takes effect only while the database is empty (a new file): before WAL mode.
        try connection.execute("PRAGMA page_size = \(newFilePageSize)")
        if !isMemory {
            var problems: [String] = []
            do {
                try connection.query("PRAGMA quick_check") { row in
                    if case .text(let line) = row.value(0) { problems.append(line) }
                    return true
                }
            } catch let error as DepotError where (error.cause as? SQLiteResult)?.primaryCode == SQLITE_NOMEM {
                // Damaged sizes in a page can make the check ask for more memory than SQLite
                // allows; a sound file never does (found by the damage runs, Docs/Fuzzing.md).
                throw DepotError(.corrupted, "The SQLite file '\(connection.fileName)' failed its quick check (its sizes are damaged: SQLite ran out of memory reading it).", cause: error.cause, detail: error.detail)
            }
            guard problems == ["ok"] else {
                // A page the check could not read is an I/O failure, not damage.
                if let failure = SQLiteErrorMapping.readFailure(inCheckLines: problems) { throw failure }
                throw DepotError(.corrupted, "The SQLite file '\(connection.fileName)' failed its quick check.", detail: problems.prefix(5).joined(separator: "; "))
            }
            guard case .text(let mode) = try connection.scalar("PRAGMA journal_mode = WAL"), mode.lowercased() == "wal" else {
                throw DepotError(.io, "The SQLite file could not be switched to WAL mode.")
            }
        }
        try connection.execute("PRAGMA synchronous = \(durability == .full ? "FULL" : "NORMAL")")
        connection.recordWALSize()
        try connection.executeCached("BEGIN IMMEDIATE")
        do {
            try connection.execute(SQLiteLayout.bootstrapSQL)
            guard case .int(let format) = try connection.scalar(#"SELECT value FROM "_depotsys_meta" WHERE key = 'format'"#) else {
                throw DepotError(.corrupted, "The SQLite store's metadata table in '\(connection.fileName)' is damaged or not Depot's.")
            }
            guard format <= SQLiteLayout.format else {
                throw DepotError(.schemaMismatch, "The SQLite store was written by a newer Depot (layout \(format); this one reads \(SQLiteLayout.format)).")
            }
            _ = try Catalog.load(connection, generation: try Catalog.currentGeneration(connection))
            try connection.executeCached("COMMIT")
        } catch {
            try? connection.executeCached("ROLLBACK")
            throw error
        }
    }

    // MARK: Transactions

    private func checkOpen() throws {
        if closed.withLock({ $0 }) { throw DepotError(.closed, "The SQLite store is closed.") }
    }

    /// The catalog at the generation the connection's transaction sees.
    private func catalog(for connection: SQLiteConnection) throws -> Catalog {
        try catalog(for: connection, generation: try Catalog.currentGeneration(connection))
    }

    /// The catalog at `generation`, read by the connection's current transaction.
    private func catalog(for connection: SQLiteConnection, generation: Int64) throws -> Catalog {
        if let last = connection.lastCatalog, last.generation == generation { return last }
        if let cached = cachedCatalog.withLock({ $0 }), cached.generation == generation {
            connection.lastCatalog = cached
            return cached
        }
        let loaded = try Catalog.load(connection, generation: generation)
        cachedCatalog.withLock { current in
            if (current?.generation ?? Int64.min) < generation { current = loaded }
        }
        connection.lastCatalog = loaded
        return loaded
    }

    /// What an attempt to run a transaction inline came to.
    enum Inline<T> {
        /// It ran (and committed or threw) on the caller's thread.
        case done(T)
        /// It could not take its connection or its locks at once, or it outgrew the step
        /// budget; nothing it did is kept, and it must run on the connection's thread.
        case declined
    }

    /// The most statement steps an inline read transaction may take before it is abandoned
    /// and run again on the connection's thread: enough for a few gets or a short scan.
    static let inlineStepBudget = 256

    /// The same for an inline write transaction: a few reads and writes. Smaller than the
    /// reads' budget because a bulk write abandoned inline is rolled back and done again, so
    /// the work thrown away stays under 64 steps (Docs/measurements/2026-11-24-sqlite-inline.md).
    static let inlineWriteStepBudget = 64

    /// Begins a transaction (`BEGIN IMMEDIATE` to write) and reads the catalog, whose first
    /// statement takes the snapshot; once it holds its locks, an inline transaction waits on
    /// busy locks again. Returns `nil` when an inline transaction could not take its locks at
    /// once (nothing ran).
    /// - Throws: what `BEGIN` or the catalog throws, after a rollback.
    private func begin(_ connection: SQLiteConnection, writable: Bool, inline: Bool) throws -> SQLiteTransaction? {
        connection.refreshLog()
        do {
            try connection.executeCached(writable ? "BEGIN IMMEDIATE" : "BEGIN")
            let transaction = SQLiteTransaction(connection: connection, catalog: try catalog(for: connection), writable: writable)
            if inline { connection.restoreBusyTimeout() }
            return transaction
        } catch let error as DepotError where inline && (error.code == .locked || connection.overBudget) {
            connection.stepsLeft = Int.max
            try? connection.executeCached("ROLLBACK")
            return nil
        } catch {
            connection.stepsLeft = Int.max
            try? connection.executeCached("ROLLBACK")
            throw error
        }
    }

    /// Runs a read transaction on `connection`: `BEGIN`, the catalog (its first read takes
    /// the snapshot), `body`, `COMMIT`. Inline, the snapshot is taken without waiting
    /// (`.declined` if it cannot be) and the steps are limited.
    ///
    /// The transaction is not opened with `BEGIN`: the statement reading the catalog's
    /// generation is stepped to its row and left pending until `body` returns. While a
    /// statement is pending, SQLite keeps the connection's read transaction (one snapshot)
    /// open for every other statement, and resetting it ends the transaction. This spares a
    /// point read two of its four statements (`BEGIN` and `COMMIT`; Docs/SQLiteDriver.md,
    /// "Where transactions run").
    private func runRead<T>(_ connection: SQLiteConnection, inline: Bool = false, _ body: (SQLiteTransaction) throws -> T) throws -> Inline<T> {
        if inline { connection.beginInline(steps: SQLiteDriver.inlineStepBudget) }
        defer { if inline { connection.endInline() } }
        connection.refreshLog()
        // The snapshot is taken by `PRAGMA data_version`, which also says whether another
        // connection committed since this one's last transaction: if not, the catalog
        // generation is the one read then (see `generationAtDataVersion`).
        let snapshot = try connection.statement(SQLiteLayout.dataVersionSQL)
        // Resetting the pending statement ends the read transaction, whatever happened.
        defer { snapshot.finish() }
        let transaction: SQLiteTransaction
        do {
            guard try snapshot.step(), case .int(let version) = snapshot.value(0) else {
                throw DepotError(.io, "SQLite did not answer PRAGMA data_version on '\(connection.fileName)'.")
            }
            let generation: Int64
            if let known = connection.generationAtDataVersion, known.dataVersion == version {
                generation = known.generation
            } else {
                generation = try Catalog.currentGeneration(connection)
                connection.generationAtDataVersion = (version, generation)
            }
            transaction = SQLiteTransaction(connection: connection, catalog: try catalog(for: connection, generation: generation), writable: false)
            if inline { connection.restoreBusyTimeout() }
        } catch let error as DepotError where inline && (error.code == .locked || connection.overBudget) {
            connection.stepsLeft = Int.max
            return .declined
        } catch {
            connection.stepsLeft = Int.max
            throw error
        }
        defer { transaction.isValid = false }
        let result: T
        do {
            result = try body(transaction)
        } catch {
            let declined = connection.overBudget
            connection.stepsLeft = Int.max
            if declined { return .declined }
            throw error
        }
        connection.stepsLeft = Int.max
        if connection.overBudget { return .declined }
        return .done(result)
    }

    /// Runs a read transaction on a thread of the driver (``runRead(_:inline:_:)`` never
    /// declines there).
    private func runRead<T>(_ connection: SQLiteConnection, _ body: (SQLiteTransaction) throws -> T) throws -> T {
        guard case .done(let value) = try runRead(connection, inline: false, body) else {
            throw DepotError(.internal, "A SQLite transaction on the connection's thread was declined.")
        }
        return value
    }

    /// Runs a write transaction on the writer connection: `BEGIN IMMEDIATE`, `body`,
    /// `COMMIT`, `ROLLBACK` when `body` throws. Inline, the write lock is taken without
    /// waiting for another process (`.declined` if it is held) and the steps are limited.
    /// After a commit that leaves the write-ahead log at 1,000 pages or more, a passive
    /// checkpoint runs on the writer's thread (queued when inline).
    private func runWrite<T>(_ connection: SQLiteConnection, inline: Bool, _ body: (any WriteTransaction) throws -> T) throws -> Inline<T> {
        if inline { connection.beginInline(steps: SQLiteDriver.inlineWriteStepBudget) }
        defer { if inline { connection.endInline() } }
        guard let transaction = try begin(connection, writable: true, inline: inline) else { return .declined }
        // This connection's own commits do not move its `PRAGMA data_version`: a catalog
        // change it may commit clears the generation its reads would otherwise reuse.
        defer { if transaction.catalogChanged { connection.generationAtDataVersion = nil } }
        let result: T
        do {
            defer { transaction.isValid = false }
            result = try body(transaction)
            connection.stepsLeft = Int.max
            if connection.overBudget {
                try? connection.executeCached("ROLLBACK")
                return .declined
            }
            try connection.executeCached("COMMIT")
        } catch {
            let declined = connection.overBudget
            connection.stepsLeft = Int.max
            try? connection.executeCached("ROLLBACK")
            if declined { return .declined }
            throw error
        }
        if transaction.catalogChanged {
            let catalog = transaction.catalog
            cachedCatalog.withLock { current in
                if (current?.generation ?? Int64.min) < catalog.generation { current = catalog }
            }
        }
        if connection.walPages >= checkpointPages {
            if inline {
                connection.walPages = 0
                writer.submit { $0.checkpoint() }
            } else {
                connection.checkpoint()
            }
        }
        return .done(result)
    }

    /// The write-ahead log's size, in pages, that triggers a checkpoint after a commit
    /// (SQLite's own automatic checkpoint default).
    static let checkpointPages: Int32 = 1000

    /// Runs `body` with a reader connection on its own thread (the writer for `:memory:`).
    private func withReader<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        try checkOpen()
        if isMemory { return try await writer.run(body) }
        let reader = try await acquireReader()
        do {
            let result = try await reader.run(body)
            release(reader)
            return result
        } catch {
            release(reader)
            throw error
        }
    }

    private func acquireReader() async throws -> ConnectionThread {
        if let idle = pool.withLock({ $0.idle.popLast() }) { return idle }
        return try await ConnectionThread.start(name: "depot.sqlite.reader", open: readerOpener)
    }

    /// Opens a reader connection (read-only through `query_only`), on the new reader's thread.
    private var readerOpener: @Sendable () throws -> SQLiteConnection {
        let filePath = self.filePath, busy = busyTimeout, logger = self.logger, logValues = logsValues, vfs = self.vfs
        return {
            let log = SQLiteStatementLog(logger: logger, showsValues: logValues, role: "reader")
            let connection = try SQLiteConnection(path: filePath, create: false, busyTimeoutMilliseconds: busy, log: log, vfs: vfs)
            try connection.execute("PRAGMA query_only = ON")
            return connection
        }
    }

    private func release(_ reader: ConnectionThread) {
        let keep = pool.withLock { pool -> Bool in
            guard !pool.closed, pool.idle.count < SQLiteDriver.idleReaderLimit else { return false }
            pool.idle.append(reader)
            return true
        }
        if !keep { reader.stop() }
    }

    /// Tries to run a read transaction on the calling thread, on a connection taken without
    /// waiting: the writer connection when it is free (its page cache stays valid across its
    /// own commits, while a reader's is dropped by SQLite whenever another connection has
    /// committed), otherwise an idle reader (Docs/SQLiteDriver.md, "Where transactions run").
    private func readInline<T>(_ body: (any ReadTransaction) throws -> T) throws -> Inline<T> {
        if let done = try writer.runIfFree({ connection in try self.runRead(connection, inline: true) { try body($0) } }) {
            return done
        }
        if isMemory { return .declined }
        guard let reader = pool.withLock({ $0.idle.popLast() }) else { return .declined }
        defer { release(reader) }
        return try reader.runIfFree { connection in try self.runRead(connection, inline: true) { try body($0) } } ?? .declined
    }

    /// Runs `body` in a read transaction: `BEGIN`, so the whole closure sees one snapshot
    /// while writers commit.
    ///
    /// When a reader connection is idle (the writer for `:memory:`) and its snapshot can be
    /// taken without waiting, the transaction runs right on the calling thread; otherwise on
    /// the connection's own thread. An inline transaction that outgrows
    /// ``inlineStepBudget`` statement steps is abandoned and `body` runs again on the
    /// connection's thread, so `body` may be called twice: keep it free of side effects
    /// other than its result. Docs/SQLiteDriver.md, "Where transactions run".
    /// - Throws: what `body` throws; `.closed`, `.io`, `.corrupted`, `.locked`.
    public func read<T: Sendable>(_ body: @escaping @Sendable (any ReadTransaction) throws -> T) async throws -> T {
        try checkOpen()
        if inlineTransactions, case .done(let value) = try readInline(body) { return value }
        return try await withReader { connection in try self.runRead(connection) { try body($0) } }
    }

    /// Runs `body` in a write transaction on the writer connection: `BEGIN IMMEDIATE` …
    /// `COMMIT`, `ROLLBACK` when `body` throws. Durable per ``durability`` when it returns.
    ///
    /// With durability `normal` (and for `:memory:`), when the writer connection is free
    /// and no other process holds the write lock, the transaction runs and commits right on
    /// the calling thread (such a commit does no fsync: the write-ahead log's checkpoints
    /// run on the writer's thread); otherwise, and always with durability `full`, on the
    /// writer's thread. An inline transaction that outgrows ``inlineWriteStepBudget`` statement
    /// steps is rolled back and `body` runs again on the writer's thread, so `body` may be
    /// called twice: keep it free of side effects other than its result.
    /// - Throws: what `body` throws; `.closed`, `.locked` (another process kept the write
    ///   lock past the busy timeout), `.io`, `.corrupted`.
    public func write<T: Sendable>(_ body: @escaping @Sendable (any WriteTransaction) throws -> T) async throws -> T {
        try checkOpen()
        if inlineTransactions && (durability == .normal || isMemory),
           case .done(let value)? = try writer.runIfFree({ connection in try self.runWrite(connection, inline: true, body) }) {
            return value
        }
        return try await writer.run { connection in
            guard case .done(let value) = try self.runWrite(connection, inline: false, body) else {
                throw DepotError(.internal, "A SQLite transaction on the connection's thread was declined.")
            }
            return value
        }
    }

    /// ``read(_:)`` for a caller that waits: inline when a reader is idle, otherwise on a
    /// reader connection (started if none is idle) used from the calling thread.
    public func readBlocking<T>(_ body: (any ReadTransaction) throws -> T) throws -> T {
        try checkOpen()
        if inlineTransactions, case .done(let value) = try readInline(body) { return value }
        if isMemory { return try writer.runWaiting { connection in try self.runRead(connection) { try body($0) } } }
        let reader: ConnectionThread
        if let idle = pool.withLock({ $0.idle.popLast() }) {
            reader = idle
        } else {
            reader = try ConnectionThread.startBlocking(name: "depot.sqlite.reader", open: readerOpener)
        }
        defer { release(reader) }
        return try reader.runWaiting { connection in try self.runRead(connection) { try body($0) } }
    }

    /// Runs a read on the calling thread when a connection can be taken right now
    /// (``read(_:)``'s inline path); `false` otherwise, with inline transactions off, or
    /// when `body` outgrew ``inlineStepBudget``.
    public func readWithoutWaiting(_ body: (any ReadTransaction) throws -> Void) throws -> Bool {
        try checkOpen()
        guard inlineTransactions, case .done = try readInline(body) else { return false }
        return true
    }

    /// ``write(_:)`` for a caller that waits: the transaction runs on the calling thread
    /// once the writer connection is free (at any durability: the caller asked to wait).
    @discardableResult
    public func writeBlocking<T>(_ body: (any WriteTransaction) throws -> T) throws -> T {
        try checkOpen()
        return try writer.runWaiting { connection in
            guard case .done(let value) = try self.runWrite(connection, inline: false, body) else {
                throw DepotError(.internal, "A SQLite transaction on the connection's thread was declined.")
            }
            return value
        }
    }

    /// Streams the results of `query`: a reader connection steps the statement on its own
    /// thread inside one read transaction, blocked while the consumer's buffer is full.
    /// Failures (`.closed`, `.invalidQuery`, SQLite errors) end the stream with an error.
    public func stream(_ query: Query, from collection: CollectionName) -> RecordStream {
        do {
            try checkOpen()
            try query.validate()
        } catch {
            return RecordStream(failing: DepotError.wrap(error))
        }
        if isMemory {
            // One connection only: collect on it, then hand the records over from a
            // plain thread, so a slow consumer never holds the connection.
            return RecordStream { sink in
                let records = try await self.read { tx in try tx.query(query, in: collection) }
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    let thread = Thread {
                        do {
                            for record in records { try sink.send(record) }
                            continuation.resume()
                        } catch {
                            continuation.resume(throwing: error)
                        }
                    }
                    thread.start()
                }
            }
        }
        return RecordStream { sink in
            try await self.withReader { connection in
                try self.runRead(connection) { transaction in
                    try transaction.forEach(query, in: collection) { record in
                        try sink.send(record)
                        return true
                    }
                }
            }
        }
    }

    /// Runs `PRAGMA integrity_check` and checks that every collection's table exists.
    /// - Returns: the problems found; empty when the store is sound.
    /// - Throws: `.closed`, `.corrupted`, `.io` (also when the check could not read a page:
    ///   SQLite reports that as a line of its result, which is not damage).
    public func integrityCheck() async throws -> [String] {
        try await withReader { connection in
            var problems: [String] = []
            try self.runRead(connection) { transaction in
                try connection.query("PRAGMA integrity_check") { row in
                    if case .text(let line) = row.value(0), line != "ok" { problems.append(line) }
                    return true
                }
                // A page the check could not read is an I/O failure, not damage.
                if let failure = SQLiteErrorMapping.readFailure(inCheckLines: problems) { throw failure }
                let tables = try SQLNaming.schemaNames(connection)
                for name in try transaction.collectionNames() {
                    guard let meta = transaction.catalog.collections[name] else { continue }
                    if !tables.contains(meta.table.lowercased()) { problems.append("\(name): table '\(meta.table)' is missing") }
                }
            }
            return problems
        }
    }

    /// Finishes queued work, closes every connection and stops the driver's threads. Later
    /// calls throw `.closed`; closing twice is harmless.
    public func close() async throws {
        let wasClosed = closed.withLock { value -> Bool in
            defer { value = true }
            return value
        }
        if wasClosed { return }
        let idle = pool.withLock { pool -> [ConnectionThread] in
            pool.closed = true
            defer { pool.idle = [] }
            return pool.idle
        }
        for reader in idle { await reader.shutdown() }
        await writer.shutdown()
    }
}
