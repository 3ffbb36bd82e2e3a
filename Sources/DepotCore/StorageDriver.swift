import Foundation

/// The protocol every backend implements.
///
/// A driver offers transactions over named collections. Everything else (typed models,
/// upsert by natural key, change events, migrations, sync) is built by the core on top of
/// these few requirements, so a new backend is small. The contract, executable in
/// `DepotConformance`, is written in Docs/ImplementingAStorageDriver.md.
///
/// The *core* requirements are the ones without a default: five here, four in
/// ``ReadTransaction`` and four in ``WriteTransaction``. They are all a driver must write to
/// pass the conformance suite. The others have defaults built on the core ones and are
/// there to be overridden where the engine does better (a count without decoding, a
/// streamed query, a bulk delete, fields bound as they are encoded).
///
/// Transactions take synchronous closures that the driver runs where it chooses (its own
/// thread for blocking engines), one writer at a time:
///
/// ```swift
/// let count = try await driver.read { tx in try tx.count(.all, in: users) }
/// try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["n": 1]), into: users) }
/// ```
///
/// A closure that throws rolls its transaction back; nothing it did is visible afterwards.
public protocol StorageDriver: AnyObject, Sendable {
    /// A short backend name: `"memory"`, `"sqlite"`, `"gdbm"`, `"json"`.
    var backendName: String { get }

    /// What the driver supports; a conformance check for a missing capability reports
    /// "not supported" instead of passing.
    var capabilities: DriverCapabilities { get }

    /// Runs `body` in a read transaction that sees one consistent snapshot.
    /// - Throws: what `body` throws, or ``DepotError`` (`.closed`, `.locked`, `.io`, `.corrupted`).
    func read<T: Sendable>(_ body: @escaping @Sendable (any ReadTransaction) throws -> T) async throws -> T

    /// Runs `body` in a write transaction: atomic across collections, serializable, durable
    /// per the store's durability when it returns. A throw rolls everything back.
    /// - Throws: what `body` throws, or ``DepotError``.
    @discardableResult
    func write<T: Sendable>(_ body: @escaping @Sendable (any WriteTransaction) throws -> T) async throws -> T

    /// Runs `body` in a read transaction and blocks the calling thread until it is done:
    /// the synchronous twin of ``read(_:)``, with the same snapshot and errors, for code that
    /// is not `async`. Not for async code: it holds a thread while it waits.
    ///
    /// The default runs ``read(_:)`` in a task and waits for it; a driver overrides it to
    /// run `body` on the calling thread or its own without a task.
    func readBlocking<T>(_ body: (any ReadTransaction) throws -> T) throws -> T

    /// Runs `body` in a read transaction right on the calling thread when that takes no
    /// waiting (no lock another thread holds, no hand-off to a driver thread) and returns
    /// `true`; returns `false` when it cannot, and the caller then uses ``read(_:)``. For
    /// short reads from async code, which would otherwise pay for ``read(_:)``'s escaping
    /// closure and its task switch: `Collection.get` and `Repository.find` try it first,
    /// with `body` storing its result in a variable of theirs.
    ///
    /// Same snapshot and errors as ``read(_:)``. On `false`, `body` did not run or what it
    /// produced must be discarded (a driver may abandon a transaction that outgrew its
    /// inline budget), so `body` may be called twice: keep it free of side effects other
    /// than its result. The default returns `false` without running `body`.
    func readWithoutWaiting(_ body: (any ReadTransaction) throws -> Void) throws -> Bool

    /// Runs `body` in a write transaction and blocks the calling thread until it has
    /// committed (or rolled back): the synchronous twin of ``write(_:)``. Not for async code.
    ///
    /// The default runs ``write(_:)`` in a task and waits for it.
    @discardableResult
    func writeBlocking<T>(_ body: (any WriteTransaction) throws -> T) throws -> T

    /// Streams the results of `query`. A driver with ``DriverCapabilities/streaming``
    /// does it without holding them all in memory; the default reads them all in one read
    /// transaction when iteration starts.
    func stream(_ query: Query, from collection: CollectionName) -> RecordStream

    /// Checks the stored data; returns the problems found (empty when sound). The default
    /// finds none: a driver with files to check overrides it.
    func integrityCheck() async throws -> [String]

