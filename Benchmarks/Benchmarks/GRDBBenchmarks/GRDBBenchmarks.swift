import Benchmark
import DepotBench
import struct DepotCore.SplitMix64
import Foundation
import GRDB

// GRDB's Codable records on the same SQLite workloads as DepotBenchmarks, same pragmas
// (WAL; synchronous NORMAL, FULL for the durable commit): the peer Depot's SQLite driver
// is measured against. Names match DepotBenchmarks with "GRDB" for the side.
// Page size: every side creates its file with 8 KiB pages (Depot's default for new files;
// set here before the first table, and on the raw side), so the YCSB tables' 1 KB rows stay
// in their B-tree pages on all three sides: same pragmas, same layout.

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.throughput, .wallClock, .mallocCountTotal, .instructions, .peakMemoryResident],
        warmupIterations: 3,
        maxDuration: .seconds(2),
        maxIterations: 100_000
    )
    grdbTargetBenchmarks()
    grdbYCSBBenchmarks()
}

/// Holds a benchmark's database from setup to teardown.
/// @unchecked Sendable: setup, the closure and teardown run one after another, never together.
final class Fixture<T>: @unchecked Sendable {
    var value: T?
    var directory: String?
    var cursor = 0
    var next = 1_000_000

    func make(_ body: (String) throws -> T) throws {
        let dir = NSTemporaryDirectory() + "grdb-benchmarks-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        directory = dir
        value = try body(dir)
    }

    func tearDown() {
        value = nil
        if let directory { try? FileManager.default.removeItem(atPath: directory) }
        directory = nil
    }
}

func openQueue(_ path: String, synchronous: String) throws -> DatabaseQueue {
    var config = Configuration()
    config.prepareDatabase { db in try db.execute(sql: "PRAGMA page_size = 8192; PRAGMA synchronous = \(synchronous)") }
    let queue = try DatabaseQueue(path: path, configuration: config)
    _ = try queue.writeWithoutTransaction { db in try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL") }
    return queue
}

struct GRDBInteger: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "integers"
    var id: Int64
    var a, b, c, d, e, f, g, h, i, j: Int64
    init(_ r: IntegerRecord) {
        id = r.id; a = r.a; b = r.b; c = r.c; d = r.d; e = r.e; f = r.f; g = r.g; h = r.h; i = r.i; j = r.j
    }
}

struct GRDBKilobyte: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "kilobytes"
    var id: Int64
    var field0, field1, field2, field3, field4, field5, field6, field7, field8, field9: String
    init(_ r: KilobyteRecord) {
        id = r.id
        field0 = r.field0; field1 = r.field1; field2 = r.field2; field3 = r.field3; field4 = r.field4
        field5 = r.field5; field6 = r.field6; field7 = r.field7; field8 = r.field8; field9 = r.field9
    }
}

func createTables(_ queue: DatabaseQueue) throws {
    try queue.write { db in
        try db.execute(sql: "CREATE TABLE integers(id INTEGER PRIMARY KEY, a INTEGER, b INTEGER, c INTEGER, d INTEGER, e INTEGER, f INTEGER, g INTEGER, h INTEGER, i INTEGER, j INTEGER)")
        try db.execute(sql: "CREATE TABLE kilobytes(id INTEGER PRIMARY KEY, \(YCSB.fieldNames.map { "\($0) TEXT" }.joined(separator: ", ")))")
    }
}

func grdbTargetBenchmarks() {
    let batch = Benchmark.Configuration(warmupIterations: 1, maxDuration: .seconds(20), maxIterations: 5)
    let integers = (0..<50_000).map { GRDBInteger(IntegerRecord($0)) }
    let insert = Fixture<DatabaseQueue>()
    Benchmark("sqlite GRDB insert 50,000 × 10 ints, one transaction", configuration: batch) { benchmark in
        guard let queue = insert.value else { return }
        do {
            try queue.write { db in try db.execute(sql: "DELETE FROM integers") }
            benchmark.startMeasurement()
            try queue.write { db in for record in integers { try record.insert(db) } }
            benchmark.stopMeasurement()
        } catch { benchmark.error("\(error)") }
    } setup: {
        try insert.make { dir in
            let queue = try openQueue(dir + "/grdb.sqlite", synchronous: "NORMAL")
            try createTables(queue)
            return queue
        }
    } teardown: { insert.tearDown() }

    let fetch = Fixture<DatabaseQueue>()
    Benchmark("sqlite GRDB fetch 200,000 × 10 ints into models", configuration: batch) { benchmark in
        guard let queue = fetch.value else { return }
        do {
            let all = try queue.read { db in try GRDBInteger.fetchAll(db) }
            guard all.count == 200_000 else { return benchmark.error("fetched \(all.count)") }
            blackHole(all)
        } catch { benchmark.error("\(error)") }
    } setup: {
        try fetch.make { dir in
            let queue = try openQueue(dir + "/grdb.sqlite", synchronous: "NORMAL")
            try createTables(queue)
            try queue.write { db in for n in 0..<200_000 { try GRDBInteger(IntegerRecord(n)).insert(db) } }
            return queue
        }
    } teardown: { fetch.tearDown() }

    var idRandom = SplitMix64(seed: 11)
    let ids = (0..<300_000).map { _ in Int64(idRandom.uniform(1...100_000)) }
    let reads = Fixture<DatabaseQueue>()
    Benchmark("sqlite GRDB 300,000 point reads by id of 100,000 × 1 KB models", configuration: .init(warmupIterations: 0, maxDuration: .seconds(20), maxIterations: 3)) { benchmark in
        guard let queue = reads.value else { return }
        do {
            for id in ids {
                guard let model = try queue.read({ db in try GRDBKilobyte.fetchOne(db, key: id) }) else { return benchmark.error("missing \(id)") }
                blackHole(model)
            }
        } catch { benchmark.error("\(error)") }
    } setup: {
        try reads.make { dir in
            let queue = try openQueue(dir + "/grdb.sqlite", synchronous: "NORMAL")
            try createTables(queue)
            try queue.write { db in for n in 0..<100_000 { try GRDBKilobyte(KilobyteRecord(n)).insert(db) } }
            return queue
        }
    } teardown: { reads.tearDown() }

    let durable = Fixture<DatabaseQueue>()
    Benchmark("sqlite GRDB durable single-record commit", configuration: .init(warmupIterations: 2, maxDuration: .seconds(5), maxIterations: 300)) { benchmark in
        guard let queue = durable.value else { return }
        do {
            for _ in benchmark.scaledIterations {
                let record = GRDBInteger(IntegerRecord(durable.next))
                try queue.write { db in try record.insert(db) }
                durable.next += 1
            }
        } catch { benchmark.error("\(error)") }
    } setup: {
        try durable.make { dir in
            let queue = try openQueue(dir + "/grdb.sqlite", synchronous: "FULL")
            try createTables(queue)
            return queue
        }
    } teardown: { durable.tearDown() }
}

