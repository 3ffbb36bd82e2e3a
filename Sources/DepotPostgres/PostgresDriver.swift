import DepotCore
import Foundation
import NIOCore
import NIOPosix
import PostgresNIO
import Synchronization

/// A driver over a PostgreSQL server (postgres-nio), for stores that several processes
/// share: one table per collection in the store's schema, one `bytea` column per top-level
/// field, every query pushed down to SQL with the exact semantics of ``QueryEvaluator``.
/// Docs/PostgresDriver.md describes the layout, the query translation, transactions,
/// durability, connections, errors and limits.
///
/// - Writes run at `SERIALIZABLE`, one at a time per driver. A serialization failure (another
///   process wrote what this transaction read) rolls back and **runs the closure again**, up
///   to ``PostgresSettings/attempts`` times, then throws `.conflict`: write closures must not
///   have side effects outside the transaction. Reads run at `REPEATABLE READ READ ONLY`, one
///   snapshot per closure.
/// - Transaction closures run on the caller's thread (``readBlocking(_:)``,
///   ``writeBlocking(_:)``) or on the driver's own threads (``read(_:)``, ``write(_:)``),
///   which wait for postgres-nio's futures. An async read of one statement runs without a
///   thread: its closure runs on the caller's task, which suspends while the statement is
///   answered. Nothing waits on an event loop or the cooperative pool.
/// - Durability `full` is `synchronous_commit = on`; `normal` is `off`.
///
/// ```swift
/// let driver = try await PostgresDriver(StoreLocation("postgres://app@127.0.0.1/appdb"))
/// try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["n": 1]), into: users) }
/// ```
public final class PostgresDriver: StorageDriver {
    /// `"postgres"`.
    public let backendName = "postgres"
    /// Everything: persistence, transactions, snapshot reads, unique constraints, assigned
    /// ids, streaming (a server-side cursor), several processes on one database, and
    /// change events from other processes (LISTEN/NOTIFY, ``deliverChanges(to:)``).
    public var capabilities: DriverCapabilities { DriverCapabilities.complete.union(.crossProcessChanges) }

    /// Where the store is and how the driver behaves; its description hides the password.
    public let settings: PostgresSettings

    let pool: PGPool
    let feed: PostgresChangeFeed
    private let readers: BlockingExecutor
    private let writer: BlockingExecutor
    /// One write transaction at a time in this driver (other processes are kept apart by
    /// `SERIALIZABLE`): taken by a write on a thread, waiting, or by one without a thread,
    /// never waiting, and held across its await.
    private let writeGate = WriteGate()
    private let metaCache = Locked<[CollectionName: CollectionMeta]>([:])
    private let closed = Atomic<Bool>(false)
    /// How many write transactions were run again after a serialization failure.
    private let retryCount = Atomic<Int>(0)
    /// How many reads ran without a thread (``readsWithoutThread``).
    private let settledWithoutThread = Atomic<Int>(0)
    /// How many writes ran without a thread (``writesWithoutThread``).
    private let writtenWithoutThread = Atomic<Int>(0)
    /// Raised by every transaction that changed the catalog (tables created, dropped or
    /// given columns) and by every failure that runs a transaction again: a connection
    /// whose prepared statements are older retires them before its next transaction, so
    /// that none runs against a table whose shape changed (``PGSession/runPrepared(_:)``).
    private let catalogGeneration = Atomic<Int>(0)

    /// Connects to the server and creates the schema and Depot's catalog table if missing.
    /// - Throws: `.remote` when the server cannot be reached or refuses the login,
    ///   `.invalidStore` for a database that does not exist.
    public init(settings: PostgresSettings) async throws {
        self.settings = settings
        self.pool = try PGPool(settings: settings)
        self.feed = PostgresChangeFeed(pool: pool, schema: settings.schema)
        readers = BlockingExecutor(name: "depot.pg.read", workers: settings.poolSize, closedMessage: "The PostgreSQL store is closed.")
        writer = BlockingExecutor(name: "depot.pg.write", closedMessage: "The PostgreSQL store is closed.")
        do {
            try await writer.run { [self] in
                try self.setUp()
                // The whole catalog is read now, on the connection set-up used, rather than by
                // the first transaction, which then needs no catalog statement of its own and
                // can run without a thread (Docs/PostgresDriver.md, "Catalog cache").
                try self.transaction(writable: true, attempts: 3) { tx in try tx.readWholeCatalog() }
            }
        } catch {
            pool.close()
            readers.stop()
            writer.stop()
            throw error
        }
    }

