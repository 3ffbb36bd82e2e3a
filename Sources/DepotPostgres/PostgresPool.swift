import DepotCore
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
import Synchronization

/// How many statements a pool's connections have sent (each a round trip on its
/// connection, since postgres-nio runs one at a time), preparations included; for tests.
final class StatementCount: Sendable {
    private let value = Atomic<Int>(0)
    func add() { value.add(1, ordering: .relaxed) }
    var current: Int { value.load(ordering: .relaxed) }
}

/// One server connection used by one transaction at a time, from a thread that may block
/// (never an event loop, never the cooperative pool): every call waits for its future.
final class PGSession: @unchecked Sendable {
    // @unchecked: a session belongs to one transaction at a time (the pool hands it out
    // under its lock); `connection` is immutable and thread-safe itself.
    let connection: PostgresConnection
    let logger: Logger
    /// Futures sent without waiting (BEGIN, SAVEPOINT, RELEASE): checked before the next
    /// result is trusted, so an error in one is never lost.
    private var pending: [EventLoopFuture<Void>] = []
    /// This connection's prepared statements by SQL text (``runPrepared(_:)``), with when
    /// each was last used; at most ``statementLimit``.
    private var statements: [String: (query: PreparedQuery, used: UInt64)] = [:]
    private var uses: UInt64 = 0
    /// Statements taken out of ``statements``, closed on the server when the next
    /// transaction begins (outside any transaction, so that an aborted one cannot refuse it).
    private var retired: [PreparedQuery] = []
    /// The driver's catalog generation the prepared statements were made under
    /// (``PostgresDriver``: a catalog change made through this process retires them all).
    var catalogGeneration = 0
    /// The most prepared statements a connection keeps; the least recently used one is
    /// closed to make room.
    static let statementLimit = 128

    /// The pool's count of statements sent (``StatementCount``).
    private let count: StatementCount

    /// Set for a connection opened with `default_transaction_isolation` = `serializable`:
    /// the pool's connection for writes, on which a statement sent outside `BEGIN` is as
    /// serializable as a write transaction (``PGPool``).
    let serializableDefault: Bool

    /// The pool's watch over answers awaited without a thread (``answer(_:)``).
    private let watch: AnswerWatch

    init(connection: PostgresConnection, logger: Logger, count: StatementCount, serializableDefault: Bool, watch: AnswerWatch) {
        self.connection = connection
        self.logger = logger
        self.count = count
        self.serializableDefault = serializableDefault
        self.watch = watch
    }

    var isClosed: Bool { connection.isClosed }

    /// Waits like ``drainPending()``, suspending the calling task instead of blocking its
    /// thread.
    /// - Throws: the first failure among them, mapped (``PostgresErrors``).
    func drainPendingAsync() async throws {
        guard !pending.isEmpty else { return }
        let futures = pending
        pending.removeAll()
        var first: (any Error)?
        for future in futures {
            do { _ = try await answer(future) } catch { if first == nil { first = error } }
        }
        if let first { throw PostgresErrors.map(first) }
    }

    /// Runs a statement like ``runPrepared(_:)``, suspending the calling task instead of
    /// blocking its thread (a read's one statement sent from an async caller,
    /// ``PostgresDriver/read(_:)``), on a connection with nothing outstanding
    /// (``drainPendingAsync()``). A statement that fails is retired; one evicted from the
    /// cache to make room is closed before the connection's next transaction.
    /// - Throws: the driver's mapping of the server's error (``PostgresErrors``),
    ///   ``answerLost`` when the connection closed before answering.
    func runPreparedAsync(_ statement: BoundStatement) async throws -> [PostgresRow] {
        count.add()
        do {
            guard statement.preparable else { return try await answer(query(statement.query)).rows }
            let query: PreparedQuery
            if let cached = cachedStatement(statement.sql) {
                query = cached
            } else {
                makeRoomForStatement()
                count.add()
                query = try await answer(connection.prepare(query: statement.sql))
                statements[statement.sql] = (query, uses)
            }
            return try await answer(onLoop { query.execute(statement.values) })
        } catch {
            retire(statement.sql)
            throw PostgresErrors.map(error)
        }
    }

