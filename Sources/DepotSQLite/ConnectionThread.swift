import DepotCore
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A dedicated thread that owns one ``SQLiteConnection`` and runs jobs on it in FIFO order.
///
/// Every blocking sqlite3 call runs here, never on Swift's cooperative pool: an `async`
/// caller enqueues a job and suspends on a continuation until the thread finishes it.
///
/// The hand-off is kept cheap: after running a job the thread spins for a short, bounded
/// while (``spinNanoseconds``) watching an atomic counter before it parks on its condition,
/// and an enqueuer signals the condition only when the thread is parked. A caller that
/// issues one operation after another (the common case: `await get`, `await update`, …)
/// so finds the thread awake and pays no thread wake-up on the way in. An idle store
/// spins not at all: the spin follows a job, never a park.
final class ConnectionThread: @unchecked Sendable {
    // @unchecked: `jobs` and `stopping` are only touched while `condition` is locked
    // (enqueue/stop/loop); `pending` and `parked` are atomics; `connection` is only used on
    // the owned thread after it is set up (the thread's job loop is its only user; `open`
    // and `stop` hand it over through jobs run on that thread); `thread` is written once
    // before the thread starts.
    private let condition = NSCondition()
    private var jobs: [(SQLiteConnection?) -> Void] = []
    private var stopping = false
    /// `jobs.count`, changed under the lock, read by the spin without it.
    private let pending = Atomic<Int>(0)
    /// `true` while the thread waits on `condition` (or is about to).
    private let parked = Atomic<Bool>(false)
    private var connection: SQLiteConnection?
    private var thread: Thread?

    /// How long the thread keeps watching for the next job after finishing one, before it
    /// parks: longer than most of a caller's round trips back through the cooperative pool
    /// (measured on a loaded 2-core VM: p50 13–23 µs, p90 about 42 µs), short enough that an
    /// idle connection costs nothing measurable. 50 µs, or `DEPOT_SQLITE_SPIN_US` from the
    /// environment (0 turns the spin off; at most 1,000).
    static let spinNanoseconds: UInt64 = {
        if let text = ProcessInfo.processInfo.environment["DEPOT_SQLITE_SPIN_US"], let micros = UInt64(text) {
            return min(micros, 1_000) * 1_000
        }
        return 50_000
    }()

    /// Starts the thread and opens the connection on it.
    /// - Throws: what opening the connection throws (the thread is stopped then).
    static func start(name: String, open: @escaping @Sendable () throws -> SQLiteConnection) async throws -> ConnectionThread {
        let worker = ConnectionThread()
        let thread = Thread { [worker] in worker.loop() }
        thread.name = name
        thread.stackSize = 1 << 20
        worker.thread = thread
        thread.start()
        do {
            try await worker.runRaw { _ in
                let connection = try open()
                worker.connection = connection
            }
        } catch {
            worker.stop()
            throw error
        }
        return worker
    }

    /// Runs `body` with the connection on the thread and returns its result.
    /// - Throws: what `body` throws; `.closed` once the thread is stopping.
    func run<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        try await runRaw { connection in
            guard let connection, !connection.isClosed else { throw DepotError(.closed, "The SQLite store is closed.") }
            return try body(connection)
        }
    }

    private func runRaw<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection?) throws -> T) async throws -> T {
        // Unsafe (unchecked) continuation: the job below resumes it exactly once, on every
        // path (result, thrown error), and a refused job resumes it instead of enqueueing.
        try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<T, any Error>) in
            let job: (SQLiteConnection?) -> Void = { connection in
                do { continuation.resume(returning: try body(connection)) } catch { continuation.resume(throwing: error) }
            }
            condition.lock()
            if stopping {
                condition.unlock()
                continuation.resume(throwing: DepotError(.closed, "The SQLite store is closed."))
                return
            }
            jobs.append(job)
            pending.add(1, ordering: .sequentiallyConsistent)
            condition.unlock()
            // `parked` is set under the lock before the thread checks `jobs`, so either the
            // thread saw this job, or it is parked (or parking) and needs the signal.
            if parked.load(ordering: .sequentiallyConsistent) {
                condition.lock()
                condition.signal()
                condition.unlock()
            }
        }
    }

    /// Finishes the queued jobs, closes the connection, ends the thread, and returns when
    /// the connection is closed.
    func shutdown() async {
        _ = try? await runRaw { connection in
            connection?.close()
        }
        stop()
    }

    /// Finishes the queued jobs, closes the connection, and ends the thread (without waiting).
    func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    /// Watches `pending` for up to ``spinNanoseconds``; `true` when a job arrived.
    private func spinForJob() -> Bool {
        let limit = Self.spinNanoseconds
        if limit == 0 { return false }
        let start = Self.monotonicNanoseconds()
        var spins = 0
        while pending.load(ordering: .relaxed) == 0 {
            spins &+= 1
            if spins & 31 == 0, Self.monotonicNanoseconds() &- start > limit { return false }
        }
        return true
    }

    private func loop() {
        var ranJob = false
        while true {
            if pending.load(ordering: .sequentiallyConsistent) == 0, ranJob, spinForJob() {
                ranJob = false
            }
            condition.lock()
            if jobs.isEmpty && !stopping {
                parked.store(true, ordering: .sequentiallyConsistent)
                while jobs.isEmpty && !stopping { condition.wait() }
                parked.store(false, ordering: .sequentiallyConsistent)
            }
            if jobs.isEmpty {
                // Only a stop ends the wait with no job.
                condition.unlock()
                break
            }
            let job = jobs.removeFirst()
            pending.subtract(1, ordering: .sequentiallyConsistent)
            condition.unlock()
            job(connection)
            ranJob = true
        }
        connection?.close()
        connection = nil
    }

    /// CLOCK_MONOTONIC in nanoseconds.
    @inline(__always)
    private static func monotonicNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }
}
