// Typed models on SQLite, side by side (issue 19; Docs/Benchmarks.md, "Typed models"):
// a model of an integer id and ten integer fields through
//
//   - the raw C API (prepared statements, columns by index into a plain struct),
//   - Depot with the Codable `IntegerRecord` (RecordEncoder/RecordDecoder),
//   - Depot with `GeneratedIntegerRecord`, the hand-written expansion of `@Model`
//     (FieldSink/FieldSource, no Codable; DepotBench's BenchTypedModel.swift),
//   - GRDB with a Codable record (`FetchableRecord & PersistableRecord` derived from Codable),
//   - GRDB with a hand-written record (`init(row:)` reading columns by index,
//     `encode(to:)` writing the container by hand),
//
// on the same three workloads as `depot bench`'s typed-model ones: insert 50,000 in one
// transaction, fetch 200,000 with one query, 300,000 point reads by uniformly random id,
// each its own transaction (and, as a second figure, all in one read transaction).
// Every side: page_size 8192, journal_mode WAL, synchronous NORMAL (Depot durability normal).
//
//   cd Benchmarks && swift build -c release --product SQLiteBenchmarks
//   .build/release/SQLiteBenchmarks typed
import Depot
import DepotBench
import Foundation
import GRDB
import GRDBSQLite

/// GRDB's Codable record of the typed workloads: GRDB derives `init(row:)` and
/// `encode(to:)` from `Codable`.
struct GRDBCodableInteger: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "integers"
    var id: Int64
    var a, b, c, d, e, f, g, h, i, j: Int64
}

/// GRDB's record written by hand, as GRDB's documentation shows for speed: columns read by
/// index, the persistence container filled by name.
struct GRDBHandInteger: FetchableRecord, PersistableRecord {
    static let databaseTableName = "integers"
    var id: Int64
    var a, b, c, d, e, f, g, h, i, j: Int64

    init(id: Int64, a: Int64, b: Int64, c: Int64, d: Int64, e: Int64, f: Int64, g: Int64, h: Int64, i: Int64, j: Int64) {
        self.id = id
        self.a = a; self.b = b; self.c = c; self.d = d; self.e = e
        self.f = f; self.g = g; self.h = h; self.i = i; self.j = j
    }

    init(row: GRDB.Row) throws {
        id = row[0]
        a = row[1]; b = row[2]; c = row[3]; d = row[4]; e = row[5]
        f = row[6]; g = row[7]; h = row[8]; i = row[9]; j = row[10]
    }

    func encode(to container: inout PersistenceContainer) throws {
        container["id"] = id
        container["a"] = a; container["b"] = b; container["c"] = c; container["d"] = d; container["e"] = e
        container["f"] = f; container["g"] = g; container["h"] = h; container["i"] = i; container["j"] = j
    }
}

/// A plain struct the raw side reads into.
struct RawInteger {
    var id, a, b, c, d, e, f, g, h, i, j: Int64
}

extension IntegerRecord {
    var grdbCodable: GRDBCodableInteger { GRDBCodableInteger(id: id, a: a, b: b, c: c, d: d, e: e, f: f, g: g, h: h, i: i, j: j) }
    var grdbHand: GRDBHandInteger { GRDBHandInteger(id: id, a: a, b: b, c: c, d: d, e: e, f: f, g: g, h: h, i: i, j: j) }
    var raw: RawInteger { RawInteger(id: id, a: a, b: b, c: c, d: d, e: e, f: f, g: g, h: h, i: i, j: j) }
}

/// The raw side of the typed workloads: `Raw` (main.swift) at synchronous NORMAL, the same
/// pragmas as the other sides, with the typed table's own statements.
extension Raw {
    /// A `Raw` connection at synchronous NORMAL.
    static func typed(_ path: String) throws -> Raw { try Raw(path, synchronous: "NORMAL") }

