import DepotCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The GDBM files of one directory of the store (`data/` or `backup/`), opened on demand
/// and kept open.
///
/// Readers on the reader pool call ``file(_:create:)`` (without `create`) concurrently;
/// `lock` guards the table of open files and every gdbm call. Everything that changes files
/// runs on the writer thread, with the engine's write lock held when readers could be reading.
final class FileSet {
    let directory: String
    /// Guards `open` and is held around every gdbm call on these files.
    let lock = FilesLock()
    private var open: [FileID: GDBMFile] = [:]
    /// Files looked up without `create` and found missing: no `access(2)` per lookup (a bulk
    /// insert into a new collection looks its file up once per record). Files appear only
    /// through this object (created by ``file(_:create:)``) or while it is cleared
    /// (``closeAll()``, ``removeAllFiles()`` come before every copy into the directory).
    private var missing: Set<FileID> = []
    /// Files written since the last ``syncAll()``.
    private(set) var dirty: Set<FileID> = []
    /// A file was created or removed since the last ``syncAll()``.
    private(set) var directoryChanged = false
    /// Each open file's size when it was opened (0 when created) or last fsynced: where
    /// ``bytesGrownSinceSync()`` measures from. Guarded by `lock` (readers open files too).
    private var sizeAtSync: [FileID: Int] = [:]

    /// Open files with gdbm's reader mode and never create any.
    var readOnly: Bool
    /// Let gdbm memory-map the files (see ``GDBMFile/open(path:name:create:readOnly:mapped:lock:)``).
    let mapped: Bool

    /// Read-only handles for read transactions' fetches (``ReaderHandles``); `nil` for a set
    /// opened without them (the backups).
    let readers: ReaderHandles?

    /// Counts the changes made to the files' contents (stores, deletes, drops, closes): a
    /// reader handle opened at one count is current until the next. Changed only with the
    /// engine's files lock held for writing, read by read transactions holding it for
    /// reading.
    private(set) var changeCount: UInt64 = 0
    /// When the files last changed (``GDBMEngine/monotonicNanoseconds()``), guarded the
    /// same way: reader handles are reopened only after a quiet spell (``ReaderHandles``).
    private(set) var changedAt: UInt64 = 0

    init(directory: String, readOnly: Bool = false, mapped: Bool = true, readerSlots: Int = 0) {
        self.directory = directory
        self.readOnly = readOnly
        self.mapped = mapped
        readers = readerSlots > 0 && mapped ? ReaderHandles(slots: readerSlots) : nil
    }

    /// What ``fetchForReader(_:_:layouts:)`` found.
    enum ReaderFetch: ~Copyable {
        /// The value, and the field layouts to decode it with (`nil`: the store's shared ones).
        case found(FetchedValue, [FieldLayout]?)
        /// The key is absent.
        case absent
        /// Read it through the writer's handle (``file(_:create:)``, ``GDBMFile/fetch(_:_:)``).
        case declined
    }

    /// Fetches `key` from the file `id` for a read transaction, which holds the engine's
    /// files lock for reading.
    ///
    /// In order: this thread's reader handle if it is current (``ReaderHandles``); the
    /// writer's handle if no other thread is in gdbm at that moment (its mapping and bucket
    /// cache are warm, and its lock is taken once, not twice); a reader handle, reopened if
    /// the files have been quiet long enough. `.declined` leaves the read to the writer's
    /// handle, waiting for its lock. So one thread reading alone never opens a reader handle,
    /// and threads reading at once soon read side by side.
    func fetchForReader(_ id: FileID, _ key: [UInt8], layouts: FieldLayoutCache) throws -> ReaderFetch {
        guard let readers else { return .declined }
        if readerHandlesFirst {
            return ReaderFetch(readers.fetch(id, path: self.path(id), changeCount: changeCount, changedAt: changedAt, onlyIfCurrent: false, quiet: 0, layouts: layouts, key))
        }
        switch readers.fetch(id, path: self.path(id), changeCount: changeCount, changedAt: changedAt, onlyIfCurrent: true, layouts: layouts, key) {
        case .found(let value, let layouts): return .found(value, layouts)
        case .absent: return .absent
        case .declined: break
        }
        if lock.tryLock() {
            guard let file = open[id] else {
                lock.unlock()
                return .declined
            }
            guard let value = try file.fetchValue(holdingLock: key) else { return .absent }
            return .found(value, nil)
        }
        return ReaderFetch(readers.fetch(id, path: self.path(id), changeCount: changeCount, changedAt: changedAt, onlyIfCurrent: false, layouts: layouts, key))
    }

