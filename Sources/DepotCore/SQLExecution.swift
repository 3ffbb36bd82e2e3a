/// Running a SQL statement of the caller's on a driver whose engine speaks SQL: the escape
/// hatch of ``DriverCapabilities/rawSQL``. Docs/SQLiteDriver.md, "Raw SQL", says what the
/// SQLite driver allows; Docs/ImplementingAStorageDriver.md, "Raw SQL", what a driver
/// implements.
///
/// A driver with the capability makes its read and write transactions conform; the store
/// reaches them through ``Store/sql(_:_:)``, ``StoreReadTransaction/sql(_:_:)`` and
/// ``StoreWriteTransaction/sql(_:_:)``:
///
/// ```swift
/// let result = try await store.sql("SELECT author, count(*) AS n FROM books WHERE year >= ? GROUP BY author", [1950])
/// for row in result.rows { print(row["author"] ?? .null, row["n"] ?? .null) }
/// ```
///
/// A write made by raw SQL bypasses everything the store does for its own writes:
/// validation, change events, read-cache invalidation, write observers, so the sync outbox
/// and a server's change feed never see it (Docs/Architecture.md, "One gateway").
public protocol SQLExecuting: AnyObject {
    /// The SQL engine that runs the statements (`"sqlite"`, `"postgresql"`): what
    /// ``QueryPlan/backend`` names for them.
    var sqlEngine: String { get }

    /// Runs one statement with `parameters` bound to its placeholders by position (the
    /// engine's own syntax: `?` and `?NNN` for SQLite, `$1` for PostgreSQL) and returns its
    /// rows and the number of rows it changed. Values are always bound, never spliced into
    /// the text.
    ///
    /// In a read transaction a statement that would write is refused; statements that would
    /// break the driver's own bookkeeping (transaction control, its private tables, Depot's
    /// reserved collections) are refused everywhere.
    /// - Throws: `.invalidQuery` for a statement the engine cannot prepare, several
    ///   statements, or a parameter count that does not match; `.unsupported` for a refused
    ///   statement; the engine's errors mapped as for the driver's own statements.
    func execute(sql: String, parameters: [FieldValue]) throws -> SQLResult

    /// How the engine would run the statement (SQLite: `EXPLAIN QUERY PLAN`), without
    /// running it. Same refusals as ``execute(sql:parameters:)``.
    func explain(sql: String, parameters: [FieldValue]) throws -> QueryPlan
}

/// What a SQL statement returned: its column names, its rows, and how many rows it changed.
public struct SQLResult: Sendable, Hashable {
    /// The result columns, in the statement's order (empty for a statement without results).
    public var columns: [String]
    /// The rows, in the order the engine returned them.
    public var rows: [SQLRow]
    /// The rows the statement inserted, updated or deleted (rows changed by triggers and
    /// foreign-key actions included); 0 for a statement that only reads.
    public var changes: Int

    /// A result of `rows` over `columns` that changed `changes` rows.
    public init(columns: [String], rows: [SQLRow], changes: Int) {
        self.columns = columns
        self.rows = rows
        self.changes = changes
    }
}

/// One row of a ``SQLResult``: a value per column, in column order.
///
/// Values are what the engine returned, as plain ``FieldValue``s: an integer, a real, text,
/// a blob or NULL. The engine does not know Depot's kinds, so a bool that Depot stored comes
/// back as an integer and an array or object as its JSON text (Docs/SQLiteDriver.md,
/// "Raw SQL").
public struct SQLRow: Sendable, Hashable, RandomAccessCollection {
    /// The column names, shared with the other rows of the result.
    public let columns: [String]
    /// The values, one per column.
    public let values: [FieldValue]

    /// A row of `values` under `columns` (the two have the same count).
    /// - Throws: `.internal` when the counts differ.
    public init(columns: [String], values: [FieldValue]) throws {
        guard columns.count == values.count else {
            throw DepotError(.internal, "A SQL row has \(values.count) values for \(columns.count) columns.")
        }
        self.columns = columns
        self.values = values
    }

    /// The first position.
    public var startIndex: Int { 0 }
    /// One past the last position.
    public var endIndex: Int { values.count }

    /// The column name and value at `position`.
    public subscript(position: Int) -> (column: String, value: FieldValue) { (columns[position], values[position]) }

    /// The value of the first column named `column` (compared exactly), `nil` when the row has
    /// no such column. A SQL NULL is `.null`, not `nil`.
    public subscript(column: String) -> FieldValue? {
        guard let index = columns.firstIndex(of: column) else { return nil }
        return values[index]
    }

    /// The row as a dictionary, NULLs left out; of two columns with one name, the first wins.
    public var fields: [String: FieldValue] {
        var fields: [String: FieldValue] = [:]
        for (column, value) in zip(columns, values) where !value.isNull && fields[column] == nil { fields[column] = value }
        return fields
    }
}

