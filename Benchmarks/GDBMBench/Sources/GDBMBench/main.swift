// gdbm-bench [RECORDS]: the GDBM driver against raw libgdbm on the same bytes, same run.
//
// - point reads: `driver.read { get }` (one transaction per read) vs `gdbm_fetch` + decoding
//   the same bytes with the driver's decoder;
// - bulk insert: one write transaction of RECORDS inserts (durability normal; the journal is
//   written, the files synced at close) vs `gdbm_store` of the same encoded bytes + gdbm_sync;
//   wall clock and CPU time of the process (`gdbm-bench RECORDS insert` runs only this);
// - point reads through the repository API (issue 4's target): records of 10 × 100-byte
//   strings under string ids, `Collection.get` and `Repository.find(id:)` (one transaction
//   each) vs `gdbm_fetch` + decoding the same bytes as the driver does (into a `Record`, then
//   for the repository row into the same model), in alternating rounds
//   (`gdbm-bench RECORDS repository` runs only this).
import CGDBMBench
import Depot
import Foundation

func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
/// CPU seconds of the whole process (every thread): on a shared machine the wall clock
/// includes time other processes took, CPU time does not (it leaves out fsync waits).
func cpuNow() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
}

func record(_ i: Int) -> Record {
    Record(id: .int(Int64(i)), fields: [
        "name": .string("user \(i)"), "email": .string("user\(i)@example.com"), "age": .int(Int64(i % 90)),
        "score": .double(Double(i) * 0.37), "active": .bool(i % 2 == 0), "tags": ["a", "b", .int(Int64(i % 7))],
    ])
}

func rawOpen(_ path: String, _ flags: Int32) -> OpaquePointer {
    guard let dbf = gdbm_open(path, 0, flags, 0o644, nil) else {
        print("cannot open \(path): \(String(cString: gdbm_strerror(gdbm_errno_location().pointee)))")
        exit(1)
    }
    return dbf
}

func withDatum<T>(_ bytes: [UInt8], _ body: (datum) -> T) -> T {
    bytes.withUnsafeBytes { raw in
        body(datum(dptr: UnsafeMutablePointer(mutating: raw.baseAddress?.assumingMemoryBound(to: CChar.self)), dsize: Int32(raw.count)))
    }
}

let count = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 100_000 : 100_000
let reads = 200_000
let base = FileManager.default.temporaryDirectory.appendingPathComponent("gdbm-bench-\(UUID().uuidString)").path
try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: base) }
let records = (1...count).map(record)
let users = try CollectionName("users")
print("gdbm-bench: \(count) records of ~\(_GDBMRecordFormat.encode(records[0]).count) bytes, \(reads) point reads")

// Bulk insert through the driver.
var t0 = now()
var c0 = cpuNow()
let driver = try await GDBMDriver(location: StoreLocation("gdbm:\(base)/store?durability=normal"))
try await driver.write { tx in for r in records { try tx.insert(r, into: users) } }
try await driver.close()
let driverInsert = now() - t0
let driverInsertCPU = cpuNow() - c0

// Bulk insert raw: the same encoded bytes, gdbm_store, gdbm_sync, close.
let encoded = records.map { (_GDBMRecordFormat.key(for: $0.id), _GDBMRecordFormat.encode($0)) }
t0 = now()
c0 = cpuNow()
let rawWriter = rawOpen(base + "/raw.gdbm", GDBM_NEWDB)
for (k, v) in encoded {
    let rc = withDatum(k) { kd in withDatum(v) { vd in gdbm_store(rawWriter, kd, vd, GDBM_REPLACE) } }
    if rc != 0 { print("store failed"); exit(1) }
}
gdbm_sync(rawWriter)
gdbm_close(rawWriter)
let rawInsert = now() - t0
let rawInsertCPU = cpuNow() - c0
let insertCPULine = String(
    format: "  same, CPU time (all threads)               driver %8.2f µs/op   raw %8.2f µs/op   ratio %5.2f×",
    driverInsertCPU / Double(count) * 1e6, rawInsertCPU / Double(count) * 1e6, driverInsertCPU / rawInsertCPU)