    /// Waits for `future` without a thread, failing with ``answerLost`` when the connection
    /// closes without answering (the watch looks every 100 ms, as ``wait(_:)`` does).
    private func answer<Value: Sendable>(_ future: EventLoopFuture<Value>) async throws -> Value {
        try await watch.answer(future, on: self)
    }

    /// Sends a statement without waiting; its failure surfaces at the next ``run(_:)``.
    func send(_ sql: String) { send(PostgresQuery(unsafeSQL: sql)) }

    /// Sends a statement with values without waiting.
    func send(_ query: PostgresQuery) {
        count.add()
        pending.append(self.query(query).map { _ in })
    }

    /// Sends a prepared statement without waiting; its failure surfaces at the next
    /// ``run(_:)`` or ``runPrepared(_:)``.
    /// - Throws: when the statement is new to the connection and cannot be prepared.
    func sendPrepared(_ statement: BoundStatement) throws {
        pending.append(try executing(statement).map { _ in })
    }

    /// How many statements this connection holds prepared (for tests).
    var preparedCount: Int { statements.count }

    /// Runs a statement as a prepared statement of this connection, preparing it on first
    /// use, so that the server parses and plans it once rather than on every call. The
    /// statement's text keys the cache; its placeholders carry their types
    /// (``SQLBuilder``). A statement that fails is retired, so that one made stale by a
    /// catalog change (SQLSTATE 0A000, "cached plan must not change result type") is
    /// prepared again the next time.
    /// - Throws: the driver's mapping of the server's error (``PostgresErrors``).
    func runPrepared(_ statement: BoundStatement) throws -> [PostgresRow] {
        let result: Result<[PostgresRow], any Error>
        do { result = .success(try wait(try execute(statement))) } catch { result = .failure(error) }
        do {
            // An earlier statement's failure (a BEGIN, an update sent ahead) is the one to report.
            try drainPending()
        } catch {
            if case .failure = result { retire(statement.sql) }
            throw error
        }
        do {
            return try result.get()
        } catch {
            retire(statement.sql)
            throw PostgresErrors.map(error)
        }
    }

    /// Runs a statement like ``runPrepared(_:)`` and hands its rows to `body` on this
    /// thread while they are still arriving: postgres-nio reads them on its event loop and
    /// this thread turns them into records meanwhile, instead of after the last one. `body`
    /// returning `false` stops the calls; the rest of the answer is still read (the
    /// connection must be done with it before its next statement). A statement `body` runs
    /// on this connection is answered after this one's last row.
    /// - Throws: what `body` throws (after the answer has ended), else the failures
    ///   ``runPrepared(_:)`` reports.
    func streamPrepared(_ statement: BoundStatement, _ body: (PostgresRow) throws -> Bool) throws {
        let rows = RowHandOff()
        let answered: EventLoopFuture<Void>
        do {
            answered = try execute(statement) { row in rows.push(row) }
        } catch {
            try drainPending()
            throw PostgresErrors.map(error)
        }
        answered.whenComplete { rows.finish($0) }
        var stopped = false
        var thrown: (any Error)?
        var outcome: Result<Void, any Error>?
        while outcome == nil {
            let (batch, ended) = rows.take(connectionClosed: { self.connection.isClosed })
            for row in batch where !stopped {
                do {
                    if try !body(row) { stopped = true }
                } catch {
                    thrown = error
                    stopped = true
                }
            }
            outcome = ended
        }
        do {
            try drainPending()
        } catch {
            if case .failure? = outcome { retire(statement.sql) }
            throw error
        }
        if case .failure(let error)? = outcome {
            retire(statement.sql)
            throw PostgresErrors.map(error)
        }
        if let thrown { throw thrown }
    }

    /// ``execute(_:)`` with each row handed to `onRow` on the event loop as it arrives.
    private func execute(_ statement: BoundStatement, onRow: @escaping @Sendable (PostgresRow) -> Void) throws -> EventLoopFuture<Void> {
        count.add()
        guard statement.preparable else { return onLoop { [connection, logger] in connection.query(statement.query, logger: logger, onRow).map { _ in } } }
        let prepared = try prepared(statement)
        return onLoop { prepared.execute(statement.values, onRow) }
    }

    /// ``execute(_:)`` for a statement sent without waiting: a failure to prepare it is
    /// reported after the failures of the statements sent before it.
    private func executing(_ statement: BoundStatement) throws -> EventLoopFuture<[PostgresRow]> {
        do {
            return try execute(statement)
        } catch {
            try drainPending()
            throw PostgresErrors.map(error)
        }
    }