extension DepotError {
    /// The error for raw SQL asked of a driver without ``DriverCapabilities/rawSQL``.
    static func noSQL(_ backend: String) -> DepotError {
        DepotError(.unsupported, "The \(backend) driver does not run SQL statements; raw SQL needs a SQL driver such as sqlite.")
    }
}

extension StoreReadTransaction {
    /// The driver transaction's SQL side. - Throws: `.unsupported` naming the driver.
    func sqlExecutor() throws -> any SQLExecuting {
        guard store.driver.capabilities.contains(.rawSQL), let executor = base as? any SQLExecuting else {
            throw DepotError.noSQL(store.driver.backendName)
        }
        return executor
    }

    /// Runs one SQL statement with `parameters` bound by position, inside this transaction
    /// (``SQLExecuting/execute(sql:parameters:)``). In a read transaction the statement must
    /// only read, over the transaction's snapshot; in a write transaction
    /// (``StoreWriteTransaction``) it may write, and commits or rolls back with everything
    /// else the closure did. What it writes is invisible to change events, the read caches by id and
    /// write observers (the sync outbox, a server's change feed): see ``SQLExecuting``; the result
    /// cache of queries forgets every entry after the commit.
    ///
    /// ```swift
    /// let n = try await store.read { tx in try tx.sql("SELECT count(*) FROM books").rows.first?[0].value }
    /// ```
    /// - Throws: `.unsupported` on a driver without ``DriverCapabilities/rawSQL`` (naming the
    ///   driver), for a statement that writes in a read transaction, or for a refused
    ///   statement; `.invalidQuery`; `.closed` after the closure returned; the engine's errors.
    public func sql(_ statement: String, _ parameters: [FieldValue] = []) throws -> SQLResult {
        if let writer = self as? StoreWriteTransaction {
            guard writer.isValid else { throw DepotError(.closed, "A transaction was used after its closure returned.") }
            // It may write anywhere: the result cache forgets everything after the commit.
            writer.touchedAll = true
        }
        return try sqlExecutor().execute(sql: statement, parameters: parameters)
    }

    /// How the engine would run `statement` (``SQLExecuting/explain(sql:parameters:)``).
    /// - Throws: as ``sql(_:_:)``.
    public func explainSQL(_ statement: String, _ parameters: [FieldValue] = []) throws -> QueryPlan {
        try sqlExecutor().explain(sql: statement, parameters: parameters)
    }
}

extension Store {
    /// Runs one SQL statement with `parameters` bound by position, in a write transaction of
    /// its own (so it may read or write), and returns its rows and changed-row count.
    ///
    /// ```swift
    /// let old = try await store.sql("DELETE FROM logs WHERE at < ? RETURNING id", [.double(cutoff)])
    /// ```
    ///
    /// Raw SQL writes bypass change events, the repositories' read caches by id and write
    /// observers (the sync outbox): see ``SQLExecuting``. The result cache of queries forgets
    /// every entry after a transaction that ran raw SQL. For a read-only statement over a read snapshot use
    /// ``StoreReadTransaction/sql(_:_:)`` inside ``read(_:)``.
    /// - Throws: `.unsupported` on a driver without ``DriverCapabilities/rawSQL`` (memory,
    ///   gdbm, json), naming it; `.invalidQuery`; the engine's errors.
    @discardableResult
    public func sql(_ statement: String, _ parameters: [FieldValue] = []) async throws -> SQLResult {
        try checkSQL()
        return try await write { tx in try tx.sql(statement, parameters) }
    }

    /// How the engine would run `statement`, in a read transaction, without running it: the
    /// plan names the engine (``QueryPlan/backend``) and holds its own account in
    /// ``QueryPlan/detail`` (SQLite's `EXPLAIN QUERY PLAN`).
    /// - Throws: as ``sql(_:_:)``.
    public func explainSQL(_ statement: String, _ parameters: [FieldValue] = []) async throws -> QueryPlan {
        try checkSQL()
        return try await read { tx in try tx.explainSQL(statement, parameters) }
    }

    /// Throws `.unsupported` naming the driver when it has no ``DriverCapabilities/rawSQL``.
    func checkSQL() throws {
        guard driver.capabilities.contains(.rawSQL) else { throw DepotError.noSQL(driver.backendName) }
    }
}

extension BlockingStore {
    /// The synchronous twin of ``Store/sql(_:_:)``: one statement in a write transaction of
    /// its own, the calling thread blocked until it committed.
    /// - Throws: as ``Store/sql(_:_:)``; `.unsupported` inside a transaction of the same store.
    @discardableResult
    public func sql(_ statement: String, _ parameters: [FieldValue] = []) throws -> SQLResult {
        try store.checkSQL()
        return try write { tx in try tx.sql(statement, parameters) }
    }

    /// The synchronous twin of ``Store/explainSQL(_:_:)``.
    /// - Throws: as ``Store/explainSQL(_:_:)``; `.unsupported` inside a transaction of the same store.
    public func explainSQL(_ statement: String, _ parameters: [FieldValue] = []) throws -> QueryPlan {
        try store.checkSQL()
        return try read { tx in try tx.explainSQL(statement, parameters) }
    }
}