    /// Opens the store a parsed `postgres:` or `postgresql:` store string names.
    /// - Throws: `.invalidStore` for a malformed string or an unknown option, and what
    ///   ``init(settings:)`` throws.
    public convenience init(_ location: StoreLocation) async throws {
        try await self.init(settings: PostgresSettings(location))
    }

    /// Registers the `postgres` and `postgresql` schemes:
    /// `postgres://user[:password]@host[:port]/database?schema=&durability=&sslmode=&pool=&retries=`.
    public static func register(in registry: inout DriverRegistry) {
        registry.register("postgres") { location in try await PostgresDriver(location) }
        registry.register("postgresql") { location in try await PostgresDriver(location) }
        registry.onOpen { store in (store.driver as? PostgresDriver)?.deliverChanges(to: store) }
    }

    /// Delivers the commits other processes (other drivers on the same schema) make to
    /// `store`'s ``Store/changes()`` and read caches, through LISTEN/NOTIFY on a connection
    /// of its own. Stores opened through a registry the driver was registered in get it
    /// automatically. Commits made while the listening connection is down are not heard.
    public func deliverChanges(to store: Store) {
        feed.attach(store)
    }

    /// `true` once the change listener has subscribed (after ``deliverChanges(to:)``).
    public var isListeningForChanges: Bool { feed.listening.load(ordering: .acquiring) }

    deinit {
        feed.stop()
        readers.stop()
        writer.stop()
        pool.close()
    }

    private func setUp() throws {
        let schema = PostgresSQL.quote(settings.schema)
        let catalog = schema + "." + PostgresSQL.quote(PostgresSQL.catalogTable)
        // Two processes opening a new store at once may both try to create the catalog.
        for attempt in 1...5 {
            // A connection of the kind writes use: it stays in the pool, so the first write
            // does not wait for a connection to open (Docs/PostgresDriver.md, "Connections").
            let session = try pool.acquire(forWrites: true)
            do {
                let encoding = try session.run("SHOW server_encoding")
                guard let row = encoding.rows.first, try row.decode(String.self) == "UTF8" else {
                    throw DepotError(.invalidStore, "The PostgreSQL database must use the UTF8 encoding.")
                }
                try session.run("BEGIN")
                try session.run("CREATE SCHEMA IF NOT EXISTS \(schema)")
                try session.run("""
                    CREATE TABLE IF NOT EXISTS \(catalog) (name text COLLATE "C" PRIMARY KEY, id_kind text NOT NULL, \
                    definition text NOT NULL, high_water bigint NOT NULL DEFAULT 0)
                    """)
                try session.run("""
                    CREATE TABLE IF NOT EXISTS \(schema).\(PostgresSQL.quote(PostgresSQL.listenersTable)) \
                    (origin text COLLATE "C" PRIMARY KEY, pid integer NOT NULL, since timestamptz NOT NULL DEFAULT now())
                    """)
                try session.run("COMMIT")
                pool.release(session)
                return
            } catch {
                let error = PostgresErrors.map(error)
                let lost = PostgresErrors.isConnectionLost(error)
                if !lost { _ = try? session.run("ROLLBACK") }  // the error being thrown is the one to report
                pool.release(session, broken: lost)
                let state = PostgresErrors.state(of: error)
                guard attempt < 5, state == "23505" || state == "42P07" || state == "40001" else { throw error }
            }
        }
    }

    // MARK: Catalog cache