    /// Releases files and threads. Later calls throw `.closed`. Closing twice is harmless.
    func close() async throws
}

/// Features a driver may or may not have.
public struct DriverCapabilities: OptionSet, Hashable, Sendable, CustomStringConvertible {
    /// The set's bits, one per capability.
    public let rawValue: Int
    /// The capabilities whose bits `rawValue` has.
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// Data survives closing and reopening the store.
    public static let persistence = DriverCapabilities(rawValue: 1 << 0)
    /// Write transactions are atomic across collections and roll back on throw.
    public static let transactions = DriverCapabilities(rawValue: 1 << 1)
    /// A read transaction sees one snapshot while writers commit.
    public static let snapshotReads = DriverCapabilities(rawValue: 1 << 2)
    /// Unique constraints are enforced.
    public static let uniqueConstraints = DriverCapabilities(rawValue: 1 << 3)
    /// The store assigns integer ids.
    public static let assignedIDs = DriverCapabilities(rawValue: 1 << 4)
    /// Queries stream without loading every result.
    public static let streaming = DriverCapabilities(rawValue: 1 << 5)
    /// Several processes may open the store (waiting or failing with `.locked`, never corrupting).
    public static let multiProcess = DriverCapabilities(rawValue: 1 << 6)
    /// The driver's transactions run SQL statements given by the caller (they conform to
    /// ``SQLExecuting``): ``Store/sql(_:_:)``. Not part of ``complete``: a driver without SQL
    /// is complete without it.
    public static let rawSQL = DriverCapabilities(rawValue: 1 << 7)

    /// Commits made by other processes reach ``Store/changes()`` and the read caches
    /// (PostgreSQL: LISTEN/NOTIFY). Not part of ``complete``: only a server driver can have it.
    public static let crossProcessChanges = DriverCapabilities(rawValue: 1 << 8)

    /// Everything a complete driver offers, persistence included.
    public static let complete: DriverCapabilities = [.persistence, .transactions, .snapshotReads, .uniqueConstraints, .assignedIDs, .streaming, .multiProcess]

    static let names: [(DriverCapabilities, String)] = [
        (.persistence, "persistence"), (.transactions, "transactions"), (.snapshotReads, "snapshotReads"),
        (.uniqueConstraints, "uniqueConstraints"), (.assignedIDs, "assignedIDs"), (.streaming, "streaming"),
        (.multiProcess, "multiProcess"), (.rawSQL, "rawSQL"), (.crossProcessChanges, "crossProcessChanges"),
    ]

    /// The capabilities' names, comma-separated (`"persistence, transactions"`).
    public var description: String { DriverCapabilities.names.filter { contains($0.0) }.map(\.1).joined(separator: ", ") }
}

/// Reading inside a transaction. Valid only inside the closure it was given to.
public protocol ReadTransaction: AnyObject {
    /// The collections that exist, reserved ones included, sorted by name.
    func collectionNames() throws -> [CollectionName]

    /// The schema of a collection, `nil` if it does not exist.
    func schema(of collection: CollectionName) throws -> CollectionSchema?

    /// The record with `id`, `nil` if there is none (also when the collection does not exist).
    func get(_ id: RecordID, from collection: CollectionName) throws -> Record?

    /// Calls `body` with each result of `query` in order until it returns `false`.
    /// A missing collection has no records.
    func forEach(_ query: Query, in collection: CollectionName, _ body: (Record) throws -> Bool) throws

    /// Like ``forEach(_:in:_:)``, but each result is offered as a ``FieldSource`` read in
    /// place, so that models decode without an intermediate ``Record``. Same results, same
    /// order, same snapshot rules as `forEach`.
    ///
    /// The default implementation wraps ``forEach(_:in:_:)``; a driver overrides it when it
    /// can read fields in place.
    func forEachFields(_ query: Query, in collection: CollectionName, _ body: (any FieldSource) throws -> Bool) throws

    /// Calls `body` with the record with `id` as a ``FieldSource``; `nil` (and `body` is not
    /// called) when there is no such record. Same answer as ``get(_:from:)``.
    ///
    /// The default implementation wraps ``get(_:from:)``.
    func withFields<T>(of id: RecordID, from collection: CollectionName, _ body: (any FieldSource) throws -> T) throws -> T?

