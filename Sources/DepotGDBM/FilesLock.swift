import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The lock held around every gdbm call on the files of one directory (``FileSet/lock``).
///
/// Its critical sections are one gdbm call each (about a microsecond for a fetch), and
/// concurrent readers take it all the time. A plain mutex puts a waiting thread to sleep in
/// the kernel and wakes it again, which costs more than the call it waited for: two clients
/// reading at once ran slower than one (Docs/GDBMDriver.md, "Concurrent reads"). On Linux
/// this is glibc's adaptive mutex, which spins briefly before sleeping; elsewhere a
/// normal one.
final class FilesLock: NSLocking, @unchecked Sendable {
    // On the heap: a pthread mutex must not move after it is initialized.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        #if canImport(Glibc)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        #endif
        // Fails only for lack of resources these attributes do not need.
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    /// Takes the lock if it is free; `false` (without waiting) when another thread holds it.
    func tryLock() -> Bool { pthread_mutex_trylock(mutex) == 0 }
    func unlock() { pthread_mutex_unlock(mutex) }
}
