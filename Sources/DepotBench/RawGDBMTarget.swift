#if canImport(CGDBM)
import CGDBM
import DepotCore

#if canImport(Glibc)
import Glibc
#endif

/// GDBM through its C API: one GDBM file keyed by the record id, each value the ten field
/// strings length-prefixed (LEB128), written with `gdbm_store` and read with `gdbm_fetch`
/// plus decoding those bytes back into Swift strings.
///
/// Durability `full` calls `gdbm_sync` (which fsyncs) after every commit; `normal` does
/// not. A bulk fetch returns the rows in id order, like Depot (the keys sorted, then
/// fetched). GDBM has no key order, so a scan (workload E) walks every key with
/// `gdbm_firstkey`/`gdbm_nextkey`, keeps those `>=` the start, sorts them and fetches the
/// first `count`: the floor for any ordered scan over a hash file.
public final class RawGDBMTarget: BenchTarget {
    public let engine = "gdbm"
    public let isBaseline = true
    public var settings: [String: String] {
        ["api": "gdbm_store/gdbm_fetch, value = 10 length-prefixed strings", "sync": "gdbm_sync per commit if durability full, none if normal", "gdbm_version": "\(GDBM_VERSION_MAJOR).\(GDBM_VERSION_MINOR).\(GDBM_VERSION_PATCH)"]
    }

    private var dbf: OpaquePointer?
    private var path = ""
    /// The handles of `--clients`' reader threads, open between `openReaders` and `closeReaders`.
    private var readers: [Reader] = []
    private var durability: Durability = .full

    /// A raw GDBM target; `open` picks its file.
    public init() {}

    private func connect() throws {
        guard let handle = gdbm_open(path, 0, GDBM_WRCREAT | GDBM_CLOEXEC, 0o644, nil) else {
            throw BenchError("gdbm raw: cannot open \(path): \(String(cString: gdbm_strerror(gdbm_errno_location().pointee)))")
        }
        dbf = handle
    }

    public func open(directory: String, durability: Durability) async throws {
        path = directory + "/raw.gdbm"
        self.durability = durability
        try connect()
    }

    public func reopen(durability: Durability) async throws {
        try await close()
        self.durability = durability
        try connect()
    }

    static func encode(_ values: [String]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(values.count * (YCSB.fieldLength + 2))
        for value in values {
            var v = value
            v.withUTF8 { bytes in
                var length = UInt64(bytes.count)
                while length >= 0x80 {
                    out.append(UInt8(length & 0x7F) | 0x80)
                    length >>= 7
                }
                out.append(UInt8(length))
                out.append(contentsOf: bytes)
            }
        }
        return out
    }

