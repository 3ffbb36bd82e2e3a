import DepotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A file system that fails chosen operations, for proving that no failure corrupts a store.
///
/// It forwards to a real ``JSONFileSystem`` and numbers every operation that can fail
/// (every throwing method) from 1 after ``arm(failingAt:mode:)``. The chosen operation fails
/// with a realistic `errno`: a write first writes half of its bytes and then fails with
/// `ENOSPC` (a short write on a full disk), fsyncs fail with `EIO`, opens and renames with
/// `EACCES`, reads and stats with `EIO`, the lock with `ENOLCK`.
///
/// ```swift
/// let fs = FaultInjectingFileSystem()
/// let driver = try await JSONFileDriver(path: path, fileSystem: fs)
/// fs.arm(failingAt: 3, mode: .once)   // the third operation from now fails
/// ```
package final class FaultInjectingFileSystem: JSONFileSystem {
    /// How long a failure lasts.
    package enum Mode: Sendable, Hashable {
        /// Only operation N fails.
        case once
        /// Operation N and every later one fail (a dead disk).
        case always
    }

    private struct State {
        var count = 0
        var failAt: Int?
        var mode: Mode = .once
        var log: [String] = []
        var failures = 0
    }

    private let base: any JSONFileSystem
    private let state = Locked(State())

    /// Wraps `base` (the real file system by default). Nothing fails until armed.
    package init(base: any JSONFileSystem = PosixFileSystem()) {
        self.base = base
    }

    /// Restarts counting at zero and makes operation `n` (1-based) fail, once or from then on.
    package func arm(failingAt n: Int, mode: Mode) {
        state.withLock { $0 = State(count: 0, failAt: n, mode: mode) }
    }

    /// Restarts counting at zero with no failure planned (to count a commit's operations).
    package func disarm() {
        state.withLock { $0 = State() }
    }

    /// Operations counted since the last ``arm(failingAt:mode:)`` or ``disarm()``.
    package var operationCount: Int { state.withLock { $0.count } }

    /// The names of the operations counted, in order.
    package var operationLog: [String] { state.withLock { $0.log } }

    /// How many operations were made to fail.
    package var failureCount: Int { state.withLock { $0.failures } }

    /// Counts one operation and says whether it must fail.
    private func tick(_ name: String) -> Bool {
        state.withLock { s in
            s.count += 1
            s.log.append(name)
            guard let n = s.failAt else { return false }
            let fail = s.mode == .once ? s.count == n : s.count >= n
            if fail { s.failures += 1 }
            return fail
        }
    }

    package func openForReading(_ path: String) throws -> Int32? {
        if tick("openForReading") { throw FileSystemError(operation: "open", path: path, errno: EACCES) }
        return try base.openForReading(path)
    }

    package func openForWriting(_ path: String, permissions: UInt32?) throws -> Int32 {
        if tick("openForWriting") { throw FileSystemError(operation: "open", path: path, errno: EACCES) }
        return try base.openForWriting(path, permissions: permissions)
    }

    package func readAll(_ fd: Int32, limit: Int) throws -> [UInt8] {
        if tick("read") { throw FileSystemError(operation: "read", path: "fd \(fd)", errno: EIO) }
        return try base.readAll(fd, limit: limit)
    }

    package func write(_ fd: Int32, _ bytes: [UInt8]) throws {
        if tick("write") {
            try base.write(fd, Array(bytes.prefix(bytes.count / 2)))
            throw FileSystemError(operation: "write", path: "fd \(fd)", errno: ENOSPC)
        }
        try base.write(fd, bytes)
    }

    package func fsync(_ fd: Int32) throws {
        if tick("fsync") { throw FileSystemError(operation: "fsync", path: "fd \(fd)", errno: EIO) }
        try base.fsync(fd)
    }

    package func close(_ fd: Int32) throws {
        if tick("close") {
            base.closeQuietly(fd)
            throw FileSystemError(operation: "close", path: "fd \(fd)", errno: EIO)
        }
        try base.close(fd)
    }

    package func closeQuietly(_ fd: Int32) { base.closeQuietly(fd) }

    package func rename(_ from: String, _ to: String) throws {
        if tick("rename") { throw FileSystemError(operation: "rename", path: to, errno: EACCES) }
        try base.rename(from, to)
    }

    package func fsyncDirectory(_ path: String) throws {
        if tick("fsyncDirectory") { throw FileSystemError(operation: "fsync directory", path: path, errno: EIO) }
        try base.fsyncDirectory(path)
    }

    package func identity(ofPath path: String) throws -> FileIdentity? {
        if tick("stat") { throw FileSystemError(operation: "stat", path: path, errno: EIO) }
        return try base.identity(ofPath: path)
    }

    package func identity(of fd: Int32) throws -> FileIdentity {
        if tick("fstat") { throw FileSystemError(operation: "fstat", path: "fd \(fd)", errno: EIO) }
        return try base.identity(of: fd)
    }

    package func removeQuietly(_ path: String) { base.removeQuietly(path) }

    package func openLockFile(_ path: String) throws -> Int32 {
        if tick("openLockFile") { throw FileSystemError(operation: "open lock file", path: path, errno: EACCES) }
        return try base.openLockFile(path)
    }

    package func tryLock(_ fd: Int32) throws -> Bool {
        if tick("lock") { throw FileSystemError(operation: "flock", path: "fd \(fd)", errno: ENOLCK) }
        return try base.tryLock(fd)
    }

    package func unlock(_ fd: Int32) { base.unlock(fd) }
}
