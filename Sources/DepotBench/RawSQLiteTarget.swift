#if canImport(CSQLite)
import CSQLite
import DepotCore

/// SQLite through its C API, the way a careful hand-written program uses it: one
/// connection on the calling thread, prepared statements kept for the whole run, values
/// bound (`SQLITE_TRANSIENT`), rows read into plain Swift strings.
///
/// Same file layout as the Depot driver (one `WITHOUT ROWID` table keyed by the string id,
/// one TEXT column per field) and the same pragmas: `page_size=8192`, `journal_mode=WAL`, `synchronous=FULL`
/// with durability full and `NORMAL` with normal. A YCSB update is one `UPDATE … SET
/// fieldN = ?` statement in its own (implicit) transaction.
public final class RawSQLiteTarget: BenchTarget {
    public let engine = "sqlite"
    public let isBaseline = true
    public var settings: [String: String] {
        ["page_size": "8192", "journal_mode": "WAL", "synchronous": "FULL if durability full, NORMAL if normal", "api": "sqlite3 C API, prepared statements, implicit transactions per operation", "sqlite_version": String(cString: sqlite3_libversion())]
    }

    private var sqlite: RawSQLiteConnection?
    private var path = ""
    private var durability: Durability = .normal
    /// The connections of `--clients`' reader threads, open between `openReaders` and `closeReaders`.
    private var readers: [Reader] = []
    private static let columns = YCSB.fieldNames.joined(separator: ", ")
    // The SQL texts, built once (as Depot builds its per-collection SQL once), not per call.
    private static let insertSQL = "INSERT INTO usertable(id, \(columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    private static let readSQL = "SELECT id, \(columns) FROM usertable WHERE id = ?"
    private static let scanSQL = "SELECT id, \(columns) FROM usertable WHERE id >= ? ORDER BY id LIMIT ?"
    private static let updateSQL = YCSB.fieldNames.map { "UPDATE usertable SET \($0) = ? WHERE id = ?" }

    /// A raw SQLite target; `open` picks its file.
    public init() {}

    /// The open connection. - Throws: ``BenchError`` before `open` or after `close`.
    private func connection() throws -> RawSQLiteConnection {
        guard let sqlite else { throw BenchError("sqlite raw: not open") }
        return sqlite
    }

    private func bind(_ stmt: OpaquePointer, _ index: Int32, _ text: String) {
        sqlite3_bind_text(stmt, index, text, -1, RawSQLiteConnection.transient)
    }

    private func row(_ stmt: OpaquePointer) -> RawRow {
        RawRow(id: RawSQLiteConnection.text(stmt, 0), fields: (1...Int32(YCSB.fieldCount)).map { RawSQLiteConnection.text(stmt, $0) })
    }

    private func connect(durability: Durability) throws {
        self.durability = durability
        sqlite = try RawSQLiteConnection(path: path, durability: durability)
    }

    public func open(directory: String, durability: Durability) async throws {
        path = directory + "/raw.sqlite"
        try connect(durability: durability)
        try connection().exec("CREATE TABLE usertable(id TEXT PRIMARY KEY NOT NULL, \(YCSB.fieldNames.map { "\($0) TEXT" }.joined(separator: ", "))) WITHOUT ROWID")
    }

    public func reopen(durability: Durability) async throws {
        try await close()
        try connect(durability: durability)
    }

    private func insert(_ n: Int, _ values: [String]) throws {
        let stmt = try connection().statement(RawSQLiteTarget.insertSQL)
        bind(stmt, 1, YCSB.key(n))
        for (i, v) in values.enumerated() { bind(stmt, Int32(i + 2), v) }
        try connection().check(sqlite3_step(stmt), "insert")
    }

    public func insertBatch(_ range: Range<Int>, values: [[String]]) async throws {
        try connection().inTransaction { for (n, v) in zip(range, values) { try insert(n, v) } }
    }

    public func fetchAll() async throws -> Int {
        let stmt = try connection().statement("SELECT id, \(RawSQLiteTarget.columns) FROM usertable ORDER BY id")
        var rows: [RawRow] = []
        while true {
            let rc = sqlite3_step(stmt)
            if rc == SQLITE_DONE { break }
            try connection().check(rc, "select all")
            rows.append(row(stmt))
        }
        return rows.count
    }

    private func read(_ n: Int) throws -> RawRow {
        try RawSQLiteTarget.read(n, on: connection())
    }

    /// Reads record `n` through `sqlite`'s prepared point-read statement.
    /// - Throws: ``BenchError`` when the record is missing or SQLite fails.
    private static func read(_ n: Int, on sqlite: RawSQLiteConnection) throws -> RawRow {
        let stmt = try sqlite.statement(RawSQLiteTarget.readSQL)
        sqlite3_bind_text(stmt, 1, YCSB.key(n), -1, RawSQLiteConnection.transient)
        let rc = sqlite3_step(stmt)
        guard rc == SQLITE_ROW else {
            sqlite3_reset(stmt)
            try sqlite.check(rc, "read")
            throw BenchError("sqlite raw: record \(n) is missing")
        }
        let found = RawRow(id: RawSQLiteConnection.text(stmt, 0), fields: (1...Int32(YCSB.fieldCount)).map { RawSQLiteConnection.text(stmt, $0) })
        sqlite3_reset(stmt)
        return found
    }

    private func update(_ n: Int, field: Int, value: String) throws {
        let stmt = try connection().statement(RawSQLiteTarget.updateSQL[field])
        bind(stmt, 1, value)
        bind(stmt, 2, YCSB.key(n))
        try connection().check(sqlite3_step(stmt), "update")
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
            let stmt = try connection().statement(RawSQLiteTarget.scanSQL)
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
        let stmt = try connection().statement("DELETE FROM usertable WHERE id = ?")
        bind(stmt, 1, YCSB.key(n))
        try connection().check(sqlite3_step(stmt), "delete")
        guard sqlite3_changes(try connection().db) == 1 else { throw BenchError("sqlite raw: record \(n) is missing") }
    }

    public func close() async throws {
        for reader in readers { reader.connection.close() }
        readers = []
        sqlite?.close()
        sqlite = nil
    }
}

extension RawSQLiteTarget: ConcurrentReadTarget {
    /// One connection of one reader thread: used by that thread only.
    final class Reader: @unchecked Sendable {
        let connection: RawSQLiteConnection
        init(_ connection: RawSQLiteConnection) { self.connection = connection }
    }

    /// Opens `count` more connections to the same file, same pragmas (WAL: they read
    /// beside the open writer connection without waiting for it).
    public func openReaders(_ count: Int) async throws {
        try await closeReaders()
        _ = try connection()
        for _ in 0..<count { readers.append(Reader(try RawSQLiteConnection(path: path, durability: durability))) }
    }

    /// One thread per client, each on its own connection.
    public func readConcurrently(_ shares: [[Int]]) async throws -> [ClientRun] {
        try await readOnThreads(readers, shares, target: "sqlite raw") { reader, n in _ = try RawSQLiteTarget.read(n, on: reader.connection) }
    }

    public func closeReaders() async throws {
        for reader in readers { reader.connection.close() }
        readers = []
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
