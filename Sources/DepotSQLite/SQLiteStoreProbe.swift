import CSQLite
import CSQLiteShim
import DepotCore
import Foundation

extension SQLiteDriver {
    /// Whether the file at `path` holds a Depot SQLite store: an SQLite database with the
    /// driver's catalog tables (`_depotsys_meta` and `_depotsys_collections`).
    ///
    /// Decided without changing anything at `path` (Docs/SQLiteDriver.md, "Is it a store?"):
    /// the file's header is read first, and only a file starting with the SQLite header is
    /// opened, through a read-only connection (`mode=ro`; also `immutable=1` when no `-wal`
    /// file is beside it, so that no `-shm` or `-wal` file is created), which reads
    /// `sqlite_master` and nothing else: no journal mode is set, no table is created, no lock
    /// file is left. Opening a store with ``init(path:durability:busyTimeoutMilliseconds:inlineTransactions:logger:logValues:)``
    /// is what prepares a new file; call this first to refuse a path that is not a store.
    ///
    /// - Returns: `false` for a missing path, a directory, a file that is not an SQLite
    ///   database (an empty file included) and a database without Depot's catalog.
    /// - Throws: `.io` when the file exists but cannot be read; `.corrupted` or `.locked`
    ///   as SQLite reports them for a damaged or busy database.
    public static func holdsStore(atPath path: String) throws -> Bool {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else { return false }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw DepotError(.io, "The file at \(path) cannot be read.")
        }
        let head: Data
        do {
            defer { handle.closeFile() }
            head = try handle.read(upToCount: sqliteHeader.count) ?? Data()
        } catch {
            throw DepotError(.io, "The file at \(path) cannot be read.", detail: "\(error)")
        }
        guard Array(head) == sqliteHeader else { return false }

        // Without a -wal file the main file is all there is, and `immutable=1` makes SQLite
        // read it without creating a -shm file or taking locks; with one (a connection has
        // the store open, or did not close), the log must be read too.
        let hasLog = FileManager.default.fileExists(atPath: path + "-wal")
        let uri = "file:" + uriEncoded(path) + "?mode=ro" + (hasLog ? "" : "&immutable=1")
        try SQLiteConnection.initializeLibrary()
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        let rc = sqlite3_open_v2(uri, &db, flags, nil)
        guard let db else {
            throw DepotError(.io, "SQLite could not allocate a connection.", cause: SQLiteResult(extendedCode: rc, message: "open"))
        }
        defer { sqlite3_close_v2(db) }
        func failure(_ code: Int32) -> DepotError {
            SQLiteErrorMapping.error(code: code, message: String(cString: sqlite3_errmsg(db)), file: path)
        }
        guard rc == SQLITE_OK else { throw failure(sqlite3_extended_errcode(db)) }
        sqlite3_busy_timeout(db, 2000)
        guard depot_sqlite_harden(db) == SQLITE_OK else { throw failure(sqlite3_extended_errcode(db)) }

        let sql = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN (?1, ?2)"
        var statement: OpaquePointer?
        let prepared = sqlite3_prepare_v2(db, sql, -1, &statement, nil)
        defer { sqlite3_finalize(statement) }
        guard prepared == SQLITE_OK, let statement else {
            // A file with the SQLite header whose first page is not a database.
            if prepared & 0xFF == SQLITE_NOTADB { return false }
            throw failure(sqlite3_extended_errcode(db))
        }
        for (index, name) in [SQLiteLayout.metaTable, SQLiteLayout.collectionsTable].enumerated() {
            guard depot_sqlite_bind_text(statement, Int32(index + 1), name, Int32(name.utf8.count)) == SQLITE_OK else { throw failure(sqlite3_extended_errcode(db)) }
        }
        let stepped = sqlite3_step(statement)
        guard stepped == SQLITE_ROW else {
            if stepped & 0xFF == SQLITE_NOTADB { return false }
            throw failure(sqlite3_extended_errcode(db))
        }
        return sqlite3_column_int64(statement, 0) == 2
    }

    /// The first 16 bytes of every SQLite database file.
    static let sqliteHeader = Array("SQLite format 3\u{0}".utf8)

    /// `path` for a `file:` URI: every byte but letters, digits, `-._~/` percent-encoded, so
    /// that `?`, `#` and `%` in a file name stay part of the name.
    static func uriEncoded(_ path: String) -> String {
        var out = ""
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "/"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }
}
