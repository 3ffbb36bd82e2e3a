import DepotCore
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Threads of the driver: every gdbm call, fsync and file operation of a store runs on
/// them, never on Swift's cooperative thread pool.
///
/// A store has two: its writer thread (one worker: write transactions, commits, applying
/// commits to the files, checkpoints) and its reader pool (several workers: read
/// transactions, stream pages, integrity checks).
final class DriverThread: @unchecked Sendable {
    // @unchecked: `jobs`, `head` and `stopped` are read and written only while `condition`
    // is locked; the threads are started once in `init`.
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var head = 0
    private var stopped = false
    /// The pthread id of the single worker once it runs (0 before, and for pools).
    private let threadID = Atomic<UInt>(0)

    init(name: String, workers: Int = 1) {
        for n in 0..<max(1, workers) {
            let thread = Thread { [self] in self.loop(recordID: workers == 1) }
            thread.name = workers == 1 ? name : "\(name).\(n)"
            thread.stackSize = 4 << 20
            thread.start()
        }
    }

    private func loop(recordID: Bool) {
        if recordID { threadID.store(UInt(pthread_self()), ordering: .releasing) }
        while true {
            condition.lock()
            while head == jobs.count && !stopped { condition.wait() }
            if head == jobs.count && stopped {
                condition.unlock()
                return
            }
            let job = jobs[head]
            head += 1
            if head == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 1024 {
                jobs.removeFirst(head)
                head = 0
            }
            condition.unlock()
            job()
        }
    }

    /// `true` when called on this thread (a task running here with this executor preferred).
    var isCurrent: Bool {
        let id = threadID.load(ordering: .acquiring)
        return id != 0 && id == UInt(pthread_self())
    }

    /// Queues `job`; returns `false` if the thread has stopped.
    @discardableResult
    func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
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
