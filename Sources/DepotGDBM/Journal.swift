import DepotCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A GDBM file of a store: the catalog, or a collection's records or index entries.
/// File names come only from validated ``CollectionName``s.
enum FileID: Hashable, Sendable {
    case catalog
    case records(CollectionName)
    case index(CollectionName)

    var fileName: String {
        switch self {
        case .catalog: "_depotsys_catalog.gdbm"
        case .records(let c): "\(c.rawValue).records.gdbm"
        case .index(let c): "\(c.rawValue).index.gdbm"
        }
    }

    var collection: CollectionName? {
        switch self {
        case .catalog: nil
        case .records(let c), .index(let c): c
        }
    }

    /// Parses a file name found on disk; `nil` for anything that is not one of ours.
    init?(fileName: String) {
        if fileName == "_depotsys_catalog.gdbm" {
            self = .catalog
            return
        }
        for (suffix, make) in [(".records.gdbm", FileID.records), (".index.gdbm", FileID.index)] where fileName.hasSuffix(suffix) {
            guard let name = try? CollectionName(validating: String(fileName.dropLast(suffix.count))) else { return nil }
            self = make(name)
            return
        }
        return nil
    }

    func write(to w: inout ByteWriter) {
        switch self {
        case .catalog: w.u8(0)
        case .records(let c): w.u8(1); w.string(c.rawValue)
        case .index(let c): w.u8(2); w.string(c.rawValue)
        }
    }

    static func read(_ r: inout ByteReader) throws -> FileID {
        switch try r.u8() {
        case 0: return .catalog
        case 1: return .records(try name(&r))
        case 2: return .index(try name(&r))
        default: throw ByteReader.Malformed()
        }
    }

    private static func name(_ r: inout ByteReader) throws -> CollectionName {
        guard let name = try? CollectionName(validating: try r.string()) else { throw ByteReader.Malformed() }
        return name
    }
}

/// One physical change to a GDBM file. Each op sets a final state (a value, an absence,
/// an empty file), so replaying a transaction's ops from the state before it is exact and
/// replaying them twice changes nothing.
enum FileOp: Sendable {
    case put(FileID, key: [UInt8], value: [UInt8])
    case delete(FileID, key: [UInt8])
    /// Removes the whole file (a dropped collection).
    case drop(FileID)

    /// The file the op changes.
    var file: FileID {
        switch self {
        case .put(let f, _, _), .delete(let f, _), .drop(let f): f
        }
    }
}

/// Consecutive ops reduced to their final states: for each (file, key), only its last op is
/// kept, and kept ops are applied in the order of those last ops. Because every op sets a
/// final state and ops on different keys are independent, applying the reduced ops leaves
/// the files exactly as applying all of them would. Two details keep it exact: a put creates
/// its file and a delete does not, so a put followed by a delete of the same key keeps the
/// put (the file exists afterwards either way); and a `drop` ends a run (everything kept
/// before it is applied first, then the drop). Folds and rebuilds replay the journal through
/// it, so a record updated a hundred times is stored once (Docs/GDBMDriver.md, "Journal
/// segments, backups and folds").
struct FileOpCoalescer {
    private struct Slot: Hashable {
        let file: FileID
        let key: [UInt8]
    }

    /// Where a slot's kept ops are: its last op, and the put a later delete must not undo.
    private struct Kept {
        var last: Int
        var put: Int?
    }

    private var kept: [FileOp?] = []
    private var slots: [Slot: Kept] = [:]

    /// How many ops were added, and how many of them were applied (the others were superseded).
    private(set) var added = 0
    private(set) var applied = 0
    /// The keys and values of the ops kept and not yet applied, in bytes (a caller that
    /// reduces a long journal flushes when they pass its memory budget).
    private(set) var keptBytes = 0

    private static func bytes(_ op: FileOp?) -> Int {
        switch op {
        case .put(_, let key, let value)?: key.count + value.count
        case .delete(_, let key)?: key.count
        case .drop?, nil: 0
        }
    }

    /// Forgets the kept op at `index` (superseded by a later one).
    private mutating func supersede(_ index: Int) {
        keptBytes -= Self.bytes(kept[index])
        kept[index] = nil
    }

