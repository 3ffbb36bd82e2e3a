import DepotCore

/// One ``SQLiteConnection`` and the thread that owns it: a one-worker
/// ``DepotCore/BlockingExecutor`` whose jobs are the only users of the connection.
///
/// Every blocking sqlite3 call runs there, never on Swift's cooperative pool: an `async`
/// caller queues a job and suspends until the thread has run it. The connection is opened
/// by the first job and closed by the last.
final class ConnectionThread: @unchecked Sendable {
    // @unchecked: `connection` is read and written only by jobs on `executor`, which has one
    // worker and runs its jobs one at a time, in order.
    private let executor: BlockingExecutor
    private var connection: SQLiteConnection?

    private init(name: String) {
        executor = BlockingExecutor(name: name, stackSize: 1 << 20, closedMessage: "The SQLite store is closed.")
    }

    /// Starts the thread and opens the connection on it.
    /// - Throws: what opening the connection throws (the thread is stopped then).
    static func start(name: String, open: @escaping @Sendable () throws -> SQLiteConnection) async throws -> ConnectionThread {
        let worker = ConnectionThread(name: name)
        do {
            try await worker.executor.run { worker.connection = try open() }
        } catch {
            worker.stop()
            throw error
        }
        return worker
    }

    /// Runs `body` with the connection on the thread and returns its result.
    /// - Throws: what `body` throws; `.closed` once the thread is stopping or the connection
    ///   is closed.
    func run<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        try await executor.run { [self] in
            guard let connection = self.connection, !connection.isClosed else { throw DepotError(.closed, "The SQLite store is closed.") }
            return try body(connection)
        }
    }

    /// Finishes the queued jobs, closes the connection, ends the thread, and returns when
    /// the connection is closed.
    func shutdown() async {
        _ = try? await executor.run { [self] in connection?.close() }
        stop()
    }

    /// Finishes the queued jobs, closes the connection, and ends the thread (without waiting).
    func stop() {
        // Queued before the executor stops, so it runs after every job already accepted;
        // a job that slips in between finds the connection gone and throws `.closed`.
        executor.submit { [self] in
            connection?.close()
            connection = nil
        }
        executor.stop()
    }
}