// MARK: Point reads through the repository API

/// The rows of the repository point-read benchmark: YCSB's shape, 10 fields of 100 bytes.
struct UserRow: Model {
    var id: String
    var field0, field1, field2, field3, field4, field5, field6, field7, field8, field9: String
    static let collectionName = "usertable"

    init(_ i: Int) {
        id = UserRow.key(i)
        func value(_ f: Int) -> String { String(repeating: String(UnicodeScalar(UInt8(97 + (i + f) % 26))), count: 100) }
        (field0, field1, field2, field3, field4) = (value(0), value(1), value(2), value(3), value(4))
        (field5, field6, field7, field8, field9) = (value(5), value(6), value(7), value(8), value(9))
    }

    static func key(_ i: Int) -> String { "user" + String(UInt64(truncatingIfNeeded: i) &* 0x9E37_79B9_7F4A_7C15, radix: 16) }
}

/// Median of `values`.
func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted[sorted.count / 2]
}

/// Raw: `gdbm_fetch` of each key, then the driver's decoding of the same bytes (field layouts
/// included) into a `Record`, and with `model` on into a `UserRow` by `RecordDecoder`.
func rawRepositoryReads(_ dbf: OpaquePointer, _ keys: [[UInt8]], model: Bool) throws -> Int {
    let reader = _GDBMRecordFormat.Reader()
    var n = 0
    for key in keys {
        let found = withDatum(key) { gdbm_fetch(dbf, $0) }
        guard let ptr = found.dptr else { print("missing record"); exit(1) }
        defer { free(ptr) }
        let record = try key.withUnsafeBytes { k in
            try reader.decode(key: k, value: UnsafeRawBufferPointer(start: ptr, count: Int(found.dsize)), collection: "usertable")
        }
        if model {
            n &+= try RecordDecoder().decode(UserRow.self, from: record).field0.utf8.count
        } else {
            n &+= record.fields.count
        }
    }
    return n
}

/// `Collection.get` of each id, one read transaction each, from an ordinary task.
func collectionReads(_ collection: Depot.Collection, _ ids: [String]) async throws -> Int {
    var n = 0
    for id in ids { n &+= try await collection.get(.string(id))?.fields.count ?? 0 }
    return n
}

/// `Repository.find(id:)` of each id (no read cache), one read transaction each.
func repositoryReads(_ repository: Repository<UserRow>, _ ids: [String]) async throws -> Int {
    var n = 0
    for id in ids { n &+= try await repository.find(id: id)?.field0.utf8.count ?? 0 }
    return n
}

