import DepotCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The store's process lock: `flock` on `store/LOCK`, held for as long as the store is open.
///
/// One process at a time may hold it exclusively (the writer), or several may hold it
/// shared (read-only opens). gdbm's own locks never wait; this one does not either, so
/// opening retries with exponential backoff (1 ms doubling to 100 ms) until the timeout,
/// then fails with `.locked`.
final class StoreLock {
    private var fd: Int32
    let path: String

    private init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    /// Takes the lock, retrying until `timeoutMilliseconds` have passed.
    /// - Throws: `.locked` after the timeout, `.io` when the lock file cannot be opened.
    static func acquire(path: String, exclusive: Bool, timeoutMilliseconds: Int) throws -> StoreLock {
        try GDBMFaults.check("open lock file", path: path)
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw GDBMErrors.system(errno, "open the lock file", path: path) }
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(max(0, timeoutMilliseconds)) * 1_000_000
        var delay: UInt64 = 1_000_000
        while true {
            if flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0 { return StoreLock(fd: fd, path: path) }
            let err = errno
            guard err == EWOULDBLOCK || err == EAGAIN || err == EINTR else {
                close(fd)
                throw GDBMErrors.system(err, "lock", path: path)
            }
            let now = DispatchTime.now().uptimeNanoseconds
            if now >= deadline {
                close(fd)
                throw GDBMErrors.lockTimeout(path: (path as NSString).deletingLastPathComponent, milliseconds: timeoutMilliseconds)
            }
            let pause = min(delay, deadline - now)
            usleep(UInt32(pause / 1000))
            delay = min(delay * 2, 100_000_000)
        }
    }

    /// Turns an exclusive lock into a shared one (for read-only opens after recovery).
    func downgrade() throws {
        guard flock(fd, LOCK_SH) == 0 else { throw GDBMErrors.system(errno, "lock", path: path) }
    }

    /// Releases the lock. Idempotent.
    func release() {
        if fd >= 0 {
            flock(fd, LOCK_UN)
            close(fd)
            fd = -1
        }
    }

    deinit { release() }
}
