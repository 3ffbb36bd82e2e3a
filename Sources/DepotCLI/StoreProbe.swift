import Depot
import Foundation

/// Decides, without opening anything, whether a path already holds a store of a driver, and
/// remembers which of a store's files did not exist before a command opened it for writing.
///
/// Read-only commands (`info`, `count`, `dump`, `query`, `check`, `sql` and `copy`'s SRC)
/// must not turn an unrelated path into a store (Docs/CLI.md, "Read-only commands"), and a
/// `load` or `copy` that fails before committing anything must not leave a new store behind
/// (Docs/CLI.md, "A failed command leaves no trace"). Both need to know each persistent
/// driver's files; the layouts are the ones Docs/GDBMDriver.md, Docs/SQLiteDriver.md and
/// Docs/JSONFileDriver.md describe.
enum StoreProbe {
    /// The first 16 bytes of every SQLite database file.
    static let sqliteHeader = Array("SQLite format 3\u{0}".utf8)

    /// `true` when `path` already holds a store of the driver `scheme`:
    /// - `sqlite`: a regular file that starts with the SQLite header;
    /// - `gdbm`: a directory with the store's `journal` file and `data/` folder;
    /// - `json`: a regular file;
    /// - any other scheme: something exists at `path`.
    static func holdsStore(scheme: String, at path: String) -> Bool {
        switch scheme {
        case "sqlite": return startsWithSQLiteHeader(path)
        case "gdbm": return isDirectory(path) && isRegularFile(path + "/journal") && isDirectory(path + "/data")
        case "json": return isRegularFile(path)
        default: return FileManager.default.fileExists(atPath: path)
        }
    }

    /// What a store of the driver `scheme` is on disk, for messages.
    static func describeStore(scheme: String) -> String {
        switch scheme {
        case "sqlite": return "a sqlite store is a file starting with the SQLite header"
        case "gdbm": return "a gdbm store is a folder with a journal file and a data folder"
        case "json": return "a json store is a file"
        default: return "a \(scheme) store is a path that exists"
        }
    }

    /// `true` when `path` is a regular file (symbolic links followed).
    static func isRegularFile(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && !isDirectory.boolValue
    }

    /// `true` when `path` is a directory (symbolic links followed).
    static func isDirectory(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue
    }

    /// `true` when `path` is a regular file whose first bytes are the SQLite header. A file
    /// that exists but cannot be read counts as a store, so that the driver reports why it
    /// cannot be opened (it cannot write to it either).
    static func startsWithSQLiteHeader(_ path: String) -> Bool {
        guard isRegularFile(path) else { return false }
        guard let handle = FileHandle(forReadingAtPath: path) else { return true }
        defer { handle.closeFile() }
        do {
            let head = try handle.read(upToCount: sqliteHeader.count) ?? Data()
            return Array(head) == sqliteHeader
        } catch {
            return true
        }
    }

    /// The files and folders that opening the store at `path` for writing may create: a
    /// driver's own side files included (SQLite's `-wal`, `-shm` and `-journal`, the JSON
    /// driver's `.lock`; a GDBM store's folder, or the files inside a folder that existed).
    static func filesOpeningMayCreate(scheme: String, at path: String) -> [String] {
        switch scheme {
        case "sqlite": return [path, path + "-wal", path + "-shm", path + "-journal"]
        case "json": return [path, path + ".lock"]
        case "gdbm":
            if FileManager.default.fileExists(atPath: path) {
                return ["LOCK", "journal", "journal.new", "data", "backup"].map { path + "/" + $0 }
            }
            return [path]
        default: return []
        }
    }
}

/// The paths of a store that did not exist before a command opened it for writing, so that a
/// command that fails before committing anything can remove exactly what it created.
struct NewStoreTrace {
    /// Paths that did not exist when the trace was taken.
    let absent: [String]

    /// Notes which of the store's possible files are absent at `path` now. When `path`
    /// already holds a store, nothing is noted: a failed command never removes files of a
    /// store it did not create (not even a `-wal` another process may still need).
    init(scheme: String, path: String) {
        if StoreProbe.holdsStore(scheme: scheme, at: path) {
            absent = []
        } else {
            absent = StoreProbe.filesOpeningMayCreate(scheme: scheme, at: path).filter { !FileManager.default.fileExists(atPath: $0) }
        }
    }

    /// Removes every path that was absent when the trace was taken and exists now. Call it
    /// only after the store is closed. A path that cannot be removed is reported on standard
    /// error, not hidden.
    func removeCreated(_ context: CommandContext) {
        for path in absent where FileManager.default.fileExists(atPath: path) {
            do {
                try FileManager.default.removeItem(atPath: path)
                context.logger.debug("removed \(path), created by this failed command")
            } catch {
                context.logger.warning("could not remove \(path), created by this failed command: \(error)")
            }
        }
    }
}
