import DepotCore
import Foundation
import Synchronization

/// A dedicated thread that owns one ``SQLiteConnection`` and runs jobs on it in FIFO order.
///
/// Every blocking sqlite3 call runs here, never on Swift's cooperative pool: an `async`
/// caller enqueues a job and suspends on a continuation until the thread finishes it.
///
/// The hand-off: a caller appends its job under the lock and signals the condition only
/// when the thread is parked; the job resumes an unsafe continuation (exactly once).
final class ConnectionThread: @unchecked Sendable {
    // @unchecked: `jobs` and `stopping` are only touched while `condition` is locked
    // (enqueue/stop/loop); `parked` is an atomic; `connection` is only used on
    // the owned thread after it is set up (the thread's job loop is its only user; `open`
    // and `stop` hand it over through jobs run on that thread); `thread` is written once
    // before the thread starts.
    private let condition = NSCondition()
    private var jobs: [(SQLiteConnection?) -> Void] = []
    private var stopping = false
    /// `true` while the thread waits on `condition` (or is about to).
    private let parked = Atomic<Bool>(false)
    private var connection: SQLiteConnection?
    private var thread: Thread?

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

    private func loop() {
        while true {
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
            condition.unlock()
            job(connection)
        }
        connection?.close()
        connection = nil
    }
}
