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
/// The hand-off: a caller appends its job under the lock and signals the condition only
/// when the thread is parked; the job resumes an unsafe continuation (exactly once). The
/// thread can spin for a short, bounded while after a job (``spinNanoseconds``, off by
/// default) watching an atomic job count before it parks, so a caller issuing one operation
/// after another finds it awake; the spin backs off when it keeps missing (see `loop`) and
/// never follows a park, so an idle store spins not at all.
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
    /// parks: `DEPOT_SQLITE_SPIN_US` from the environment (at most 1,000 µs), 0 (no spin) by
    /// default. A caller's round trip back through the cooperative pool took p50 13–23 µs,
    /// p90 ~42 µs on the 2-core development VM, so a 50 µs spin catches most next jobs; but
    /// that VM always runs more threads than it has cores, and there the spinning thread took
    /// CPU from the caller and from everyone else: `depot bench` point reads went from 38 µs
    /// p50 / 84 µs p99 without the spin to 58 µs / 4.7 ms with it (adaptive back-off included).
    /// Turn it on only on a machine with a core to spare.
    static let spinNanoseconds: UInt64 = {
        if let text = ProcessInfo.processInfo.environment["DEPOT_SQLITE_SPIN_US"], let micros = UInt64(text) {
            return min(micros, 1_000) * 1_000
        }
        return 0
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
        // Adaptive: a spin that saw no job makes the thread skip spinning for the next
        // `backoff` idle moments (doubling up to 256); a spin that caught a job resets it.
        // On a machine with more runnable threads than cores the caller comes back late,
        // spins fail, and the thread soon stops spinning instead of taking CPU from others.
        var skip = 0
        var backoff = 1
        while true {
            if ranJob, pending.load(ordering: .sequentiallyConsistent) == 0 {
                if skip > 0 {
                    skip -= 1
                } else if spinForJob() {
                    backoff = 1
                } else {
                    skip = backoff
                    backoff = min(backoff * 2, 256)
                }
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
