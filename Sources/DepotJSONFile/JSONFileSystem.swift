/// The few file-system operations the JSON-file driver performs, behind a protocol so tests
/// can inject faults (``FaultInjectingFileSystem``) and count operations. Package-level, as
/// the fault injector: the public initializer always uses ``PosixFileSystem``.
///
/// Every method is blocking; the driver calls them only on its own thread. Methods that can
/// fail throw ``FileSystemError`` (the failed operation, the path and the `errno`); the
/// driver maps those to ``DepotCore/DepotError`` `.io` in one place. Cleanup operations
/// (`close`, `remove`, `unlock`) that the driver performs only after a failure, or that
/// cannot lose data, do not throw.
///
/// A commit with `durability=full` performs, in order: `openForWriting(temp)`, `write`,
/// `fsync`, `close`, `rename(temp, store)`, `fsyncDirectory`. With `durability=normal` the
/// two fsyncs are left out.
package protocol JSONFileSystem: Sendable {
    /// Opens an existing file for reading; `nil` when it does not exist.
    /// - Throws: ``FileSystemError`` for anything but "does not exist".
    func openForReading(_ path: String) throws -> Int32?

    /// Creates (or truncates) a file for writing, before any byte is written giving it
    /// exactly `permissions` (the store file's, so a private store stays private), or
    /// 0644 less the umask when `nil` (a new store).
    /// - Throws: ``FileSystemError`` (EACCES, ENOSPC, EROFS...).
    func openForWriting(_ path: String, permissions: UInt32?) throws -> Int32

    /// Reads the whole remaining content of `fd`, failing when it exceeds `limit` bytes.
    /// - Throws: ``FileSystemError``; `EFBIG` when the file is larger than `limit`.
    func readAll(_ fd: Int32, limit: Int) throws -> [UInt8]

    /// Writes all of `bytes`; a short write that cannot be completed throws.
    /// - Throws: ``FileSystemError`` (ENOSPC, EIO, EDQUOT...).
    func write(_ fd: Int32, _ bytes: [UInt8]) throws

    /// Flushes the file's data and metadata to stable storage.
    /// - Throws: ``FileSystemError``. A failed fsync must never be retried as if it worked.
    func fsync(_ fd: Int32) throws

    /// Closes a descriptor, reporting a deferred write error.
    /// - Throws: ``FileSystemError``.
    func close(_ fd: Int32) throws

    /// Closes a descriptor, ignoring errors (cleanup after a failure).
    func closeQuietly(_ fd: Int32)

    /// Atomically replaces `to` with `from` (both in one directory).
    /// - Throws: ``FileSystemError``.
    func rename(_ from: String, _ to: String) throws

    /// Makes the directory's entries (a rename) durable.
    /// - Throws: ``FileSystemError``.
    func fsyncDirectory(_ path: String) throws

    /// The identity of the file at `path` (device, inode, size, times); `nil` if missing.
    /// - Throws: ``FileSystemError`` for anything but "does not exist".
    func identity(ofPath path: String) throws -> FileIdentity?

    /// The identity of an open file.
    /// - Throws: ``FileSystemError``.
    func identity(of fd: Int32) throws -> FileIdentity

    /// Removes a file if present, ignoring errors (cleanup of a temporary file).
    func removeQuietly(_ path: String)

    /// Opens (creating if needed) the lock file beside the store.
    /// - Throws: ``FileSystemError``.
    func openLockFile(_ path: String) throws -> Int32

    /// Tries to take the exclusive advisory lock on `fd` without waiting; `false` if
    /// another open file description holds it.
    /// - Throws: ``FileSystemError`` for anything but "would block".
    func tryLock(_ fd: Int32) throws -> Bool

    /// Releases the lock taken by ``tryLock(_:)``.
    func unlock(_ fd: Int32)
    /// A change notification over the store's folder, or `nil` to have every read `stat`
    /// the file (the default: a file system a test simulates has no notifications).
    func changeWatch(directory: String) -> FileChangeWatch?
}

extension JSONFileSystem {
    /// No notification: every read `stat`s the file.
    package func changeWatch(directory: String) -> FileChangeWatch? { nil }
}

/// What identifies one version of a file: if any part differs, someone replaced or edited it.
package struct FileIdentity: Hashable, Sendable {
    /// The device holding the file (`st_dev`).
    package var device: UInt64
    /// The inode number (`st_ino`); a replaced file has a new one.
    package var inode: UInt64
    /// The size in bytes.
    package var size: Int64
    /// The modification time, whole seconds (`st_mtim.tv_sec`).
    package var modificationSeconds: Int64
    /// The modification time, nanoseconds within the second.
    package var modificationNanoseconds: Int64
    /// The status-change time, whole seconds (`st_ctim.tv_sec`); a chmod or rename changes it.
    package var changeSeconds: Int64
    /// The status-change time, nanoseconds within the second.
    package var changeNanoseconds: Int64
    /// The permission bits (`st_mode & 0o7777`).
    package var permissions: UInt32

    /// Makes an identity from its parts.
    package init(device: UInt64, inode: UInt64, size: Int64, modificationSeconds: Int64, modificationNanoseconds: Int64, changeSeconds: Int64, changeNanoseconds: Int64, permissions: UInt32) {
        self.device = device
        self.inode = inode
        self.size = size
        self.modificationSeconds = modificationSeconds
        self.modificationNanoseconds = modificationNanoseconds
        self.changeSeconds = changeSeconds
        self.changeNanoseconds = changeNanoseconds
        self.permissions = permissions
    }
}

/// A failed file-system operation: which one, on what, and the `errno`.
///
/// The path is the store's own path or a file beside it, never user data.
public struct FileSystemError: Error, Sendable, CustomStringConvertible {
    /// The operation, e.g. `"fsync"`, `"rename"`.
    public var operation: String
    /// The file or directory involved.
    public var path: String
    /// The C `errno` value.
    public var errno: Int32

    /// Makes an error.
    public init(operation: String, path: String, errno: Int32) {
        self.operation = operation
        self.path = path
        self.errno = errno
    }

    public var description: String { "\(operation) \(path): errno \(errno)" }
}
