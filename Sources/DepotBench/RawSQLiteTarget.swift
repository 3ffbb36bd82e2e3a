#if canImport(CSQLite)
import CSQLite
import DepotCore

/// SQLite through its C API, the way a careful hand-written program uses it: one
/// connection on the calling thread, prepared statements kept for the whole run, values
/// bound (`SQLITE_TRANSIENT`), rows read into plain Swift strings.
///
/// Same file layout as the Depot driver (one `WITHOUT ROWID` table keyed by the string id,
/// one TEXT column per field) and the same pragmas: `journal_mode=WAL`, `synchronous=FULL`
/// with durability full and `NORMAL` with normal. A YCSB update is one `UPDATE … SET
/// fieldN = ?` statement in its own (implicit) transaction.
public final class RawSQLiteTarget: BenchTarget {
    public let engine = "sqlite"
    public let isBaseline = true
    public var settings: [String: String] {
        ["journal_mode": "WAL", "synchronous": "FULL if durability full, NORMAL if normal", "api": "sqlite3 C API, prepared statements, implicit transactions per operation", "sqlite_version": String(cString: sqlite3_libversion())]
    }

    private var db: OpaquePointer?
    private var path = ""
    private var synchronous = "FULL"
    private var statements: [String: OpaquePointer] = [:]
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
    private static let columns = YCSB.fieldNames.joined(separator: ", ")

    /// A raw SQLite target; `open` picks its file.
    public init() {}

    private func check(_ rc: Int32, _ what: String) throws {
        guard rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "no connection"
            throw BenchError("sqlite raw: \(what) failed (\(rc)): \(message)")
        }
    }

    private func exec(_ sql: String) throws {
        try check(sqlite3_exec(db, sql, nil, nil, nil), sql)
    }

    private func statement(_ sql: String) throws -> OpaquePointer {
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

    private func bind(_ stmt: OpaquePointer, _ index: Int32, _ text: String) {
        sqlite3_bind_text(stmt, index, text, -1, RawSQLiteTarget.transient)
    }

    private func text(_ stmt: OpaquePointer, _ column: Int32) -> String {
        guard let pointer = sqlite3_column_text(stmt, column) else { return "" }
        let count = Int(sqlite3_column_bytes(stmt, column))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    private func row(_ stmt: OpaquePointer) -> RawRow {
        RawRow(id: text(stmt, 0), fields: (1...Int32(YCSB.fieldCount)).map { text(stmt, $0) })
    }

    private func connect(durability: Durability) throws {
        var handle: OpaquePointer?
        let rc = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        db = handle
        try check(rc, "open")
        try exec("PRAGMA journal_mode = WAL")
        synchronous = durability == .full ? "FULL" : "NORMAL"
        try exec("PRAGMA synchronous = \(synchronous)")
    }

    public func open(directory: String, durability: Durability) async throws {
        path = directory + "/raw.sqlite"
        try connect(durability: durability)
        try exec("CREATE TABLE usertable(id TEXT PRIMARY KEY NOT NULL, \(YCSB.fieldNames.map { "\($0) TEXT" }.joined(separator: ", "))) WITHOUT ROWID")
    }

    public func reopen(durability: Durability) async throws {
        try await close()
        try connect(durability: durability)
    }

    private func insert(_ n: Int, _ values: [String]) throws {
        let stmt = try statement("INSERT INTO usertable(id, \(RawSQLiteTarget.columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        bind(stmt, 1, YCSB.key(n))
        for (i, v) in values.enumerated() { bind(stmt, Int32(i + 2), v) }
        try check(sqlite3_step(stmt), "insert")
    }

    public func insertBatch(_ range: Range<Int>, values: [[String]]) async throws {
        try exec("BEGIN")
        do {
            for (n, v) in zip(range, values) { try insert(n, v) }
            try exec("COMMIT")
        } catch {
            try? exec("ROLLBACK")
            throw error
        }
    }

    public func fetchAll() async throws -> Int {
        let stmt = try statement("SELECT id, \(RawSQLiteTarget.columns) FROM usertable ORDER BY id")
        var rows: [RawRow] = []
        while true {
            let rc = sqlite3_step(stmt)
            if rc == SQLITE_DONE { break }
            try check(rc, "select all")
            rows.append(row(stmt))
        }
        return rows.count
    }

    private func read(_ n: Int) throws -> RawRow {
        let stmt = try statement("SELECT id, \(RawSQLiteTarget.columns) FROM usertable WHERE id = ?")
        bind(stmt, 1, YCSB.key(n))
        guard sqlite3_step(stmt) == SQLITE_ROW else { throw BenchError("sqlite raw: record \(n) is missing") }
        let found = row(stmt)
        sqlite3_reset(stmt)
        return found
    }

    private func update(_ n: Int, field: Int, value: String) throws {
        let stmt = try statement("UPDATE usertable SET \(YCSB.fieldNames[field]) = ? WHERE id = ?")
        bind(stmt, 1, value)
        bind(stmt, 2, YCSB.key(n))
        try check(sqlite3_step(stmt), "update")
    }

    public func run(_ operation: BenchOperation) async throws {
        switch operation {
        case .read(let n):
            _ = try read(n)
        case .update(let n, let field, let value):
            try update(n, field: field, value: value)
        case .insert(let n):
            try insert(n, YCSB.fields(record: n))
        case .scan(let n, let count):
            let stmt = try statement("SELECT id, \(RawSQLiteTarget.columns) FROM usertable WHERE id >= ? ORDER BY id LIMIT ?")
            bind(stmt, 1, YCSB.key(n))
            sqlite3_bind_int64(stmt, 2, Int64(count))
            var rows: [RawRow] = []
            while sqlite3_step(stmt) == SQLITE_ROW { rows.append(row(stmt)) }
            sqlite3_reset(stmt)
            _ = rows.count
        case .readModifyWrite(let n, let field, let value):
            var found = try read(n)
            found.fields[field] = value
            try update(n, field: field, value: found.fields[field])
        }
    }

    public func durableInsert(_ n: Int, values: [String]) async throws {
        try insert(n, values)
    }

    public func delete(_ n: Int) async throws {
        let stmt = try statement("DELETE FROM usertable WHERE id = ?")
        bind(stmt, 1, YCSB.key(n))
        try check(sqlite3_step(stmt), "delete")
        guard sqlite3_changes(db) == 1 else { throw BenchError("sqlite raw: record \(n) is missing") }
    }

    public func close() async throws {
        for stmt in statements.values { sqlite3_finalize(stmt) }
        statements = [:]
        if let db { sqlite3_close_v2(db) }
        db = nil
    }
}
#endif

/// A record as a raw baseline holds it: the id and the ten field strings.
public struct RawRow: Sendable, Hashable {
    /// The record's key.
    public var id: String
    /// `field0` … `field9`.
    public var fields: [String]
}
