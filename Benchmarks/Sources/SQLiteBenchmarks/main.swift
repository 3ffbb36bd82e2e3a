// SQLite workloads of issue 3: Depot (SQLiteDriver, through the typed Store API and at the
// driver level) against the raw C API and against GRDB's Codable records, in one run, with
// the same pragmas on every side (WAL, synchronous=FULL). Each figure is the best of
// `DEPOT_BENCH_RUNS` runs (3 by default).
//
//   cd Benchmarks && swift run -c release SQLiteBenchmarks
//   cd Benchmarks && swift run -c release SQLiteBenchmarks typed    # only the typed models (TypedModels.swift)
import Depot
import Foundation
import GRDB
import GRDBSQLite

// MARK: Models

struct Row: Model, FetchableRecord, PersistableRecord, Equatable {
    var id: Int64
    var f0, f1, f2, f3, f4, f5, f6, f7, f8, f9: Int64
    static var collectionName: String { "rows" }
    static var databaseTableName: String { "rows" }

    init(_ i: Int64) {
        id = i
        f0 = i; f1 = i &* 3; f2 = i &* 5; f3 = i &* 7; f4 = i &* 11
        f5 = i &* 13; f6 = i &* 17; f7 = i &* 19; f8 = i &* 23; f9 = i &* 29
    }
}

struct Doc: Model, FetchableRecord, PersistableRecord {
    var id: Int64
    var title: String
    var body: String
    var views: Int64
    var score: Double
    static var collectionName: String { "docs" }
    static var databaseTableName: String { "docs" }

    init(_ i: Int64) {
        id = i
        title = "Document \(i)"
        body = String(repeating: "lorem ipsum dolor sit amet ", count: 36)  // ~1 KB
        views = i % 1000
        score = Double(i) / 7
    }
}

// MARK: Timing

let runs = ProcessInfo.processInfo.environment["DEPOT_BENCH_RUNS"].flatMap(Int.init) ?? 3
let root = FileManager.default.temporaryDirectory.appendingPathComponent("depot-bench-\(UUID().uuidString)").path
try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: root) }
func freshPath() -> String { "\(root)/\(UUID().uuidString).sqlite" }

/// Best-of-`runs` seconds of `body`, which gets a fresh setup from `setup` each run.
func measure<S>(_ setup: () async throws -> S, _ body: (S) async throws -> Void, teardown: (S) async throws -> Void = { _ in }) async throws -> Double {
    var best = Double.infinity
    for _ in 0..<runs {
        let state = try await setup()
        let clock = ContinuousClock()
        let start = clock.now
        try await body(state)
        let elapsed = clock.now - start
        try await teardown(state)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        best = min(best, seconds)
    }
    return best
}

struct Line {
    var workload: String
    var side: String
    var seconds: Double
    var perOp: Double
}
var lines: [Line] = []
@MainActor func report(_ workload: String, _ side: String, _ seconds: Double, ops: Int) {
    lines.append(Line(workload: workload, side: side, seconds: seconds, perOp: seconds / Double(ops)))
    print(String(format: "%-28@ %-34@ %9.4f s  %8.3f µs/op", workload as NSString, side as NSString, seconds, seconds / Double(ops) * 1e6))
}

// MARK: Raw C API

final class Raw {
    var db: OpaquePointer?
    /// Opens `path` with 8 KiB pages, WAL and `synchronous` (FULL for issue 3's workloads,
    /// NORMAL for the typed ones: the same as the other sides of each).
    init(_ path: String, synchronous: String = "FULL") throws {
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK else { throw BenchError("open") }
        try exec("PRAGMA page_size=8192; PRAGMA journal_mode=WAL; PRAGMA synchronous=\(synchronous)")
    }
    deinit { sqlite3_close_v2(db) }
    func exec(_ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw BenchError(String(cString: sqlite3_errmsg(db))) }
    }
    func prepare(_ sql: String) throws -> OpaquePointer {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK, let statement else { throw BenchError("prepare") }
        return statement
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ text: String) { description = text }
}

let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