    func createTable() throws {
        try exec("CREATE TABLE integers(id INTEGER PRIMARY KEY, a INTEGER, b INTEGER, c INTEGER, d INTEGER, e INTEGER, f INTEGER, g INTEGER, h INTEGER, i INTEGER, j INTEGER)")
    }
    func insert(_ rows: [RawInteger]) throws {
        try exec("BEGIN IMMEDIATE")
        let statement = try prepare("INSERT INTO integers(id, a, b, c, d, e, f, g, h, i, j) VALUES (?,?,?,?,?,?,?,?,?,?,?)")
        defer { sqlite3_finalize(statement) }
        for row in rows {
            sqlite3_bind_int64(statement, 1, row.id)
            sqlite3_bind_int64(statement, 2, row.a); sqlite3_bind_int64(statement, 3, row.b)
            sqlite3_bind_int64(statement, 4, row.c); sqlite3_bind_int64(statement, 5, row.d)
            sqlite3_bind_int64(statement, 6, row.e); sqlite3_bind_int64(statement, 7, row.f)
            sqlite3_bind_int64(statement, 8, row.g); sqlite3_bind_int64(statement, 9, row.h)
            sqlite3_bind_int64(statement, 10, row.i); sqlite3_bind_int64(statement, 11, row.j)
            guard sqlite3_step(statement) == SQLITE_DONE else { throw BenchError("step") }
            sqlite3_reset(statement)
        }
        try exec("COMMIT")
    }
    static func row(_ statement: OpaquePointer, id: Int64, from first: Int32) -> RawInteger {
        RawInteger(id: id,
                   a: sqlite3_column_int64(statement, first), b: sqlite3_column_int64(statement, first + 1),
                   c: sqlite3_column_int64(statement, first + 2), d: sqlite3_column_int64(statement, first + 3),
                   e: sqlite3_column_int64(statement, first + 4), f: sqlite3_column_int64(statement, first + 5),
                   g: sqlite3_column_int64(statement, first + 6), h: sqlite3_column_int64(statement, first + 7),
                   i: sqlite3_column_int64(statement, first + 8), j: sqlite3_column_int64(statement, first + 9))
    }
}

func typedGRDBQueue(_ path: String) throws -> DatabaseQueue {
    var config = Configuration()
    config.prepareDatabase { db in try db.execute(sql: "PRAGMA page_size=8192; PRAGMA synchronous=NORMAL") }
    let queue = try DatabaseQueue(path: path, configuration: config)
    _ = try queue.writeWithoutTransaction { db in try String.fetchOne(db, sql: "PRAGMA journal_mode=WAL") }
    return queue
}

func typedGRDBCreate(_ queue: DatabaseQueue) throws {
    try queue.write { db in
        try db.execute(sql: "CREATE TABLE integers(id INTEGER PRIMARY KEY, a INTEGER, b INTEGER, c INTEGER, d INTEGER, e INTEGER, f INTEGER, g INTEGER, h INTEGER, i INTEGER, j INTEGER)")
    }
}

/// Inserts `rows` in one GRDB write transaction (the synchronous API, as GRDB's own
/// benchmarks call it: no async hop).
func grdbInsert<R: PersistableRecord>(_ queue: DatabaseQueue, _ rows: [R]) throws {
    try queue.write { db in for row in rows { try row.insert(db) } }
}

/// Every row in id order as `R`, in one GRDB read.
func grdbFetchAll<R: FetchableRecord>(_ queue: DatabaseQueue, _ type: R.Type) throws -> [R] {
    try queue.read { db in try R.fetchAll(db, sql: "SELECT * FROM integers ORDER BY id") }
}

func typedStore(_ path: String) async throws -> Store {
    try await Store(driver: SQLiteDriver(path: path, durability: .normal))
}

