import DepotCore

#if canImport(Glibc)
import Glibc
#endif

/// A row of the typed-model workloads as a raw baseline holds it: a plain struct of eleven
/// integers, no Depot type involved.
struct RawIntegerRow {
    var id, a, b, c, d, e, f, g, h, i, j: Int64

    /// Record `n`: the values of `IntegerRecord(n)`.
    init(_ n: Int) {
        let m = IntegerRecord(n)
        self.init(id: m.id, a: m.a, b: m.b, c: m.c, d: m.d, e: m.e, f: m.f, g: m.g, h: m.h, i: m.i, j: m.j)
    }

    init(id: Int64, a: Int64, b: Int64, c: Int64, d: Int64, e: Int64, f: Int64, g: Int64, h: Int64, i: Int64, j: Int64) {
        self.id = id
        self.a = a; self.b = b; self.c = c; self.d = d; self.e = e
        self.f = f; self.g = g; self.h = h; self.i = i; self.j = j
    }

    var checksum: Int64 { IntegerRows.checksum(id: id, values: [a, b, c, d, e, f, g, h, i, j]) }
}

#if canImport(CSQLite)
import CSQLite

/// The typed-model workloads through SQLite's C API, as a careful hand-written program does
/// them: one connection on the calling thread (``RawSQLiteConnection``: `page_size=8192`,
/// `journal_mode=WAL`, `synchronous` FULL or NORMAL as Depot's durability), prepared
/// statements kept for the run, each of the eleven integers bound and read by column
/// index into a plain struct.
///
/// Table `integers(id INTEGER PRIMARY KEY, a INTEGER, …, j INTEGER)`: the rowid table a
/// hand-written program would declare. (Depot's driver adds its tag column and id-mark
/// triggers: costs of Depot's layout that the ratio includes.) The insert is one explicit
/// transaction; a point read is one statement in its own implicit transaction.
final class RawSQLiteModelTarget: ModelBenchTarget {
    let engine = "sqlite"
    let side = ModelSide.raw
    var settings: [String: String] {
        ["page_size": "8192", "journal_mode": "WAL", "synchronous": "FULL if durability full, NORMAL if normal", "api": "sqlite3 C API, prepared statements, columns by index, implicit transaction per point read", "table": "integers(id INTEGER PRIMARY KEY, a … j INTEGER)", "sqlite_version": String(cString: sqlite3_libversion())]
    }

    private var sqlite: RawSQLiteConnection?
    private var staged: [RawIntegerRow] = []
    private var fetched: [RawIntegerRow] = []
    private var last: RawIntegerRow?
    private static let insertSQL = "INSERT INTO integers(id, a, b, c, d, e, f, g, h, i, j) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    private static let fetchSQL = "SELECT id, a, b, c, d, e, f, g, h, i, j FROM integers ORDER BY id"
    private static let readSQL = "SELECT a, b, c, d, e, f, g, h, i, j FROM integers WHERE id = ?"

    init() {}

    private func connection() throws -> RawSQLiteConnection {
        guard let sqlite else { throw BenchError("sqlite raw: not open") }
        return sqlite
    }

    func open(directory: String, durability: Durability) async throws {
        sqlite = try RawSQLiteConnection(path: directory + "/raw-models.sqlite", durability: durability)
        try connection().exec("CREATE TABLE integers(id INTEGER PRIMARY KEY, \(IntegerRows.fieldNames.map { "\($0) INTEGER" }.joined(separator: ", ")))")
    }

    func stage(_ rows: Range<Int>) { staged = rows.map(RawIntegerRow.init) }