func rawCreateRows(_ raw: Raw) throws {
    try raw.exec("CREATE TABLE rows(id INTEGER PRIMARY KEY, f0 INTEGER, f1 INTEGER, f2 INTEGER, f3 INTEGER, f4 INTEGER, f5 INTEGER, f6 INTEGER, f7 INTEGER, f8 INTEGER, f9 INTEGER)")
}

func rawInsertRows(_ raw: Raw, _ rows: [Row]) throws {
    try raw.exec("BEGIN IMMEDIATE")
    let statement = try raw.prepare("INSERT INTO rows VALUES (?,?,?,?,?,?,?,?,?,?,?)")
    defer { sqlite3_finalize(statement) }
    for row in rows {
        let values = [row.id, row.f0, row.f1, row.f2, row.f3, row.f4, row.f5, row.f6, row.f7, row.f8, row.f9]
        for (index, value) in values.enumerated() { sqlite3_bind_int64(statement, Int32(index + 1), value) }
        guard sqlite3_step(statement) == SQLITE_DONE else { throw BenchError("step") }
        sqlite3_reset(statement)
    }
    try raw.exec("COMMIT")
}

// MARK: Workloads

let insertCount = 50_000, fetchCount = 200_000, docCount = 100_000, pointReads = 300_000, commits = 100
let rows50k = (1...Int64(insertCount)).map(Row.init)
let rows200k = (1...Int64(fetchCount)).map(Row.init)
var random = SystemRandomNumberGenerator()
let readIDs = (0..<pointReads).map { _ in Int64.random(in: 1...Int64(docCount), using: &random) }

func openStore(_ path: String) async throws -> Store {
    try await Store(driver: SQLiteDriver(path: path, durability: .full))
}

func grdbQueue(_ path: String) throws -> DatabaseQueue {
    var config = Configuration()
    config.prepareDatabase { db in try db.execute(sql: "PRAGMA page_size=8192; PRAGMA synchronous=FULL") }
    let queue = try DatabaseQueue(path: path, configuration: config)
    try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode=WAL") }
    return queue
}

func grdbCreateRows(_ queue: DatabaseQueue) throws {
    try queue.write { db in
        try db.execute(sql: "CREATE TABLE rows(id INTEGER PRIMARY KEY, f0 INTEGER, f1 INTEGER, f2 INTEGER, f3 INTEGER, f4 INTEGER, f5 INTEGER, f6 INTEGER, f7 INTEGER, f8 INTEGER, f9 INTEGER)")
    }
}

// DEPOT_BENCH_PROFILE=1: only Depot's insert and fetch of models through the Store, for a
// profiler (DEPOT_BENCH_PROFILE=driver: the same at the driver level, with records).
if let mode = ProcessInfo.processInfo.environment["DEPOT_BENCH_PROFILE"] {
    let rowsName = try CollectionName("rows")
    let clock = ContinuousClock()
    if mode == "reads" {
        let store = try await openStore(freshPath())
        try await store.repository(Doc.self).save((1...Int64(docCount)).map(Doc.init))
        let t0 = clock.now
        let total = try await store.read { tx in
            let repository = try tx.repository(Doc.self)
            var total = 0
            for _ in 0..<3 { for id in readIDs { total &+= try repository.find(id: id)?.body.utf8.count ?? 0 } }
            return total
        }
        print("profile (reads): 3x300k point reads \(clock.now - t0), \(total) bytes")
        try await store.close()
    } else if mode == "driver" {
        let records = rows200k.map { row in
            Record(id: .int(row.id), fields: ["f0": .int(row.f0), "f1": .int(row.f1), "f2": .int(row.f2), "f3": .int(row.f3), "f4": .int(row.f4),
                                              "f5": .int(row.f5), "f6": .int(row.f6), "f7": .int(row.f7), "f8": .int(row.f8), "f9": .int(row.f9)])
        }
        let driver = try await SQLiteDriver(path: freshPath())
        let t0 = clock.now
        try await driver.write { tx in for record in records { try tx.insert(record, into: rowsName) } }
        let t1 = clock.now
        for _ in 0..<3 { _ = try await driver.read { tx in try tx.query(Query(), in: rowsName).count } }
        print("profile (driver): insert 200k \(t1 - t0), fetch 3x200k \(clock.now - t1)")
        try await driver.close()
    } else {
        let store = try await openStore(freshPath())
        let t0 = clock.now
        try await store.write { tx in
            let repository = try tx.repository(Row.self)
            for row in rows200k { _ = try repository.insert(row) }
        }
        let t1 = clock.now
        let repository = try await store.repository(Row.self)
        for _ in 0..<3 { _ = try await repository.all().count }
        print("profile (store): insert 200k \(t1 - t0), fetch 3x200k \(clock.now - t1)")
        try await store.close()
    }
    exit(0)
}

