import DepotCore
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

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
    /// The pthread id of the thread once it runs (0 before).
    private let threadID = Atomic<UInt>(0)

    init(name: String) {
        let thread = Thread { [self] in self.loop() }
        thread.name = name
        thread.stackSize = 4 << 20
        thread.start()
    }

    private func loop() {
        threadID.store(UInt(pthread_self()), ordering: .releasing)
        while true {
            condition.lock()
            while jobs.isEmpty && !stopped { condition.wait() }
            if jobs.isEmpty && stopped {
                condition.unlock()
                return
            }
            let batch = jobs
            jobs.removeAll(keepingCapacity: true)
            condition.unlock()
            for job in batch { job() }
        }
    }

    /// `true` when called on this thread (a task running here with this executor preferred).
    var isCurrent: Bool {
        let id = threadID.load(ordering: .acquiring)
        return id != 0 && id == UInt(pthread_self())
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
        // Already here (the task prefers this executor): no hop.
        if isCurrent { return try body() }
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
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

/// The thread is also a task executor: a task that prefers it
/// (`withTaskExecutorPreference(driver.taskExecutor)`) runs on the store's thread, and its
/// transactions then run inline, without two thread switches per transaction.
extension DriverThread: TaskExecutor {
    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        if !submit({ unowned.runSynchronously(on: executor) }) {
            // Stopped: the job must still run somewhere, or its task would never resume.
            Thread.detachNewThread { unowned.runSynchronously(on: executor) }
        }
    }
}

/// Carries one result from the driver thread to a blocked caller.
private final class ResultBox<T>: @unchecked Sendable {
    // @unchecked: written once by the driver thread before `signal()`, read by the waiting
    // thread only after `wait()` returns: the semaphore orders the two accesses.
    var result: Result<T, any Error>?
}
