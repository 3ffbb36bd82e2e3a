import DepotCore
import Foundation

/// One ``SQLiteConnection`` and the thread that owns it: a one-worker
/// ``DepotCore/BlockingExecutor`` for the connection's queued work, and a lock that whoever
/// uses the connection holds.
///
/// An `async` caller either queues a job and suspends until the thread has run it
/// (``run(_:)``), or, when the lock is free right now, runs its work on its own thread
/// (``runIfFree(_:)``, which never waits). Docs/SQLiteDriver.md ("Where transactions run")
/// says which work may run inline. The connection is opened by the first job and closed
/// by the last.
final class ConnectionThread: @unchecked Sendable {
    // @unchecked: `connection` is written only by the first and the last job on `executor`
    // (before any other use, and after every other job), always under `lock`, and used only
    // while `lock` is held.
    private let executor: BlockingExecutor
    private var connection: SQLiteConnection?
    /// Held by whoever uses the connection: a job on the thread (waiting for it there), or a
    /// caller running inline (which only ever tries it).
    private let lock = NSLock()

    private init(name: String) {
        executor = BlockingExecutor(name: name, stackSize: 1 << 20, closedMessage: "The SQLite store is closed.")
    }

    /// Starts the thread and opens the connection on it.
    /// - Throws: what opening the connection throws (the thread is stopped then).
    static func start(name: String, open: @escaping @Sendable () throws -> SQLiteConnection) async throws -> ConnectionThread {
        let worker = ConnectionThread(name: name)
        do {
            try await worker.executor.run { worker.install(try open()) }
        } catch {
            worker.stop()
            throw error
        }
        return worker
    }

    /// Stores the opened connection under `lock`, which every later use takes (an inline
    /// caller's ``runIfFree(_:)`` included): the task that awaited the opening job does see
    /// it, but ThreadSanitizer cannot follow that hand-off and reported the inline read as a
    /// race with this write.
    private func install(_ opened: SQLiteConnection) {
        lock.lock()
        defer { lock.unlock() }
        connection = opened
    }

    /// ``start(name:open:)`` for a caller that waits instead of suspending.
    static func startBlocking(name: String, open: @escaping @Sendable () throws -> SQLiteConnection) throws -> ConnectionThread {
        let worker = ConnectionThread(name: name)
        do {
            try worker.executor.runBlocking { worker.install(try open()) }
        } catch {
            worker.stop()
            throw error
        }
        return worker
    }

    /// Runs `body` with the connection on the calling thread, waiting for the lock: for
    /// callers that asked to wait (the blocking API), never for the cooperative pool.
    /// - Throws: what `body` throws; `.closed` when the connection is closed.
    func runWaiting<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(try openConnection())
    }

    /// Runs `body` with the connection on the thread and returns its result.
    /// - Throws: what `body` throws; `.closed` once the thread is stopping or the connection
    ///   is closed.
    func run<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        try await executor.run { [self] in
            lock.lock()
            defer { lock.unlock() }
            return try body(try self.openConnection())
        }
    }

    /// Queues `body` on the thread without waiting for it (the writer's checkpoints).
    func submit(_ body: @escaping @Sendable (SQLiteConnection) -> Void) {
        executor.submit { [self] in
            lock.lock()
            defer { lock.unlock() }
            if let connection, !connection.isClosed { body(connection) }
        }
    }

    /// Runs `body` with the connection on the calling thread if nobody is using the
    /// connection and no job is queued for it at this moment; returns `nil` at once
    /// otherwise, without waiting.
    /// - Throws: what `body` throws; `.closed` when the connection is closed.
    func runIfFree<T>(_ body: (SQLiteConnection) throws -> T) throws -> T? {
        guard executor.isIdle, lock.try() else { return nil }
        defer { lock.unlock() }
        return try body(try openConnection())
    }

    private func openConnection() throws -> SQLiteConnection {
        guard let connection, !connection.isClosed else { throw DepotError(.closed, "The SQLite store is closed.") }
        return connection
    }

    /// Finishes the queued jobs, closes the connection, ends the thread, and returns when
    /// the connection is closed.
    func shutdown() async {
        _ = try? await executor.run { [self] in
            lock.lock()
            defer { lock.unlock() }
            connection?.close()
        }
        stop()
    }

    /// Finishes the queued jobs, closes the connection, and ends the thread (without waiting).
    func stop() {
        // Queued before the executor stops, so it runs after every job already accepted;
        // a job that slips in between finds the connection gone and throws `.closed`.
        executor.submit { [self] in
            lock.lock()
            defer { lock.unlock() }
            connection?.close()
            connection = nil
        }
        executor.stop()
    }
}