/// Ratios against the raw C API of the same workload.
@MainActor func printRatios() {
    print("\nratios (time / raw C API time of the same workload):")
    for workload in Set(lines.map(\.workload)).sorted() {
        let group = lines.filter { $0.workload == workload }
        guard let raw = group.first(where: { $0.side.hasPrefix("raw") }) else { continue }
        for line in group where !line.side.hasPrefix("raw") {
            print(String(format: "%-36@ %-34@ %6.2fx", workload as NSString, line.side as NSString, line.perOp / raw.perOp))
        }
    }
}

// `SQLiteBenchmarks typed`: only the typed-model workloads (TypedModels.swift).
if CommandLine.arguments.dropFirst().contains("typed") {
    try await runTypedModelBenchmarks()
    printRatios()
    exit(0)
}

print("SQLite \(String(cString: sqlite3_libversion())), WAL, synchronous=FULL on every side; best of \(runs) runs")

// 1. Insert 50,000 records of 10 integer fields in one transaction.
do {
    let w = "insert 50k (1 transaction)"
    report(w, "raw C API", try await measure({ () -> Raw in let r = try Raw(freshPath()); try rawCreateRows(r); return r }) { raw in try rawInsertRows(raw, rows50k) }, ops: insertCount)
    report(w, "Depot Store, models", try await measure({ try await openStore(freshPath()) }, { store in
        try await store.write { tx in
            let repository = try tx.repository(Row.self)
            for row in rows50k { _ = try repository.insert(row) }
        }
    }, teardown: { try await $0.close() }), ops: insertCount)
    let records = rows50k.map { row in
        Record(id: .int(row.id), fields: ["f0": .int(row.f0), "f1": .int(row.f1), "f2": .int(row.f2), "f3": .int(row.f3), "f4": .int(row.f4),
                                          "f5": .int(row.f5), "f6": .int(row.f6), "f7": .int(row.f7), "f8": .int(row.f8), "f9": .int(row.f9)])
    }
    let rowsName = try CollectionName("rows")
    report(w, "Depot driver, records", try await measure({ try await SQLiteDriver(path: freshPath()) }, { driver in
        try await driver.write { tx in for record in records { try tx.insert(record, into: rowsName) } }
    }, teardown: { try await $0.close() }), ops: insertCount)
    report(w, "GRDB Codable records", try await measure({ () -> DatabaseQueue in let q = try grdbQueue(freshPath()); try grdbCreateRows(q); return q }) { queue in
        try await queue.write { db in for row in rows50k { try row.insert(db) } }
    }, ops: insertCount)
}

