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

    init(directory: String, readOnly: Bool = false, mapped: Bool = true) {
        self.directory = directory
        self.readOnly = readOnly
        self.mapped = mapped
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
        directoryChanged = true
    }
}