/// Inserts `models` through Depot's TransactionRepository in one transaction.
func depotInsert<M: StoredModel>(_ store: Store, _ models: [M]) async throws {
    try await store.write { tx in
        let repository = try tx.repository(M.self)
        for model in models { _ = try repository.insert(model) }
    }
}

/// 300,000 point reads through Depot's Repository, each its own read transaction.
func depotReadsEach<M: BenchIntegerModel>(_ repository: Repository<M>, _ ids: [Int64]) async throws -> Int64 {
    var sum: Int64 = 0
    for id in ids {
        guard let model = try await repository.find(id: id) else { throw BenchError("depot miss \(id)") }
        sum &+= model.id
    }
    return sum
}

/// The same reads inside one read transaction.
func depotReadsOneTransaction<M: BenchIntegerModel>(_ store: Store, _ type: M.Type, _ ids: [Int64]) async throws -> Int64 {
    try await store.read { tx in
        let repository = try tx.repository(M.self)
        var sum: Int64 = 0
        for id in ids {
            guard let model = try repository.find(id: id) else { throw BenchError("depot miss \(id)") }
            sum &+= model.id
        }
        return sum
    }
}

/// GRDB point reads through a cached statement (GRDB's advice for hot paths), each its own
/// `read` (one read transaction per read).
func grdbReadsEach<R: FetchableRecord>(_ queue: DatabaseQueue, _ type: R.Type, _ ids: [Int64], id: (R) -> Int64) throws -> Int64 {
    var sum: Int64 = 0
    for key in ids {
        let found = try queue.read { db in
            try R.fetchOne(db.cachedStatement(sql: "SELECT * FROM integers WHERE id = ?"), arguments: [key])
        }
        guard let found else { throw BenchError("grdb miss \(key)") }
        sum &+= id(found)
    }
    return sum
}

/// The same GRDB reads inside one `read`.
func grdbReadsOneTransaction<R: FetchableRecord>(_ queue: DatabaseQueue, _ type: R.Type, _ ids: [Int64], id: @escaping (R) -> Int64) throws -> Int64 {
    try queue.read { db in
        let statement = try db.cachedStatement(sql: "SELECT * FROM integers WHERE id = ?")
        var sum: Int64 = 0
        for key in ids {
            guard let found = try R.fetchOne(statement, arguments: [key]) else { throw BenchError("grdb miss \(key)") }
            sum &+= id(found)
        }
        return sum
    }
}

/// Raw point reads: one statement each, in its own implicit transaction, or all inside one.
func rawReads(_ raw: Raw, _ ids: [Int64], oneTransaction: Bool) throws -> Int64 {
    if oneTransaction { try raw.exec("BEGIN") }
    let statement = try raw.prepare("SELECT a, b, c, d, e, f, g, h, i, j FROM integers WHERE id = ?")
    defer { sqlite3_finalize(statement) }
    var sum: Int64 = 0
    for id in ids {
        sqlite3_bind_int64(statement, 1, id)
        guard sqlite3_step(statement) == SQLITE_ROW else { throw BenchError("raw miss \(id)") }
        let row = Raw.row(statement, id: id, from: 0)
        sqlite3_reset(statement)
        sum &+= row.id
    }
    if oneTransaction { try raw.exec("COMMIT") }
    return sum
}

