// gdbm-bench [RECORDS]: the GDBM driver against raw libgdbm on the same bytes, same run.
//
// - point reads: `driver.read { get }` (one transaction per read) vs `gdbm_fetch` + decoding
//   the same bytes with the driver's decoder;
// - bulk insert: one write transaction of RECORDS inserts (durability normal; the journal is
//   written, the files synced at close) vs `gdbm_store` of the same encoded bytes + gdbm_sync.
import CGDBMBench
import Depot
import Foundation

func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

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
let driver = try await GDBMDriver(location: StoreLocation("gdbm:\(base)/store?durability=normal"))
try await driver.write { tx in for r in records { try tx.insert(r, into: users) } }
try await driver.close()
let driverInsert = now() - t0

// Bulk insert raw: the same encoded bytes, gdbm_store, gdbm_sync, close.
let encoded = records.map { (_GDBMRecordFormat.key(for: $0.id), _GDBMRecordFormat.encode($0)) }
t0 = now()
let rawWriter = rawOpen(base + "/raw.gdbm", GDBM_NEWDB)
for (k, v) in encoded {
    let rc = withDatum(k) { kd in withDatum(v) { vd in gdbm_store(rawWriter, kd, vd, GDBM_REPLACE) } }
    if rc != 0 { print("store failed"); exit(1) }
}
gdbm_sync(rawWriter)
gdbm_close(rawWriter)
let rawInsert = now() - t0

if CommandLine.arguments.count > 2 && CommandLine.arguments[2] == "insert" {
    print(String(format: "bulk insert: driver %.2f µs/op, raw %.2f µs/op, ratio %.2f×", driverInsert / Double(count) * 1e6, rawInsert / Double(count) * 1e6, driverInsert / rawInsert))
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
t0 = now()
for i in ids {
    let r = try await store.read { tx in try tx.get(.int(Int64(i)), from: users) }
    checksum &+= r?.fields.count ?? 0
}
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

func line(_ name: String, _ driver: Double, _ raw: Double, ops: Int) {
    let d = driver / Double(ops) * 1e6, r = raw / Double(ops) * 1e6
    print(String(format: "%-44@ driver %8.2f µs/op   raw %8.2f µs/op   ratio %5.2f×", name as NSString, d, r, driver / raw))
}
line("bulk insert (one transaction, normal)", driverInsert, rawInsert, ops: count)
line("point read (one read transaction each)", driverRead, rawRead, ops: reads)
line("point read (one each, task on store thread)", driverPinned, rawRead, ops: reads)
line("point read (all in one read transaction)", driverBatched, rawRead, ops: reads)
print("(checksum \(checksum))")
