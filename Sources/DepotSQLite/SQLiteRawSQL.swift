import CSQLite
import DepotCore
import Foundation

/// Raw SQL (``DriverCapabilities/rawSQL``): a statement of the caller's, run in the
/// transaction's connection with its parameters bound, under an authorizer that refuses
/// what would break the driver (Docs/SQLiteDriver.md, "Raw SQL").
extension SQLiteTransaction: SQLExecuting {
    /// `"sqlite"`.
    var sqlEngine: String { "sqlite" }

    func execute(sql: String, parameters: [FieldValue]) throws -> SQLResult {
        try withRawStatement(sql, parameters) { statement, guardian in
            if !writable && sqlite3_stmt_readonly(statement.handle) == 0 {
                throw DepotError(.unsupported, "This SQL statement writes, and a read transaction cannot write: run it with store.sql or inside store.write.")
            }
            let count = sqlite3_column_count(statement.handle)
            let columns = (0..<count).map { index in sqlite3_column_name(statement.handle, index).map { String(cString: $0) } ?? "" }
            let before = sqlite3_total_changes64(connection.db)
            var rows: [SQLRow] = []
            while try statement.step() {
                var values: [FieldValue] = []
                values.reserveCapacity(Int(count))
                for index in 0..<count { values.append(Self.fieldValue(statement.value(index))) }
                rows.append(try SQLRow(columns: columns, values: values))
            }
            // A statement that writes a table directly counts its own rows, not those of the
            // triggers it fired (the driver's id-mark triggers write too).
            let changes = guardian.writesRows
                ? Int(sqlite3_changes64(connection.db))
                : Int(sqlite3_total_changes64(connection.db) - before)
            return SQLResult(columns: columns, rows: rows, changes: changes)
        }
    }

    func explain(sql: String, parameters: [FieldValue]) throws -> QueryPlan {
        // Nothing runs, so a statement that writes may be explained in a read transaction.
        try withRawStatement("EXPLAIN QUERY PLAN " + sql, parameters) { statement, _ in
            var steps: [String] = []
            var indexes: [String] = []
            while try statement.step() {
                guard case .text(let step) = statement.value(3) else { continue }
                steps.append(step)
                for marker in ["USING INDEX ", "USING COVERING INDEX "] {
                    if let range = step.range(of: marker) {
                        let name = String(step[range.upperBound...].prefix { $0 != " " })
                        if !indexes.contains(name) { indexes.append(name) }
                    }
                }
                if step.hasPrefix("SEARCH "), step.contains(" USING PRIMARY KEY ") || step.contains(" USING INTEGER PRIMARY KEY "), !indexes.contains("id") {
                    indexes.append("id")
                }
            }
            return QueryPlan(
                backend: sqlEngine, filterInEngine: true, sortInEngine: true, pagingInEngine: true, indexesUsed: indexes,
                detail: "raw SQL: \(sql); plan: \(steps.joined(separator: " | "))")
        }
    }

    /// What a column value of a raw statement is: SQLite's storage class as it is. No type
    /// tags apply (the statement may not read a collection's columns), so a bool stored by
    /// Depot is an int here and an array or object its JSON text.
    static func fieldValue(_ value: SQLValue) -> FieldValue {
        switch value {
        case .null: .null
        case .int(let i): .int(i)
        case .double(let d): .double(d)
        case .text(let s): .string(s)
        case .blob(let data): .bytes(data)
        }
    }