// 2. Fetch 200,000 such records into an array of models.
do {
    let w = "fetch 200k into models"
    let rawPath = freshPath(), depotPath = freshPath(), grdbPath = freshPath()
    do { let raw = try Raw(rawPath); try rawCreateRows(raw); try rawInsertRows(raw, rows200k) }
    do { let store = try await openStore(depotPath); try await store.repository(Row.self).save(rows200k); try await store.close() }
    do { let q = try grdbQueue(grdbPath); try grdbCreateRows(q); try await q.write { db in for row in rows200k { try row.insert(db) } } }
    report(w, "raw C API", try await measure({ try Raw(rawPath) }) { raw in
        let statement = try raw.prepare("SELECT id, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9 FROM rows ORDER BY id")
        defer { sqlite3_finalize(statement) }
        var out: [Row] = []
        out.reserveCapacity(fetchCount)
        while sqlite3_step(statement) == SQLITE_ROW {
            var row = Row(0)
            row.id = sqlite3_column_int64(statement, 0)
            row.f0 = sqlite3_column_int64(statement, 1); row.f1 = sqlite3_column_int64(statement, 2)
            row.f2 = sqlite3_column_int64(statement, 3); row.f3 = sqlite3_column_int64(statement, 4)
            row.f4 = sqlite3_column_int64(statement, 5); row.f5 = sqlite3_column_int64(statement, 6)
            row.f6 = sqlite3_column_int64(statement, 7); row.f7 = sqlite3_column_int64(statement, 8)
            row.f8 = sqlite3_column_int64(statement, 9); row.f9 = sqlite3_column_int64(statement, 10)
            out.append(row)
        }
        guard out.count == fetchCount else { throw BenchError("raw fetched \(out.count)") }
    }, ops: fetchCount)
    let store = try await openStore(depotPath)
    let repository = try await store.repository(Row.self)
    report(w, "Depot Store, models", try await measure({ repository }) { repository in
        let all = try await repository.all()
        guard all.count == fetchCount else { throw BenchError("depot fetched \(all.count)") }
    }, ops: fetchCount)
    let rowsName = try CollectionName("rows")
    report(w, "Depot driver, records", try await measure({ () }) { _ in
        let all = try await store.driver.read { tx in try tx.query(Query(), in: rowsName) }
        guard all.count == fetchCount else { throw BenchError("depot fetched \(all.count)") }
    }, ops: fetchCount)
    try await store.close()
    let queue = try grdbQueue(grdbPath)
    report(w, "GRDB Codable records", try await measure({ queue }) { queue in
        let all = try await queue.read { db in try Row.fetchAll(db, sql: "SELECT * FROM rows ORDER BY id") }
        guard all.count == fetchCount else { throw BenchError("grdb fetched \(all.count)") }
    }, ops: fetchCount)
}

// 3. 300,000 random point reads by id from 100,000 records of about 1 KB.
do {
    let w = "300k point reads of 1 KB"
    let docs = (1...Int64(docCount)).map(Doc.init)
    let someIDs = Array(readIDs.prefix(30_000))
    let rawPath = freshPath(), depotPath = freshPath(), grdbPath = freshPath()
    do {
        let raw = try Raw(rawPath)
        try raw.exec("CREATE TABLE docs(id INTEGER PRIMARY KEY, title TEXT, body TEXT, views INTEGER, score REAL)")
        try raw.exec("BEGIN")
        let statement = try raw.prepare("INSERT INTO docs VALUES (?,?,?,?,?)")
        for doc in docs {
            sqlite3_bind_int64(statement, 1, doc.id)
            sqlite3_bind_text(statement, 2, doc.title, -1, transient)
            sqlite3_bind_text(statement, 3, doc.body, -1, transient)
            sqlite3_bind_int64(statement, 4, doc.views)
            sqlite3_bind_double(statement, 5, doc.score)
            _ = sqlite3_step(statement)
            sqlite3_reset(statement)
        }
        sqlite3_finalize(statement)
        try raw.exec("COMMIT")
    }
    do { let store = try await openStore(depotPath); try await store.repository(Doc.self).save(docs); try await store.close() }
    do {
        let q = try grdbQueue(grdbPath)
        try await q.write { db in
            try db.execute(sql: "CREATE TABLE docs(id INTEGER PRIMARY KEY, title TEXT, body TEXT, views INTEGER, score REAL)")
            for doc in docs { try doc.insert(db) }
        }
    }
    report(w, "raw C API (1 read tx)", try await measure({ try Raw(rawPath) }) { raw in
        try raw.exec("BEGIN")
        let statement = try raw.prepare("SELECT id, title, body, views, score FROM docs WHERE id = ?")
        var total = 0
        for id in readIDs {
            sqlite3_bind_int64(statement, 1, id)
            guard sqlite3_step(statement) == SQLITE_ROW else { throw BenchError("raw miss") }
            let doc = (sqlite3_column_int64(statement, 0), String(cString: sqlite3_column_text(statement, 1)),
                       String(cString: sqlite3_column_text(statement, 2)), sqlite3_column_int64(statement, 3), sqlite3_column_double(statement, 4))
            total &+= doc.1.utf8.count &+ doc.2.utf8.count
            sqlite3_reset(statement)
        }
        sqlite3_finalize(statement)
        try raw.exec("COMMIT")
        if total == 0 { throw BenchError("nothing read") }
    }, ops: pointReads)
    let store = try await openStore(depotPath)
    report(w, "Depot Store, models (1 read tx)", try await measure({ () }) { _ in
        let total = try await store.read { tx in
            let repository = try tx.repository(Doc.self)
            var total = 0
            for id in readIDs {
                guard let doc = try repository.find(id: id) else { throw BenchError("depot miss") }
                total &+= doc.body.utf8.count
            }
            return total
        }
        if total == 0 { throw BenchError("nothing read") }
    }, ops: pointReads)
    let repository = try await store.repository(Doc.self)
    report(w, "Depot Store, find(id:) each", try await measure({ () }) { _ in
        for id in someIDs { guard try await repository.find(id: id) != nil else { throw BenchError("depot miss") } }
    }, ops: someIDs.count)
    try await store.close()
    let queue = try grdbQueue(grdbPath)
    // GRDB's key lookups are slow here (hundreds of µs each), so GRDB runs the first 30,000
    // of the same ids, through a cached statement as its docs advise for hot paths.
    report(w, "GRDB Codable records (1 read tx)", try await measure({ queue }) { queue in
        let total = try await queue.read { db in
            var total = 0
            let statement = try db.cachedStatement(sql: "SELECT * FROM docs WHERE id = ?")
            for id in someIDs {
                guard let doc = try Doc.fetchOne(statement, arguments: [id]) else { throw BenchError("grdb miss") }
                total &+= doc.body.utf8.count
            }
            return total
        }
        if total == 0 { throw BenchError("nothing read") }
    }, ops: someIDs.count)
    report(w, "GRDB, read { fetchOne } each", try await measure({ queue }) { queue in
        for id in someIDs.prefix(3_000) { guard try await queue.read({ db in try Doc.fetchOne(db, key: id) }) != nil else { throw BenchError("grdb miss") } }
    }, ops: 3_000)
}

