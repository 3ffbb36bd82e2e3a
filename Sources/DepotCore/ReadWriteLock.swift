#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A readers-writer lock (pthread): many holders in read mode, or one in write mode.
///
/// For drivers whose synchronous transaction closures share one state (the memory driver,
/// GDBM's files). Never hold it across an `await`; a thread holding it in write mode must
/// not ask for it again in either mode.
package final class ReadWriteLock: @unchecked Sendable {
    // @unchecked: the pthread lock is made for use from many threads; the pointer is
    // allocated once and freed in deinit.
    private let lock: UnsafeMutablePointer<pthread_rwlock_t>

    package init() {
        lock = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)
        lock.initialize(to: pthread_rwlock_t())
        pthread_rwlock_init(lock, nil)
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    package func readLock() { pthread_rwlock_rdlock(lock) }
    package func tryReadLock() -> Bool { pthread_rwlock_tryrdlock(lock) == 0 }
    package func writeLock() { pthread_rwlock_wrlock(lock) }
    package func tryWriteLock() -> Bool { pthread_rwlock_trywrlock(lock) == 0 }
    package func unlock() { pthread_rwlock_unlock(lock) }
}