    func cachedMeta(_ name: CollectionName) -> CollectionMeta? { metaCache.withLock { $0[name] } }
    func cache(_ name: CollectionName, _ meta: CollectionMeta) { metaCache.withLock { $0[name] = meta } }

    /// `true` until a transaction has read the whole catalog into the cache, and again
    /// after the cache is emptied: the next lookup then reads every entry in one statement
    /// (Docs/PostgresDriver.md, "Catalog cache").
    var catalogNeverRead: Bool { !wholeCatalogCached.withLock { $0 } }
    func catalogWasRead() { wholeCatalogCached.withLock { $0 = true } }
    private let wholeCatalogCached = Locked(false)

    /// Empties the catalog cache (a catalog another process changed).
    private func forgetCatalog() {
        metaCache.withLock { $0.removeAll() }
        wholeCatalogCached.withLock { $0 = false }
    }

    /// How many catalog queries (one entry, or all of them) the driver has sent (for tests).
    let catalogReads = StatementCount()

    /// How many write transactions ran again after a serialization failure since the driver
    /// opened (for tests and `depot info`).
    public var serializationRetries: Int { retryCount.load(ordering: .relaxed) }

    /// How many statements the driver's connections have sent since it opened, `BEGIN`,
    /// `COMMIT` and preparations included: each is a round trip on its connection (for
    /// tests; Docs/PostgresDriver.md, "Transactions").
    var statementsSent: Int { pool.statementCount.current }

    // MARK: Transactions

    /// Runs `body` at REPEATABLE READ READ ONLY on a pooled connection, on this thread.
    /// **The closure may run twice**: its first statement is sent on its own, without
    /// `BEGIN` (a point read is then one round trip); when it asks for a second, that run
    /// is abandoned and the closure runs again inside `BEGIN … COMMIT`. It may also run
    /// again after a catalog change another process made.
    /// - Throws: what `body` throws, `.closed`, `.remote` when the connection is lost.
    public func readBlocking<T>(_ body: (any ReadTransaction) throws -> T) throws -> T {
        try transaction(writable: false, attempts: settings.attempts, deferBegin: true) { tx in try body(tx) }
    }

    /// Runs `body` at SERIALIZABLE on a pooled connection, on this thread, one writer at a
    /// time per driver. **The closure may run more than once**: after a serialization failure
    /// the transaction is rolled back and run again, up to ``PostgresSettings/attempts``
    /// times, then `.conflict` is thrown.
    /// - Throws: what `body` throws, `.conflict`, `.closed`, `.remote`.
    @discardableResult
    public func writeBlocking<T>(_ body: (any WriteTransaction) throws -> T) throws -> T {
        try transaction(writable: true, attempts: settings.attempts) { tx in try body(tx) }
    }

    /// Runs `body` as ``readBlocking(_:)`` does. A read of one statement whose connection is
    /// idle runs without a thread: the closure runs on the caller's thread with nothing sent,
    /// its statement is sent and awaited (the task suspends, no thread waits), and the closure
    /// runs again with the answer. Any other read, and one that finds no idle connection,
    /// runs on one of the driver's read threads (Docs/PostgresDriver.md, "Transactions").
    /// **The closure may run more than once** either way.
    public func read<T: Sendable>(_ body: @escaping @Sendable (any ReadTransaction) throws -> T) async throws -> T {
        guard !closed.load(ordering: .acquiring) else { throw DepotError(.closed, "The PostgreSQL store is closed.") }
        let deferBegin: Bool
        switch try await readWithoutThread(body) {
        case .done(let value): return value
        case .onThread(let alone): deferBegin = alone
        }
        return try await readers.run { [self] in
            try self.transaction(writable: false, attempts: self.settings.attempts, deferBegin: deferBegin) { tx in try body(tx) }
        }
    }

    /// How a read tried without a thread ended (``readWithoutThread(_:)``).
    enum Settled<T> {
        /// Its value.
        case done(T)
        /// Not settled: run it on a thread, its first statement sent alone if `deferBegin`
        /// (`false` once it is known to ask for a second one).
        case onThread(deferBegin: Bool)
    }