    /// Prepares `sql` as exactly one statement under the raw-SQL authorizer, binds
    /// `parameters` by position and runs `body` with it; the authorizer stays on until `body`
    /// returns (SQLite may prepare the statement again while it steps).
    /// - Throws: `.closed`; `.invalidQuery` for a statement SQLite cannot prepare, several
    ///   statements, a NaN or too deep parameter, or a parameter count that does not match; `.unsupported` for a
    ///   statement the authorizer refused; what `body` throws, SQLite's plain errors
    ///   (`SQLITE_ERROR`) as `.invalidQuery`.
    private func withRawStatement<T>(_ sql: String, _ parameters: [FieldValue], _ body: (Statement, RawSQLGuard) throws -> T) throws -> T {
        guard isValid else { throw DepotError(.closed, "A transaction was used after its closure returned.") }
        guard !sql.utf8.contains(0) else { throw DepotError(.invalidQuery, "A SQL statement cannot contain a NUL character.") }
        for (offset, value) in parameters.enumerated() {
            do {
                try value.validate(field: "?\(offset + 1)")
            } catch let error as DepotError {
                throw DepotError(.invalidQuery, "SQL parameter ?\(offset + 1) cannot be bound: \(error.message)")
            }
        }
        let guardian = RawSQLGuard(catalog: catalog)
        let db = connection.db
        sqlite3_set_authorizer(db, { context, action, first, second, _, trigger in
            guard let context else { return SQLITE_OK }
            let guardian = Unmanaged<RawSQLGuard>.fromOpaque(context).takeUnretainedValue()
            return guardian.authorize(action, first.map { String(cString: $0) }, second.map { String(cString: $0) }, inTrigger: trigger != nil)
        }, Unmanaged.passUnretained(guardian).toOpaque())
        defer { sqlite3_set_authorizer(db, nil, nil) }
        return try withExtendedLifetime(guardian) {
            let handle = try prepareOne(sql, guardian)
            let statement = Statement(handle: handle, connection: connection, sql: sql, transient: true)
            defer { statement.finish() }
            let expected = Int(sqlite3_bind_parameter_count(handle))
            guard expected == parameters.count else {
                throw DepotError(.invalidQuery, "The SQL statement has \(expected) parameter\(expected == 1 ? "" : "s"); \(parameters.count) value\(parameters.count == 1 ? " was" : "s were") given.")
            }
            for (offset, value) in parameters.enumerated() {
                try statement.bind(SQLiteQueryTranslator.sqlValue(value), at: Int32(offset + 1))
            }
            do {
                return try body(statement, guardian)
            } catch let error as DepotError where (error.cause as? SQLiteResult)?.primaryCode == SQLITE_ERROR {
                throw DepotError(.invalidQuery, "SQLite could not run the statement: \((error.cause as? SQLiteResult)?.message ?? "error").", cause: error.cause, detail: error.detail)
            }
        }
    }

    /// Prepares the one statement `sql` holds (not cached: a caller's statements are
    /// one-offs). - Throws: as ``withRawStatement(_:_:_:)``.
    private func prepareOne(_ sql: String, _ guardian: RawSQLGuard) throws -> OpaquePointer {
        let db = connection.db
        var handle: OpaquePointer?
        var more = false
        let rc = sql.withCString { text -> Int32 in
            var tail: UnsafePointer<CChar>?
            let rc = sqlite3_prepare_v3(db, text, -1, 0, &handle, &tail)
            guard rc == SQLITE_OK, let tail, tail.pointee != 0 else { return rc }
            // Only whitespace and comments may follow: they prepare to no statement.
            var next: OpaquePointer?
            let nextRC = sqlite3_prepare_v3(db, tail, -1, 0, &next, nil)
            if let next { sqlite3_finalize(next) }
            more = next != nil || nextRC != SQLITE_OK
            return rc
        }
        guard rc == SQLITE_OK, let handle else {
            if let handle { sqlite3_finalize(handle) }
            if let denial = guardian.denial { throw DepotError(.unsupported, denial) }
            if rc == SQLITE_OK { throw DepotError(.invalidQuery, "The SQL text holds no statement.") }
            let error = connection.lastError(rc, sql: sql)
            guard let cause = error.cause as? SQLiteResult, cause.primaryCode == SQLITE_ERROR else { throw error }
            throw DepotError(.invalidQuery, "SQLite could not prepare the statement: \(cause.message).", cause: cause, detail: error.detail)
        }
        if more {
            sqlite3_finalize(handle)
            throw DepotError(.invalidQuery, "Give one SQL statement at a time; the text holds more than one.")
        }
        return handle
    }
}

/// The authorizer of raw SQL: refuses, while a caller's statement is prepared, what would
/// break the driver's transactions or its bookkeeping (Docs/SQLiteDriver.md, "Raw SQL"), and
/// keeps the first reason for the error.
final class RawSQLGuard {
    /// The table of each collection, lowercased (SQLite names ignore case) → the collection.
    private let collectionTables: [String: String]
    /// The SQL indexes that implement Depot's unique constraints and indexes, lowercased.
    private let depotIndexes: Set<String>
    /// Why the statement was refused, once it was.
    private(set) var denial: String?
    /// `true` once the statement was seen inserting, updating or deleting rows of a table
    /// itself (not through a trigger, not the schema table that DDL writes).
    private(set) var writesRows = false

    /// Pragmas that only describe the schema, allowed with an argument.
    static let describingPragmas: Set<String> = [
        "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo", "foreign_key_list",
    ]