    /// For tests: reads go to the reader handles first, reopened as soon as they are
    /// stale, whether or not the writer's handle is free.
    var readerHandlesFirst = false

    /// Marks the files changed: reader handles opened before are stale.
    private func changed() {
        changeCount &+= 1
        changedAt = GDBMEngine.monotonicNanoseconds()
    }

    func path(_ id: FileID) -> String { directory + "/" + id.fileName }

    /// The open file, opening it if it exists (or creating it when `create`); `nil` when
    /// it does not exist and `create` is false.
    func file(_ id: FileID, create: Bool) throws -> GDBMFile? {
        // Opening under the lock too: two handles on one file would fight over gdbm's lock.
        try lock.withLock {
            if let f = open[id] { return f }
            if !create && missing.contains(id) { return nil }
            let opened = try openFile(id, create: create)
            if let opened {
                open[id] = opened
                missing.remove(id)
            } else {
                missing.insert(id)
            }
            return opened
        }
    }

    private func openFile(_ id: FileID, create: Bool) throws -> GDBMFile? {
        let path = path(id)
        if (!create || readOnly) && !FileSystem.exists(path) { return nil }
        if FileSystem.exists(path) {
            // gdbm turns an empty file opened for writing into a new database; for a file we
            // wrote, zero bytes means damage, not "empty".
            let size = FileSystem.size(path)
            guard size > 0 else {
                throw GDBMErrors.corrupted("The GDBM file '\(id.fileName)' is empty.", collection: id.collection?.rawValue)
            }
            sizeAtSync[id] = size
        } else {
            directoryChanged = true
            sizeAtSync[id] = 0
        }
        return try GDBMFile.open(path: path, name: id.fileName, create: create && !readOnly, readOnly: readOnly, mapped: mapped, lock: lock)
    }

    /// Applies one change.
    func apply(_ op: FileOp) throws {
        changed()
        switch op {
        case .put(let id, let key, let value):
            guard let f = try file(id, create: true) else { return }
            try unmapIfBatch(id, f)
            try f.store(key, value)
            dirty.insert(id)
        case .delete(let id, let key):
            guard let f = try file(id, create: false) else { return }
            try unmapIfBatch(id, f)
            try f.delete(key)
            dirty.insert(id)
        case .drop(let id):
            let dropped = lock.withLock {
                sizeAtSync.removeValue(forKey: id)
                return open.removeValue(forKey: id)
            }
            // A file dropped in the middle of a batch is closed: nothing to map again.
            batchUnmapped?.removeValue(forKey: id)
            readers?.closeAll()
            dropped?.close()
            dirty.remove(id)
            try FileSystem.remove(path(id))
            directoryChanged = true
        }
    }

    /// Batches of at least this many file ops are applied with gdbm's memory mapping off in
    /// the files they write (Docs/GDBMDriver.md, "Large applies").
    static let unmappedBatchOps = 1024

    /// During ``apply(_:)`` of a large batch: the files whose mapping it turned off.
    private var batchUnmapped: [FileID: GDBMFile]?

    /// Batches applied with the mapping off since the files were opened (for tests).
    private(set) var unmappedBatches = 0