    /// The number of records matching `filter`. The default counts what ``forEach(_:in:_:)``
    /// finds; a driver overrides it to count without decoding records.
    func count(_ filter: Filter, in collection: CollectionName) throws -> Int

    /// How the driver would run `query`. The default describes what the defaults do: every
    /// record read and filtered by the shared evaluator.
    func explain(_ query: Query, in collection: CollectionName) throws -> QueryPlan

    /// Like ``forEach(_:in:_:)`` (same records, same order), but each record carries only
    /// the fields named in `fields` (the id always). The default trims what `forEach` reads;
    /// a driver overrides it to read only those fields.
    func forEach(_ query: Query, selecting fields: Set<String>, in collection: CollectionName, _ body: (Record) throws -> Bool) throws

    /// The groups of `query`, one row each, in any order, with their group values and
    /// aggregates as ``AggregateEvaluator`` computes them (Docs/Aggregates.md). `having`,
    /// `sort`, `offset` and `limit` are not applied here: the caller finishes the rows with
    /// ``AggregateEvaluator/finish(_:_:collection:)``. The default reads every record the
    /// filter matches; a driver overrides it to group in its engine.
    /// - Throws: `.invalidQuery`, `.invalidValue` for an int sum that overflows.
    func aggregateGroups(_ query: AggregateQuery, in collection: CollectionName) throws -> [AggregateRow]

    /// How the driver would run a grouped query. The default: the shared evaluator does all.
    func explain(_ query: AggregateQuery, in collection: CollectionName) throws -> QueryPlan
}

/// Writing inside a transaction. Reads see the transaction's own writes.
///
/// Writing to a collection that does not exist creates it with the id kind of the record
/// written and no constraints. Records are validated (``Record/validate(collection:)``)
/// by the caller; top-level `.null` fields are removed before they reach the driver.
public protocol WriteTransaction: ReadTransaction {
    /// Creates the collection or makes its constraints and indexes exactly those of `schema`.
    /// - Throws: `.schemaMismatch` if the id kind differs, `.uniqueViolation` if existing
    ///   records break a new unique constraint.
    func prepare(_ schema: CollectionSchema) throws

    /// Removes a collection and all its records; `false` if it did not exist.
    @discardableResult
    func dropCollection(_ collection: CollectionName) throws -> Bool

    /// Stores `record` as `mode` says, the one write of a record every other write is made
    /// of: `.insert` adds it (`.alreadyExists` when the id is taken), `.update` replaces an
    /// existing record's fields (`.notFound` when there is none), `.save` does either and
    /// reports which.
    /// - Throws: those, `.uniqueViolation` naming the constraint, `.invalidValue` for an id
    ///   of the other kind than the collection's.
    @discardableResult
    func write(_ record: Record, as mode: RecordWriteMode, into collection: CollectionName) throws -> WriteOutcome

    /// Deletes by id; `false` if there was no such record.
    @discardableResult
    func delete(_ id: RecordID, from collection: CollectionName) throws -> Bool

    /// Adds a record under a new integer id, greater than every id the collection has had
    /// (``DriverCapabilities/assignedIDs``). The default throws `.unsupported`.
    /// - Throws: `.invalidValue` if the collection uses string ids or no ids are left,
    ///   `.uniqueViolation`.
    func insert(fields: [String: FieldValue], into collection: CollectionName) throws -> RecordID

    /// Deletes every record matching `filter` and returns their ids, in id order. The
    /// default finds them with ``ReadTransaction/forEach(_:in:_:)`` and deletes each; a
    /// driver overrides it with one statement where it can.
    /// - Throws: `.invalidQuery` for a filter that is not valid.
    func deleteReturningIDs(matching filter: Filter, from collection: CollectionName) throws -> [RecordID]