// 4. One durable single-record commit (synchronous=FULL), averaged over `commits`.
do {
    let w = "durable 1-record commit"
    report(w, "raw C API", try await measure({ () -> Raw in let r = try Raw(freshPath()); try rawCreateRows(r); return r }) { raw in
        let statement = try raw.prepare("INSERT INTO rows VALUES (?,?,?,?,?,?,?,?,?,?,?)")
        defer { sqlite3_finalize(statement) }
        for row in rows50k.prefix(commits) {
            try raw.exec("BEGIN IMMEDIATE")
            let values = [row.id, row.f0, row.f1, row.f2, row.f3, row.f4, row.f5, row.f6, row.f7, row.f8, row.f9]
            for (index, value) in values.enumerated() { sqlite3_bind_int64(statement, Int32(index + 1), value) }
            guard sqlite3_step(statement) == SQLITE_DONE else { throw BenchError("step") }
            sqlite3_reset(statement)
            try raw.exec("COMMIT")
        }
    }, ops: commits)
    report(w, "Depot Store, models", try await measure({ () -> Store in
        let store = try await openStore(freshPath())
        try await store.write { tx in try tx.driverWriteTransaction.prepare(Row.schema()) }
        return store
    }, { store in
        let repository = try await store.repository(Row.self)
        for row in rows50k.prefix(commits) { _ = try await repository.insert(row) }
    }, teardown: { try await $0.close() }), ops: commits)
    report(w, "GRDB Codable records", try await measure({ () -> DatabaseQueue in let q = try grdbQueue(freshPath()); try grdbCreateRows(q); return q }) { queue in
        for row in rows50k.prefix(commits) { try await queue.write { db in try row.insert(db) } }
    }, ops: commits)
}

// The typed-model workloads (their own pragmas: synchronous=NORMAL on every side), then
// the ratios of everything.
try await runTypedModelBenchmarks()
printRatios()