    /// How many reads ran without a thread (``read(_:)``; for tests).
    var readsWithoutThread: Int { settledWithoutThread.load(ordering: .relaxed) }

    /// Runs a read of one statement without a thread (``read(_:)``, ``FirstStatement``), on
    /// an idle read connection; `.onThread` when there is none or the closure asks for more.
    private func readWithoutThread<T>(_ body: (any ReadTransaction) throws -> T) async throws -> Settled<T> {
        guard let session = pool.takeIdleForRead() else { return .onThread(deferBegin: true) }
        let (capture, tx, outcome): (FirstStatement, PostgresTransaction, Result<T, any Error>)
        switch try await runTwice({ try body($0) }, on: session, writable: false) {
        case .refused: return .onThread(deferBegin: true)
        case .settled(let value):
            settledWithoutThread.add(1, ordering: .relaxed)
            return .done(try value.get())
        case .answered(let c, let t, let o): (capture, tx, outcome) = (c, t, o)
        }
        let lost = tx.connectionLost
        pool.release(session, broken: lost, waiting: false)
        if capture.refused || tx.needsBegin || !capture.answered {
            // A second statement, or not the first run's: run it on a thread, inside BEGIN.
            return .onThread(deferBegin: false)
        }
        if tx.retryable != nil, !lost {
            // A catalog another process changed: as ``transaction(writable:attempts:deferBegin:_:)``
            // does, forget the catalog and run it again, there.
            forgetCatalog()
            catalogGeneration.add(1, ordering: .releasing)
            return .onThread(deferBegin: true)
        }
        settledWithoutThread.add(1, ordering: .relaxed)
        return .done(try outcome.get())
    }

    /// Runs `body` as ``writeBlocking(_:)`` does. A write of one statement that runs on its
    /// own (a transaction of one write by id, ``PostgresTransaction``'s `runsAlone`), whose
    /// closure the store vouches asks for it with the same values on every run
    /// (``WriteTransaction/nextCallEndsTransaction(sameOnEveryRun:)``), runs without a thread
    /// when no other write of this driver is running and a write connection is idle: the closure runs on the caller's thread with nothing sent, its
    /// statement is sent and awaited (the task suspends, no thread waits), and the closure
    /// runs again with the answer. Any other write runs on the driver's write thread
    /// (Docs/PostgresDriver.md, "Transactions"). **The closure may run more than once**
    /// either way.
    @discardableResult
    public func write<T: Sendable>(_ body: @escaping @Sendable (any WriteTransaction) throws -> T) async throws -> T {
        guard !closed.load(ordering: .acquiring) else { throw DepotError(.closed, "The PostgreSQL store is closed.") }
        if case .done(let value) = try await writeWithoutThread(body) { return value }
        return try await writer.run { [self] in try self.writeBlocking(body) }
    }

    /// How many writes ran without a thread (``write(_:)``; for tests).
    var writesWithoutThread: Int { writtenWithoutThread.load(ordering: .relaxed) }

    /// How the two runs of a closure without a thread went (``runTwice(_:on:writable:)``).
    private enum TwoRuns<T> {
        /// The first run asked for something this way cannot give; nothing was sent.
        case refused
        /// The first run asked for nothing: its outcome stands.
        case settled(Result<T, any Error>)
        /// The first run's statement was sent and the second run given its answer.
        case answered(FirstStatement, PostgresTransaction, Result<T, any Error>)
    }

