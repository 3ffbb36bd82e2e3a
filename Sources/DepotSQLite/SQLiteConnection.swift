import CSQLite
import CSQLiteShim
import DepotCore
import Foundation

/// A value bound to or read from a SQL statement.
enum SQLValue {
    case null
    case int(Int64)
    case double(Double)
    case text(String)
    case blob(Data)
}

/// One sqlite3 connection and its prepared-statement cache.
///
/// Not thread-safe: a connection is used by one thread at a time, the one holding its
/// ``ConnectionThread``'s lock (its own thread, or a caller running a transaction inline).
final class SQLiteConnection {
    let db: OpaquePointer
    /// The busy timeout the connection was opened with.
    let busyTimeoutMilliseconds: Int32
    /// How many more ``Statement/step()`` calls the current inline transaction may make
    /// before it is abandoned (see Docs/SQLiteDriver.md, "Where transactions run"); `Int.max`
    /// outside inline transactions.
    var stepsLeft = Int.max
    /// Set when an inline transaction ran out of steps: whatever its body returned or threw
    /// afterwards, the transaction is rolled back and run again on the connection's thread.
    var overBudget = false
    /// The pages in the write-ahead log after the last commit, as SQLite's WAL hook reports.
    var walPages: Int32 = 0
    /// The type tags text last decoded on this connection and its decoding: rows of one
    /// collection mostly carry the same tags, so ``SQLiteTransaction/decodeTags(_:)`` parses
    /// a text once and compares the next rows' bytes with it.
    var lastTags: (text: [UInt8], tags: [String: UInt8])?
    private var cache: [String: OpaquePointer] = [:]
    /// Partial updates of one record by id, by the shape that decides their statement
    /// (SQLitePartialAccess.swift): the text is built once per shape, not once per update.
    private(set) var partialUpdates: [PartialUpdateKey: PartialUpdatePlan] = [:]
    /// The last few statements used, most recent first, checked before `cache`: comparing a
    /// statement's SQL with `==` is immediate when it is the same string (a collection's
    /// cached insert or get SQL), while a dictionary lookup hashes the whole text each time.
    /// Twelve: a DepotServer write goes through about eight statements in turn (the
    /// idempotency record, the record, the change log and its index), which four kept
    /// sending every other lookup to the dictionary.
    private var recent: [(sql: String, handle: OpaquePointer)] = []
    private static let recentLimit = 12
    static let cacheLimit = 256
    private(set) var isClosed = false
    /// A cached statement bound and waiting to be stepped (``SQLiteTransaction``'s model
    /// writes): making room in the cache never finalizes it.
    var pinned: OpaquePointer?
    /// The row source of the last point read (``SQLiteTransaction/withFields(of:from:_:)``),
    /// kept so that the next one reuses it and the field order it learned: a model decoded
    /// by id costs one string comparison per field instead of a hash lookup. Taken out while
    /// in use, so a nested read makes its own.
    var pointReadFields: SQLiteRowFields?
    /// The statement log, `nil` for a connection that logs nothing (Docs/SQLiteDriver.md,
    /// "Statement log").
    let log: SQLiteStatementLog?
    /// The catalog generation read at the last `PRAGMA data_version` seen. That version
    /// changes when another connection commits; while it is still `dataVersion`, the
    /// generation is this one, unless this connection itself committed a catalog change,
    /// which clears it (Docs/SQLiteDriver.md, "Where transactions run").
    var generationAtDataVersion: (dataVersion: Int64, generation: Int64)?
    /// The catalog this connection's last transaction used: the next one at the same
    /// generation takes it without the driver's lock (a generation's catalog never changes).
    var lastCatalog: Catalog?