    /// Inserts, updates or saves (as `mode` says) the one record whose fields `encode` hands
    /// to the driver's ``DriverFieldSink`` and whose id it returns: the same result and
    /// errors as ``write(_:as:into:)``, without building the ``Record`` when the driver can
    /// place fields as they come. The default collects them in a dictionary
    /// (``writeRecord(_:into:_:)``). `encode` is called at least once, and a driver may call
    /// it again with another sink when the first cannot take the record (SQLite does when a
    /// field has no column yet), so each call must encode the same record; the sink's base
    /// class checks every field before the driver's ``DriverFieldSink/accept(_:forField:)``
    /// sees it.
    /// - Throws: what `encode` throws, and the errors of ``write(_:as:into:)``.
    @discardableResult
    func write(_ mode: RecordWriteMode, into collection: CollectionName, _ encode: (DriverFieldSink) throws -> RecordID) throws -> WriteOutcome

    /// Applies `change` (already normalized: no `.null` in `set`) to the record with `id`;
    /// `false` when there is none. The default reads the record and writes it back with
    /// ``write(_:as:into:)``; a driver overrides it to change the fields in place.
    /// - Throws: `.uniqueViolation`, as for an update.
    @discardableResult
    func update(_ id: RecordID, applying change: FieldChange, in collection: CollectionName) throws -> Bool

    /// Applies `change` (normalized) to every record `filter` matches and returns their
    /// ids in id order. The default finds them with ``ReadTransaction/forEach(_:in:_:)`` and
    /// updates each; a driver overrides it with one statement where it can.
    /// - Throws: `.invalidQuery`, `.uniqueViolation` (the transaction rolls back when the
    ///   error leaves its closure).
    func updateReturningIDs(matching filter: Filter, applying change: FieldChange, in collection: CollectionName) throws -> [RecordID]

    /// Tells the driver that its next call, a write of one record by id
    /// (``write(_:as:into:)``, ``write(_:into:_:)`` or ``update(_:applying:in:)``), is the
    /// last thing the transaction asks of it: when that call returns, the store commits,
    /// and when it throws, the store rolls back. The store says so only for a transaction
    /// made of that one write, with no write observer, reference check or delete rule that
    /// could add work after it (Docs/Architecture.md, "Transactions of one write").
    ///
    /// A driver that begins its transactions when the first statement goes out may then run
    /// that write's statement on its own, as a transaction of its own (PostgreSQL: one round
    /// trip instead of three), provided it has sent nothing yet. The default ignores it.
    func nextCallEndsTransaction()

    /// As ``nextCallEndsTransaction()``, with the store's word in `sameOnEveryRun` that each
    /// run of the transaction's closure makes that call with the same values: the record or
    /// change was made before the closure and handed to it (``Collection``'s one-record
    /// methods), not encoded inside it from a model whose encoding may differ between runs
    /// (a value transformer that draws a nonce). A driver that learns the write from one run
    /// of the closure, sends it, and gives its answer to the next relies on that word
    /// (PostgreSQL's writes without a thread, Docs/PostgresDriver.md); without it, it runs
    /// the transaction as any other. The default calls ``nextCallEndsTransaction()``.
    func nextCallEndsTransaction(sameOnEveryRun: Bool)
}

/// What a save did.
public enum WriteOutcome: String, Sendable, Hashable {
    /// The record was new.
    case inserted
    /// A record with that id existed and was replaced.
    case updated
}

extension ReadTransaction {
    /// All results of `query` as an array.
    public func query(_ query: Query, in collection: CollectionName) throws -> [Record] {
        var out: [Record] = []
        try forEach(query, in: collection) { out.append($0); return true }
        return out
    }

    /// The first result of `query`, or `nil`.
    public func first(_ query: Query, in collection: CollectionName) throws -> Record? {
        var found: Record?
        var q = query
        q.limit = 1
        try forEach(q, in: collection) { found = $0; return false }
        return found
    }

    /// `true` when some record matches `filter`.
    public func exists(_ filter: Filter, in collection: CollectionName) throws -> Bool {
        try first(Query(filter: filter), in: collection) != nil
    }
}

extension StorageDriver {
    /// The default stream: the query's results, read in one read transaction when
    /// iteration starts (no ``DriverCapabilities/streaming``).
    public func stream(_ query: Query, from collection: CollectionName) -> RecordStream {
        do { try query.validate() } catch let error as DepotError { return RecordStream(failing: error) } catch {
            return RecordStream(failing: DepotError.wrap(error))
        }
        return RecordStream(deferred: { [self] in try await self.read { tx in try tx.query(query, in: collection) } })
    }