    /// Adds `op`. A drop first applies everything kept, then itself, through `apply`.
    mutating func add(_ op: FileOp, apply: (FileOp) throws -> Void) rethrows {
        added += 1
        switch op {
        case .put(let file, let key, _):
            let slot = Slot(file: file, key: key)
            if let earlier = slots.updateValue(Kept(last: kept.count, put: nil), forKey: slot) {
                supersede(earlier.last)
                if let put = earlier.put { supersede(put) }
            }
            keptBytes += Self.bytes(op)
            kept.append(op)
        case .delete(let file, let key):
            let slot = Slot(file: file, key: key)
            var entry = Kept(last: kept.count, put: nil)
            if let earlier = slots[slot] {
                if case .put? = kept[earlier.last] { entry.put = earlier.last } else {
                    supersede(earlier.last)
                    entry.put = earlier.put
                }
            }
            slots[slot] = entry
            keptBytes += Self.bytes(op)
            kept.append(op)
        case .drop:
            try flush(apply: apply)
            applied += 1
            try apply(op)
        }
    }

    /// Applies every kept op, in order, and starts a new run.
    mutating func flush(apply: (FileOp) throws -> Void) rethrows {
        for case let op? in kept {
            applied += 1
            try apply(op)
        }
        kept.removeAll(keepingCapacity: true)
        slots.removeAll(keepingCapacity: true)
        keptBytes = 0
    }
}

/// A record of the redo journal.
enum JournalRecord: Sendable {
    /// A committed write transaction: its sequence number and every change it made.
    case transaction(seq: UInt64, ops: [FileOp])
    /// The primary GDBM files hold every transaction up to `seq` and were synced.
    case applied(seq: UInt64)
    /// A checkpoint of transactions up to `seq` into the backup files has started. Written
    /// only by drivers before journal segments (2026-11-26); opening still understands it.
    case checkpointBegin(seq: UInt64)

    var seq: UInt64 {
        switch self {
        case .transaction(let s, _), .applied(let s), .checkpointBegin(let s): s
        }
    }
}

/// One segment of the redo journal: the active one, `store/journal`, or a closed one,
/// `store/journal.<base>` (Docs/GDBMDriver.md, "Journal segments").
///
/// Layout: a 24-byte header (`DEPOTJNL`, format version u32, base sequence u64, CRC-32 of
/// the first 20 bytes), then records, each `payload length u32 | CRC-32 u32 | payload`
/// (little-endian). A payload is a type byte (1 transaction, 2 applied, 3 checkpoint begin),
/// a sequence number u64, and for a transaction a varint op count and the ops.
/// Reading stops at the first record that is short or fails its checksum (a torn tail: it
/// was never acknowledged), and the file is cut there.
///
/// Durable appends (durability `full`) write into zeros laid down ahead of them
/// (up to ``preallocationChunk`` at a time): an fsync after a write inside the file's length has no
/// new length or block to record, and took 115–140 µs here against 170–200 µs for one that
/// grew the file (Docs/GDBMDriver.md, "Formats"). Zeros read as the end of the
/// records, like a torn tail: a record's length is at least 9.
///
/// Appends that are not fsynced (durability `normal`) are copied into a shared mapping of
/// zeros written ahead of them (``mappedChunk`` at a time): a record then lands in pages the
/// page cache already holds, where a `write(2)` that extends the file makes the kernel give
/// it new pages and update its length and times on every commit (5.5 µs of a GDBM update
/// against 2.3 µs, Docs/GDBMDriver.md, "Formats"). Both kinds of append go to the same
/// page cache, so a later `fsync` covers the mapped ones too.
final class Journal {
    static let magic: [UInt8] = Array("DEPOTJNL".utf8)
    static let formatVersion: UInt32 = 1
    static let headerSize = 24