    /// Queues the statement's execution, preparing it first (and waiting for that) when it
    /// is new to the connection. The preparation is waited for because postgres-nio queues
    /// statements in the order they are handed to it: an execution chained to the
    /// preparation's answer would be queued after whatever was sent meanwhile (a `COMMIT`).
    private func execute(_ statement: BoundStatement) throws -> EventLoopFuture<[PostgresRow]> {
        count.add()
        guard statement.preparable else { return query(statement.query).map(\.rows) }
        let prepared = try prepared(statement)
        return onLoop { prepared.execute(statement.values) }
    }

    /// The connection's prepared statement for `statement`, prepared now (and waited for)
    /// when it is new to the connection; the least recently used one is retired to make room.
    private func prepared(_ statement: BoundStatement) throws -> PreparedQuery {
        if let cached = cachedStatement(statement.sql) { return cached }
        makeRoomForStatement()
        count.add()
        let prepared = try wait(connection.prepare(query: statement.sql))
        statements[statement.sql] = (prepared, uses)
        return prepared
    }

    /// The statement prepared for `sql` on this connection, marked as just used; `nil` when
    /// it must be prepared (``makeRoomForStatement()`` first, then stored with ``uses``).
    private func cachedStatement(_ sql: String) -> PreparedQuery? {
        uses += 1
        guard let entry = statements[sql] else { return nil }
        statements[sql] = (entry.query, uses)
        return entry.query
    }

    /// Retires the least recently used statement when the cache is full
    /// (``PGSession/statementLimit``), so that one more can be prepared.
    private func makeRoomForStatement() {
        guard statements.count >= PGSession.statementLimit,
            let oldest = statements.min(by: { $0.value.used < $1.value.used })
        else { return }
        statements[oldest.key] = nil
        retired.append(oldest.value.query)
    }

    /// Takes one statement out of the cache; it is closed when the next transaction begins.
    func retire(_ sql: String) {
        if let entry = statements.removeValue(forKey: sql) { retired.append(entry.query) }
    }

    /// Takes every prepared statement out of the cache (after a catalog change, whose
    /// tables they may name with another shape).
    func retireAll() {
        retired.append(contentsOf: statements.values.map(\.query))
        statements.removeAll()
    }

    /// Closes the retired statements on the server, without waiting: called before a
    /// transaction starts (its `BEGIN` goes out with its first statement,
    /// ``PostgresTransaction/admit()``).
    func closeRetired() {
        guard !retired.isEmpty else { return }
        for query in retired { pending.append(query.deallocate()) }
        retired.removeAll()
    }

    /// Sends `query` (postgres-nio's `query`, all rows) from the connection's event loop
    /// (``onLoop(_:)``).
    private func query(_ query: PostgresQuery) -> EventLoopFuture<PostgresQueryResult> {
        onLoop { [connection, logger] in connection.query(query, logger: logger) }
    }

    /// Calls `start`, one of postgres-nio's calls that send a statement, on the connection's
    /// event loop. Called from another thread, such a call queues the statement's write and
    /// the registration of its row consumer as two separate event-loop tasks; rows answered
    /// between the two wait unconsumed, and a server that dies right then (a connection
    /// closed after them) trips a precondition in postgres-nio 1.33's row stream
    /// (`RowStreamStateMachine.channelReadComplete`), ending the process. On the loop, both
    /// happen in one task. Statements are still queued in the order they are started.
    private func onLoop<T: Sendable>(_ start: @escaping @Sendable () -> EventLoopFuture<T>) -> EventLoopFuture<T> {
        let loop = connection.eventLoop
        return loop.inEventLoop ? start() : loop.flatSubmit(start)
    }

    /// Runs a statement and waits for all its rows.
    /// - Throws: the driver's mapping of the server's error (``PostgresErrors``).
    func run(_ query: PostgresQuery) throws -> PostgresQueryResult {
        count.add()
        let future = self.query(query)
        // The server answers in order: once this statement is answered, the statements
        // sent before it are too, so waiting for it first costs one wake-up, not one each.
        let result: Result<PostgresQueryResult, any Error>
        do { result = .success(try wait(future)) } catch { result = .failure(error) }
        // An earlier statement's failure (a BEGIN, a SAVEPOINT) is the one to report.
        try drainPending()
        do {
            return try result.get()
        } catch {
            throw PostgresErrors.map(error)
        }
    }

