import DepotCore

/// The model of the SQLite driver's insert and fetch targets: an integer id and ten
/// integer fields.
public struct IntegerRecord: Model, Hashable {
    public static var collectionName: String { "integers" }
    public var id: Int64
    public var a, b, c, d, e, f, g, h, i, j: Int64

    /// Record `n`: id `n + 1`, fields derived from `n`.
    public init(_ n: Int) {
        let v = Int64(n)
        id = v + 1
        a = v; b = v &* 3; c = v &* 7; d = v ^ 0x5555; e = -v; f = v &* v; g = v % 97; h = v / 3; i = v &+ 1_000_000; j = Int64.max - v
    }

    /// A record with every value given (for decoders of raw rows).
    public init(id: Int64, values: [Int64]) {
        self.id = id
        a = values[0]; b = values[1]; c = values[2]; d = values[3]; e = values[4]
        f = values[5]; g = values[6]; h = values[7]; i = values[8]; j = values[9]
    }

    /// The ten values in column order.
    public var values: [Int64] { [a, b, c, d, e, f, g, h, i, j] }
}

/// The model of the point-read target: an integer id and ten 100-byte strings (about 1 KB).
public struct KilobyteRecord: Model, Hashable {
    public static var collectionName: String { "kilobytes" }
    public var id: Int64
    public var field0, field1, field2, field3, field4, field5, field6, field7, field8, field9: String

    /// Record `n`: id `n + 1`, the YCSB field values of record `n`.
    public init(_ n: Int) {
        self.init(id: Int64(n) + 1, values: YCSB.fields(record: n))
    }

    /// A record with every value given.
    public init(id: Int64, values: [String]) {
        self.id = id
        field0 = values[0]; field1 = values[1]; field2 = values[2]; field3 = values[3]; field4 = values[4]
        field5 = values[5]; field6 = values[6]; field7 = values[7]; field8 = values[8]; field9 = values[9]
    }

    /// The ten values in column order.
    public var values: [String] { [field0, field1, field2, field3, field4, field5, field6, field7, field8, field9] }
}

#if canImport(CSQLite)
import CSQLite

/// The raw C API side of the SQLite driver's performance targets (issue "SQLite driver",
/// Performance): the same models written and read with prepared statements, binding and
/// stepping by hand, in the same pragmas (WAL; synchronous FULL or NORMAL).
public final class RawSQLiteModels {
    private let sqlite: RawSQLiteConnection
    private static let letters = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]

    /// Opens (creating) the database at `path` and creates the two tables.
    /// - Throws: ``BenchError`` with SQLite's message.
    public init(path: String, durability: Durability) throws {
        sqlite = try RawSQLiteConnection(path: path, durability: durability)
        try sqlite.exec("CREATE TABLE IF NOT EXISTS integers(id INTEGER PRIMARY KEY, \(RawSQLiteModels.letters.map { "\($0) INTEGER" }.joined(separator: ", ")))")
        try sqlite.exec("CREATE TABLE IF NOT EXISTS kilobytes(id INTEGER PRIMARY KEY, \(YCSB.fieldNames.map { "\($0) TEXT" }.joined(separator: ", ")))")
    }

    private func insertInteger(_ row: IntegerRecord) throws {
        let stmt = try sqlite.statement("INSERT INTO integers(id, a, b, c, d, e, f, g, h, i, j) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        sqlite3_bind_int64(stmt, 1, row.id)
        for (k, v) in row.values.enumerated() { sqlite3_bind_int64(stmt, Int32(k + 2), v) }
        try sqlite.check(sqlite3_step(stmt), "insert")
    }

    /// Inserts `rows` in one transaction.
    /// - Throws: ``BenchError``.
    public func insertIntegers(_ rows: [IntegerRecord]) throws {
        try sqlite.inTransaction { for row in rows { try insertInteger(row) } }
    }

    /// Deletes every integer row.
    /// - Throws: ``BenchError``.
    public func deleteIntegers() throws { try sqlite.exec("DELETE FROM integers") }

    /// Inserts one row in its own (implicit, durable per `synchronous`) transaction.
    /// - Throws: ``BenchError``.
    public func insertDurably(_ row: IntegerRecord) throws { try insertInteger(row) }

    /// Reads every integer row into models, in id order.
    /// - Throws: ``BenchError``.
    public func fetchIntegers() throws -> [IntegerRecord] {
        let stmt = try sqlite.statement("SELECT id, a, b, c, d, e, f, g, h, i, j FROM integers ORDER BY id")
        var rows: [IntegerRecord] = []
        while true {
            let rc = sqlite3_step(stmt)
            if rc == SQLITE_DONE { break }
            try sqlite.check(rc, "select")
            rows.append(IntegerRecord(id: sqlite3_column_int64(stmt, 0), values: (1...10).map { sqlite3_column_int64(stmt, Int32($0)) }))
        }
        return rows
    }

    /// Inserts `rows` in one transaction.
    /// - Throws: ``BenchError``.
    public func insertKilobytes(_ rows: [KilobyteRecord]) throws {
        try sqlite.inTransaction {
            let stmt = try sqlite.statement("INSERT INTO kilobytes(id, \(YCSB.fieldNames.joined(separator: ", "))) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
            for row in rows {
                sqlite3_reset(stmt)
                sqlite3_bind_int64(stmt, 1, row.id)
                for (k, v) in row.values.enumerated() { sqlite3_bind_text(stmt, Int32(k + 2), v, -1, RawSQLiteConnection.transient) }
                try sqlite.check(sqlite3_step(stmt), "insert")
            }
        }
    }

    /// Reads the kilobyte row with `id` into a model (an implicit read transaction).
    /// - Throws: ``BenchError``.
    public func kilobyte(id: Int64) throws -> KilobyteRecord? {
        let stmt = try sqlite.statement("SELECT \(YCSB.fieldNames.joined(separator: ", ")) FROM kilobytes WHERE id = ?")
        sqlite3_bind_int64(stmt, 1, id)
        guard sqlite3_step(stmt) == SQLITE_ROW else { return nil }
        let values = (0..<10).map { RawSQLiteConnection.text(stmt, Int32($0)) }
        sqlite3_reset(stmt)
        return KilobyteRecord(id: id, values: values)
    }

    /// Finalizes the statements and closes the connection. Closing twice is harmless.
    public func close() { sqlite.close() }
}
#endif