    /// The part reads and writes without a thread share (``FirstStatement``): `session`
    /// made ready as a transaction on a thread would be (statements prepared before a
    /// catalog change retired and closed; what its last transaction sent without waiting, a
    /// read's COMMIT, answered: a failure there is this one's), the closure run once with
    /// nothing sent, that run's statement sent and awaited without a thread, and the closure
    /// run again with the answer. A read's transaction begins deferred; a write's sends only
    /// a statement that runs alone. `session` is given back to the pool except for
    /// `.answered`, where the caller gives it back once it has read the transaction.
    private func runTwice<T>(_ body: (PostgresTransaction) throws -> T, on session: PGSession, writable: Bool) async throws -> TwoRuns<T> {
        let generation = catalogGeneration.load(ordering: .acquiring)
        if session.catalogGeneration != generation {
            session.retireAll()
            session.catalogGeneration = generation
        }
        session.closeRetired()
        do {
            try await session.drainPendingAsync()
        } catch let error as DepotError {
            pool.release(session, broken: PostgresErrors.isConnectionLost(error), waiting: false)
            throw error
        }
        let begin: String? = writable ? "BEGIN ISOLATION LEVEL SERIALIZABLE" : nil
        let capture = FirstStatement()
        let probe = PostgresTransaction(driver: self, session: session, writable: writable, begin: begin, deferredBegin: !writable, capture: capture)
        let early: Result<T, any Error>
        do { early = .success(try body(probe)) } catch { early = .failure(error) }
        probe.isOpen = false
        guard let statement = capture.statement, !capture.refused else {
            pool.release(session, waiting: false)
            return capture.refused ? .refused : .settled(early)
        }
        do {
            capture.answer = .success(try await session.runPreparedAsync(statement))
        } catch {
            capture.answer = .failure(PostgresErrors.map(error))
        }
        let tx = PostgresTransaction(driver: self, session: session, writable: writable, begin: begin, deferredBegin: !writable, capture: capture)
        let outcome: Result<T, any Error>
        do { outcome = .success(try body(tx)) } catch { outcome = .failure(error) }
        tx.isOpen = false
        return .answered(capture, tx, outcome)
    }

    /// Runs a write of one statement that runs on its own without a thread (``write(_:)``,
    /// ``FirstStatement``), on an idle write connection while no other write of this driver
    /// runs; `.onThread` when that cannot be, or when the closure asks for anything else
    /// before its statement changed a row (nothing has changed then: a statement that ran
    /// on its own and changed no row, or failed, did nothing).
    private func writeWithoutThread<T>(_ body: (any WriteTransaction) throws -> T) async throws -> Settled<T> {
        guard writeGate.tryTake() else { return .onThread(deferBegin: false) }
        defer { writeGate.leave() }
        guard let session = pool.takeIdleForWrite() else { return .onThread(deferBegin: false) }
        let (capture, tx, outcome): (FirstStatement, PostgresTransaction, Result<T, any Error>)
        switch try await runTwice({ try body($0) }, on: session, writable: true) {
        case .refused: return .onThread(deferBegin: false)
        case .settled(let value):
            writtenWithoutThread.add(1, ordering: .relaxed)
            return .done(try value.get())
        case .answered(let c, let t, let o): (capture, tx, outcome) = (c, t, o)
        }
        let lost = tx.connectionLost
        pool.release(session, broken: lost, waiting: false)
        if tx.committedAlone {
            // Committed: whatever the closure did after it stands (a statement after it was
            // refused, as on a thread).
            writtenWithoutThread.add(1, ordering: .relaxed)
            publish(tx.changed)
            return .done(try outcome.get())
        }
        // A lost connection may have lost the answer of a statement that committed: that is
        // the write's error, never a second run.
        if lost { return .done(try outcome.get()) }
        if !capture.answered, case .success(let rows)? = capture.answer, !rows.isEmpty {
            // The statement changed a row, so it committed, but this run asked for another
            // one: the store's word that every run asks for the same write did not hold.
            // Running the closure again could store the write twice; it is not run again.
            throw DepotError(
                .internal,
                "A write was committed, but its closure asked for a different write when run again with the answer; it was not run a third time. Write closures must ask for the same write on every run.")
        }
        // Nothing changed.
        if capture.refused || !capture.answered {
            // The closure asked for more (the catalog read again after a column check): on a
            // thread, from the start.
            return .onThread(deferBegin: false)
        }
        if tx.retryable != nil {
            // A serialization failure or a catalog another process changed: as
            // ``transaction(writable:attempts:deferBegin:_:)`` does, forget the catalog and
            // run it again, there (counted as its first retry).
            forgetCatalog()
            catalogGeneration.add(1, ordering: .releasing)
            retryCount.add(1, ordering: .relaxed)
            return .onThread(deferBegin: false)
        }
        writtenWithoutThread.add(1, ordering: .relaxed)
        return .done(try outcome.get())
    }

