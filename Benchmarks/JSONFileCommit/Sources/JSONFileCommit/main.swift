import Depot
import Foundation

#if canImport(Glibc)
import Glibc
#endif

// One single-record commit at 1k/10k/100k records, against the floor: the same records
// serialized by Foundation's JSONSerialization (sorted keys, same pretty setting) and
// written with the same temp-file + fsync + rename + directory-fsync sequence.

func record(_ i: Int) -> [String: FieldValue] {
    ["name": .string("user \(i)"), "email": .string("user\(i)@example.com"), "age": .int(Int64(i % 90)),
     "score": .double(Double(i) * 0.37), "active": .bool(i % 3 == 0), "tags": .array(["a", .string("t\(i % 10)")])]
}

func foundationObject(_ value: FieldValue) -> Any {
    switch value {
    case .null: return NSNull()
    case .bool(let b): return b
    case .int(let i): return i
    case .double(let d): return d
    case .string(let s): return s
    case .bytes(let d): return ["$bytes": d.base64EncodedString()]
    case .array(let a): return a.map(foundationObject)
    case .object(let o): return o.mapValues(foundationObject)
    }
}

func atomicWrite(_ bytes: [UInt8], dir: String) { atomicWrite(Data(bytes), dir: dir) }

func atomicWrite(_ data: Data, dir: String) {
    let temp = dir + "/.floor.json.tmp", path = dir + "/floor.json"
    let fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    data.withUnsafeBytes { buffer in
        var offset = 0
        while offset < buffer.count { offset += write(fd, buffer.baseAddress! + offset, buffer.count - offset) }
    }
    fsync(fd)
    rename(temp, path)
    let dfd = open(dir, O_RDONLY | O_DIRECTORY)
    fsync(dfd)
    close(dfd)
    close(fd)
}

func median(_ xs: [Duration]) -> Duration { xs.sorted()[xs.count / 2] }
func ms(_ d: Duration) -> String { String(format: "%.2f ms", Double(d.components.attoseconds) / 1e15 + Double(d.components.seconds) * 1000) }

let users = try CollectionName("users")
let pretty = CommandLine.arguments.contains("--compact") ? false : true
print("durability=full pretty=\(pretty), release build, median of repeated commits")
print("records | driver commit | floor A: JSONSerialization + write | ratio A | floor B: JSONText + write | ratio B | write alone | file size | 100-record batch, per record")
func seconds(_ d: Duration) -> Double { Double(d.components.attoseconds) / 1e18 + Double(d.components.seconds) }
for count in [1_000, 10_000, 100_000] {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("depot-bench-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let driver = try await DriverRegistry.standard.makeDriver("json:\(dir)/db.json?pretty=\(pretty)")
    try await driver.write { tx in
        for i in 1...count { try tx.insert(Record(id: .int(Int64(i)), fields: record(i)), into: users) }
    }
    let repeats = count >= 100_000 ? 7 : 21
    var driverTimes: [Duration] = []
    for k in 0..<repeats {
        let id = Int64(count + 1 + k)
        let start = ContinuousClock.now
        try await driver.write { tx in try tx.insert(Record(id: .int(id), fields: record(Int(id))), into: users) }
        driverTimes.append(ContinuousClock.now - start)
    }
    let batchStart = ContinuousClock.now
    try await driver.write { tx in
        for k in 0..<100 { let id = Int64(count + 1000 + k); try tx.insert(Record(id: .int(id), fields: record(Int(id))), into: users) }
    }
    let batch = (ContinuousClock.now - batchStart) / 100
    let size = (try? FileManager.default.attributesOfItem(atPath: dir + "/db.json")[.size] as? Int) ?? 0
    try await driver.close()

    // The floor: the same records (already in memory as Foundation objects, as the driver's
    // are already in memory as field values), serialized and written the same way.
    var rows: [[String: Any]] = (1...count).map { i in
        var object = record(i).mapValues(foundationObject)
        object["id"] = i
        return object
    }
    var floorTimes: [Duration] = []
    for k in 0..<(count >= 100_000 ? 1 : 3) {
        let id = count + 1 + k
        let start = ContinuousClock.now
        var object = record(id).mapValues(foundationObject)
        object["id"] = id
        rows.append(object)
        let document: [String: Any] = ["_depot": ["format": 1], "users": rows]
        let data = try JSONSerialization.data(withJSONObject: document, options: pretty ? [.sortedKeys, .prettyPrinted] : [.sortedKeys])
        atomicWrite(data, dir: dir)
        floorTimes.append(ContinuousClock.now - start)
    }
    // Floor B: DepotCore's own JSON writer over the same records, the same write.
    var values: [FieldValue] = (1...count).map { i in var o = record(i); o["id"] = .int(Int64(i)); return .object(o) }
    var textTimes: [Duration] = []
    var writeTimes: [Duration] = []
    for k in 0..<repeats {
        let id = count + 1 + k
        let start = ContinuousClock.now
        var o = record(id)
        o["id"] = .int(Int64(id))
        values.append(.object(o))
        var bytes: [UInt8] = []
        bytes.reserveCapacity(size + 4096)
        JSONText.write(.object(["_depot": ["format": 1], "users": .array(values)]), into: &bytes, pretty: pretty)
        let mid = ContinuousClock.now
        atomicWrite(bytes, dir: dir)
        let end = ContinuousClock.now
        textTimes.append(end - start)
        writeTimes.append(end - mid)
    }
    let d = median(driverTimes), f = median(floorTimes), t = median(textTimes), w = median(writeTimes)
    print("\(count) | \(ms(d)) | \(ms(f)) | \(String(format: "%.2f", seconds(d) / seconds(f)))x | \(ms(t)) | \(String(format: "%.2f", seconds(d) / seconds(t)))x | \(ms(w)) | \(size / 1024) KiB | \(ms(batch))")
}