    /// Opens (creating if asked) the database at `path`, hardened and configured; `log`
    /// logs its statements from the first one. `vfs` names the SQLite VFS to open it with
    /// (tests only: ``SQLiteTestSettings/vfs``); `nil` is the default one.
    /// - Throws: `.io`, `.corrupted`, `.locked` as SQLite reports.
    init(path: String, create: Bool, busyTimeoutMilliseconds: Int32, log: SQLiteStatementLog? = nil, vfs: String? = nil) throws {
        try Self.initializeLibrary()
        var handle: OpaquePointer?
        var flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        if create { flags |= SQLITE_OPEN_CREATE }
        let rc = sqlite3_open_v2(path, &handle, flags, vfs)
        guard let handle else {
            throw DepotError(.io, "SQLite could not allocate a connection.", cause: SQLiteResult(extendedCode: rc, message: "open"))
        }
        guard rc == SQLITE_OK else {
            let message = String(cString: sqlite3_errmsg(handle))
            let code = sqlite3_extended_errcode(handle)
            sqlite3_close_v2(handle)
            throw SQLiteErrorMapping.error(code: code, message: message, file: path)
        }
        db = handle
        self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
        self.log = log
        log?.refresh(handle)
        sqlite3_extended_result_codes(db, 1)
        sqlite3_busy_timeout(db, busyTimeoutMilliseconds)
        let hardened = depot_sqlite_harden(db)
        guard hardened == SQLITE_OK else {
            let error = SQLiteErrorMapping.error(code: hardened, message: "hardening the connection")
            sqlite3_close_v2(db)
            throw error
        }
        do {
            try execute("PRAGMA trusted_schema = OFF")
        } catch {
            close()
            throw error
        }
    }

    deinit { close() }

    /// Registers or removes the statement log's trace to match its logger's level now: once
    /// per transaction, so a level that changes takes effect at the next transaction.
    @inline(__always)
    func refreshLog() {
        log?.refresh(db)
    }

