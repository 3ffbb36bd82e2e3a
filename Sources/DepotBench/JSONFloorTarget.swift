import DepotCore
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The floor under the JSON driver: the same records held in memory as field values, each
/// record's JSON text (DepotCore's ``JSONText``, pretty, as the driver's default) encoded
/// when it changes and kept, every commit writing the whole file from those texts the same
/// atomic way: a temporary file, fsync, rename over the store, fsync of the directory (the
/// fsyncs only with durability `full`).
///
/// No JSON file driver can commit faster than this: it must at least encode what changed
/// and write the whole file atomically.
/// Reads, scans and the bulk fetch are served from memory, as the driver serves them.
public final class JSONFloorTarget: BenchTarget {
    public let engine = "json"
    public let isBaseline = true
    public var settings: [String: String] { ["floor": "JSONText (pretty) of each changed record, whole file from kept record texts, temp file, fsync, rename, fsync directory per commit"] }

    private var path = ""
    private var directory = ""
    private var durability: Durability = .full
    /// Records in insertion order, each a JSON object with its id.
    private var records: [FieldValue] = []
    /// Each record's JSON text, encoded when the record changed.
    private var texts: [[UInt8]] = []
    private var positions: [String: Int] = [:]
    private var lastSize = 1 << 16

    /// A floor target; `open` picks its file.
    public init() {}

    public func open(directory: String, durability: Durability) async throws {
        self.directory = directory
        path = directory + "/floor.json"
        self.durability = durability
        records = []
        texts = []
        positions = [:]
        try commit()
    }

    public func reopen(durability: Durability) async throws { self.durability = durability }

    private func object(_ n: Int, _ values: [String]) -> FieldValue {
        var fields: [String: FieldValue] = ["id": .string(YCSB.key(n))]
        for (i, v) in values.enumerated() { fields[YCSB.fieldNames[i]] = .string(v) }
        return .object(fields)
    }

    private func put(_ n: Int, _ values: [String]) throws {
        let key = YCSB.key(n)
        guard positions[key] == nil else { throw BenchError("json floor: record \(n) exists") }
        positions[key] = records.count
        let value = object(n, values)
        records.append(value)
        texts.append(JSONFloorTarget.encode(value))
    }

    static func encode(_ value: FieldValue) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(1_300)
        JSONText.write(value, into: &out, pretty: true, indent: 4)
        return out
    }

    /// Serializes everything and replaces the file atomically.
    private func commit() throws {
        var out: [UInt8] = []
        out.reserveCapacity(lastSize + lastSize / 8 + 4096)
        out.append(contentsOf: Array("{\n  \"usertable\": [".utf8))
        for (i, text) in texts.enumerated() {
            out.append(contentsOf: i == 0 ? [0x0A, 0x20, 0x20, 0x20, 0x20] : [0x2C, 0x0A, 0x20, 0x20, 0x20, 0x20])
            out.append(contentsOf: text)
        }
        out.append(contentsOf: Array("\n  ]\n}\n".utf8))
        lastSize = out.count
        let temporary = path + ".tmp"
        let fd = Glibc.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw BenchError("json floor: cannot create \(temporary) (errno \(errno))") }
        defer { _ = Glibc.close(fd) }
        var written = 0
        try out.withUnsafeBytes { buffer in
            while written < buffer.count {
                let n = Glibc.write(fd, buffer.baseAddress! + written, buffer.count - written)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw BenchError("json floor: write failed (errno \(errno))")
                }
                written += n
            }
        }
        if durability == .full, fsync(fd) != 0 { throw BenchError("json floor: fsync failed (errno \(errno))") }
        guard rename(temporary, path) == 0 else { throw BenchError("json floor: rename failed (errno \(errno))") }
        if durability == .full {
            let dirfd = Glibc.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard dirfd >= 0 else { throw BenchError("json floor: cannot open the directory (errno \(errno))") }
            defer { _ = Glibc.close(dirfd) }
            guard fsync(dirfd) == 0 else { throw BenchError("json floor: directory fsync failed (errno \(errno))") }
        }
    }

    public func insertBatch(_ range: Range<Int>, values: [[String]]) async throws {
        for (n, v) in zip(range, values) { try put(n, v) }
        try commit()
    }

    public func fetchAll() async throws -> Int {
        var copy: [FieldValue] = []
        copy.reserveCapacity(records.count)
        for record in records { copy.append(record) }
        return copy.count
    }

    private func index(_ n: Int) throws -> Int {
        guard let i = positions[YCSB.key(n)] else { throw BenchError("json floor: record \(n) is missing") }
        return i
    }

    private func set(_ i: Int, field: Int, value: String) {
        guard case .object(var fields) = records[i] else { return }
        fields[YCSB.fieldNames[field]] = .string(value)
        records[i] = .object(fields)
        texts[i] = JSONFloorTarget.encode(records[i])
    }

    public func run(_ operation: BenchOperation) async throws {
        switch operation {
        case .read(let n):
            _ = records[try index(n)]
        case .update(let n, let field, let value), .readModifyWrite(let n, let field, let value):
            set(try index(n), field: field, value: value)
            try commit()
        case .insert(let n):
            try put(n, YCSB.fields(record: n))
            try commit()
        case .scan(let n, let count):
            let start = YCSB.key(n)
            var keys: [String] = []
            for key in positions.keys where !key.utf8.lexicographicallyPrecedes(start.utf8) { keys.append(key) }
            keys.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            var found: [FieldValue] = []
            for key in keys.prefix(count) { if let i = positions[key] { found.append(records[i]) } }
            _ = found.count
        }
    }

    public func durableInsert(_ n: Int, values: [String]) async throws {
        try put(n, values)
        try commit()
    }

    public func delete(_ n: Int) async throws {
        let key = YCSB.key(n)
        guard let i = positions.removeValue(forKey: key) else { throw BenchError("json floor: record \(n) is missing") }
        let last = records.count - 1
        if i != last, case .object(let moved) = records[last], case .string(let movedKey)? = moved["id"] {
            records[i] = records[last]
            texts[i] = texts[last]
            positions[movedKey] = i
        }
        records.removeLast()
        texts.removeLast()
        try commit()
    }

    public func close() async throws {
        texts = []
        records = []
        positions = [:]
    }
}
