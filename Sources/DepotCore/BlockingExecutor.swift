import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Threads of its own for a driver's blocking work (engine calls, file I/O, fsync, waiting
/// for a file lock), so none of it runs on Swift's cooperative thread pool.
///
/// An `async` caller hands a synchronous closure to ``run(_:)`` and suspends until one of
/// the executor's threads has run it; a plain thread can wait with ``runBlocking(_:)``, and
/// ``submit(_:)`` queues work without waiting. Jobs start in submission order. With one
/// worker they also run one at a time, so state touched only by jobs needs no lock of its own
/// (SQLite keeps one executor per connection for that; JSON and GDBM's writer have one each);
/// with several (GDBM's readers) they run side by side.
///
/// It is also a `TaskExecutor`: a task that prefers a one-worker executor
/// (`withTaskExecutorPreference`) runs on its thread, and then ``run(_:)`` calls the closure
/// right there instead of queueing it (``isCurrent``).
///
/// ``stop()`` lets the queued jobs finish and ends the threads; later jobs are refused with
/// `.closed`. Jobs are not cancelled: a task cancelled while waiting still gets the job's
/// result, since a half-run engine call cannot be taken back.
package final class BlockingExecutor: @unchecked Sendable {
    // @unchecked: `jobs`, `head` and `stopped` are read and written only while `condition`
    // is locked; `parked` and `threadID` are atomics; the rest is immutable after `init`.
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    /// Index of the next job to run in `jobs` (the array is compacted now and then).
    private var head = 0
    private var stopped = false
    /// How many workers wait on `condition`. Raised under the lock before waiting, so a
    /// submitter that reads 0 after queueing knows a worker will see its job without a
    /// signal (the worker is busy and looks at the queue before it waits again).
    private let parked = Atomic<Int>(0)
    /// The thread id of the single worker once it runs; 0 before, and for several workers.
    private let threadID = Atomic<UInt>(0)
    /// Jobs queued and not yet started: raised as a job is queued, lowered as a worker takes it.
    private let pending = Atomic<Int>(0)
    private let closedError: DepotError

    /// Starts the threads.
    /// - Parameters:
    ///   - name: the thread name (with `.0`, `.1`, ... appended for several workers), cut
    ///     to its first 15 bytes, the most Linux keeps (`top -H` and debuggers show it).
    ///   - workers: how many threads take jobs from the one queue (at least 1).
    ///   - stackSize: each thread's stack in bytes; `nil` for the system's default.
    ///   - closedMessage: the message of the `.closed` error refused jobs fail with.
    package init(name: String, workers: Int = 1, stackSize: Int? = nil, closedMessage: String) {
        closedError = DepotError(.closed, closedMessage)
        let count = max(1, workers)
        for n in 0..<count {
            // Linux keeps at most 15 bytes of a thread's name and ignores a longer one, and
            // Foundation applies a name only from the thread itself: set it there, cut short.
            let threadName = String(decoding: (count == 1 ? name : "\(name).\(n)").utf8.prefix(15), as: UTF8.self)
            let thread = Thread { [self] in
                Thread.current.name = threadName
                let id = Self.currentThreadID()
                BlockingExecutor.workers.withLock { _ = $0.insert(id) }
                defer { BlockingExecutor.workers.withLock { _ = $0.remove(id) } }
                self.work(recordingID: count == 1)
            }
            if let stackSize { thread.stackSize = stackSize }
            thread.start()
        }
    }

    private func work(recordingID: Bool) {
        if recordingID { threadID.store(Self.currentThreadID(), ordering: .releasing) }
        condition.lock()
        while true {
            if head == jobs.count {
                if stopped { break }
                parked.add(1, ordering: .sequentiallyConsistent)
                while head == jobs.count && !stopped { condition.wait() }
                parked.subtract(1, ordering: .sequentiallyConsistent)
                continue
            }
            let job = jobs[head]
            head += 1
            pending.subtract(1, ordering: .relaxed)
            if head == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 1024 {
                jobs.removeFirst(head)
                head = 0
            }
            condition.unlock()
            job()
            condition.lock()
        }
        condition.unlock()
    }

    private static func currentThreadID() -> UInt {
        #if canImport(Glibc)
        UInt(pthread_self())
        #else
        UInt(bitPattern: pthread_self())
        #endif
    }

    /// The thread ids of every executor's running workers.
    private static let workers = Locked<Set<UInt>>([])

    /// `true` when called on a worker thread of any executor: a driver's own thread, not the
    /// caller's (for tests of where work runs).
    package static var isWorkerThread: Bool {
        let id = currentThreadID()
        return workers.withLock { $0.contains(id) }
    }

    /// `true` when called on the worker of a one-worker executor (from a job, or from a task
    /// that prefers this executor); always `false` for several workers.
    package var isCurrent: Bool {
        let id = threadID.load(ordering: .acquiring)
        return id != 0 && id == Self.currentThreadID()
    }

    /// `true` when no job is waiting to start at this moment (a hint: one may be queued
    /// right after, and one may be running).
    package var isIdle: Bool { pending.load(ordering: .acquiring) == 0 }

    /// How many workers wait for a job at this moment (a hint, for tests: a job queued while
    /// every worker waits, for longer than a signal takes, is a lost wake-up).
    package var parkedWorkers: Int { parked.load(ordering: .sequentiallyConsistent) }

    /// Queues `job` without waiting for it.
    /// - Returns: `false` (and drops `job`) once ``stop()`` has been called.
    @discardableResult
    package func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        condition.lock()
        if stopped {
            condition.unlock()
            return false
        }
        pending.add(1, ordering: .relaxed)
        jobs.append(job)
        condition.unlock()
        // A worker that parked before the job was queued needs the signal; one that parks
        // later finds the job first (see `parked`). The signal is sent without the lock: a
        // parked worker was already waiting on `condition` when the job was queued under the
        // lock, so it cannot miss it, and a worker woken while the submitter still held the
        // lock went straight back to sleep on the lock, a second wake-up on every hop.
        if parked.load(ordering: .sequentiallyConsistent) > 0 {
            condition.signal()
        }
        return true
    }

    /// Runs `body` on one of the threads and returns its result to the suspended caller;
    /// on the worker itself (``isCurrent``) it runs `body` at once.
    /// - Throws: what `body` throws; `.closed` once ``stop()`` has been called.
    package func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        if isCurrent { return try body() }
        // Unsafe continuation: the job resumes it exactly once (result or error), and a
        // refused job is resumed here instead, never both.
        return try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<T, any Error>) in
            let queued = submit { continuation.resume(with: Result { try body() }) }
            if !queued { continuation.resume(throwing: closedError) }
        }
    }

    /// Runs `body` on one of the threads and blocks the calling thread until it is done.
    /// For plain threads only (a stream's producer): never call it from a Swift task.
    /// - Throws: what `body` throws; `.closed` once ``stop()`` has been called.
    package func runBlocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) throws -> T {
        if isCurrent { return try body() }
        let done = DispatchSemaphore(value: 0)
        let box = ResultBox<T>()
        let queued = submit {
            box.result = Result { try body() }
            done.signal()
        }
        guard queued else { throw closedError }
        done.wait()
        guard let result = box.result else { throw DepotError(.internal, "A driver job ended without a result.") }
        return try result.get()
    }

    /// ``runBlocking(_:)`` for a closure that need not escape or be `Sendable`: the calling
    /// thread waits until the job is done, so the closure and its result never outlive it.
    /// - Throws: what `body` throws; `.closed` once ``stop()`` has been called.
    package func runBlocking<T>(nonEscaping body: () throws -> T) throws -> T {
        try withoutActuallyEscaping(body) { body in
            let loan = ClosureLoan<Void, T> { _ in try body() }
            defer { loan.end() }
            return try runBlocking { UncheckedSendable(try loan.call(())) }.value
        }
    }

    /// Lets the queued jobs finish, then ends the threads (without waiting for them). Later
    /// jobs are refused: ``run(_:)`` and ``runBlocking(_:)`` throw `.closed`. Calling it
    /// again does nothing.
    package func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }
}

extension BlockingExecutor: TaskExecutor {
    /// Runs a task's job on the executor's threads (or, once stopped, on a thread of its own,
    /// since a job that never runs would leave its task suspended forever).
    package func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        if !submit({ unowned.runSynchronously(on: executor) }) {
            Thread.detachNewThread { unowned.runSynchronously(on: executor) }
        }
    }
}

/// Carries one result from a worker to the thread blocked in `runBlocking`.
private final class ResultBox<T>: @unchecked Sendable {
    // @unchecked: written once by the worker before `signal()`, read by the waiting thread
    // only after `wait()` returns: the semaphore orders the two accesses.
    var result: Result<T, any Error>?
}
