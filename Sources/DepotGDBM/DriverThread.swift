import DepotCore
import Foundation

/// The driver's own thread: every gdbm call, fsync and file operation of one store runs
/// here, one job at a time, never on Swift's cooperative thread pool.
///
/// Because jobs run one at a time, a transaction's closure (and its commit) never
/// interleaves with another's: read transactions see one consistent state, writers are
/// serialized.
final class DriverThread: @unchecked Sendable {
    // @unchecked: `jobs` and `stopped` are read and written only while `condition` is
    // locked; the thread itself is started once in `init`.
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var stopped = false

    init(name: String) {
        let thread = Thread { [self] in self.loop() }
        thread.name = name
        thread.stackSize = 4 << 20
        thread.start()
    }

    private func loop() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopped { condition.wait() }
            if jobs.isEmpty && stopped {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job()
        }
    }

    /// Queues `job`; returns `false` if the thread has stopped.
    private func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        if stopped { return false }
        jobs.append(job)
        condition.signal()
        return true
    }

    /// Runs `body` on the thread and returns its result to the awaiting task.
    /// - Throws: what `body` throws; `.closed` if the thread has stopped.
    func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let queued = submit {
                do { continuation.resume(returning: try body()) } catch { continuation.resume(throwing: error) }
            }
            if !queued { continuation.resume(throwing: DepotError(.closed, "The GDBM store is closed.")) }
        }
    }

    /// Runs `body` on the thread and blocks the calling (non-pool) thread until it is done.
    func runBlocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) throws -> T {
        let done = DispatchSemaphore(value: 0)
        let box = ResultBox<T>()
        let queued = submit {
            box.result = Result { try body() }
            done.signal()
        }
        guard queued else { throw DepotError(.closed, "The GDBM store is closed.") }
        done.wait()
        guard let result = box.result else { throw DepotError(.internal, "A driver job ended without a result.") }
        return try result.get()
    }

    /// Lets queued jobs finish, then ends the thread. Later submissions fail with `.closed`.
    func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }
}

/// Carries one result from the driver thread to a blocked caller.
private final class ResultBox<T>: @unchecked Sendable {
    // @unchecked: written once by the driver thread before `signal()`, read by the waiting
    // thread only after `wait()` returns: the semaphore orders the two accesses.
    var result: Result<T, any Error>?
}
