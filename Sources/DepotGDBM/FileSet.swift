import DepotCore
import Foundation

/// The GDBM files of one directory of the store (`data/` or `backup/`), opened on demand
/// and kept open. Used only on the engine's thread.
final class FileSet {
    let directory: String
    private(set) var open: [FileID: GDBMFile] = [:]
    /// Files written since the last ``syncAll()``.
    private(set) var dirty: Set<FileID> = []
    /// A file was created or removed since the last ``syncAll()``.
    private(set) var directoryChanged = false

    /// Open files with gdbm's reader mode and never create any.
    var readOnly: Bool

    init(directory: String, readOnly: Bool = false) {
        self.directory = directory
        self.readOnly = readOnly
    }

    func path(_ id: FileID) -> String { directory + "/" + id.fileName }

    /// The open file, opening it if it exists (or creating it when `create`); `nil` when
    /// it does not exist and `create` is false.
    func file(_ id: FileID, create: Bool) throws -> GDBMFile? {
        if let f = open[id] { return f }
        let path = path(id)
        if (!create || readOnly) && !FileSystem.exists(path) { return nil }
        if FileSystem.exists(path) {
            // gdbm turns an empty file opened for writing into a new database; for a file we
            // wrote, zero bytes means damage, not "empty".
            guard FileSystem.size(path) > 0 else {
                throw GDBMErrors.corrupted("The GDBM file '\(id.fileName)' is empty.", collection: id.collection?.rawValue)
            }
        } else {
            directoryChanged = true
        }
        let f = try GDBMFile.open(path: path, name: id.fileName, create: create && !readOnly, readOnly: readOnly)
        open[id] = f
        return f
    }

    /// Applies one change.
    func apply(_ op: FileOp) throws {
        switch op {
        case .put(let id, let key, let value):
            guard let f = try file(id, create: true) else { return }
            try f.store(key, value)
            dirty.insert(id)
        case .delete(let id, let key):
            guard let f = try file(id, create: false) else { return }
            try f.delete(key)
            dirty.insert(id)
        case .drop(let id):
            open.removeValue(forKey: id)?.close()
            dirty.remove(id)
            try FileSystem.remove(path(id))
            directoryChanged = true
        }
    }

    /// gdbm_sync on every written file, then fsync of the directory if it changed.
    func syncAll() throws {
        for id in dirty { try open[id]?.sync() }
        dirty.removeAll()
        if directoryChanged {
            try FileSystem.syncDirectory(directory)
            directoryChanged = false
        }
    }

    /// Closes every file (a clean close: sound GDBM files).
    func closeAll() {
        for (_, f) in open { f.close() }
        open.removeAll()
        dirty.removeAll()
    }

    /// Removes every GDBM file of the directory (files must be closed).
    func removeAllFiles() throws {
        closeAll()
        for id in try FileSystem.gdbmFiles(in: directory) { try FileSystem.remove(path(id)) }
        directoryChanged = true
    }
}
