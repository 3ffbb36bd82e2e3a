import CGDBM
import DepotCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// One open GDBM database file.
///
/// gdbm handles are not thread-safe: every call into gdbm holds `lock` (shared by the files
/// of one directory), and only for the call itself. Changing the file (store, delete, sync,
/// close) additionally needs the engine's write lock, so readers never see it change.
final class GDBMFile {
    private(set) var handle: OpaquePointer?
    private let lock: FilesLock
    /// The file's name inside its directory (for messages).
    let name: String
    let path: String

    private init(handle: OpaquePointer, name: String, path: String, lock: FilesLock) {
        self.handle = handle
        self.lock = lock
        self.name = name
        self.path = path
    }

    /// Opens (and with `create`, creates) a GDBM file as a writer.
    ///
    /// `mapped` false opens it with `GDBM_NOMMAP`: gdbm then reads and writes with
    /// `pread`/`pwrite` through its bucket cache. The backups use it: a fold running beside
    /// transactions would otherwise remap its growing files, and every remap interrupts the
    /// process's other threads to flush their TLBs.
    /// - Throws: `.locked`, `.corrupted` (not a GDBM file), `.io`.
    static func open(path: String, name: String, create: Bool, readOnly: Bool = false, mapped: Bool = true, lock: FilesLock = FilesLock()) throws -> GDBMFile {
        let mode: Int32 = readOnly ? GDBM_READER : (create ? GDBM_WRCREAT : GDBM_WRITER)
        let flags = mode | GDBM_CLOEXEC | GDBM_XVERIFY | (mapped ? 0 : GDBM_NOMMAP)
        try GDBMFaults.check("gdbm open", path: path)
        guard let dbf = gdbm_open(path, 0, flags, 0o644, nil) else {
            let saved = errno
            throw GDBMErrors.fromOpen(operation: "open", file: name, savedErrno: saved)
        }
        // A fixed bucket cache instead of gdbm's automatic one, which grows with the
        // directory (a full scan of a million-record file would keep ~35 MB of buckets).
        var cacheSize = GDBMFile.bucketCacheSize
        _ = gdbm_setopt(dbf, GDBM_SETCACHESIZE, &cacheSize, Int32(MemoryLayout<Int>.size))
        return GDBMFile(handle: dbf, name: name, path: path, lock: lock)
    }

    /// Buckets gdbm keeps in memory per file (a bucket is one block, 4 KiB on most file
    /// systems): about 4 MiB at most per open file.
    static let bucketCacheSize = 1024

    /// Holders of gdbm's memory mapping off for this file: streams reading it and large
    /// batches writing it (guarded by `lock`).
    private var unmappedReaders = 0

    /// Turns gdbm's memory mapping of this file off until the matching
    /// ``endUnmappedReads()`` (nested calls count).
    ///
    /// A stream over a large file would otherwise make the whole file resident in this
    /// process: gdbm maps the file and every fetch faults in its pages, with the kernel's
    /// fault-around adding up to 64 KiB around each. Unmapped, gdbm reads buckets and values
    /// with `pread` into its bucket cache (``bucketCacheSize`` blocks), so RSS stays bounded.
    /// Other reads and writes of the file meanwhile work the same, through `pread`/`pwrite`.
    /// gdbm fsyncs the file when the mode changes (harmless: nothing uncommitted is in it).
    /// If gdbm refuses, the mapping simply stays on.
    func beginUnmappedReads() {
        lock.lock()
        defer { lock.unlock() }
        guard let handle else { return }
        unmappedReaders += 1
        if unmappedReaders == 1 {
            var flag: Int32 = 0
            _ = gdbm_setopt(handle, GDBM_SETMMAP, &flag, Int32(MemoryLayout<Int32>.size))
        }
    }