    /// No problems, once a read transaction shows the driver is open: the default for a
    /// driver with nothing of its own to check.
    public func integrityCheck() async throws -> [String] {
        try await read { _ in [String]() }
    }
}

extension ReadTransaction {
    /// The default count: what ``forEach(_:in:_:)`` finds.
    public func count(_ filter: Filter, in collection: CollectionName) throws -> Int {
        var n = 0
        try forEach(Query(filter: filter), in: collection) { _ in n += 1; return true }
        return n
    }

    /// The default plan: every record read and filtered by the shared evaluator.
    public func explain(_ query: Query, in collection: CollectionName) throws -> QueryPlan {
        try query.validate()
        return QueryPlan(
            backend: QueryPlan.evaluatorBackend, filterInEngine: false, sortInEngine: false, pagingInEngine: false,
            detail: "every record of \(collection.rawValue) read, then filtered, sorted and paged by the shared evaluator"
        )
    }
}

extension ReadTransaction {
    /// The default projection: ``forEach(_:in:_:)``, each record trimmed to `fields`.
    public func forEach(_ query: Query, selecting fields: Set<String>, in collection: CollectionName, _ body: (Record) throws -> Bool) throws {
        try forEach(query, in: collection) { record in
            try body(Record(id: record.id, fields: record.fields.filter { fields.contains($0.key) }))
        }
    }

    /// The default grouping: the shared evaluator over every record of the collection.
    public func aggregateGroups(_ query: AggregateQuery, in collection: CollectionName) throws -> [AggregateRow] {
        try query.validate()
        var records: [Record] = []
        try forEach(Query(filter: query.filter), in: collection) { records.append($0); return true }
        return try AggregateEvaluator.groups(query, over: records, collection: collection)
    }

    /// The default plan of a grouped query: the shared evaluator does everything.
    public func explain(_ query: AggregateQuery, in collection: CollectionName) throws -> QueryPlan {
        try query.validate()
        return QueryPlan(
            backend: QueryPlan.evaluatorBackend, filterInEngine: false, sortInEngine: false, pagingInEngine: false,
            detail: "every record of \(collection.rawValue) read, then filtered, grouped, aggregated, sorted and paged by the shared evaluator"
        )
    }
}

extension WriteTransaction {
    /// The default: nothing to do (see ``WriteTransaction/nextCallEndsTransaction()``).
    public func nextCallEndsTransaction() {}

    /// The default: ``WriteTransaction/nextCallEndsTransaction()``, the word on runs unused.
    public func nextCallEndsTransaction(sameOnEveryRun: Bool) { nextCallEndsTransaction() }

    /// The default partial update: read, change, write back.
    @discardableResult
    public func update(_ id: RecordID, applying change: FieldChange, in collection: CollectionName) throws -> Bool {
        guard let record = try get(id, from: collection) else { return false }
        try write(change.applied(to: record), as: .update, into: collection)
        return true
    }

    /// The default: find the matching ids, then update each.
    public func updateReturningIDs(matching filter: Filter, applying change: FieldChange, in collection: CollectionName) throws -> [RecordID] {
        try filter.validate()
        var records: [Record] = []
        try forEach(Query(filter: filter), in: collection) { records.append($0); return true }
        for record in records { try write(change.applied(to: record), as: .update, into: collection) }
        return records.map(\.id)
    }

    /// Adds a record. - Throws: `.alreadyExists`, `.uniqueViolation`, `.invalidValue` (id kind).
    public func insert(_ record: Record, into collection: CollectionName) throws {
        try write(record, as: .insert, into: collection)
    }

    /// Replaces a record's fields. - Throws: `.notFound`, `.uniqueViolation`.
    public func update(_ record: Record, in collection: CollectionName) throws {
        try write(record, as: .update, into: collection)
    }

    /// Inserts or replaces. - Throws: `.uniqueViolation`.
    @discardableResult
    public func save(_ record: Record, into collection: CollectionName) throws -> WriteOutcome {
        try write(record, as: .save, into: collection)
    }

