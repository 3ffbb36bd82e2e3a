import Depot
import Foundation

/// Decides, without changing anything, whether a path already holds a store of a driver, and
/// remembers which of a store's files did not exist before a command opened it for writing.
///
/// Read-only commands (`info`, `count`, `dump`, `query`, `check`, `sql` and `copy`'s SRC)
/// must not turn an unrelated path into a store (Docs/CLI.md, "Read-only commands"), and a
/// `load` or `copy` that fails before committing anything must not leave a new store behind
/// (Docs/CLI.md, "A failed command leaves no trace"). Both need to know each persistent
/// driver's files; the layouts are the ones Docs/GDBMDriver.md, Docs/SQLiteDriver.md and
/// Docs/JSONFileDriver.md describe.
enum StoreProbe {
    /// `true` when `path` already holds a store of the driver `scheme`, decided without
    /// creating, locking or changing anything there:
    /// - `sqlite`: an SQLite database holding Depot's catalog tables, read through a
    ///   read-only connection (``SQLiteDriver/holdsStore(atPath:)``);
    /// - `gdbm`: a directory with the store's `journal` file and `data/` folder;
    /// - `json`: a regular file that is empty or holds a JSON object (its first character,
    ///   after a byte order mark and white space, is `{`);
    /// - any other scheme: something exists at `path`.
    /// - Throws: `.io` when a file that may be a store cannot be read; what SQLite reports
    ///   for a damaged database.
    static func holdsStore(scheme: String, at path: String) throws -> Bool {
        switch scheme {
        case "sqlite": return try SQLiteDriver.holdsStore(atPath: path)
        case "gdbm": return isDirectory(path) && isRegularFile(path + "/journal") && isDirectory(path + "/data")
        case "json": return try holdsJSONObjectOrNothing(path)
        default: return FileManager.default.fileExists(atPath: path)
        }
    }

    /// What a store of the driver `scheme` is on disk, for messages.
    static func describeStore(scheme: String) -> String {
        switch scheme {
        case "sqlite": return "a sqlite store is an SQLite database with Depot's _depotsys tables"
        case "gdbm": return "a gdbm store is a folder with a journal file and a data folder"
        case "json": return "a json store is a file holding a JSON object, or an empty file"
        default: return "a \(scheme) store is a path that exists"
        }
    }

    /// `true` when `path` is a regular file that is empty (white space only) or whose first
    /// character after an optional UTF-8 byte order mark and white space is `{`. Reads only
    /// as far as that character.
    /// - Throws: `.io` when the file cannot be read.
    static func holdsJSONObjectOrNothing(_ path: String) throws -> Bool {
        guard isRegularFile(path) else { return false }
        guard let handle = FileHandle(forReadingAtPath: path) else { throw DepotError(.io, "The file at \(path) cannot be read.") }
        defer { handle.closeFile() }
        var first = true
        while true {
            let chunk: [UInt8]
            do {
                chunk = Array(try handle.read(upToCount: 4096) ?? Data())
            } catch {
                throw DepotError(.io, "The file at \(path) cannot be read.", detail: "\(error)")
            }
            if chunk.isEmpty { return true }
            var bytes = chunk[...]
            if first, bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
            first = false
            if let significant = bytes.first(where: { !($0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D) }) {
                return significant == UInt8(ascii: "{")
            }
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

    /// The files and folders that opening the store at `path` for writing may create: a
    /// driver's own side files included (SQLite's `-wal`, `-shm` and `-journal`, the JSON
    /// driver's `.lock`; a GDBM store's folder, or the files inside a folder that existed).
    static func filesOpeningMayCreate(scheme: String, at path: String) -> [String] {
        switch scheme {
        case "sqlite": return [path, path + "-wal", path + "-shm", path + "-journal"]
        case "json": return [path, path + ".lock"]
        case "gdbm":
            if FileManager.default.fileExists(atPath: path) {
                return ["LOCK", "journal", "journal.new", "data", "backup", "backup.b"].map { path + "/" + $0 }
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
    /// The store's path when it was an empty file that is not a store of the driver (SQLite
    /// prepares one as a new database): emptied again, not removed, after a failure.
    let emptyFile: String?

    /// Notes which of the store's possible files are absent at `path` now. When `path`
    /// already holds a store, nothing is noted: a failed command never removes files of a
    /// store it did not create (not even a `-wal` another process may still need).
    /// - Throws: what ``StoreProbe/holdsStore(scheme:at:)`` throws.
    init(scheme: String, path: String) throws {
        if try StoreProbe.holdsStore(scheme: scheme, at: path) {
            absent = []
            emptyFile = nil
        } else {
            absent = StoreProbe.filesOpeningMayCreate(scheme: scheme, at: path).filter { !FileManager.default.fileExists(atPath: $0) }
            var size: Int64?
            do {
                size = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value
            } catch {
                size = nil  // no size known: the file is never emptied
            }
            emptyFile = StoreProbe.isRegularFile(path) && size == 0 ? path : nil
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
        if let emptyFile {
            guard let handle = FileHandle(forWritingAtPath: emptyFile) else {
                context.logger.warning("could not empty \(emptyFile) again after this failed command")
                return
            }
            defer { handle.closeFile() }
            do {
                try handle.truncate(atOffset: 0)
                context.logger.debug("emptied \(emptyFile) again after this failed command")
            } catch {
                context.logger.warning("could not empty \(emptyFile) again after this failed command: \(error)")
            }
        }
    }
}
