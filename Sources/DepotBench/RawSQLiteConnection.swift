#if canImport(CSQLite)
import CSQLite
import CSQLiteShim
import DepotCore

/// One SQLite connection used the way a careful hand-written program uses the C API: the
/// raw baselines' shared plumbing (``RawSQLiteTarget``, ``RawSQLiteModels``). Opens with
/// `page_size=8192` (Depot's for new files), `journal_mode=WAL` and `synchronous` FULL (durability full) or NORMAL (normal), keeps
/// prepared statements for the whole run, and turns failures into ``BenchError``s.
final class RawSQLiteConnection {
    private(set) var db: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]
    /// `SQLITE_TRANSIENT`: SQLite copies bound text before the call returns.
    static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    /// Opens (creating) the database at `path` with the pragmas above.
    /// - Throws: ``BenchError`` with SQLite's message.
    init(path: String, durability: Durability) throws {
        // The library settings Depot's driver runs with (the same process-wide ones).
        guard depot_sqlite_initialize() == SQLITE_OK else { throw BenchError("SQLite could not initialize") }
        var handle: OpaquePointer?
        let rc = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        db = handle
        try check(rc, "open")
        // Depot's page size for new files (SQLiteDriver.newFilePageSize), so both sides have
        // the same layout: the 1 KB YCSB rows stay in their B-tree pages.
        try exec("PRAGMA page_size = 8192")
        try exec("PRAGMA journal_mode = WAL")
        try exec("PRAGMA synchronous = \(durability == .full ? "FULL" : "NORMAL")")
    }

    deinit { close() }

    /// Throws unless `rc` is OK, DONE or ROW.
    func check(_ rc: Int32, _ what: String) throws {
        guard rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "no connection"
            throw BenchError("sqlite raw: \(what) failed (\(rc)): \(message)")
        }
    }

    /// Runs SQL without results.
    func exec(_ sql: String) throws { try check(sqlite3_exec(db, sql, nil, nil, nil), sql) }

    /// The prepared statement for `sql`, reset and ready to bind.
    func statement(_ sql: String) throws -> OpaquePointer {
        if let cached = statements[sql] {
            sqlite3_reset(cached)
            return cached
        }
        var stmt: OpaquePointer?
        try check(sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil), "prepare")
        guard let stmt else { throw BenchError("sqlite raw: empty statement") }
        statements[sql] = stmt
        return stmt
    }

    /// Runs `body` in one transaction: COMMIT when it returns, ROLLBACK when it throws.
    func inTransaction(_ body: () throws -> Void) throws {
        try exec("BEGIN")
        do {
            try body()
            try exec("COMMIT")
        } catch {
            try? exec("ROLLBACK")
            throw error
        }
    }

    /// A text column of the current row as a Swift string.
    static func text(_ stmt: OpaquePointer, _ column: Int32) -> String {
        guard let pointer = sqlite3_column_text(stmt, column) else { return "" }
        let count = Int(sqlite3_column_bytes(stmt, column))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    /// Finalizes the statements and closes the connection. Closing twice is harmless.
    func close() {
        for stmt in statements.values { sqlite3_finalize(stmt) }
        statements = [:]
        if let db { sqlite3_close_v2(db) }
        db = nil
    }
}
#endif
