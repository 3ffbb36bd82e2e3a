#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The real file system, through POSIX calls. Stateless, so trivially `Sendable`.
package struct PosixFileSystem: JSONFileSystem {
    /// Makes the real file system.
    package init() {}

    package func openForReading(_ path: String) throws -> Int32? {
        while true {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            if fd >= 0 { return fd }
            let code = errno
            if code == EINTR { continue }
            if code == ENOENT { return nil }
            throw FileSystemError(operation: "open", path: path, errno: code)
        }
    }

    package func openForWriting(_ path: String, permissions: UInt32?) throws -> Int32 {
        while true {
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, permissions.map { mode_t($0 & 0o600) } ?? 0o644)
            if fd < 0 {
                let code = errno
                if code == EINTR { continue }
                throw FileSystemError(operation: "open", path: path, errno: code)
            }
            if let permissions, fchmod(fd, mode_t(permissions & 0o7777)) != 0 {
                let code = errno
                _ = Glibc.close(fd)
                throw FileSystemError(operation: "fchmod", path: path, errno: code)
            }
            return fd
        }
    }

    package func readAll(_ fd: Int32, limit: Int) throws -> [UInt8] {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw FileSystemError(operation: "fstat", path: "fd \(fd)", errno: errno) }
        if Int64(st.st_size) > Int64(limit) { throw FileSystemError(operation: "read", path: "fd \(fd)", errno: EFBIG) }
        var out: [UInt8] = []
        out.reserveCapacity(Int(st.st_size) + 1)
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileSystemError(operation: "read", path: "fd \(fd)", errno: errno)
            }
            if n == 0 { return out }
            if out.count + n > limit { throw FileSystemError(operation: "read", path: "fd \(fd)", errno: EFBIG) }
            out.append(contentsOf: chunk[0..<n])
        }
    }

    package func write(_ fd: Int32, _ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = Glibc.write(fd, buffer.baseAddress.map { $0 + offset }, buffer.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw FileSystemError(operation: "write", path: "fd \(fd)", errno: errno)
                }
                // A zero-byte write for a non-empty buffer cannot make progress: report it.
                if n == 0 { throw FileSystemError(operation: "write", path: "fd \(fd)", errno: EIO) }
                offset += n
            }
        }
    }

    package func fsync(_ fd: Int32) throws {
        // Not retried on EINTR either: after a failed fsync the page cache may have dropped
        // the dirty pages, so a second call could report success for data that is gone.
        if Glibc.fsync(fd) != 0 { throw FileSystemError(operation: "fsync", path: "fd \(fd)", errno: errno) }
    }

    package func close(_ fd: Int32) throws {
        if Glibc.close(fd) != 0 { throw FileSystemError(operation: "close", path: "fd \(fd)", errno: errno) }
    }

    package func closeQuietly(_ fd: Int32) {
        _ = Glibc.close(fd)
    }

    package func rename(_ from: String, _ to: String) throws {
        if Glibc.rename(from, to) != 0 { throw FileSystemError(operation: "rename", path: to, errno: errno) }
    }

    package func fsyncDirectory(_ path: String) throws {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw FileSystemError(operation: "open directory", path: path, errno: errno) }
        defer { _ = Glibc.close(fd) }
        if Glibc.fsync(fd) != 0 { throw FileSystemError(operation: "fsync directory", path: path, errno: errno) }
    }

    /// inotify over `directory` on Linux (``FileChangeWatch``); `nil` elsewhere.
    package func changeWatch(directory: String) -> FileChangeWatch? {
        FileChangeWatch.make(directory: directory)
    }

    package func identity(ofPath path: String) throws -> FileIdentity? {
        var st = stat()
        if stat(path, &st) != 0 {
            if errno == ENOENT { return nil }
            throw FileSystemError(operation: "stat", path: path, errno: errno)
        }
        return FileIdentity(st)
    }

    package func identity(of fd: Int32) throws -> FileIdentity {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw FileSystemError(operation: "fstat", path: "fd \(fd)", errno: errno) }
        return FileIdentity(st)
    }

    package func removeQuietly(_ path: String) {
        _ = unlink(path)
    }

    package func openLockFile(_ path: String) throws -> Int32 {
        while true {
            let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            if fd >= 0 { return fd }
            if errno == EINTR { continue }
            throw FileSystemError(operation: "open lock file", path: path, errno: errno)
        }
    }

    package func tryLock(_ fd: Int32) throws -> Bool {
        while true {
            if flock(fd, LOCK_EX | LOCK_NB) == 0 { return true }
            let code = errno
            if code == EINTR { continue }
            if code == EWOULDBLOCK || code == EAGAIN { return false }
            throw FileSystemError(operation: "flock", path: "fd \(fd)", errno: code)
        }
    }

    package func unlock(_ fd: Int32) {
        _ = flock(fd, LOCK_UN)
    }
}

extension FileIdentity {
    init(_ st: stat) {
        self.init(
            device: UInt64(st.st_dev), inode: UInt64(st.st_ino), size: Int64(st.st_size),
            modificationSeconds: Int64(st.st_mtim.tv_sec), modificationNanoseconds: Int64(st.st_mtim.tv_nsec),
            changeSeconds: Int64(st.st_ctim.tv_sec), changeNanoseconds: Int64(st.st_ctim.tv_nsec),
            permissions: UInt32(st.st_mode) & 0o7777)
    }
}