/// Loads `count` rows into a new store in `directory`, then runs `rounds` rounds of raw, `Collection.get` and
/// `Repository.find(id:)` over the same random ids; prints the medians and their ratios.
func repositoryPointReads(in directory: String, count: Int, reads: Int, rounds: Int) async throws {
    let store = try await Store.open("gdbm:\(directory)?durability=normal", registry: .standard)
    let rows = try await store.repository(UserRow.self)
    var start = 0
    while start < count {
        let end = min(start + 10_000, count)
        try await rows.save((start..<end).map(UserRow.init))
        start = end
    }
    // Raw opens the driver's own file read-only without gdbm's lock: the store has it open too.
    let dbf = rawOpen(directory + "/data/usertable.records.gdbm", GDBM_READER | GDBM_NOLOCK)
    defer { gdbm_close(dbf) }
    let collection = store.collection(try UserRow.collection())
    var rng = SystemRandomNumberGenerator()
    var times: [String: [Double]] = [:]
    var check = 0
    for round in 0...rounds {
        let ids = (0..<reads).map { _ in UserRow.key(Int.random(in: 0..<count, using: &rng)) }
        let keys = ids.map { _GDBMRecordFormat.key(for: .string($0)) }
        var t = now()
        check &+= try rawRepositoryReads(dbf, keys, model: false)
        let raw = now() - t
        t = now()
        check &+= try rawRepositoryReads(dbf, keys, model: true)
        let rawModel = now() - t
        t = now()
        check &+= try await collectionReads(collection, ids)
        let depot = now() - t
        t = now()
        check &+= try await repositoryReads(rows, ids)
        let depotModel = now() - t
        guard round > 0 else { continue }  // round 0 warms both sides up
        times["raw", default: []].append(raw)
        times["rawModel", default: []].append(rawModel)
        times["collection", default: []].append(depot)
        times["repository", default: []].append(depotModel)
        print(String(format: "  round %d: Collection.get %.2f×, Repository.find %.2f×", round, depot / raw, depotModel / rawModel))
    }
    try await store.close()
    func m(_ name: String) -> Double { median(times[name] ?? [0]) }
    print("point reads through the repository API, \(count) records of 10 × 100 B, string ids, \(reads) reads per round, median of \(rounds) rounds (checksum \(check)):")
    line("  Collection.get vs fetch + decode to Record", m("collection"), m("raw"), ops: reads)
    line("  Repository.find vs fetch + decode to model", m("repository"), m("rawModel"), ops: reads)
}

if CommandLine.arguments.count > 2 && CommandLine.arguments[2] == "repository" {
    try await repositoryPointReads(in: base + "/repository", count: count, reads: reads, rounds: 5)
    try? FileManager.default.removeItem(atPath: base)  // exit(0) skips the defer
    exit(0)
}

if CommandLine.arguments.count > 2 && CommandLine.arguments[2] == "insert" {
    print(String(format: "bulk insert: driver %.2f µs/op, raw %.2f µs/op, ratio %.2f×", driverInsert / Double(count) * 1e6, rawInsert / Double(count) * 1e6, driverInsert / rawInsert))
    print(String(format: "bulk insert, CPU time: driver %.2f µs/op, raw %.2f µs/op, ratio %.2f×", driverInsertCPU / Double(count) * 1e6, rawInsertCPU / Double(count) * 1e6, driverInsertCPU / rawInsertCPU))
    try? FileManager.default.removeItem(atPath: base)  // exit(0) skips the defer
    exit(0)
}

// Point reads: the same random ids on both sides.
var rng = SystemRandomNumberGenerator()
let ids = (0..<reads).map { _ in Int.random(in: 1...count, using: &rng) }

let reader = rawOpen(base + "/store/data/users.records.gdbm", GDBM_READER)
t0 = now()
var checksum = 0
for i in ids {
    let key = _GDBMRecordFormat.key(for: .int(Int64(i)))
    let found = withDatum(key) { gdbm_fetch(reader, $0) }
    guard let ptr = found.dptr else { print("missing \(i)"); exit(1) }
    let r = try key.withUnsafeBytes { k in
        try _GDBMRecordFormat.decode(key: k, value: UnsafeRawBufferPointer(start: ptr, count: Int(found.dsize)), collection: "users")
    }
    free(ptr)
    checksum &+= r.fields.count
}
let rawRead = now() - t0
gdbm_close(reader)

let store = try await GDBMDriver(location: StoreLocation("gdbm:\(base)/store?durability=normal"))
// Warm up the same way as raw (one pass over a few reads), then measure.
for i in ids.prefix(1000) { _ = try await store.read { tx in try tx.get(.int(Int64(i)), from: users) } }

// One read transaction per read from an ordinary task: a nonisolated async function runs
// on the default (cooperative) executor, not on the main actor of top-level code.
func poolReads(_ store: GDBMDriver, _ ids: [Int], _ users: CollectionName) async throws -> Int {
    var n = 0
    for i in ids { n &+= try await store.read { tx in try tx.get(.int(Int64(i)), from: users) }?.fields.count ?? 0 }
    return n
}
t0 = now()
checksum &+= try await poolReads(store, ids, users)
let driverRead = now() - t0