    /// Waits for `future`, or for the connection to close (checked every 100 ms): a server
    /// stopped with `pg_ctl stop -m immediate` can close the connection without the query in
    /// flight ever failing (seen with postgres-nio 1.33 on a COMMIT), which would hang the
    /// caller.
    /// What a wait for an answer reports when the connection closed before the answer came.
    static let answerLost = DepotError(.remote, "The connection to the PostgreSQL server was lost before the statement was answered.")

    private func wait<Value: Sendable>(_ future: EventLoopFuture<Value>) throws -> Value {
        let done = DispatchSemaphore(value: 0)
        let outcome = NIOLockedValueBox<Result<Value, any Error>?>(nil)
        future.whenComplete { result in
            outcome.withLockedValue { $0 = result }
            done.signal()
        }
        while true {
            let timedOut = done.wait(timeout: .now() + .milliseconds(100)) == .timedOut
            if let result = outcome.withLockedValue({ $0 }) { return try result.get() }
            if timedOut && connection.isClosed {
                // One last look: the answer may have come with the close.
                if let result = outcome.withLockedValue({ $0 }) { return try result.get() }
                throw PGSession.answerLost
            }
        }
    }

    /// Runs a statement given as text with no values.
    @discardableResult
    func run(_ sql: String) throws -> PostgresQueryResult { try run(PostgresQuery(unsafeSQL: sql)) }

    /// Waits for the statements sent without waiting.
    func drainPending() throws {
        guard !pending.isEmpty else { return }
        let futures = pending
        pending.removeAll()
        var first: (any Error)?
        for future in futures {
            do { _ = try wait(future) } catch { if first == nil { first = error } }
        }
        if let first { throw PostgresErrors.map(first) }
    }

    /// Forgets statements sent without waiting (after a failure that ends the transaction).
    func discardPending() {
        let futures = pending
        pending.removeAll()
        for future in futures { _ = try? wait(future) }  // their errors repeat the one being reported
    }
}

/// Rows handed from postgres-nio's event loop to the thread that reads them
/// (``PGSession/streamPrepared(_:_:)``): the event loop appends, the reader takes all there
/// are at once, waiting when there are none.
private final class RowHandOff: @unchecked Sendable {
    // @unchecked: every var is read and written with `condition` locked.
    private let condition = NSCondition()
    private var rows: [PostgresRow] = []
    private var outcome: Result<Void, any Error>?
    private var waiting = false

    func push(_ row: PostgresRow) {
        condition.lock()
        rows.append(row)
        if waiting { condition.signal() }
        condition.unlock()
    }

    func finish(_ result: Result<Void, any Error>) {
        condition.lock()
        outcome = result
        condition.signal()
        condition.unlock()
    }

    /// The rows that arrived since the last call, and the answer's outcome once it has
    /// ended (then the rows are the last ones). Waits while there is nothing; every 100 ms
    /// it asks `connectionClosed`, and a closed connection ends the answer with `.remote`
    /// (the wait of ``PGSession`` for a single answer does the same).
    func take(connectionClosed: () -> Bool) -> ([PostgresRow], Result<Void, any Error>?) {
        condition.lock()
        defer { condition.unlock() }
        while rows.isEmpty && outcome == nil {
            waiting = true
            let signalled = condition.wait(until: Date(timeIntervalSinceNow: 0.1))
            waiting = false
            if !signalled, rows.isEmpty, outcome == nil, connectionClosed() {
                outcome = .failure(PGSession.answerLost)
            }
        }
        let taken = rows
        rows.removeAll(keepingCapacity: true)
        return (taken, outcome)
    }
}