    /// Replaces SQLite's automatic checkpoint with a hook that only records the log's size
    /// in ``walPages``, so the driver decides where the checkpoint (and its fsync) runs: on
    /// the writer's thread, never inline on a caller's thread.
    func recordWALSize() {
        sqlite3_wal_hook(db, { context, _, _, pages in
            if let context { Unmanaged<SQLiteConnection>.fromOpaque(context).takeUnretainedValue().walPages = pages }
            return SQLITE_OK
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// A passive checkpoint of the write-ahead log (what SQLite's automatic checkpoint runs):
    /// copies committed pages to the database file without waiting for readers.
    func checkpoint() {
        walPages = 0
        // A checkpoint that cannot finish now (readers in the way, an I/O error) leaves the
        // log as it is; the next one after a later commit tries again, as SQLite's own does.
        _ = sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
    }

    /// Starts an inline transaction: no waiting on locks held elsewhere (a busy lock fails
    /// at once with `.locked`) and at most `steps` statement steps.
    func beginInline(steps: Int) {
        sqlite3_busy_timeout(db, 0)
        stepsLeft = steps
        overBudget = false
    }

    /// Once the transaction holds its locks: waits on busy locks again as configured.
    func restoreBusyTimeout() {
        sqlite3_busy_timeout(db, busyTimeoutMilliseconds)
    }

    /// Ends an inline transaction's limits.
    func endInline() {
        stepsLeft = Int.max
        overBudget = false
        restoreBusyTimeout()
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        for (_, statement) in cache { sqlite3_finalize(statement) }
        cache.removeAll()
        recent.removeAll()
        log?.stop(db)
        sqlite3_close_v2(db)
    }

    /// The error for the connection's last failed call.
    func lastError(_ rc: Int32, sql: String?) -> DepotError {
        let code = sqlite3_extended_errcode(db)
        let message = String(cString: sqlite3_errmsg(db))
        return SQLiteErrorMapping.error(code: code == SQLITE_OK ? rc : code, message: message, sql: sql, file: fileName)
    }

    /// The path of the connection's database file (empty for an in-memory database), for
    /// the messages of `.corrupted` errors.
    var fileName: String { SQLiteConnection.fileName(of: db) }

    /// The path of the main database file of connection `db`.
    static func fileName(of db: OpaquePointer?) -> String {
        guard let db, let name = sqlite3_db_filename(db, "main") else { return "" }
        return String(cString: name)
    }

    /// Runs SQL without parameters or results (one or more statements).
    func execute(_ sql: String) throws {
        let rc = sqlite3_exec(db, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw lastError(rc, sql: sql) }
    }

    /// A prepared statement for `sql`: the cached one, or a one-off statement when the cached
    /// one is in use by an enclosing loop (a query run inside another query's row callback).
    /// Call ``Statement/finish()`` after use.
    func statement(_ sql: String) throws -> Statement {
        if let cached = cachedHandle(sql) {
            if sqlite3_stmt_busy(cached) == 0 { return Statement(handle: cached, connection: self, sql: sql, transient: false) }
            return Statement(handle: try prepare(sql, persistent: false), connection: self, sql: sql, transient: true)
        }
        let handle = try prepare(sql, persistent: true)
        if cache.count >= SQLiteConnection.cacheLimit {
            // Statements stepping in an enclosing loop stay; the others are finalized.
            recent.removeAll()
            for (text, old) in cache where sqlite3_stmt_busy(old) == 0 && old != pinned {
                sqlite3_finalize(old)
                cache[text] = nil
            }
        }
        cache[sql] = handle
        return Statement(handle: handle, connection: self, sql: sql, transient: false)
    }

    /// How many prepared statements the cache holds (for tests).
    var cachedStatementCount: Int { cache.count }

    /// Whether `sql` has a prepared statement in the cache (for tests).
    func isCached(_ sql: String) -> Bool { cache[sql] != nil }

    /// The cached statement for `sql`, looking at the most recently used ones first.
    private func cachedHandle(_ sql: String) -> OpaquePointer? {
        for index in recent.indices where recent[index].sql == sql {
            // Keep the caller's copy of the text: a collection's SQL is built again with its
            // metadata after a catalog change, and comparing a string with itself is
            // immediate while comparing two copies reads them both.
            recent[index].sql = sql
            return recent[index].handle
        }
        guard let handle = cache[sql] else { return nil }
        recent.insert((sql, handle), at: 0)
        if recent.count > SQLiteConnection.recentLimit { recent.removeLast() }
        return handle
    }

    private func prepare(_ sql: String, persistent: Bool) throws -> OpaquePointer {
        var handle: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, persistent ? UInt32(SQLITE_PREPARE_PERSISTENT) : 0, &handle, nil)
        guard rc == SQLITE_OK, let handle else {
            if let handle { sqlite3_finalize(handle) }
            throw lastError(rc, sql: sql)
        }
        return handle
    }

    /// Runs a cached statement without parameters or results (BEGIN, COMMIT, ...).
    func executeCached(_ sql: String) throws {
        let statement = try self.statement(sql)
        defer { statement.finish() }
        while try statement.step() {}
    }

    /// Runs a statement that returns no rows; returns the number of rows it changed.
    @discardableResult
    func run(_ sql: String, _ parameters: [SQLValue] = []) throws -> Int {
        try run(sql) { try $0.bind(parameters) }
    }

    /// Runs a statement whose parameters `bind` sets; returns the number of changed rows.
    @discardableResult
    func run(_ sql: String, binding bind: (Statement) throws -> Void) throws -> Int {
        let statement = try self.statement(sql)
        defer { statement.finish() }
        try bind(statement)
        while try statement.step() {}
        return Int(sqlite3_changes64(db))
    }

    /// Runs a query, calling `row` for each result row until it returns `false`.
    func query(_ sql: String, _ parameters: [SQLValue] = [], _ row: (Statement) throws -> Bool) throws {
        let statement = try self.statement(sql)
        defer { statement.finish() }
        try statement.bind(parameters)
        while try statement.step() {
            if try !row(statement) { break }
        }
    }

    /// The first column of the first row, or `nil` when there is no row.
    func scalar(_ sql: String, _ parameters: [SQLValue] = []) throws -> SQLValue? {
        var value: SQLValue?
        try query(sql, parameters) { row in
            value = row.value(0)
            return false
        }
        return value
    }

    /// Initializes SQLite with Depot's library settings, once per process, before a
    /// connection opens (Docs/SQLiteDriver.md, "Library settings").
    /// - Throws: `.io` when SQLite cannot initialize.
    static func initializeLibrary() throws {
        let initialized = depot_sqlite_initialize()
        guard initialized == SQLITE_OK else {
            throw DepotError(.io, "SQLite could not initialize.", cause: SQLiteResult(extendedCode: initialized, message: "initialize"))
        }
    }

    /// Keeps `plan` for the partial updates of `key`; at most 64 are kept (a store's update
    /// shapes are few; past that the kept ones are forgotten and built again as needed).
    func keepPartialUpdate(_ key: PartialUpdateKey, _ plan: PartialUpdatePlan) {
        if partialUpdates.count >= 64 { partialUpdates.removeAll(keepingCapacity: true) }
        partialUpdates[key] = plan
    }

    var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(db) }

    /// The rows the last INSERT, UPDATE or DELETE changed.
    var changes: Int { Int(sqlite3_changes64(db)) }
}

/// A prepared statement borrowed from a connection's cache.
struct Statement {
    let handle: OpaquePointer
    /// Not counted: a statement is borrowed inside a call on its connection and never
    /// outlives it (an `unowned` reference cost two atomic operations per statement).
    unowned(unsafe) let connection: SQLiteConnection
    let sql: String
    /// A one-off statement, finalized by ``finish()`` instead of returning to the cache.
    let transient: Bool