func runTypedModelBenchmarks() async throws {
    let inserts = 50_000, fetched = 200_000, reads = 300_000
    print("Typed models (id + 10 integer fields): SQLite \(String(cString: sqlite3_libversion())), page_size 8192, WAL, synchronous=NORMAL on every side; best of \(runs) runs")
    let models = (0..<fetched).map(IntegerRecord.init)
    let generated = (0..<fetched).map(GeneratedIntegerRecord.init)
    let insertCodable = Array(models.prefix(inserts)), insertGenerated = Array(generated.prefix(inserts))
    let insertGRDBCodable = insertCodable.map(\.grdbCodable), insertGRDBHand = insertCodable.map(\.grdbHand), insertRaw = insertCodable.map(\.raw)
    var random = SplitMix64(seed: 19)
    let ids = (0..<reads).map { _ in Int64(random.uniform(1...fetched)) }
    let idSum = ids.reduce(0, &+)

    // 1. Insert 50,000 in one transaction.
    do {
        let w = "typed: insert 50k (1 tx)"
        await report(w, "raw C API", try await measure({ () -> Raw in let r = try Raw.typed(freshPath()); try r.createTable(); return r }) { raw in
            try raw.insert(insertRaw)
        }, ops: inserts)
        await report(w, "Depot @Model (generated)", try await measure({ () -> Store in
            let store = try await typedStore(freshPath()); _ = try await store.repository(GeneratedIntegerRecord.self); return store
        }, { store in try await depotInsert(store, insertGenerated) }, teardown: { try await $0.close() }), ops: inserts)
        await report(w, "Depot Codable", try await measure({ () -> Store in
            let store = try await typedStore(freshPath()); _ = try await store.repository(IntegerRecord.self); return store
        }, { store in try await depotInsert(store, insertCodable) }, teardown: { try await $0.close() }), ops: inserts)
        await report(w, "GRDB hand-written record", try await measure({ () -> DatabaseQueue in let q = try typedGRDBQueue(freshPath()); try typedGRDBCreate(q); return q }) { queue in
            try grdbInsert(queue, insertGRDBHand)
        }, ops: inserts)
        await report(w, "GRDB Codable record", try await measure({ () -> DatabaseQueue in let q = try typedGRDBQueue(freshPath()); try typedGRDBCreate(q); return q }) { queue in
            try grdbInsert(queue, insertGRDBCodable)
        }, ops: inserts)
    }

    // The files read by the fetch and the point reads: 200,000 rows each.
    let rawPath = freshPath(), codablePath = freshPath(), generatedPath = freshPath(), grdbPath = freshPath()
    do { let raw = try Raw.typed(rawPath); try raw.createTable(); try raw.insert(models.map(\.raw)) }
    do { let store = try await typedStore(codablePath); _ = try await store.repository(IntegerRecord.self); try await depotInsert(store, models); try await store.close() }
    do { let store = try await typedStore(generatedPath); _ = try await store.repository(GeneratedIntegerRecord.self); try await depotInsert(store, generated); try await store.close() }
    do {
        let queue = try typedGRDBQueue(grdbPath)
        try typedGRDBCreate(queue)
        try grdbInsert(queue, models.map(\.grdbHand))
    }
    let raw = try Raw.typed(rawPath)
    let codableStore = try await typedStore(codablePath), generatedStore = try await typedStore(generatedPath)
    let codableRepository = try await codableStore.repository(IntegerRecord.self)
    let generatedRepository = try await generatedStore.repository(GeneratedIntegerRecord.self)
    let queue = try typedGRDBQueue(grdbPath)

    // 2. Fetch 200,000 into models with one query.
    do {
        let w = "typed: fetch 200k"
        await report(w, "raw C API", try await measure({ raw }) { raw in
            let statement = try raw.prepare("SELECT id, a, b, c, d, e, f, g, h, i, j FROM integers ORDER BY id")
            defer { sqlite3_finalize(statement) }
            var out: [RawInteger] = []
            while sqlite3_step(statement) == SQLITE_ROW { out.append(Raw.row(statement, id: sqlite3_column_int64(statement, 0), from: 1)) }
            guard out.count == fetched else { throw BenchError("raw fetched \(out.count)") }
        }, ops: fetched)
        await report(w, "Depot @Model (generated)", try await measure({ generatedRepository }) { repository in
            let all = try await repository.all()
            guard all.count == fetched, all.last == generated.last else { throw BenchError("depot fetched \(all.count)") }
        }, ops: fetched)
        await report(w, "Depot Codable", try await measure({ codableRepository }) { repository in
            let all = try await repository.all()
            guard all.count == fetched, all.last == models.last else { throw BenchError("depot fetched \(all.count)") }
        }, ops: fetched)
        await report(w, "GRDB hand-written record", try await measure({ queue }) { queue in
            let all = try grdbFetchAll(queue, GRDBHandInteger.self)
            guard all.count == fetched else { throw BenchError("grdb fetched \(all.count)") }
        }, ops: fetched)
        await report(w, "GRDB Codable record", try await measure({ queue }) { queue in
            let all = try grdbFetchAll(queue, GRDBCodableInteger.self)
            guard all.count == fetched else { throw BenchError("grdb fetched \(all.count)") }
        }, ops: fetched)
    }

    // 3. 300,000 point reads by uniformly random id, each its own transaction.
    do {
        let w = "typed: 300k point reads, 1 tx each"
        func check(_ sum: Int64) throws { guard sum == idSum else { throw BenchError("read the wrong records") } }
        await report(w, "raw C API", try await measure({ raw }) { raw in try check(rawReads(raw, ids, oneTransaction: false)) }, ops: reads)
        await report(w, "Depot @Model (generated)", try await measure({ generatedRepository }) { repository in try check(await depotReadsEach(repository, ids)) }, ops: reads)
        await report(w, "Depot Codable", try await measure({ codableRepository }) { repository in try check(await depotReadsEach(repository, ids)) }, ops: reads)
        await report(w, "GRDB hand-written record", try await measure({ queue }) { queue in try check(grdbReadsEach(queue, GRDBHandInteger.self, ids) { $0.id }) }, ops: reads)
        await report(w, "GRDB Codable record", try await measure({ queue }) { queue in try check(grdbReadsEach(queue, GRDBCodableInteger.self, ids) { $0.id }) }, ops: reads)
    }

    // 3b. The same reads inside one read transaction (no per-read transaction or hop).
    do {
        let w = "typed: 300k point reads, 1 tx"
        func check(_ sum: Int64) throws { guard sum == idSum else { throw BenchError("read the wrong records") } }
        await report(w, "raw C API", try await measure({ raw }) { raw in try check(rawReads(raw, ids, oneTransaction: true)) }, ops: reads)
        await report(w, "Depot @Model (generated)", try await measure({ generatedStore }) { store in try check(await depotReadsOneTransaction(store, GeneratedIntegerRecord.self, ids)) }, ops: reads)
        await report(w, "Depot Codable", try await measure({ codableStore }) { store in try check(await depotReadsOneTransaction(store, IntegerRecord.self, ids)) }, ops: reads)
        await report(w, "GRDB hand-written record", try await measure({ queue }) { queue in try check(grdbReadsOneTransaction(queue, GRDBHandInteger.self, ids) { $0.id }) }, ops: reads)
        await report(w, "GRDB Codable record", try await measure({ queue }) { queue in try check(grdbReadsOneTransaction(queue, GRDBCodableInteger.self, ids) { $0.id }) }, ops: reads)
    }
    try await codableStore.close()
    try await generatedStore.close()

    await printTypedAgainstGRDB()
}

/// Throughput of Depot's sides against GRDB's (GRDB's time ÷ Depot's: 2.00x = twice GRDB's
/// throughput).
@MainActor func printTypedAgainstGRDB() {
    print("\ntyped models, throughput against GRDB (GRDB time / Depot time; higher is better):")
    for workload in Set(lines.map(\.workload)).filter({ $0.hasPrefix("typed") }).sorted() {
        let group = lines.filter { $0.workload == workload }
        for depot in group where depot.side.hasPrefix("Depot") {
            for grdb in group where grdb.side.hasPrefix("GRDB") {
                print(String(format: "%-36@ %-26@ vs %-26@ %6.2fx", workload as NSString, depot.side as NSString, grdb.side as NSString, grdb.perOp / depot.perOp))
            }
        }
    }
}