    let path: String
    private(set) var fd: Int32
    /// Transactions with a sequence number up to this are in the backup files.
    let baseSeq: UInt64
    /// The length of the records in bytes (header included): where the next one goes.
    private(set) var size: Int
    /// The file's length: ``size`` plus the zeros written ahead of durable appends.
    private(set) var allocated: Int
    /// The most zeros written ahead at a time, when a durable append finds too few.
    static let preallocationChunk = 128 << 10
    /// The length as of the last fsync (or as found when opened): what survives power loss.
    private(set) var syncedSize: Int
    /// The encoding buffer of the last append, kept for the next one (small commits then
    /// allocate nothing); dropped when a large transaction grew it past ``keptBufferLimit``.
    private var spare: [UInt8] = []
    static let keptBufferLimit = 256 << 10
    /// The zeros written ahead at a time for appends that are not fsynced.
    static let mappedChunk = 64 << 10
    /// The least a mapping of the file spans (its length may pass the end of the file: only
    /// the part below ``allocated`` is ever touched, since a page past the end of a file
    /// faults with SIGBUS).
    static let mappingSpan = 16 << 20
    /// A shared read-write mapping of the file from ``mappingStart`` (page aligned) for
    /// ``mappingLength`` bytes, made at the first mapped append and again when a record
    /// passes its end; `nil` until then.
    private var mapping: UnsafeMutableRawPointer?
    private var mappingStart = 0
    private var mappingLength = 0

    private init(path: String, fd: Int32, baseSeq: UInt64, size: Int) {
        self.path = path
        self.fd = fd
        self.baseSeq = baseSeq
        self.size = size
        allocated = size
        syncedSize = size
    }

    /// Writes a fresh journal with `baseSeq` next to `path` and renames it into place
    /// (fsync of the file and its directory first), then opens it.
    static func create(path: String, baseSeq: UInt64) throws -> Journal {
        let tmp = path + ".new"
        try writeHeaderFile(tmp, baseSeq: baseSeq, sync: true)
        try FileSystem.rename(tmp, to: path)
        try FileSystem.syncDirectory((path as NSString).deletingLastPathComponent)
        let opened = try open(path: path)
        return opened.journal
    }

    /// Closes the active segment at `path` under the name `closedPath` and starts a new one
    /// there whose base is `baseSeq` (Docs/GDBMDriver.md, "Journal segments"): the new
    /// segment is written as `path.new`, then `path` is renamed to `closedPath` and `path.new`
    /// to `path`. A crash between the two renames leaves `path.new` and no `path`, which
    /// opening renames into place. With `sync` (durability `full`) the new file and the
    /// directory are fsynced, so acknowledged commits in the new segment survive power loss.
    static func rotate(path: String, closedPath: String, baseSeq: UInt64, sync: Bool) throws -> Journal {
        let tmp = path + ".new"
        try writeHeaderFile(tmp, baseSeq: baseSeq, sync: sync)
        try FileSystem.rename(path, to: closedPath)
        try FileSystem.rename(tmp, to: path)
        if sync { try FileSystem.syncDirectory((path as NSString).deletingLastPathComponent) }
        return try open(path: path).journal
    }