    /// Ends one ``beginUnmappedReads()``; the last one turns the mapping back on.
    /// Harmless after ``close()``.
    func endUnmappedReads() {
        lock.lock()
        defer { lock.unlock() }
        guard let handle, unmappedReaders > 0 else { return }
        unmappedReaders -= 1
        if unmappedReaders == 0 {
            var flag: Int32 = 1
            _ = gdbm_setopt(handle, GDBM_SETMMAP, &flag, Int32(MemoryLayout<Int32>.size))
        }
    }

    /// Turns gdbm's memory mapping of this file off for a batch of writes, until the matching
    /// ``endUnmappedWrites()``; shares the count of ``beginUnmappedReads()``, so the mapping
    /// comes back only when neither a stream nor a batch still wants it off.
    ///
    /// gdbm maps exactly the file's current size, so every write that grows the file
    /// unmaps and maps it again, and each unmap interrupts the process's other threads to
    /// flush their TLBs; unmapped, gdbm writes with `pwrite` instead
    /// (Docs/GDBMDriver.md, "Large applies"). gdbm fsyncs the file when the mode changes.
    /// - Throws: `.io` when gdbm refuses (its fsync failed); the count is then unchanged.
    func beginUnmappedWrites() throws {
        lock.lock()
        defer { lock.unlock() }
        let dbf = try dbf()
        if unmappedReaders == 0 {
            try GDBMFaults.check("gdbm mapping", path: path)
            var flag: Int32 = 0
            guard gdbm_setopt(dbf, GDBM_SETMMAP, &flag, Int32(MemoryLayout<Int32>.size)) == 0 else {
                throw GDBMErrors.fromFile(dbf, operation: "turn the memory mapping off", file: name)
            }
        }
        unmappedReaders += 1
    }

    /// Ends one ``beginUnmappedWrites()``; the last holder turns the mapping back on, which
    /// fsyncs the file (gdbm's own step).
    /// - Throws: `.io` when gdbm refuses; the count is ended anyway, and the file stays
    ///   readable and writable unmapped.
    func endUnmappedWrites() throws {
        lock.lock()
        defer { lock.unlock() }
        guard let handle, unmappedReaders > 0 else { return }
        unmappedReaders -= 1
        if unmappedReaders == 0 {
            try GDBMFaults.check("gdbm mapping", path: path)
            var flag: Int32 = 1
            guard gdbm_setopt(handle, GDBM_SETMMAP, &flag, Int32(MemoryLayout<Int32>.size)) == 0 else {
                throw GDBMErrors.fromFile(handle, operation: "turn the memory mapping back on", file: name)
            }
        }
    }

    /// Whether gdbm currently reads this file through its memory mapping (`nil` once closed
    /// or when gdbm cannot say).
    var isMemoryMapped: Bool? {
        lock.lock()
        defer { lock.unlock() }
        guard let handle else { return nil }
        var flag: Int32 = 0
        guard gdbm_setopt(handle, GDBM_GETMMAP, &flag, Int32(MemoryLayout<Int32>.size)) == 0 else { return nil }
        return flag != 0
    }

    private func dbf() throws -> OpaquePointer {
        guard let handle else { throw DepotError(.internal, "GDBM file '\(name)' used after close.") }
        return handle
    }

    /// Calls `body` with the value stored under `key`; `nil` when there is none.
    func fetch<T>(_ key: [UInt8], _ body: (UnsafeRawBufferPointer) throws -> T) throws -> T? {
        lock.lock()
        return try fetch(holdingLock: key, body)
    }

    /// ``fetch(_:_:)`` for a caller that took `lock` already; it is released before `body`
    /// runs (or the call throws).
    func fetch<T>(holdingLock key: [UInt8], _ body: (UnsafeRawBufferPointer) throws -> T) throws -> T? {
        guard let value = try fetchValue(holdingLock: key) else { return nil }
        return try body(value.bytes)
    }