    /// The one transaction loop: begin, run, commit; roll back on a throw; run again after a
    /// failure another run may not meet. With `deferBegin`, a read first runs without
    /// `BEGIN` and is run again inside one if it asks for a second statement
    /// (``PostgresTransaction/deferredBegin``; Docs/PostgresDriver.md, "Transactions").
    func transaction<T>(writable: Bool, attempts: Int, deferBegin: Bool = false, _ body: (PostgresTransaction) throws -> T) throws -> T {
        guard !closed.load(ordering: .acquiring) else { throw DepotError(.closed, "The PostgreSQL store is closed.") }
        // Blocking an event loop thread would deadlock the connections it serves.
        if MultiThreadedEventLoopGroup.currentEventLoop != nil {
            let executor = writable ? writer : readers
            return try executor.runBlocking(nonEscaping: { try self.transaction(writable: writable, attempts: attempts, deferBegin: deferBegin, body) })
        }
        if writable { writeGate.take() }
        defer { if writable { writeGate.leave() } }
        var attempt = 1
        var deferring = deferBegin && !writable
        while true {
            let session = try pool.acquire(forWrites: writable)
            // A read's first statement goes out alone only on a connection of the server's
            // default isolation (PGPool).
            let deferThis = deferring && !session.serializableDefault
            let generation = catalogGeneration.load(ordering: .acquiring)
            if session.catalogGeneration != generation {
                session.retireAll()
                session.catalogGeneration = generation
            }
            session.closeRetired()
            let tx = PostgresTransaction(
                driver: self, session: session, writable: writable,
                begin: writable ? "BEGIN ISOLATION LEVEL SERIALIZABLE" : "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", deferredBegin: deferThis)
            let outcome: Result<T, any Error>
            do {
                let value = try body(tx)
                tx.isOpen = false
                if tx.needsBegin { throw DepotError(.internal, "A read of more than one statement runs again inside BEGIN and COMMIT.") }
                if let failure = tx.retryable { throw failure }
                if !tx.begun {
                    // Nothing was sent, or its one statement ran on its own (a deferred read,
                    // a write that committed by itself): there is no transaction to end.
                } else if writable {
                    try tx.notify(feed)
                    let commit = try session.run("COMMIT")
                    guard commit.metadata.command == "COMMIT" else {
                        throw DepotError(.internal, "PostgreSQL rolled the transaction back at COMMIT after an error inside it.")
                    }
                } else {
                    // A read-only transaction has nothing to make durable: its COMMIT is not
                    // waited for here; the connection's next statement waits for it first.
                    session.send("COMMIT")
                }
                outcome = .success(value)
            } catch {
                tx.isOpen = false
                outcome = .failure(error)
            }
            if tx.changedCatalog {
                // Statements prepared after the change inside the transaction name its tables
                // as they were in it; the other connections' ones as they were before.
                session.retireAll()
                catalogGeneration.add(1, ordering: .releasing)
                session.catalogGeneration = catalogGeneration.load(ordering: .acquiring)
            }
            if tx.needsBegin, !tx.connectionLost {
                // The closure asked for a second statement (whatever it then threw or caught):
                // run it again inside a transaction. Nothing was begun, so nothing is rolled
                // back. Not counted as an attempt.
                session.discardPending()
                pool.release(session)
                deferring = false
                continue
            }
            switch outcome {
            case .success(let value):
                pool.release(session)
                if writable { publish(tx.changed) }
                return value
            case .failure(let error):
                let depotError = error as? DepotError
                let lost = tx.connectionLost || depotError.map(PostgresErrors.isConnectionLost) == true
                var broken = lost
                if !lost {
                    session.discardPending()
                    // Without BEGIN there is no transaction to roll back.
                    if tx.begun {
                        do { try session.run("ROLLBACK") } catch { broken = true }
                    }
                }
                pool.release(session, broken: broken)
                let retryable = tx.retryable ?? depotError.flatMap { PostgresErrors.isRetryable($0) ? $0 : nil }
                guard let retryable, !lost else { throw error }
                forgetCatalog()
                catalogGeneration.add(1, ordering: .releasing)
                guard attempt < attempts else {
                    throw DepotError(
                        .conflict,
                        "The transaction met a serialization failure or a concurrent catalog change \(attempts) times and was given up; run it again.",
                        cause: retryable)
                }
                attempt += 1
                if writable { retryCount.add(1, ordering: .relaxed) }
                // Back off a random time that doubles with each attempt (up to 100 ms), so that
                // two writers that keep meeting stop meeting.
                let ceiling = min(100_000, 1_000 << min(attempt, 10))
                usleep(UInt32.random(in: 500...UInt32(ceiling)))
            }
        }
    }