/// A YCSB user record as a GRDB Codable record.
struct GRDBUser: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "usertable"
    var id: String
    var field0, field1, field2, field3, field4, field5, field6, field7, field8, field9: String

    init(_ n: Int) {
        let v = YCSB.fields(record: n)
        id = YCSB.key(n)
        field0 = v[0]; field1 = v[1]; field2 = v[2]; field3 = v[3]; field4 = v[4]
        field5 = v[5]; field6 = v[6]; field7 = v[7]; field8 = v[8]; field9 = v[9]
    }

    mutating func set(_ field: Int, _ value: String) {
        switch field {
        case 0: field0 = value
        case 1: field1 = value
        case 2: field2 = value
        case 3: field3 = value
        case 4: field4 = value
        case 5: field5 = value
        case 6: field6 = value
        case 7: field7 = value
        case 8: field8 = value
        default: field9 = value
        }
    }
}

/// Runs one YCSB operation the way a GRDB user writes it: each its own transaction, an
/// update as fetch + change + update in one write.
func run(_ op: BenchOperation, on queue: DatabaseQueue) throws {
    switch op {
    case .read(let n):
        guard try queue.read({ db in try GRDBUser.fetchOne(db, key: YCSB.key(n)) }) != nil else { throw BenchError("missing \(n)") }
    case .update(let n, let field, let value):
        try queue.write { db in
            guard var user = try GRDBUser.fetchOne(db, key: YCSB.key(n)) else { throw BenchError("missing \(n)") }
            user.set(field, value)
            try user.update(db)
        }
    case .insert(let n):
        let user = GRDBUser(n)
        try queue.write { db in try user.insert(db) }
    case .scan(let n, let count):
        let rows = try queue.read { db in try GRDBUser.filter(Column("id") >= YCSB.key(n)).order(Column("id")).limit(count).fetchAll(db) }
        blackHole(rows)
    case .readModifyWrite(let n, let field, let value):
        guard var user = try queue.read({ db in try GRDBUser.fetchOne(db, key: YCSB.key(n)) }) else { throw BenchError("missing \(n)") }
        user.set(field, value)
        try queue.write { db in try user.update(db) }
    }
}

func grdbYCSBBenchmarks() {
    let records = 10_000
    for workload in Workload.runOrder where workload.isYCSB {
        let ops = OperationPlan(records: records).operations(workload, count: 20_000, seed: 1).ops
        let fixture = Fixture<DatabaseQueue>()
        Benchmark("\(workload.label) sqlite GRDB (\(records) records)", configuration: .init(warmupIterations: 0, maxDuration: .seconds(3), maxIterations: ops.count)) { benchmark in
            guard let queue = fixture.value else { return }
            do {
                for _ in benchmark.scaledIterations {
                    try run(ops[fixture.cursor % ops.count], on: queue)
                    fixture.cursor += 1
                }
            } catch { benchmark.error("\(error)") }
        } setup: {
            try fixture.make { dir in
                let queue = try openQueue(dir + "/grdb.sqlite", synchronous: "NORMAL")
                try queue.write { db in
                    try db.execute(sql: "CREATE TABLE usertable(id TEXT PRIMARY KEY NOT NULL, \(YCSB.fieldNames.map { "\($0) TEXT" }.joined(separator: ", "))) WITHOUT ROWID")
                    for n in 0..<records { try GRDBUser(n).insert(db) }
                }
                return queue
            }
        } teardown: { fixture.tearDown() }
    }
}
