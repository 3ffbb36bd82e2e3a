#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A value that is only read or written while holding a lock: Depot's own mutex, used in
/// place of the standard library's `Synchronization.Mutex` throughout the package.
///
/// Same shape as `Mutex`: not copyable, `Sendable`, and ``withLock(_:)`` hands the body the
/// value `inout` while the lock is held. It differs in one way that matters for testing: the
/// lock is a `pthread_mutex_t`, which ThreadSanitizer intercepts, so the sanitizer knows that
/// work done under the lock is ordered. On Linux it does not see `Mutex`'s lock and unlock and
/// reports every access under one as a race (Docs/Testing.md, "Sanitizers").
///
/// Not reentrant: calling ``withLock(_:)`` on the same value from inside its body deadlocks.
/// Uncontended, a `withLock` costs about what `Mutex.withLock` does (13 ns against 16 ns for
/// a dictionary update on the development machine, -O).
package struct Locked<Value: ~Copyable>: ~Copyable {
    // Both on the heap: a pthread mutex must not move after it is initialized, and this
    // struct may be moved.
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline let value: UnsafeMutablePointer<Value>

    /// Creates the lock around `initialValue`.
    package init(_ initialValue: consuming sending Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        // Default attributes: a normal, non-recursive mutex. It only fails for lack of
        // resources the default attributes do not need.
        pthread_mutex_init(mutex, nil)
        value = .allocate(capacity: 1)
        value.initialize(to: initialValue)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
        value.deinitialize(count: 1)
        value.deallocate()
    }

    /// Runs `body` with the value while holding the lock, and returns what it returns.
    /// - Throws: what `body` throws; the lock is released either way.
    @inlinable
    package borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }

    /// Runs `body` with the value if the lock can be taken without waiting, and returns what
    /// it returns; returns nil, without running `body`, if another thread holds the lock.
    /// - Throws: what `body` throws; the lock is released either way.
    @inlinable
    package borrowing func withLockIfAvailable<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result? {
        guard pthread_mutex_trylock(mutex) == 0 else { return nil }
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }
}

// The value is only reached through `withLock`, under the lock.
extension Locked: @unchecked Sendable where Value: ~Copyable {}