    static func decode(_ bytes: UnsafeRawBufferPointer) throws -> [String] {
        var fields: [String] = []
        fields.reserveCapacity(YCSB.fieldCount)
        var i = 0
        while i < bytes.count {
            var length = 0
            var shift = 0
            while true {
                guard i < bytes.count, shift < 63 else { throw BenchError("gdbm raw: bad record") }
                let b = bytes[i]
                i += 1
                length |= Int(b & 0x7F) << shift
                if b & 0x80 == 0 { break }
                shift += 7
            }
            guard length <= bytes.count - i else { throw BenchError("gdbm raw: bad record") }
            fields.append(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[i..<(i + length)]), as: UTF8.self))
            i += length
        }
        return fields
    }

    private func store(_ key: String, _ value: [UInt8]) throws {
        var key = key
        var value = value
        let rc = key.withUTF8 { k in
            value.withUnsafeMutableBytes { v in
                gdbm_store(dbf, datum(dptr: UnsafeMutableRawPointer(mutating: k.baseAddress)?.assumingMemoryBound(to: CChar.self), dsize: Int32(k.count)),
                           datum(dptr: v.baseAddress?.assumingMemoryBound(to: CChar.self), dsize: Int32(v.count)), GDBM_REPLACE)
            }
        }
        guard rc == 0 else { throw BenchError("gdbm raw: store failed") }
    }

    private func sync() throws {
        if durability == .full, gdbm_sync(dbf) != 0 { throw BenchError("gdbm raw: sync failed") }
    }

    private func fetch(_ key: String) throws -> RawRow? {
        try RawGDBMTarget.fetch(key, from: dbf)
    }

    /// Fetches and decodes `key` from the open file `handle`; `nil` when it is not there.
    /// - Throws: ``BenchError`` for a record that does not decode.
    private static func fetch(_ key: String, from handle: OpaquePointer?) throws -> RawRow? {
        var key = key
        let found = key.withUTF8 { k in
            gdbm_fetch(handle, datum(dptr: UnsafeMutableRawPointer(mutating: k.baseAddress)?.assumingMemoryBound(to: CChar.self), dsize: Int32(k.count)))
        }
        guard let pointer = found.dptr else { return nil }
        defer { free(pointer) }
        return RawRow(id: key, fields: try RawGDBMTarget.decode(UnsafeRawBufferPointer(start: pointer, count: Int(found.dsize))))
    }

    private func read(_ n: Int) throws -> RawRow {
        guard let row = try fetch(YCSB.key(n)) else { throw BenchError("gdbm raw: record \(n) is missing") }
        return row
    }

    public func insertBatch(_ range: Range<Int>, values: [[String]]) async throws {
        for (n, v) in zip(range, values) { try store(YCSB.key(n), RawGDBMTarget.encode(v)) }
        try sync()
    }

    private func allKeys() -> [String] {
        var keys: [String] = []
        var key = gdbm_firstkey(dbf)
        while let pointer = key.dptr {
            keys.append(String(decoding: UnsafeRawBufferPointer(start: pointer, count: Int(key.dsize)), as: UTF8.self))
            let next = gdbm_nextkey(dbf, key)
            free(pointer)
            key = next
        }
        return keys
    }

    /// Every row in id order, as Depot's query returns them: GDBM hands keys out in hash
    /// order, so the keys are sorted (byte order, as YCSB keys compare) before the fetches.
    public func fetchAll() async throws -> Int {
        var rows: [RawRow] = []
        var keys = allKeys()
        keys.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        rows.reserveCapacity(keys.count)
        for key in keys { if let row = try fetch(key) { rows.append(row) } }
        return rows.count
    }

    public func run(_ operation: BenchOperation) async throws {
        switch operation {
        case .read(let n):
            _ = try read(n)
        case .update(let n, let field, let value), .readModifyWrite(let n, let field, let value):
            var row = try read(n)
            row.fields[field] = value
            try store(row.id, RawGDBMTarget.encode(row.fields))
            try sync()
        case .insert(let n):
            try store(YCSB.key(n), RawGDBMTarget.encode(YCSB.fields(record: n)))
            try sync()
        case .scan(let n, let count):
            let start = YCSB.key(n)
            var keys = allKeys().filter { !$0.utf8.lexicographicallyPrecedes(start.utf8) }
            keys.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            var rows: [RawRow] = []
            for key in keys.prefix(count) { if let row = try fetch(key) { rows.append(row) } }
            _ = rows.count
        }
    }

    public func durableInsert(_ n: Int, values: [String]) async throws {
        try store(YCSB.key(n), RawGDBMTarget.encode(values))
        try sync()
    }

    public func delete(_ n: Int) async throws {
        var key = YCSB.key(n)
        let rc = key.withUTF8 { k in
            gdbm_delete(dbf, datum(dptr: UnsafeMutableRawPointer(mutating: k.baseAddress)?.assumingMemoryBound(to: CChar.self), dsize: Int32(k.count)))
        }
        guard rc == 0 else { throw BenchError("gdbm raw: record \(n) is missing") }
        try sync()
    }

    public func close() async throws {
        try await closeReaders()
        if let dbf { gdbm_close(dbf) }
        dbf = nil
    }
}

extension RawGDBMTarget: ConcurrentReadTarget {
    /// One read-only handle of one reader thread: used by that thread only.
    final class Reader: @unchecked Sendable {
        let handle: OpaquePointer
        init(_ handle: OpaquePointer) { self.handle = handle }
    }

    /// Closes the writer handle (GDBM admits one writer or many readers per file) and opens
    /// `count` handles with `GDBM_READER`, each with its own bucket cache.
    public func openReaders(_ count: Int) async throws {
        try await closeReaders()
        if let dbf { gdbm_close(dbf) }
        dbf = nil
        for _ in 0..<count {
            guard let handle = gdbm_open(path, 0, GDBM_READER | GDBM_CLOEXEC, 0, nil) else {
                let message = String(cString: gdbm_strerror(gdbm_errno_location().pointee))
                try await closeReaders()
                throw BenchError("gdbm raw: cannot open \(path) for reading: \(message)")
            }
            readers.append(Reader(handle))
        }
    }

    /// One thread per client, each on its own reader handle.
    public func readConcurrently(_ shares: [[Int]]) async throws -> [ClientRun] {
        try await readOnThreads(readers, shares, target: "gdbm raw") { reader, n in
            guard try RawGDBMTarget.fetch(YCSB.key(n), from: reader.handle) != nil else { throw BenchError("gdbm raw: record \(n) is missing") }
        }
    }

    /// Closes the reader handles and opens the writer handle again (if it was open).
    public func closeReaders() async throws {
        guard !readers.isEmpty else { return }
        for reader in readers { gdbm_close(reader.handle) }
        readers = []
        if dbf == nil { try connect() }
    }
}
#endif