/// A bounded pool of connections for blocking callers (Docs/PostgresDriver.md,
/// "Connections"): a caller takes an idle connection, opens a new one below the limit, or
/// waits. A connection that broke is closed and forgotten, so the pool recovers by opening
/// a new one on the next demand.
///
/// Connections come in two kinds, one limit for both: writes prefer a connection whose
/// default isolation is SERIALIZABLE (a write the store runs as one statement outside
/// `BEGIN` is then serializable like any other), reads one with the server's default (a
/// read's first statement, sent outside `BEGIN`, then takes no part in serializable
/// conflict tracking, as a `REPEATABLE READ` transaction would not). Either kind serves the
/// other when it is all there is: a read then begins at once, and a write never runs
/// outside `BEGIN`.
final class PGPool: @unchecked Sendable {
    // @unchecked: every var is read and written with `condition` locked.
    let settings: PostgresSettings
    private let configuration: PostgresConnection.Configuration
    /// ``configuration`` with `default_transaction_isolation` = `serializable`.
    private let writeConfiguration: PostgresConnection.Configuration
    private let condition = NSCondition()
    /// Idle connections of the server's default isolation.
    private var idle: [PGSession] = []
    /// Idle connections of ``PGSession/serializableDefault``.
    private var idleForWrites: [PGSession] = []
    private var open = 0
    private var closed = false
    private var nextID = 1
    let logger: Logger
    /// Statements sent by every connection of the pool (for tests).
    let statementCount = StatementCount()
    /// Answers awaited without a thread on the pool's connections.
    let watch = AnswerWatch()

    init(settings: PostgresSettings) throws {
        self.settings = settings
        var tls = PostgresConnection.Configuration.TLS.disable
        switch settings.tls {
        case .disable: break
        case .prefer, .require:
            let context: NIOSSLContext
            do { context = try NIOSSLContext(configuration: .makeClientConfiguration()) } catch {
                throw DepotError(.invalidStore, "TLS could not be set up for the PostgreSQL connection.", cause: DepotError.wrap(error))
            }
            tls = settings.tls == .require ? .require(context) : .prefer(context)
        }
        var configuration = PostgresConnection.Configuration(
            host: settings.host, port: settings.port, username: settings.user, password: settings.password, database: settings.database, tls: tls
        )
        configuration.options.additionalStartupParameters = [
            ("synchronous_commit", settings.durability == .full ? "on" : "off"),
            ("application_name", "depot"),
            ("client_min_messages", "warning"),
        ]
        configuration.options.connectTimeout = .seconds(10)
        self.configuration = configuration
        var writeConfiguration = configuration
        writeConfiguration.options.additionalStartupParameters.append(("default_transaction_isolation", "serializable"))
        self.writeConfiguration = writeConfiguration
        var logger = Logger(label: "depot.postgres", factory: { _ in SwiftLogNoOpLogHandler() })
        logger.logLevel = .critical
        self.logger = logger
    }

    /// Takes a connection: an idle one of the kind `forWrites` asks for (see ``PGPool``),
    /// else a new one of that kind if the limit allows, else an idle one of the other kind,
    /// else waits.
    /// - Throws: `.closed` after ``close()``, `.remote` when the server cannot be reached.
    func acquire(forWrites: Bool = false) throws -> PGSession {
        condition.lock()
        while true {
            if closed {
                condition.unlock()
                throw DepotError(.closed, "The PostgreSQL store is closed.")
            }
            if let session = forWrites ? popIdle(&idleForWrites) : popIdle(&idle) {
                condition.unlock()
                return session
            }
            if open < settings.poolSize { break }
            if let session = forWrites ? popIdle(&idle) : popIdle(&idleForWrites) {
                condition.unlock()
                return session
            }
            condition.wait()
        }
        open += 1
        let id = nextID
        nextID += 1
        condition.unlock()
        do {
            let connection = try PostgresConnection.connect(
                on: MultiThreadedEventLoopGroup.singleton.any(), configuration: forWrites ? writeConfiguration : configuration, id: id, logger: logger
            ).wait()
            return PGSession(connection: connection, logger: logger, count: statementCount, serializableDefault: forWrites, watch: watch)
        } catch {
            condition.lock()
            open -= 1
            condition.signal()
            condition.unlock()
            throw PostgresErrors.map(error)
        }
    }

    /// An idle connection of the server's default isolation (a read's), or `nil` when none
    /// is idle: never waits and never opens one (``PostgresDriver/read(_:)``).
    func takeIdleForRead() -> PGSession? {
        condition.lock()
        defer { condition.unlock() }
        guard !closed else { return nil }
        return popIdle(&idle)
    }