    /// Deletes every record matching `filter`; returns how many.
    /// - Throws: `.invalidQuery` for a filter that is not valid.
    @discardableResult
    public func delete(matching filter: Filter, from collection: CollectionName) throws -> Int {
        try deleteReturningIDs(matching: filter, from: collection).count
    }

    /// Assigned ids are not supported: the default for drivers without
    /// ``DriverCapabilities/assignedIDs``.
    public func insert(fields: [String: FieldValue], into collection: CollectionName) throws -> RecordID {
        throw DepotError(.unsupported, "This driver does not assign ids; give each record one.", collection: collection.rawValue)
    }

    /// The default for ``WriteTransaction/deleteReturningIDs(matching:from:)``: find the ids,
    /// delete each.
    public func deleteReturningIDs(matching filter: Filter, from collection: CollectionName) throws -> [RecordID] {
        try filter.validate()
        var ids: [RecordID] = []
        try forEach(Query(filter: filter), in: collection) { ids.append($0.id); return true }
        return try ids.filter { try delete($0, from: collection) }
    }
}

extension StorageDriver {
    /// The default ``StorageDriver/readWithoutWaiting(_:)``: `false`, `body` not run.
    public func readWithoutWaiting(_ body: (any ReadTransaction) throws -> Void) throws -> Bool { false }

    /// The default ``StorageDriver/readBlocking(_:)``: ``StorageDriver/read(_:)`` in a task,
    /// waited for.
    public func readBlocking<T>(_ body: (any ReadTransaction) throws -> T) throws -> T {
        try withoutActuallyEscaping(body) { body in
            let loan = ClosureLoan(body)
            defer { loan.end() }
            return try waitForTask { try await self.read { tx in UncheckedSendable(try loan.call(tx)) } }.value
        }
    }

    /// The default ``StorageDriver/writeBlocking(_:)``: ``StorageDriver/write(_:)`` in a
    /// task, waited for.
    @discardableResult
    public func writeBlocking<T>(_ body: (any WriteTransaction) throws -> T) throws -> T {
        try withoutActuallyEscaping(body) { body in
            let loan = ClosureLoan(body)
            defer { loan.end() }
            return try waitForTask { try await self.write { tx in UncheckedSendable(try loan.call(tx)) } }.value
        }
    }
}

/// A value handed to another thread while the thread that owns it waits for that thread
/// to finish with it (a closure or a result crossing into a driver's thread and back):
/// the wait orders every access, which the compiler cannot see.
package struct UncheckedSendable<Value>: @unchecked Sendable {
    package let value: Value
    package init(_ value: Value) { self.value = value }
}

/// A closure lent to another thread while its owner waits (``StorageDriver/readBlocking(_:)``,
/// ``BlockingExecutor/runBlocking(nonEscaping:)``): the owner ends the loan before its
/// `withoutActuallyEscaping` returns, so whatever still holds the loan (a finished job, a
/// task being torn down) no longer holds the closure.
package final class ClosureLoan<Argument, Result>: @unchecked Sendable {
    // @unchecked: the borrower calls `call` while the owner waits, and the owner calls `end`
    // after the wait: the wait orders the two.
    private var closure: ((Argument) throws -> Result)?

    package init(_ closure: @escaping (Argument) throws -> Result) { self.closure = closure }

    /// Calls the lent closure. - Throws: what it throws; `.internal` after ``end()``.
    package func call(_ argument: Argument) throws -> Result {
        guard let closure else { throw DepotError(.internal, "A lent closure was called after its loan ended.") }
        return try closure(argument)
    }

    /// Ends the loan: drops the closure.
    package func end() { closure = nil }
}

/// Runs `operation` in a new task and blocks the calling thread until it finishes.
/// - Throws: what `operation` throws.
package func waitForTask<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) throws -> T {
    let done = DispatchSemaphore(value: 0)
    let result = Locked<Result<T, any Error>?>(nil)
    Task.detached {
        let outcome: Result<T, any Error>
        do { outcome = .success(try await operation()) } catch { outcome = .failure(error) }
        result.withLock { $0 = outcome }
        done.signal()
    }
    done.wait()
    guard let outcome = result.withLock({ $0 }) else { throw DepotError(.internal, "A blocking call ended without a result.") }
    return try outcome.get()
}
