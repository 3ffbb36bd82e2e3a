import DepotCore
import Foundation

/// A dedicated thread that owns one ``SQLiteConnection`` and runs jobs on it in FIFO order.
///
/// Every blocking sqlite3 call runs here, never on Swift's cooperative pool: an `async`
/// caller enqueues a job and suspends on a continuation until the thread finishes it.
final class ConnectionThread: @unchecked Sendable {
    // @unchecked: `jobs`, `stopping` and `connection` are only touched while `condition` is
    // locked (enqueue/stop) or, for `connection`, only on the owned thread after it is set up
    // (the thread's job loop is its only user; `open` and `stop` hand it over under the lock).
    private let condition = NSCondition()
    private var jobs: [(SQLiteConnection?) -> Void] = []
    private var stopping = false
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
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
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
            condition.signal()
            condition.unlock()
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
            while jobs.isEmpty && !stopping { condition.wait() }
            if jobs.isEmpty && stopping {
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