    /// The value under `key` as gdbm returned it, for a caller that took `lock` already; the
    /// lock is released before it returns (or throws). `nil` when there is none.
    func fetchValue(holdingLock key: [UInt8]) throws -> FetchedValue? {
        guard let dbf = handle else {
            lock.unlock()
            throw DepotError(.internal, "GDBM file '\(name)' used after close.")
        }
        let found = key.withUnsafeBytes { raw -> datum in
            let k = datum(dptr: UnsafeMutablePointer(mutating: raw.baseAddress?.assumingMemoryBound(to: CChar.self)), dsize: Int32(raw.count))
            return gdbm_fetch(dbf, k)
        }
        guard let value = FetchedValue(found) else {
            defer { lock.unlock() }
            if Int(gdbm_last_errno(dbf)) == Int(GDBM_ITEM_NOT_FOUND) { return nil }
            throw GDBMErrors.fromFile(dbf, operation: "read", file: name)
        }
        lock.unlock()
        return value
    }

    /// The value under `key` as bytes.
    func fetch(_ key: [UInt8]) throws -> [UInt8]? { try fetch(key) { Array($0) } }

    /// `true` when `key` is present.
    func contains(_ key: [UInt8]) throws -> Bool {
        let dbf = try dbf()
        lock.lock()
        defer { lock.unlock() }
        let found = key.withUnsafeBytes { raw -> Int32 in
            let k = datum(dptr: UnsafeMutablePointer(mutating: raw.baseAddress?.assumingMemoryBound(to: CChar.self)), dsize: Int32(raw.count))
            return gdbm_exists(dbf, k)
        }
        if found != 0 { return true }
        let code = Int(gdbm_last_errno(dbf))
        if code == Int(GDBM_NO_ERROR) || code == Int(GDBM_ITEM_NOT_FOUND) { return false }
        throw GDBMErrors.fromFile(dbf, operation: "read", file: name)
    }

    /// Stores `value` under `key`, replacing what was there.
    func store(_ key: [UInt8], _ value: [UInt8]) throws {
        let dbf = try dbf()
        try GDBMFaults.check("gdbm store", path: path)
        lock.lock()
        defer { lock.unlock() }
        let rc = key.withUnsafeBytes { kraw in
            value.withUnsafeBytes { vraw -> Int32 in
                let k = datum(dptr: UnsafeMutablePointer(mutating: kraw.baseAddress?.assumingMemoryBound(to: CChar.self)), dsize: Int32(kraw.count))
                // gdbm rejects a NULL dptr even for an empty value; point at the key then.
                let vptr = vraw.baseAddress ?? kraw.baseAddress
                let v = datum(dptr: UnsafeMutablePointer(mutating: vptr?.assumingMemoryBound(to: CChar.self)), dsize: Int32(vraw.count))
                return gdbm_store(dbf, k, v, GDBM_REPLACE)
            }
        }
        if rc != 0 { throw GDBMErrors.fromFile(dbf, operation: "write", file: name) }
    }

    /// Removes `key`; a missing key is not an error.
    func delete(_ key: [UInt8]) throws {
        let dbf = try dbf()
        try GDBMFaults.check("gdbm delete", path: path)
        lock.lock()
        defer { lock.unlock() }
        let rc = key.withUnsafeBytes { raw -> Int32 in
            let k = datum(dptr: UnsafeMutablePointer(mutating: raw.baseAddress?.assumingMemoryBound(to: CChar.self)), dsize: Int32(raw.count))
            return gdbm_delete(dbf, k)
        }
        if rc != 0 && Int(gdbm_last_errno(dbf)) != Int(GDBM_ITEM_NOT_FOUND) {
            throw GDBMErrors.fromFile(dbf, operation: "delete from", file: name)
        }
    }