    func insertStaged() async throws {
        let sqlite = try connection()
        let stmt = try sqlite.statement(RawSQLiteModelTarget.insertSQL)
        try sqlite.inTransaction {
            for row in staged {
                sqlite3_bind_int64(stmt, 1, row.id)
                sqlite3_bind_int64(stmt, 2, row.a)
                sqlite3_bind_int64(stmt, 3, row.b)
                sqlite3_bind_int64(stmt, 4, row.c)
                sqlite3_bind_int64(stmt, 5, row.d)
                sqlite3_bind_int64(stmt, 6, row.e)
                sqlite3_bind_int64(stmt, 7, row.f)
                sqlite3_bind_int64(stmt, 8, row.g)
                sqlite3_bind_int64(stmt, 9, row.h)
                sqlite3_bind_int64(stmt, 10, row.i)
                sqlite3_bind_int64(stmt, 11, row.j)
                let rc = sqlite3_step(stmt)
                sqlite3_reset(stmt)
                try sqlite.check(rc, "insert")
            }
        }
    }

    func fetchAll() async throws -> Int {
        let sqlite = try connection()
        let stmt = try sqlite.statement(RawSQLiteModelTarget.fetchSQL)
        var rows: [RawIntegerRow] = []
        while true {
            let rc = sqlite3_step(stmt)
            if rc == SQLITE_DONE { break }
            try sqlite.check(rc, "select all")
            rows.append(RawIntegerRow(
                id: sqlite3_column_int64(stmt, 0), a: sqlite3_column_int64(stmt, 1), b: sqlite3_column_int64(stmt, 2),
                c: sqlite3_column_int64(stmt, 3), d: sqlite3_column_int64(stmt, 4), e: sqlite3_column_int64(stmt, 5),
                f: sqlite3_column_int64(stmt, 6), g: sqlite3_column_int64(stmt, 7), h: sqlite3_column_int64(stmt, 8),
                i: sqlite3_column_int64(stmt, 9), j: sqlite3_column_int64(stmt, 10)))
        }
        sqlite3_reset(stmt)
        fetched = rows
        return rows.count
    }

    func fetchedChecksum() -> Int64? {
        defer { fetched = [] }
        return fetched.reduce(0) { $0 &+ $1.checksum }
    }

    func read(_ n: Int) async throws {
        let sqlite = try connection()
        let stmt = try sqlite.statement(RawSQLiteModelTarget.readSQL)
        let id = Int64(n) + 1
        sqlite3_bind_int64(stmt, 1, id)
        let rc = sqlite3_step(stmt)
        guard rc == SQLITE_ROW else {
            sqlite3_reset(stmt)
            try sqlite.check(rc, "read")
            throw BenchError("sqlite raw: record \(n) is missing")
        }
        last = RawIntegerRow(
            id: id, a: sqlite3_column_int64(stmt, 0), b: sqlite3_column_int64(stmt, 1), c: sqlite3_column_int64(stmt, 2),
            d: sqlite3_column_int64(stmt, 3), e: sqlite3_column_int64(stmt, 4), f: sqlite3_column_int64(stmt, 5),
            g: sqlite3_column_int64(stmt, 6), h: sqlite3_column_int64(stmt, 7), i: sqlite3_column_int64(stmt, 8),
            j: sqlite3_column_int64(stmt, 9))
        sqlite3_reset(stmt)
    }

    func lastReadChecksum() -> Int64? { last?.checksum }

    func close() async throws {
        sqlite?.close()
        sqlite = nil
        staged = []
        fetched = []
    }
}
#endif

#if canImport(CGDBM)
import CGDBM

/// The typed-model workloads through GDBM's C API: one GDBM file keyed by the 8-byte id,
/// each value the ten integers as 80 little-endian bytes, written with `gdbm_store` and
/// read with `gdbm_fetch` into a plain struct.
///
/// The insert stores every row, then `gdbm_sync` (which fsyncs) with durability full, none
/// with normal. The fetch returns the rows in id order, like Depot: the keys are listed with
/// `gdbm_firstkey`/`gdbm_nextkey`, sorted, then fetched.
final class RawGDBMModelTarget: ModelBenchTarget {
    let engine = "gdbm"
    let side = ModelSide.raw
    var settings: [String: String] {
        ["api": "gdbm_store/gdbm_fetch, key = 8-byte id, value = 10 × 8-byte little-endian integers", "sync": "gdbm_sync after the insert if durability full, none if normal", "gdbm_version": "\(GDBM_VERSION_MAJOR).\(GDBM_VERSION_MINOR).\(GDBM_VERSION_PATCH)"]
    }