    func bind(_ parameters: [SQLValue]) throws {
        for (offset, value) in parameters.enumerated() {
            try bind(value, at: Int32(offset + 1))
        }
    }

    func bind(_ value: SQLValue, at index: Int32) throws {
        let rc = try Self.bind(value, at: index, to: handle)
        guard rc == SQLITE_OK else { throw connection.lastError(rc, sql: sql) }
    }

    /// Binds `value` to parameter `index` of `handle`; returns SQLite's result code.
    /// - Throws: `.invalidValue` for bytes too large for SQLite.
    static func bind(_ value: SQLValue, at index: Int32, to handle: OpaquePointer) throws -> Int32 {
        let rc: Int32
        switch value {
        case .null: rc = sqlite3_bind_null(handle, index)
        case .int(let i): rc = sqlite3_bind_int64(handle, index, i)
        case .double(let d): rc = sqlite3_bind_double(handle, index, d)
        case .text(let s):
            var s = s
            rc = s.withUTF8 { buffer in
                guard buffer.count <= Int(Int32.max) else { return SQLITE_TOOBIG }
                // The shim binds '' (not NULL) when the buffer has no address.
                return buffer.withMemoryRebound(to: CChar.self) { chars in
                    depot_sqlite_bind_text(handle, index, chars.baseAddress, Int32(buffer.count))
                }
            }
        case .blob(let data):
            guard data.count <= Int(Int32.max) else { throw DepotError(.invalidValue, "A bytes value is too large for SQLite.") }
            if data.isEmpty {
                rc = sqlite3_bind_zeroblob(handle, index, 0)
            } else {
                rc = data.withUnsafeBytes { raw in depot_sqlite_bind_blob(handle, index, raw.baseAddress, Int32(raw.count)) }
            }
        }
        return rc
    }

    /// Steps once: `true` when a row is ready, `false` when done.
    func step() throws -> Bool {
        connection.stepsLeft &-= 1
        if connection.stepsLeft < 0 {
            connection.overBudget = true
            throw DepotError(.internal, "An inline SQLite transaction outgrew its budget; it runs again on the connection's thread.")
        }
        let rc = sqlite3_step(handle)
        if rc == SQLITE_ROW { return true }
        if rc == SQLITE_DONE { return false }
        throw connection.lastError(rc, sql: sql)
    }

    /// Ends a use: resets a cached statement (and clears its bindings), finalizes a one-off.
    func finish(clearing: Bool = true) {
        if transient {
            sqlite3_finalize(handle)
        } else {
            sqlite3_reset(handle)
            if clearing { sqlite3_clear_bindings(handle) }
        }
    }

    // MARK: Reading columns

    func type(_ column: Int32) -> Int32 { sqlite3_column_type(handle, column) }
    func int(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }
    func double(_ column: Int32) -> Double { sqlite3_column_double(handle, column) }

    func text(_ column: Int32) -> String { Self.text(handle, column) }
    func blob(_ column: Int32) -> Data { Self.blob(handle, column) }

    /// A text column of the current row of `handle`.
    static func text(_ handle: OpaquePointer, _ column: Int32) -> String {
        guard let pointer = sqlite3_column_text(handle, column) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    /// A blob column of the current row of `handle`.
    static func blob(_ handle: OpaquePointer, _ column: Int32) -> Data {
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let pointer = sqlite3_column_blob(handle, column) else { return Data() }
        return Data(bytes: pointer, count: count)
    }

    func value(_ column: Int32) -> SQLValue {
        switch type(column) {
        case SQLITE_INTEGER: return .int(int(column))
        case SQLITE_FLOAT: return .double(double(column))
        case SQLITE_TEXT: return .text(text(column))
        case SQLITE_BLOB: return .blob(blob(column))
        default: return .null
        }
    }
}

/// The number of result columns of a statement.
func columnCount(_ statement: Statement) -> Int32 { sqlite3_column_count(statement.handle) }