    private func publish(_ changed: [CollectionName: CollectionMeta?]) {
        guard !changed.isEmpty else { return }
        metaCache.withLock { cache in
            for (name, meta) in changed { cache[name] = meta }
        }
    }

    // MARK: Streaming

    /// Streams through a server-side cursor in one read transaction, 256 rows at a time, so
    /// memory stays bounded whatever the result's size.
    public func stream(_ query: Query, from collection: CollectionName) -> RecordStream {
        do { try query.validate() } catch { return RecordStream(failing: DepotError.wrap(error)) }
        return RecordStream(bufferSize: 256) { [self] sink in
            guard !closed.load(ordering: .acquiring) else { throw DepotError(.closed, "The PostgreSQL store is closed.") }
            try await readers.run { [self] in
                // One attempt: records already handed out cannot be taken back.
                try transaction(writable: false, attempts: 1) { tx in
                    try tx.forEachStreamed(query, in: collection, batch: 256) { record in
                        try sink.send(record)
                        return true
                    }
                }
            }
        }
    }

    /// Checks that every collection in the catalog has its table.
    public func integrityCheck() async throws -> [String] {
        try await read { [self] tx in
            guard let tx = tx as? PostgresTransaction else { return [] }
            return try tx.missingTables(schema: settings.schema)
        }
    }

    /// Closes the connections and stops the driver's threads. Later calls throw `.closed`.
    public func close() async throws {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        feed.stop()
        pool.close()
        readers.stop()
        writer.stop()
    }
}

extension PostgresTransaction {
    /// Catalog entries without a table.
    func missingTables(schema: String) throws -> [String] {
        var problems: [String] = []
        for name in try collectionNames() {
            let sql = SQLBuilder()
            let result = try run(sql.query("SELECT to_regclass(\(sql.text(PostgresSQL.quote(schema) + "." + PostgresSQL.quote(name.rawValue)))) IS NOT NULL"))
            if let row = result.rows.first, try row.decode(Bool.self) == false { problems.append("collection \(name) has no table") }
        }
        return problems
    }
}

/// The driver's one-write-at-a-time gate: a lock that a thread may wait for (``take()``), a
/// task may only try (``tryTake()``), and any thread may give back (``leave()``), since a
/// write without a thread holds it across an await and may resume on another thread.
private final class WriteGate: @unchecked Sendable {
    // @unchecked: `taken` is read and written only with `condition` locked.
    private let condition = NSCondition()
    private var taken = false

    /// Takes the gate, waiting while another write holds it (a driver thread only).
    func take() {
        condition.lock()
        while taken { condition.wait() }
        taken = true
        condition.unlock()
    }

    /// Takes the gate if it is free right now; never waits.
    func tryTake() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !taken else { return false }
        taken = true
        return true
    }

    /// Gives the gate back (from any thread).
    func leave() {
        condition.lock()
        taken = false
        condition.signal()
        condition.unlock()
    }
}