    /// Calls `body` with each key (in hash order) until it returns `false`.
    /// The file must not change during the walk.
    func forEachKey(_ body: (UnsafeRawBufferPointer) throws -> Bool) throws {
        let dbf = try dbf()
        lock.lock()
        var key = gdbm_firstkey(dbf)
        var code = key.dptr == nil ? Int(gdbm_last_errno(dbf)) : 0
        lock.unlock()
        while let ptr = key.dptr {
            let keep: Bool
            do {
                keep = try body(UnsafeRawBufferPointer(start: ptr, count: Int(key.dsize)))
            } catch {
                free(ptr)
                throw error
            }
            if !keep {
                free(ptr)
                return
            }
            lock.lock()
            let next = gdbm_nextkey(dbf, key)
            if next.dptr == nil { code = Int(gdbm_last_errno(dbf)) }
            lock.unlock()
            free(ptr)
            key = next
        }
        if code != Int(GDBM_ITEM_NOT_FOUND) && code != Int(GDBM_NO_ERROR) {
            throw lock.withLock { GDBMErrors.fromFile(dbf, operation: "iterate", file: name) }
        }
    }

    /// Every key, in hash order.
    func allKeys() throws -> [[UInt8]] {
        var keys: [[UInt8]] = []
        try forEachKey { keys.append(Array($0)); return true }
        return keys
    }

    /// The number of keys.
    func count() throws -> Int {
        let dbf = try dbf()
        lock.lock()
        defer { lock.unlock() }
        var n: gdbm_count_t = 0
        if gdbm_count(dbf, &n) != 0 { throw GDBMErrors.fromFile(dbf, operation: "count", file: name) }
        return Int(clamping: n)
    }

    /// Writes gdbm's caches and header to the file and fsyncs it.
    func sync() throws {
        let dbf = try dbf()
        try GDBMFaults.check("gdbm sync", path: path)
        lock.lock()
        defer { lock.unlock() }
        if gdbm_sync(dbf) != 0 { throw GDBMErrors.fromFile(dbf, operation: "sync", file: name) }
    }

    /// A duplicate of the file's descriptor, for an fsync that holds no lock while it runs
    /// (a sync point in the background; the caller closes it). gdbm writes a store's
    /// buckets, directory and header to the file (or its shared mapping) before
    /// `gdbm_store` returns, so fsyncing the descriptor makes every finished store durable.
    func duplicateDescriptor() throws -> Int32 {
        let dbf = try dbf()
        lock.lock()
        defer { lock.unlock() }
        let fd = dup(gdbm_fdesc(dbf))
        guard fd >= 0 else { throw GDBMErrors.system(errno, "dup", path: path) }
        return fd
    }

    /// The file's size in bytes (`fstat(2)` of gdbm's descriptor).
    /// - Throws: ``GDBMErrors`` `.io` when `fstat` fails; `.closed` for a closed file.
    func byteCount() throws -> Int {
        let dbf = try dbf()
        lock.lock()
        defer { lock.unlock() }
        var status = stat()
        guard fstat(gdbm_fdesc(dbf), &status) == 0 else { throw GDBMErrors.system(errno, "fstat", path: path) }
        return Int(status.st_size)
    }

    /// Closes the file (a clean close leaves a sound GDBM database). Idempotent.
    func close() {
        if let handle {
            lock.lock()
            defer { lock.unlock() }
            gdbm_close(handle)
            self.handle = nil
        }
    }

    deinit { close() }
}

/// A value `gdbm_fetch` returned: its own allocation, freed when this goes away. Reads hand
/// it up to the code that decodes it, so no closure carries the decoding down to gdbm.
struct FetchedValue: ~Copyable {
    private let pointer: UnsafeMutableRawPointer
    private let count: Int

    /// Takes `found`'s allocation; `nil` when gdbm returned none.
    init?(_ found: datum) {
        guard let pointer = found.dptr else { return nil }
        self.pointer = UnsafeMutableRawPointer(pointer)
        count = Int(found.dsize)
    }

    /// The value's bytes, valid while this lives.
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: pointer, count: count) }

    deinit { free(pointer) }
}