    /// Writes a journal file holding only a header.
    private static func writeHeaderFile(_ path: String, baseSeq: UInt64, sync: Bool) throws {
        var w = ByteWriter(capacity: headerSize)
        w.bytes.append(contentsOf: magic)
        w.u32(formatVersion)
        w.u64(baseSeq)
        w.u32(CRC32.checksum(w.bytes))
        try GDBMFaults.check("create", path: path)
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw GDBMErrors.system(errno, "create", path: path) }
        defer { Glibc.close(fd) }
        try writeAll(fd, w.bytes, at: 0, path: path)
        if sync { try FileSystem.sync(descriptor: fd, path: path) }
    }

    /// The name of a closed segment whose base is `base`: `journal.` and 20 decimal digits,
    /// so names sort like their bases.
    static func segmentPath(directory: String, base: UInt64) -> String {
        let digits = String(base)
        return directory + "/journal." + String(repeating: "0", count: 20 - digits.count) + digits
    }

    /// The closed segments of a store directory, by base (names that are not
    /// `journal.` and 20 digits are ignored).
    static func closedSegments(in directory: String) throws -> [(base: UInt64, path: String)] {
        try GDBMFaults.check("list", path: directory)
        let names: [String]
        do { names = try FileManager.default.contentsOfDirectory(atPath: directory) } catch {
            throw DepotError(.io, "Could not list '\(directory)'.", cause: DepotError.wrap(error))
        }
        var found: [(base: UInt64, path: String)] = []
        for name in names where name.hasPrefix("journal.") {
            let digits = name.dropFirst("journal.".count)
            guard digits.count == 20, digits.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let base = UInt64(digits) else { continue }
            found.append((base, directory + "/" + name))
        }
        return found.sorted { $0.base < $1.base }
    }

    /// What opening needs of a closed segment, read without holding its records in memory:
    /// its base, the last commit it holds (`end`), and its last record with the ops left
    /// out (a transaction comes back with none). Records are read one at a time in chunks
    /// and checked by their CRC-32, so a segment of any size costs one 64 KiB buffer; reading
    /// stops where ``parse(_:)`` would stop short of a torn tail. (The ops are decoded only
    /// when a rebuild replays the segment, by ``readSegment(path:sync:)``.)
    static func scanSegment(path: String) throws -> (baseSeq: UInt64, end: UInt64, last: JournalRecord?) {
        try GDBMFaults.check("open", path: path)
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw GDBMErrors.system(errno, "open", path: path) }
        defer { Glibc.close(fd) }
        try GDBMFaults.check("read", path: path)
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw GDBMErrors.system(errno, "stat", path: path) }
        let size = Int(st.st_size)
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        /// Reads exactly `count` bytes at `offset` into the start of `buffer`; false at end of file.
        func read(_ count: Int, at offset: Int) throws -> Bool {
            if buffer.count < count { buffer = [UInt8](repeating: 0, count: count) }
            var done = 0
            while done < count {
                let n = buffer.withUnsafeMutableBytes { raw -> Int in
                    guard let base = raw.baseAddress else { return 0 }
                    return Glibc.pread(fd, base + done, count - done, off_t(offset + done))
                }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw GDBMErrors.system(errno, "read", path: path)
                }
                if n == 0 { return false }
                done += n
            }
            return true
        }
        guard try read(headerSize, at: 0) else { throw GDBMErrors.corrupted("The GDBM store's journal is not a Depot journal.") }
        let (baseSeq, _, _) = try parse(Array(buffer[0..<headerSize]))
        var offset = headerSize
        var end = baseSeq
        var last: JournalRecord?
        while offset + 8 <= size, try read(8, at: offset) {
            let length = buffer.withUnsafeBytes { Int(UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: 0, as: UInt32.self))) }
            let sum = buffer.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: 4, as: UInt32.self)) }
            guard length >= 9, offset + 8 + length <= size else { break }
            // The payload in chunks: its CRC-32, and its type and sequence from the first chunk.
            var crc: UInt32 = 0
            var type: UInt8 = 0
            var seq: UInt64 = 0
            var at = 0
            var complete = true
            while at < length {
                let chunk = min(1 << 16, length - at)
                guard try read(chunk, at: offset + 8 + at) else { complete = false; break }
                buffer.withUnsafeBytes { raw in
                    crc = CRC32.update(crc, UnsafeRawBufferPointer(rebasing: raw[0..<chunk]))
                    if at == 0 {
                        type = raw[0]
                        seq = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 1, as: UInt64.self))
                    }
                }
                at += chunk
            }
            guard complete, crc == sum else { break }
            switch type {
            case 1: last = .transaction(seq: seq, ops: [])
            case 2: last = .applied(seq: seq)
            case 3: last = .checkpointBegin(seq: seq)
            default: break
            }
            guard (1...3).contains(type) else { break }
            end = max(end, seq)
            offset += 8 + length
        }
        return (baseSeq, end, last)
    }

    /// Reads a closed segment without changing it: its base and its complete records (a
    /// torn tail is left on disk and ignored). With `sync`, fsyncs it first.
    static func readSegment(path: String, sync: Bool = false) throws -> (baseSeq: UInt64, records: [JournalRecord]) {
        try GDBMFaults.check("open", path: path)
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw GDBMErrors.system(errno, "open", path: path) }
        defer { Glibc.close(fd) }
        if sync { try FileSystem.sync(descriptor: fd, path: path) }
        let (base, records, _) = try parse(try readAll(fd, path: path))
        return (base, records)
    }

    /// Whether the file at `path` begins with a whole journal header (its magic and checksum).
    /// - Throws: `.io` when it cannot be read.
    static func hasHeader(path: String) throws -> Bool {
        try GDBMFaults.check("open", path: path)
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw GDBMErrors.system(errno, "open", path: path) }
        defer { Glibc.close(fd) }
        // A rotation's new segment is its header alone, so reading it whole costs nothing.
        do {
            _ = try parse(try readAll(fd, path: path))
            return true
        } catch let error as DepotError where error.code == .corrupted {
            return false
        }
    }

    /// Opens the journal, reads every complete record, and cuts off a torn tail.
    /// - Throws: `.corrupted` when the header is not a Depot journal; `.io`.
    static func open(path: String) throws -> (journal: Journal, records: [JournalRecord]) {
        try GDBMFaults.check("open", path: path)
        let fd = Glibc.open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw GDBMErrors.system(errno, "open", path: path) }
        do {
            let bytes = try readAll(fd, path: path)
            let (baseSeq, records, validLength) = try parse(bytes)
            // Zeros written ahead of durable appends stay (the journal of a session that only
            // read is left as it was); anything else after the records is a torn tail, cut
            // with the zeros behind it, so no later append leaves part of it readable.
            let zeroTail = bytes[validLength...].allSatisfy { $0 == 0 }
            if validLength < bytes.count && !zeroTail {
                try GDBMFaults.check("truncate", path: path)
                guard ftruncate(fd, off_t(validLength)) == 0 else { throw GDBMErrors.system(errno, "truncate", path: path) }
                try GDBMFaults.check("fsync", path: path)
                guard fsync(fd) == 0 else { throw GDBMErrors.system(errno, "sync", path: path) }
            }
            let journal = Journal(path: path, fd: fd, baseSeq: baseSeq, size: validLength)
            if zeroTail { journal.allocated = bytes.count }
            return (journal, records)
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    /// Parses journal bytes: the base sequence, the complete records, and the length of the
    /// valid prefix.
    static func parse(_ bytes: [UInt8]) throws -> (UInt64, [JournalRecord], Int) {
        try bytes.withUnsafeBytes { raw in
            guard raw.count >= headerSize, Array(raw[0..<8]) == magic else {
                throw GDBMErrors.corrupted("The GDBM store's journal is not a Depot journal.")
            }
            var r = ByteReader(raw, from: 8)
            let version = try r.u32()
            let baseSeq = try r.u64()
            let crc = try r.u32()
            guard crc == CRC32.update(0, UnsafeRawBufferPointer(rebasing: raw[0..<20])) else {
                throw GDBMErrors.corrupted("The GDBM store's journal header fails its checksum.")
            }
            guard version == formatVersion else {
                throw DepotError(.schemaMismatch, "The GDBM store's journal has format \(version); this driver reads format \(formatVersion).")
            }
            var records: [JournalRecord] = []
            var valid = headerSize
            while r.remaining >= 8 {
                guard let length = try? r.u32(), let sum = try? r.u32(), Int(length) <= r.remaining,
                    let payload = try? r.slice(Int(length)), CRC32.update(0, payload) == sum,
                    let record = try? decode(payload)
                else { break }
                records.append(record)
                valid = r.position
            }
            return (baseSeq, records, valid)
        }
    }

    /// Appends one record; with `sync`, fsyncs before returning. A record that does not fit
    /// in the zeros already past the records is followed by `preallocate` more (at most
    /// ``preallocationChunk`` for a synced append, written before the fsync, and
    /// ``mappedChunk`` for another; rounded up to 4 KiB). A record that is not synced is
    /// copied into the mapping of those zeros (``appendMapped(_:ahead:)``). On failure the
    /// file is cut back to the end of the records, so no partial record stays behind.
    func append(_ record: JournalRecord, sync: Bool, preallocate: Int = 0) throws {
        // One buffer: the 8-byte frame (length, CRC-32) is filled in after the payload is
        // encoded behind it, so a large transaction's payload is never copied.
        var w = ByteWriter(capacity: 0)
        swap(&w.bytes, &spare)
        w.bytes.removeAll(keepingCapacity: true)
        w.bytes.reserveCapacity(8 + Journal.encodedSizeEstimate(record))
        defer {
            if w.bytes.capacity <= Journal.keptBufferLimit { swap(&w.bytes, &spare) }
        }
        w.u32(0)
        w.u32(0)
        Journal.encode(record, into: &w)
        let length = UInt32(w.bytes.count - 8)
        let crc = w.bytes.withUnsafeBytes { CRC32.update(0, UnsafeRawBufferPointer(rebasing: $0[8...])) }
        withUnsafeBytes(of: length.littleEndian) { src in for n in 0..<4 { w.bytes[n] = src[n] } }
        withUnsafeBytes(of: crc.littleEndian) { src in for n in 0..<4 { w.bytes[4 + n] = src[n] } }
        do {
            if !sync {
                try appendMapped(w.bytes, ahead: min(preallocate, Journal.mappedChunk))
            } else {
                try Journal.writeAll(fd, w.bytes, at: size, path: path)
                let end = size + w.bytes.count
                if preallocate > 0, end > allocated { try writeZeros(from: end, upTo: end + min(preallocate, Journal.preallocationChunk)) }
                try self.sync()
            }
            size += w.bytes.count
            allocated = max(allocated, size)
            if sync { syncedSize = size }
        } catch {
            _ = ftruncate(fd, off_t(size))
            allocated = size
            throw error
        }
    }

    /// Copies a framed record to the end of the records through the mapping, first writing
    /// `ahead` more zeros past it when it does not fit in those there, and mapping the file
    /// (again) when the record passes the mapping's end. An injected write fault (Docs/GDBMDriver.md, "I/O fault injection") fails before the copy;
    /// an ENOSPC one copies half the record first, as a full disk's short write leaves half a
    /// record, and the caller's cut back removes it with the zeros ahead.
    /// - Throws: `.io` when the zeros cannot be written or the file cannot be mapped.
    private func appendMapped(_ bytes: [UInt8], ahead: Int) throws {
        let end = size + bytes.count
        if end > allocated { try writeZeros(from: allocated, upTo: end + ahead) }
        if mapping == nil || end > mappingStart + mappingLength {
            unmap()
            let start = size & ~4095
            let length = max(Journal.mappingSpan, (end - start + 4095) & ~4095)
            try GDBMFaults.check("map", path: path)
            guard let mapped = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(start)), mapped != MAP_FAILED else {
                throw GDBMErrors.system(errno, "map", path: path)
            }
            mapping = mapped
            mappingStart = start
            mappingLength = length
        }
        guard let mapping else { throw GDBMErrors.system(EINVAL, "map", path: path) }
        let injected = GDBMFaults.failure("write", path: path)
        let count = injected.map { $0 == ENOSPC ? bytes.count / 2 : 0 } ?? bytes.count
        bytes.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            (mapping + (size - mappingStart)).copyMemory(from: base, byteCount: count)
        }
        if let injected { throw GDBMErrors.system(injected, "write", path: path) }
    }

    /// Writes zeros from `start` (the end of the file or of the records) up to `end` rounded
    /// up to a 4 KiB boundary, with `pwrite`, at most ``preallocationChunk`` per call: the
    /// file's length becomes ``allocated``. The fsync of a durable append that wrote them
    /// makes them durable with it.
    private func writeZeros(from start: Int, upTo end: Int) throws {
        let target = (end + 4095) & ~4095
        var at = start
        while at < target {
            let count = min(target - at, Journal.zeros.count)
            try Journal.zeros.withUnsafeBytes { raw in
                try Journal.writeAll(fd, UnsafeRawBufferPointer(rebasing: raw[0..<count]), at: at, path: path)
            }
            at += count
            allocated = max(allocated, at)
        }
    }

    /// The zeros ``writeZeros(from:upTo:)`` writes, one chunk at a time.
    private static let zeros = [UInt8](repeating: 0, count: preallocationChunk)

    /// Ends the mapping, if any.
    private func unmap() {
        if let mapping { munmap(mapping, mappingLength) }
        mapping = nil
        mappingLength = 0
    }

    /// fsyncs the journal.
    func sync() throws {
        try GDBMFaults.check("fsync", path: path)
        guard fsync(fd) == 0 else { throw GDBMErrors.system(errno, "sync", path: path) }
        syncedSize = size
    }

    func close() {
        unmap()
        if fd >= 0 {
            Glibc.close(fd)
            fd = -1
        }
    }

    deinit { close() }

    // MARK: Encoding

    static func encode(_ record: JournalRecord) -> [UInt8] {
        var w = ByteWriter(capacity: encodedSizeEstimate(record))
        encode(record, into: &w)
        return w.bytes
    }

    /// A capacity that holds `record`'s payload without growing (an upper bound: varints
    /// are counted at their longest).
    static func encodedSizeEstimate(_ record: JournalRecord) -> Int {
        guard case .transaction(_, let ops) = record else { return 16 }
        func fileSize(_ file: FileID) -> Int { 1 + 10 + (file.collection?.rawValue.utf8.count ?? 0) }
        var total = 1 + 8 + 10
        for op in ops {
            switch op {
            case .put(let file, let key, let value): total += 1 + fileSize(file) + 10 + key.count + 10 + value.count
            case .delete(let file, let key): total += 1 + fileSize(file) + 10 + key.count
            case .drop(let file): total += 1 + fileSize(file)
            }
        }
        return total
    }

    /// Appends `record`'s payload to `w`.
    static func encode(_ record: JournalRecord, into w: inout ByteWriter) {
        switch record {
        case .transaction(let seq, let ops):
            w.u8(1)
            w.u64(seq)
            w.varint(ops.count)
            for op in ops {
                switch op {
                case .put(let file, let key, let value):
                    w.u8(1); file.write(to: &w); w.blob(key); w.blob(value)
                case .delete(let file, let key):
                    w.u8(2); file.write(to: &w); w.blob(key)
                case .drop(let file):
                    w.u8(3); file.write(to: &w)
                }
            }
        case .applied(let seq):
            w.u8(2)
            w.u64(seq)
        case .checkpointBegin(let seq):
            w.u8(3)
            w.u64(seq)
        }
    }

    static func decode(_ payload: UnsafeRawBufferPointer) throws -> JournalRecord {
        var r = ByteReader(payload)
        let type = try r.u8()
        let seq = try r.u64()
        switch type {
        case 1:
            let n = try r.varint()
            guard n <= r.remaining else { throw ByteReader.Malformed() }
            var ops: [FileOp] = []
            ops.reserveCapacity(n)
            for _ in 0..<n {
                switch try r.u8() {
                case 1:
                    let file = try FileID.read(&r)
                    let key = try r.blob()
                    ops.append(.put(file, key: key, value: try r.blob()))
                case 2:
                    let file = try FileID.read(&r)
                    ops.append(.delete(file, key: try r.blob()))
                case 3:
                    ops.append(.drop(try FileID.read(&r)))
                default:
                    throw ByteReader.Malformed()
                }
            }
            guard r.isAtEnd else { throw ByteReader.Malformed() }
            return .transaction(seq: seq, ops: ops)
        case 2: return .applied(seq: seq)
        case 3: return .checkpointBegin(seq: seq)
        default: throw ByteReader.Malformed()
        }
    }

    // MARK: I/O helpers

    /// Writes all of `bytes` at file offset `offset` with `pwrite` (the file position is
    /// neither used nor moved). An injected ENOSPC writes half the bytes first, as a full
    /// disk does (Docs/GDBMDriver.md, "I/O fault injection"); an injected EIO writes nothing.
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int, path: String) throws {
        let injected = GDBMFaults.failure("write", path: path)
        guard let base = bytes.baseAddress else {
            if let injected { throw GDBMErrors.system(injected, "write", path: path) }
            return
        }
        let end = injected.map { $0 == ENOSPC ? bytes.count / 2 : 0 } ?? bytes.count
        var done = 0
        while done < end {
            let n = Glibc.pwrite(fd, base + done, end - done, off_t(offset + done))
            if n < 0 {
                if errno == EINTR { continue }
                throw GDBMErrors.system(errno, "write", path: path)
            }
            done += n
        }
        if let injected { throw GDBMErrors.system(injected, "write", path: path) }
    }

    /// ``writeAll(_:_:at:path:)`` of an array.
    static func writeAll(_ fd: Int32, _ bytes: [UInt8], at offset: Int, path: String) throws {
        try bytes.withUnsafeBytes { try writeAll(fd, $0, at: offset, path: path) }
    }

    /// Reads from the current position to the end.
    static func readAll(_ fd: Int32, path: String) throws -> [UInt8] {
        try GDBMFaults.check("read", path: path)
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw GDBMErrors.system(errno, "read", path: path)
            }
            if n == 0 { break }
            out.append(contentsOf: chunk[0..<n])
        }
        return out
    }
}