    /// Applies `batches` of changes in order: one commit's ops, or the commits waiting to be
    /// applied. With at least ``unmappedBatchOps`` ops in all (a bulk load, a large
    /// transaction) and mapped files, each file is written with gdbm's mapping off
    /// (``GDBMFile/beginUnmappedWrites()``) and mapped again at the end, which fsyncs it:
    /// gdbm then writes with `pwrite` instead of unmapping and mapping the file again each
    /// time it grows (2.3 times as fast for 64,000 inserts of 1.1 KB in a C program on this
    /// machine, the fsync included).
    /// - Throws: what a write throws, or `.io` when gdbm cannot change the mapping (its fsync
    ///   failed); the files may then hold part of the batch, as after any failed apply.
    func apply(_ batches: [[FileOp]]) throws {
        let count = batches.reduce(0) { $0 + $1.count }
        guard mapped, count >= FileSet.unmappedBatchOps else {
            for ops in batches { for op in ops { try apply(op) } }
            return
        }
        batchUnmapped = [:]
        unmappedBatches += 1
        var failure: (any Error)?
        do {
            for ops in batches { for op in ops { try apply(op) } }
        } catch {
            failure = error
        }
        let files = batchUnmapped ?? [:]
        batchUnmapped = nil
        for file in files.values {
            do { try file.endUnmappedWrites() } catch { failure = failure ?? error }
        }
        if let failure { throw failure }
    }

    /// In a large batch, turns the mapping of `file` off the first time the batch writes it.
    private func unmapIfBatch(_ id: FileID, _ file: GDBMFile) throws {
        guard batchUnmapped != nil, batchUnmapped?[id] == nil else { return }
        try file.beginUnmappedWrites()
        batchUnmapped?[id] = file
    }

    /// gdbm_sync on every written file, then fsync of the directory if it changed.
    func syncAll() throws {
        for id in dirty {
            guard let file = lock.withLock({ open[id] }) else { continue }
            try file.sync()
            let size = try file.byteCount()
            lock.withLock { sizeAtSync[id] = size }
        }
        dirty.removeAll()
        if directoryChanged {
            try FileSystem.syncDirectory(directory)
            directoryChanged = false
        }
    }

    /// For a sync point off the files lock: duplicates of the descriptors of the files written
    /// since the last sync (closed by the caller) and whether the directory changed; both
    /// are then cleared, as by ``syncAll()``. Files written after this call are in the next.
    func takeDirty() throws -> (descriptors: [(fd: Int32, path: String)], directoryChanged: Bool) {
        var descriptors: [(fd: Int32, path: String)] = []
        do {
            for id in dirty {
                guard let f = lock.withLock({ open[id] }) else { continue }
                descriptors.append((try f.duplicateDescriptor(), f.path))
                // Taken before the fsync starts: what is written from here on counts as
                // growth since this sync.
                let size = try f.byteCount()
                lock.withLock { sizeAtSync[id] = size }
            }
        } catch {
            for d in descriptors { Glibc.close(d.fd) }
            throw error
        }
        let changed = directoryChanged
        dirty.removeAll()
        directoryChanged = false
        return (descriptors, changed)
    }

    /// How many bytes the files written since the last sync (``syncAll()``, ``takeDirty()``)
    /// have grown since then, or since they were opened or created: records added make
    /// files grow, records rewritten at the same size (gdbm writes them in place) do not.
    /// - Throws: ``GDBMErrors`` `.io` when a file's size cannot be read.
    func bytesGrownSinceSync() throws -> Int {
        var grown = 0
        for id in dirty {
            guard let (file, base) = lock.withLock({ open[id].map { ($0, sizeAtSync[id] ?? 0) } }) else { continue }
            grown += max(0, try file.byteCount() - base)
        }
        return grown
    }

    /// Closes every file (a clean close: sound GDBM files).
    func closeAll() {
        changed()
        readers?.closeAll()
        let files = lock.withLock {
            defer {
                open.removeAll()
                missing.removeAll()
                sizeAtSync.removeAll()
            }
            return Array(open.values)
        }
        for f in files { f.close() }
        dirty.removeAll()
    }

    /// Removes every GDBM file of the directory (files must be closed).
    func removeAllFiles() throws {
        closeAll()
        for id in try FileSystem.gdbmFiles(in: directory) { try FileSystem.remove(path(id)) }
        changed()
        directoryChanged = true
    }
}

extension FileSet.ReaderFetch {
    /// What a reader handle found.
    init(_ fetched: consuming ReaderHandles.Fetched) {
        switch consume fetched {
        case .found(let value, let layouts): self = .found(value, layouts)
        case .absent: self = .absent
        case .declined: self = .declined
        }
    }
}