    private var dbf: OpaquePointer?
    private var durability: Durability = .full
    private var staged: [RawIntegerRow] = []
    private var fetched: [RawIntegerRow] = []
    private var last: RawIntegerRow?

    init() {}

    func open(directory: String, durability: Durability) async throws {
        let path = directory + "/raw-models.gdbm"
        guard let handle = gdbm_open(path, 0, GDBM_WRCREAT | GDBM_CLOEXEC, 0o644, nil) else {
            throw BenchError("gdbm raw: cannot open \(path): \(String(cString: gdbm_strerror(gdbm_errno_location().pointee)))")
        }
        dbf = handle
        self.durability = durability
    }

    func stage(_ rows: Range<Int>) { staged = rows.map(RawIntegerRow.init) }

    func insertStaged() async throws {
        var key = Int64(0)
        var value = (Int64(0), Int64(0), Int64(0), Int64(0), Int64(0), Int64(0), Int64(0), Int64(0), Int64(0), Int64(0))
        for row in staged {
            key = row.id.bigEndian
            value = (row.a.littleEndian, row.b.littleEndian, row.c.littleEndian, row.d.littleEndian, row.e.littleEndian,
                     row.f.littleEndian, row.g.littleEndian, row.h.littleEndian, row.i.littleEndian, row.j.littleEndian)
            let rc = withUnsafeMutableBytes(of: &key) { k in
                withUnsafeMutableBytes(of: &value) { v in
                    gdbm_store(dbf, datum(dptr: k.baseAddress?.assumingMemoryBound(to: CChar.self), dsize: Int32(k.count)),
                               datum(dptr: v.baseAddress?.assumingMemoryBound(to: CChar.self), dsize: Int32(v.count)), GDBM_REPLACE)
                }
            }
            guard rc == 0 else { throw BenchError("gdbm raw: store failed") }
        }
        if durability == .full, gdbm_sync(dbf) != 0 { throw BenchError("gdbm raw: sync failed") }
    }

    /// The row stored under `id`, `nil` when there is none.
    private func fetch(_ id: Int64) throws -> RawIntegerRow? {
        var key = id.bigEndian
        let found = withUnsafeMutableBytes(of: &key) { k in
            gdbm_fetch(dbf, datum(dptr: k.baseAddress?.assumingMemoryBound(to: CChar.self), dsize: Int32(k.count)))
        }
        guard let pointer = found.dptr else { return nil }
        defer { free(pointer) }
        guard found.dsize == 80 else { throw BenchError("gdbm raw: bad record \(id)") }
        let bytes = UnsafeRawPointer(pointer)
        func field(_ k: Int) -> Int64 { Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: k * 8, as: Int64.self)) }
        return RawIntegerRow(id: id, a: field(0), b: field(1), c: field(2), d: field(3), e: field(4), f: field(5), g: field(6), h: field(7), i: field(8), j: field(9))
    }

    func fetchAll() async throws -> Int {
        var ids: [Int64] = []
        var key = gdbm_firstkey(dbf)
        while let pointer = key.dptr {
            if key.dsize == 8 { ids.append(Int64(bigEndian: UnsafeRawPointer(pointer).loadUnaligned(as: Int64.self))) }
            let next = gdbm_nextkey(dbf, key)
            free(pointer)
            key = next
        }
        ids.sort()
        var rows: [RawIntegerRow] = []
        rows.reserveCapacity(ids.count)
        for id in ids { if let row = try fetch(id) { rows.append(row) } }
        fetched = rows
        return rows.count
    }

    func fetchedChecksum() -> Int64? {
        defer { fetched = [] }
        return fetched.reduce(0) { $0 &+ $1.checksum }
    }

    func read(_ n: Int) async throws {
        guard let row = try fetch(Int64(n) + 1) else { throw BenchError("gdbm raw: record \(n) is missing") }
        last = row
    }

    func lastReadChecksum() -> Int64? { last?.checksum }

    func close() async throws {
        if let dbf { gdbm_close(dbf) }
        dbf = nil
        staged = []
        fetched = []
    }
}
#endif