// The same, from a task that prefers the store's thread (no thread switch per transaction).
// A nonisolated function: top-level code runs on the main actor, which would override the preference.
func pinnedReads(_ store: GDBMDriver, _ ids: [Int], _ users: CollectionName) async throws -> Int {
    try await withTaskExecutorPreference(store.taskExecutor) {
        var n = 0
        for i in ids { n &+= try await store.read { tx in try tx.get(.int(Int64(i)), from: users) }?.fields.count ?? 0 }
        return n
    }
}
t0 = now()
checksum &+= try await pinnedReads(store, ids, users)
let driverPinned = now() - t0

// Many point reads in one read transaction (the per-transaction hop paid once).
t0 = now()
let batched = try await store.read { tx in
    var n = 0
    for i in ids { n &+= try tx.get(.int(Int64(i)), from: users)?.fields.count ?? 0 }
    return n
}
let driverBatched = now() - t0
checksum &+= batched
try await store.close()

// YCSB core workloads A-D and F (uniform keys), one operation per transaction, the task on
// the store's writer thread; raw: the same operations as gdbm_fetch/gdbm_store + encode/decode.
enum Op { case read(Int), update(Int), insert(Int), rmw(Int) }

func workload(_ name: String, ops count: Int, existing: Int, _ pick: (inout SystemRandomNumberGenerator, inout Int) -> Op) -> [Op] {
    var rng = SystemRandomNumberGenerator()
    var next = existing
    return (0..<count).map { _ in pick(&rng, &next) }
}

/// Runs `ops` from an ordinary task (the default executor), or with `pinned` from a task on
/// the store's writer thread (``GDBMDriver/taskExecutor``).
func runDriver(_ store: GDBMDriver, _ ops: [Op], _ users: CollectionName, pinned: Bool) async throws -> Double {
    let t0 = now()
    if pinned {
        try await withTaskExecutorPreference(store.taskExecutor) { try await runOps(store, ops, users) }
    } else {
        try await runOps(store, ops, users)
    }
    return now() - t0
}

func runOps(_ store: GDBMDriver, _ ops: [Op], _ users: CollectionName) async throws {
        for op in ops {
            switch op {
            case .read(let i): _ = try await store.read { tx in try tx.get(.int(Int64(i)), from: users) }
            case .update(let i), .insert(let i): _ = try await store.write { tx in try tx.save(record(i), into: users) }
            case .rmw(let i):
                try await store.write { tx in
                    var r = try tx.get(.int(Int64(i)), from: users) ?? record(i)
                    r.fields["age"] = .int((r.fields["age"]?.intValue ?? 0) + 1)
                    _ = try tx.save(r, into: users)
                }
            }
        }
}

func runRaw(_ path: String, _ ops: [Op]) throws -> Double {
    let dbf = rawOpen(path, GDBM_WRITER)
    defer { gdbm_close(dbf) }
    func fetch(_ i: Int) throws -> Record? {
        let key = _GDBMRecordFormat.key(for: .int(Int64(i)))
        let found = withDatum(key) { gdbm_fetch(dbf, $0) }
        guard let ptr = found.dptr else { return nil }
        defer { free(ptr) }
        return try key.withUnsafeBytes { k in try _GDBMRecordFormat.decode(key: k, value: UnsafeRawBufferPointer(start: ptr, count: Int(found.dsize)), collection: "users") }
    }
    func store(_ r: Record) {
        let k = _GDBMRecordFormat.key(for: r.id), v = _GDBMRecordFormat.encode(r)
        _ = withDatum(k) { kd in withDatum(v) { vd in gdbm_store(dbf, kd, vd, GDBM_REPLACE) } }
    }
    let t0 = now()
    for op in ops {
        switch op {
        case .read(let i): _ = try fetch(i)
        case .update(let i), .insert(let i): store(record(i))
        case .rmw(let i):
            var r = try fetch(i) ?? record(i)
            r.fields["age"] = .int((r.fields["age"]?.intValue ?? 0) + 1)
            store(r)
        }
    }
    gdbm_sync(dbf)
    return now() - t0
}