    /// An idle connection of ``PGSession/serializableDefault`` (a write's, on which one
    /// statement may run on its own), or `nil` when none is idle: never waits and never
    /// opens one (``PostgresDriver/write(_:)``).
    func takeIdleForWrite() -> PGSession? {
        condition.lock()
        defer { condition.unlock() }
        guard !closed else { return nil }
        return popIdle(&idleForWrites)
    }

    /// The last open connection of `list`, dropping closed ones; called with `condition` locked.
    private func popIdle(_ list: inout [PGSession]) -> PGSession? {
        while let session = list.popLast() {
            if !session.isClosed { return session }
            open -= 1
        }
        return nil
    }

    /// A connection of its own, outside the pool's limit (the change listener's).
    func connectDedicated() async throws -> PostgresConnection {
        do {
            return try await PostgresConnection.connect(
                on: MultiThreadedEventLoopGroup.singleton.any(), configuration: configuration, id: 0, logger: logger)
        } catch {
            throw PostgresErrors.map(error)
        }
    }

    /// Gives a connection back; `broken` (or a closed connection) closes it instead, and
    /// waits for the close unless `waiting` is `false` (a caller that may not block).
    func release(_ session: PGSession, broken: Bool = false, waiting: Bool = true) {
        condition.lock()
        if broken || closed || session.isClosed {
            open -= 1
            condition.signal()
            condition.unlock()
            let closing: EventLoopFuture<Void> = session.connection.close()
            if waiting {
                _ = try? closing.wait()  // a broken connection may fail to close cleanly
            } else {
                // Held until closed: a connection let go while still open is a leak (debug
                // builds of postgres-nio stop on it), and a close from off its event loop
                // finishes later.
                closing.whenComplete { _ in withExtendedLifetime(session) {} }
            }
            return
        }
        if session.serializableDefault { idleForWrites.append(session) } else { idle.append(session) }
        // Waiters of either kind may take it.
        condition.broadcast()
        condition.unlock()
    }

    /// Closes the idle connections; connections in use close when they come back.
    func close() {
        condition.lock()
        closed = true
        let sessions = idle + idleForWrites
        idle.removeAll()
        idleForWrites.removeAll()
        open -= sessions.count
        condition.broadcast()
        condition.unlock()
        for session in sessions { _ = try? session.connection.close().wait() }  // closing: nothing to report to
    }
}

/// Answers awaited without a thread (``PGSession/runPreparedAsync(_:)``), looked at every
/// 100 ms while any is awaited: one whose connection closed without answering fails with
/// ``PGSession/answerLost``, as a blocking wait does (``PGSession``'s `wait`), since a server
/// stopped with `pg_ctl stop -m immediate` can close a connection without failing the
/// statement in flight.
final class AnswerWatch: Sendable {
    private struct Awaited {
        let session: PGSession
        let fail: @Sendable () -> Void
    }

    private struct State {
        var awaited: [Int: Awaited] = [:]
        var next = 0
        var watching = false
    }

    private let state = Locked(State())

    /// `future`'s value, awaited; fails when `session`'s connection closes first.
    func answer<Value: Sendable>(_ future: EventLoopFuture<Value>, on session: PGSession) async throws -> Value {
        let promise = future.eventLoop.makePromise(of: Value.self)
        future.cascade(to: promise)
        let (key, start) = state.withLock { state -> (Int, Bool) in
            let key = state.next
            state.next &+= 1
            // A promise completed twice keeps its first value: failing one that was answered meanwhile does nothing.
            state.awaited[key] = Awaited(session: session, fail: { promise.fail(PGSession.answerLost) })
            let start = !state.watching
            state.watching = true
            return (key, start)
        }
        if start { Task.detached { [self] in await self.watch() } }
        defer { _ = state.withLock { $0.awaited.removeValue(forKey: key) } }
        return try await promise.futureResult.get()
    }

    /// Looks every 100 ms until nothing is awaited.
    private func watch() async {
        while true {
            do {
                try await Task.sleep(for: .milliseconds(100))
            } catch {
                state.withLock { $0.watching = false }  // cancelled: the next answer awaited starts a new watch
                return
            }
            let lost: [Awaited]? = state.withLock { state in
                if state.awaited.isEmpty {
                    state.watching = false
                    return nil
                }
                return state.awaited.values.filter { $0.session.isClosed }
            }
            guard let lost else { return }
            for awaited in lost { awaited.fail() }
        }
    }
}