/// Small file-system helpers used by the store (all on the driver thread).
enum FileSystem {
    /// fsyncs a directory so renames and new files in it survive power loss.
    static func syncDirectory(_ path: String) throws {
        try GDBMFaults.check("fsync directory", path: path)
        let fd = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw GDBMErrors.system(errno, "open", path: path) }
        defer { Glibc.close(fd) }
        guard fsync(fd) == 0 else { throw GDBMErrors.system(errno, "sync", path: path) }
    }

    /// fsyncs a file.
    static func syncFile(_ path: String) throws {
        try GDBMFaults.check("fsync", path: path)
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw GDBMErrors.system(errno, "open", path: path) }
        defer { Glibc.close(fd) }
        guard fsync(fd) == 0 else { throw GDBMErrors.system(errno, "sync", path: path) }
    }

    static func makeDirectory(_ path: String) throws {
        try GDBMFaults.check("create directory", path: path)
        if mkdir(path, 0o755) != 0 && errno != EEXIST { throw GDBMErrors.system(errno, "create directory", path: path) }
        var st = stat()
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else {
            throw DepotError(.invalidStore, "The GDBM store path '\(path)' exists and is not a directory.")
        }
    }

    static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    static func rename(_ from: String, to: String) throws {
        try GDBMFaults.check("rename", path: from)
        guard Glibc.rename(from, to) == 0 else { throw GDBMErrors.system(errno, "rename", path: from) }
    }

    /// fsyncs an open descriptor (a dup of a GDBM file's, for a sync point off the files lock).
    static func sync(descriptor: Int32, path: String) throws {
        try GDBMFaults.check("fsync", path: path)
        guard fsync(descriptor) == 0 else { throw GDBMErrors.system(errno, "sync", path: path) }
    }

    /// The size of a file in bytes, `0` when it cannot be read.
    static func size(_ path: String) -> Int {
        var st = stat()
        guard stat(path, &st) == 0 else { return 0 }
        return Int(st.st_size)
    }

    static func remove(_ path: String) throws {
        try GDBMFaults.check("remove", path: path)
        if unlink(path) != 0 && errno != ENOENT { throw GDBMErrors.system(errno, "remove", path: path) }
    }

    /// The GDBM files of a directory, parsed into ``FileID``s (other names are ignored).
    static func gdbmFiles(in directory: String) throws -> [FileID] {
        try GDBMFaults.check("list", path: directory)
        let names: [String]
        do { names = try FileManager.default.contentsOfDirectory(atPath: directory) } catch {
            throw DepotError(.io, "Could not list '\(directory)'.", cause: DepotError.wrap(error))
        }
        return names.compactMap(FileID.init(fileName:))
    }

    /// Copies a file byte for byte and fsyncs the copy.
    static func copy(_ from: String, to: String) throws {
        try GDBMFaults.check("open", path: from)
        let src = Glibc.open(from, O_RDONLY | O_CLOEXEC)
        guard src >= 0 else { throw GDBMErrors.system(errno, "open", path: from) }
        defer { Glibc.close(src) }
        try GDBMFaults.check("create", path: to)
        let dst = Glibc.open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard dst >= 0 else { throw GDBMErrors.system(errno, "create", path: to) }
        defer { Glibc.close(dst) }
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        try chunk.withUnsafeMutableBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            while true {
                let n = Glibc.read(src, base, buffer.count)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw GDBMErrors.system(errno, "read", path: from)
                }
                if n == 0 { break }
                let injected = GDBMFaults.failure("write", path: to)
                let end = injected.map { $0 == ENOSPC ? n / 2 : 0 } ?? n
                var written = 0
                while written < end {
                    let w = Glibc.write(dst, base + written, end - written)
                    if w < 0 {
                        if errno == EINTR { continue }
                        throw GDBMErrors.system(errno, "write", path: to)
                    }
                    written += w
                }
                if let injected { throw GDBMErrors.system(injected, "write", path: to) }
            }
        }
        try GDBMFaults.check("fsync", path: to)
        guard fsync(dst) == 0 else { throw GDBMErrors.system(errno, "sync", path: to) }
    }
}