    init(catalog: Catalog) {
        var tables: [String: String] = [:]
        var indexes = Set<String>()
        for meta in catalog.collections.values {
            tables[meta.table.lowercased()] = meta.name.rawValue
            for sqlName in meta.info.sqlIndexes.values { indexes.insert(sqlName.lowercased()) }
        }
        collectionTables = tables
        depotIndexes = indexes
    }

    /// SQLite's answer for one action: `SQLITE_OK`, or `SQLITE_DENY` with ``denial`` set.
    /// `inTrigger` says the action belongs to a trigger the statement fires: raw SQL cannot
    /// create triggers, so it is one of the driver's, which may keep a table's id mark.
    func authorize(_ action: Int32, _ first: String?, _ second: String?, inTrigger: Bool) -> Int32 {
        let rowWrite = action == SQLITE_INSERT || action == SQLITE_UPDATE || action == SQLITE_DELETE
        if inTrigger, rowWrite, first?.lowercased() == SQLiteLayout.idMarksTable { return SQLITE_OK }
        if rowWrite, !inTrigger, let table = first?.lowercased(), table != "sqlite_master", table != "sqlite_schema", table != "sqlite_temp_master" {
            writesRows = true
        }
        guard let reason = refusal(action, first, second) else { return SQLITE_OK }
        if denial == nil { denial = reason }
        return SQLITE_DENY
    }

    /// `true` for Depot's own tables: the driver's `_depotsys_` ones and reserved `_depot_`
    /// collections.
    private static func isDepots(_ name: String?) -> Bool {
        name.map { $0.lowercased().hasPrefix("_depot") } ?? false
    }

    private func refusal(_ action: Int32, _ first: String?, _ second: String?) -> String? {
        switch action {
        case SQLITE_TRANSACTION, SQLITE_SAVEPOINT:
            return "Raw SQL cannot begin, commit or roll back transactions or savepoints: Depot runs the transaction (use store.write for several statements)."
        case SQLITE_ATTACH, SQLITE_DETACH:
            return "Raw SQL cannot attach or detach databases."
        case SQLITE_CREATE_TRIGGER, SQLITE_CREATE_TEMP_TRIGGER:
            return "Raw SQL cannot create triggers: they would run inside Depot's own writes."
        case SQLITE_PRAGMA:
            let name = (first ?? "").lowercased()
            if second != nil && !Self.describingPragmas.contains(name) {
                return "Raw SQL cannot set PRAGMA \(name): the driver owns its connections' settings."
            }
            return nil
        case SQLITE_INSERT, SQLITE_UPDATE, SQLITE_DELETE:
            // DDL writes `sqlite_schema` (reported here too); SQLite guards that table itself.
            if Self.isDepots(first) {
                return "Raw SQL cannot write to '\(first ?? "")': it holds Depot's own data (metadata, the sync outbox, reserved collections)."
            }
            return nil
        case SQLITE_CREATE_TABLE, SQLITE_CREATE_VIEW, SQLITE_CREATE_TEMP_TABLE, SQLITE_CREATE_TEMP_VIEW:
            if Self.isDepots(first) { return "Names starting with _depot belong to Depot; choose another name." }
            return nil
        case SQLITE_CREATE_INDEX, SQLITE_CREATE_TEMP_INDEX:
            if Self.isDepots(first) || Self.isDepots(second) { return "Raw SQL cannot add indexes to Depot's own tables or name them _depot…." }
            return nil
        case SQLITE_DROP_TABLE, SQLITE_DROP_TEMP_TABLE:
            return tableRefusal(first, "drop")
        case SQLITE_ALTER_TABLE:
            return tableRefusal(second, "alter")
        case SQLITE_DROP_INDEX, SQLITE_DROP_TEMP_INDEX:
            if let index = first, depotIndexes.contains(index.lowercased()) || Self.isDepots(index) {
                return "Raw SQL cannot drop index '\(index)': it implements a Depot index or unique constraint (change the collection's schema instead)."
            }
            return nil
        default:
            return nil
        }
    }

    /// Why a table may not be dropped or altered, `nil` when it may.
    private func tableRefusal(_ table: String?, _ verb: String) -> String? {
        guard let table else { return nil }
        if let collection = collectionTables[table.lowercased()] {
            return "Raw SQL cannot \(verb) table '\(table)': it holds collection '\(collection)' (use dropCollection or a migration)."
        }
        if Self.isDepots(table) { return "Raw SQL cannot \(verb) table '\(table)': it holds Depot's own data." }
        return nil
    }
}