func line(_ name: String, _ driver: Double, _ raw: Double, ops: Int) {
    let d = driver / Double(ops) * 1e6, r = raw / Double(ops) * 1e6
    print(String(format: "%-44@ driver %8.2f µs/op   raw %8.2f µs/op   ratio %5.2f×", name as NSString, d, r, driver / raw))
}
line("bulk insert (one transaction, normal)", driverInsert, rawInsert, ops: count)
print(insertCPULine)
line("point read (one each, default executor)", driverRead, rawRead, ops: reads)
line("point read (one each, task on store thread)", driverPinned, rawRead, ops: reads)
line("point read (all in one read transaction)", driverBatched, rawRead, ops: reads)
print("(checksum \(checksum))")

let ycsbOps = 20_000
let workloads: [(String, [Op])] = [
    ("YCSB A (50% read, 50% update)", workload("A", ops: ycsbOps, existing: count) { rng, _ in
        let i = Int.random(in: 1...count, using: &rng); return Bool.random(using: &rng) ? .read(i) : .update(i) }),
    ("YCSB B (95% read, 5% update)", workload("B", ops: ycsbOps, existing: count) { rng, _ in
        let i = Int.random(in: 1...count, using: &rng); return Int.random(in: 0..<100, using: &rng) < 95 ? .read(i) : .update(i) }),
    ("YCSB C (100% read)", workload("C", ops: ycsbOps, existing: count) { rng, _ in .read(Int.random(in: 1...count, using: &rng)) }),
    ("YCSB D (95% read latest, 5% insert)", workload("D", ops: ycsbOps, existing: count) { rng, next in
        if Int.random(in: 0..<100, using: &rng) < 5 { next += 1; return .insert(next) }
        return .read(max(1, next - Int.random(in: 0..<1000, using: &rng))) }),
    ("YCSB F (50% read, 50% read-modify-write)", workload("F", ops: ycsbOps, existing: count) { rng, _ in
        let i = Int.random(in: 1...count, using: &rng); return Bool.random(using: &rng) ? .read(i) : .rmw(i) }),
]
// Raw runs on a copy of the driver's records file (same bytes, same size).
let rawCopy = base + "/ycsb-raw.gdbm"
try FileManager.default.copyItem(atPath: base + "/store/data/users.records.gdbm", toPath: rawCopy)
let ycsbStore = try await GDBMDriver(location: StoreLocation("gdbm:\(base)/store?durability=normal" + (ProcessInfo.processInfo.environment["GDBM_BENCH_OPTIONS"] ?? "")))
print("YCSB, \(ycsbOps) operations each, uniform keys, one transaction per operation, durability normal; driver from an ordinary task / from a task on the store's thread:")
for (name, ops) in workloads {
    let d = try await runDriver(ycsbStore, ops, users, pinned: false)
    let r = try runRaw(rawCopy, ops)
    let p = try await runDriver(ycsbStore, ops, users, pinned: true)
    line(name, d, r, ops: ops.count)
    line("  same, task on the store's thread", p, r, ops: ops.count)
}
try await ycsbStore.close()

// The journal at durability full: every commit fsyncs it (raw gdbm_store does not sync).
let fullOps = Array(workloads[0].1.prefix(1000))
let fullStore = try await GDBMDriver(location: StoreLocation("gdbm:\(base)/store?durability=full"))
let fullDriver = try await runDriver(fullStore, fullOps, users, pinned: false)
try await fullStore.close()
line("YCSB A, durability full (\(fullOps.count) ops)", fullDriver, try runRaw(rawCopy, fullOps), ops: fullOps.count)
print("YCSB E (short range scans) is not run: GDBM has no key order, so a range scan is a full scan of the collection file plus the shared evaluator.")

try await repositoryPointReads(in: base + "/repository", count: count, reads: reads, rounds: 5)
