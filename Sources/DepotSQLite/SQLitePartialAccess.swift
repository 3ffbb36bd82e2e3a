import CSQLite
import DepotCore
import Foundation

// Projections, grouped queries and partial updates in SQL (Docs/SQLiteDriver.md,
// "Aggregates, projections and partial updates"): the same answers as the shared
// evaluator, with every value bound.

extension SQLiteTransaction {
    // MARK: Projections

    /// Reads only the selected columns (the id and the type tags always).
    func forEach(_ query: Query, selecting fields: Set<String>, in collection: CollectionName, _ body: (Record) throws -> Bool) throws {
        try checkValid()
        try query.validate()
        guard let meta = catalog.collections[collection] else { return }
        let selected = fields.filter { $0 != "id" && meta.position[$0] != nil }.sorted()
        let columns = selected.compactMap { meta.position[$0].map { quoteIdentifier(meta.columns[$0]) } }
        let head = "SELECT \"id\", \(quoteIdentifier(SQLiteLayout.tagColumn))" + columns.map { ", " + $0 }.joined() + " FROM \(meta.quotedTable)"
        var translator = SQLiteQueryTranslator(meta: meta)
        let sql = translator.select(query, head: head)
        var records: [Record] = []
        var stopped = false
        try connection.query(sql, translator.parameters) { row in
            let id = try Self.decodeID(row, meta)
            let tags = Self.decodeTags(row)
            var values: [String: FieldValue] = [:]
            for (offset, field) in selected.enumerated() {
                guard let index = meta.position[field],
                    let value = try Self.decodeValue(row.handle, column: Int32(offset + 2), tag: tags.isEmpty ? nil : tags[meta.columns[index]])
                else { continue }
                values[field] = value
            }
            let record = Record(id: id, fields: values)
            // A write transaction reads its results first (see forEach(_:in:_:)).
            if writable {
                records.append(record)
                return true
            }
            let more = try body(record)
            stopped = !more
            return more
        }
        if writable, !stopped {
            for record in records where try !body(record) { break }
        }
    }

    /// The value in `column` of the current row, read with the field's type tag; `nil` for NULL.
    static func decodeValue(_ handle: OpaquePointer, column: Int32, tag: UInt8?) throws -> FieldValue? {
        switch sqlite3_column_type(handle, column) {
        case SQLITE_NULL: return nil
        case SQLITE_INTEGER:
            let i = sqlite3_column_int64(handle, column)
            return tag == UInt8(ascii: "b") ? .bool(i != 0) : .int(i)
        case SQLITE_FLOAT: return .double(sqlite3_column_double(handle, column))
        case SQLITE_TEXT:
            let text = Statement.text(handle, column)
            return tag == UInt8(ascii: "j") ? try NestedJSON.decode(text, statement: handle) : .string(text)
        default: return .bytes(Statement.blob(handle, column))
        }
    }

    // MARK: Grouped queries

    /// One `SELECT … GROUP BY` statement: the filter, the groups and the aggregates' parts
    /// in SQL, merged into rows by ``AggregateEvaluator``.
    func aggregateGroups(_ query: AggregateQuery, in collection: CollectionName) throws -> [AggregateRow] {
        try checkValid()
        try query.validate()
        guard let meta = catalog.collections[collection] else {
            // No table: no records. Without group fields that is still one row.
            return try AggregateEvaluator.groups(query, over: [], collection: collection)
        }
        let plan = AggregateSQL(query, meta: meta)
        var rows: [AggregateRow] = []
        do {
            try connection.query(plan.sql, plan.parameters) { row in
                rows.append(try plan.row(row, query: query, collection: collection))
                return true
            }
        } catch let error as DepotError where (error.cause as? SQLiteResult)?.message.contains("integer overflow") == true {
            // SQLite's sum stops at the first partial sum outside 64 bits, which depends on
            // the order of the rows; the shared evaluator sums exactly and fails only when
            // the total is outside the range (Docs/Aggregates.md). Rare: let it decide.
            var records: [Record] = []
            try forEach(Query(filter: query.filter), in: collection) { records.append($0); return true }
            return try AggregateEvaluator.groups(query, over: records, collection: collection)
        }
        return rows
    }

    /// The SQL of a grouped query and SQLite's plan for it.
    func explain(_ query: AggregateQuery, in collection: CollectionName) throws -> QueryPlan {
        try checkValid()
        try query.validate()
        guard let meta = catalog.collections[collection] else {
            return QueryPlan(backend: "sqlite", filterInEngine: true, sortInEngine: false, pagingInEngine: false, detail: "collection \(collection) does not exist: no rows")
        }
        let plan = AggregateSQL(query, meta: meta)
        var steps: [String] = []
        try connection.query("EXPLAIN QUERY PLAN " + plan.sql, plan.parameters) { row in
            if case .text(let step) = row.value(3) { steps.append(step) }
            return true
        }
        return QueryPlan(
            backend: "sqlite", filterInEngine: true, sortInEngine: false, pagingInEngine: false,
            detail: "groups and aggregates in engine; having, sort and paging of the groups in memory; SQL: \(plan.sql); plan: \(steps.joined(separator: " | "))")
    }

    // MARK: Partial updates

    /// One `UPDATE … WHERE "id" = ?`: the fields set and removed in place.
    func update(_ id: RecordID, applying change: FieldChange, in collection: CollectionName) throws -> Bool {
        try checkWritable()
        guard let meta = catalog.collections[collection], id.kind == meta.idKind else { return false }
        return try !runUpdate(change, meta: meta, where: .equal("id", id.fieldValue), id: id).isEmpty
    }

    /// One `UPDATE … WHERE … RETURNING "id"` statement.
    func updateReturningIDs(matching filter: Filter, applying change: FieldChange, in collection: CollectionName) throws -> [RecordID] {
        try checkWritable()
        try filter.validate()
        guard let meta = catalog.collections[collection] else { return [] }
        return try runUpdate(change, meta: meta, where: filter, id: nil).sorted()
    }

    /// Runs the UPDATE of `change` over the rows `filter` matches; returns their ids.
    /// Columns are added first for fields set that have none; the type tags of every field
    /// touched are rewritten.
    private func runUpdate(_ change: FieldChange, meta original: CollectionMeta, where filter: Filter, id: RecordID?) throws -> [RecordID] {
        var meta = original
        if change.set.keys.contains(where: { meta.position[$0] == nil }) {
            // Only when something matches: a change of nothing adds no columns.
            var probe = SQLiteQueryTranslator(meta: meta)
            let condition = probe.filter(filter)
            guard try connection.scalar("SELECT 1 FROM \(meta.quotedTable) WHERE \(condition) LIMIT 1", probe.parameters) != nil else { return [] }
            meta = try ensureColumns(Set(change.set.keys), meta)
            try save(meta)
        }
        // One record by id: the statement's text and constant parameters depend only on the
        // change's shape, so they are built once per shape and kept on the connection.
        let shape = id.map { _ in PartialUpdateShape(meta, change) }
        if let id, let shape, let plan = connection.partialUpdates[shape.key] {
            let parameters = plan.parameters(values: shape.values, id: SQLiteQueryTranslator.sqlValue(id.fieldValue))
            let changed = try mappingWriteErrors(meta, id: id) { try connection.run(plan.sql, parameters) }
            return changed > 0 ? [id] : []
        }
        var translator = SQLiteQueryTranslator(meta: meta)
        var assignments: [String] = []
        // Where the values set are bound, in the order of their names (for the plan above).
        var valueSlots: [Int] = []
        var tags = "COALESCE(\(quoteIdentifier(SQLiteLayout.tagColumn)), ',')"
        for name in change.remove.sorted() {
            guard let index = meta.position[name] else { continue }
            let column = meta.columns[index]
            assignments.append("\(quoteIdentifier(column)) = NULL")
            tags = "replace(replace(\(tags), \(translator.bind(.text(",\(column):b,"))), ','), \(translator.bind(.text(",\(column):j,"))), ',')"
        }
        for name in change.set.keys.sorted() {
            guard let index = meta.position[name], let value = change.set[name] else { continue }
            let column = meta.columns[index]
            valueSlots.append(translator.parameters.count)
            assignments.append("\(quoteIdentifier(column)) = \(translator.bind(SQLiteQueryTranslator.sqlValue(value)))")
            tags = "replace(replace(\(tags), \(translator.bind(.text(",\(column):b,"))), ','), \(translator.bind(.text(",\(column):j,"))), ',')"
            switch value {
            case .bool: tags = "(\(tags) || \(translator.bind(.text("\(column):b,"))))"
            case .array, .object: tags = "(\(tags) || \(translator.bind(.text("\(column):j,"))))"
            default: break
            }
        }
        guard !assignments.isEmpty else {
            // Only fields that have no column were removed: nothing changes, but the matching
            // records are still the ones updated.
            var ids: [RecordID] = []
            try forEach(Query(filter: filter), selecting: [], in: meta.name) { ids.append($0.id); return true }
            return ids
        }
        assignments.append("\(quoteIdentifier(SQLiteLayout.tagColumn)) = NULLIF(\(tags), ',')")
        let beforeFilter = translator.parameters.count
        let condition = translator.filter(filter)
        let update = "UPDATE \(meta.quotedTable) SET \(assignments.joined(separator: ", ")) WHERE \(condition)"
        if let id, let shape {
            // One record by its primary key: the count of changed rows says whether it was
            // there, without RETURNING (whose rows SQLite collects in a temporary table first).
            let changed = try mappingWriteErrors(meta, id: id) { try connection.run(update, translator.parameters) }
            if valueSlots.count == shape.values.count, translator.parameters.count == beforeFilter + 1 {
                connection.keepPartialUpdate(shape.key, PartialUpdatePlan(sql: update, bound: translator.parameters, valueSlots: valueSlots, idSlot: beforeFilter))
            }
            return changed > 0 ? [id] : []
        }
        let sql = update + " RETURNING \"id\""
        var ids: [RecordID] = []
        try mappingWriteErrors(meta, id: id) {
            try connection.query(sql, translator.parameters) { row in
                ids.append(try Self.decodeID(row, meta))
                return true
            }
        }
        return ids
    }
}

/// The SQL of a grouped query: per group field its kind rank and value, per aggregate the
/// parts ``AggregateEvaluator/Accumulator`` merges (sums split into ints and doubles, minima
/// and maxima per kind), so that the engine's results equal the evaluator's.
struct AggregateSQL {
    private(set) var sql = ""
    private(set) var parameters: [SQLValue] = []
    /// Per aggregate, the result columns it reads, in order.
    private var layout: [[Int32]] = []

    init(_ query: AggregateQuery, meta: CollectionMeta) {
        var translator = SQLiteQueryTranslator(meta: meta)
        var columns: [String] = []
        var groupTerms: [String] = []
        for field in query.groupBy {
            let r = translator.ref(field)
            let rank = Self.rank(r, &translator)
            let value = translator.expression(r)
            columns.append(rank)
            columns.append(value)
            // A constant (the rank of an id, a field with no column) does not split groups,
            // and an integer literal in GROUP BY would name a result column.
            if Int(rank) == nil { groupTerms.append(rank) }
            if value != "NULL" { groupTerms.append(value) }
        }
        // Group fields that are all constants still make groups: none when no record matches.
        if groupTerms.isEmpty && !query.groupBy.isEmpty { groupTerms.append("''") }
        for aggregate in query.aggregates {
            var parts: [String] = []
            let r = aggregate.field.map { translator.ref($0) }
            switch (aggregate.function, r) {
            case (.count, nil):
                parts = ["count(*)"]
            case (.count, let r?):
                parts = ["count(\(translator.expression(r)))"]
            case (.sum, let r?), (.average, let r?):
                let e = translator.expression(r)
                let isNumber = translator.isNumber(r)
                let isInt = "(\(isNumber) AND typeof(\(e)) = 'integer')"
                parts = [
                    "sum(CASE WHEN \(isInt) THEN \(e) END)",
                    "sum(CASE WHEN typeof(\(e)) = 'real' THEN \(e) END)",
                    "count(CASE WHEN \(isNumber) THEN 1 END)",
                    // SQLite's sum of ∞ and -∞ is NULL: this count tells it from no doubles.
                    "count(CASE WHEN typeof(\(e)) = 'real' THEN 1 END)",
                ]
            case (.min, let r?), (.max, let r?):
                let fn = aggregate.function == .min ? "min" : "max"
                let e = translator.expression(r)
                let isNumber = translator.isNumber(r)
                parts = [
                    "\(fn)(CASE WHEN \(translator.isBool(r)) THEN \(e) END)",
                    "\(fn)(CASE WHEN \(isNumber) AND typeof(\(e)) = 'integer' THEN \(e) END)",
                    "\(fn)(CASE WHEN typeof(\(e)) = 'real' THEN \(e) END)",
                    "\(fn)(CASE WHEN \(translator.isString(r)) THEN \(e) END)",
                    "\(fn)(CASE WHEN \(translator.isBytes(r)) THEN \(e) END)",
                ]
            case (_, nil):
                parts = ["NULL"]
            }
            let start = Int32(columns.count)
            layout.append(parts.indices.map { start + Int32($0) })
            columns.append(contentsOf: parts)
        }
        let condition = translator.filter(query.filter)
        var text = "SELECT \(columns.joined(separator: ", ")) FROM \(meta.quotedTable)"
        if condition != "1" { text += " WHERE " + condition }
        if !groupTerms.isEmpty { text += " GROUP BY " + groupTerms.joined(separator: ", ") }
        sql = text
        parameters = translator.parameters
    }

    /// The kind rank of a field as sorting orders kinds: 0 null, 1 bool, 2 number,
    /// 3 string, 4 bytes, 5 array, 6 object.
    private static func rank(_ r: SQLiteQueryTranslator.Ref, _ translator: inout SQLiteQueryTranslator) -> String {
        switch r {
        case .absent: return "0"
        case .id(let kind): return kind == .int ? "2" : "3"
        case .column(let q, let name): return translator.kindRank(quoted: q, name: name)
        }
    }

    /// The row of one result: group values read by their rank, aggregates merged.
    func row(_ row: Statement, query: AggregateQuery, collection: CollectionName) throws -> AggregateRow {
        var key: [FieldValue] = []
        for index in query.groupBy.indices {
            let rankColumn = Int32(index * 2), valueColumn = rankColumn + 1
            let rank = row.int(rankColumn)
            let value: FieldValue
            switch (rank, row.value(valueColumn)) {
            case (1, .int(let i)): value = .bool(i != 0)
            case (2, .int(let i)): value = .int(i)
            case (2, .double(let d)): value = .double(d)
            case (3, .text(let s)): value = .string(s)
            case (4, .blob(let b)): value = .bytes(b)
            case (5, .text(let s)), (6, .text(let s)): value = try NestedJSON.decode(s)
            default: value = .null
            }
            key.append(value)
        }
        var accumulators: [AggregateEvaluator.Accumulator] = []
        for (aggregate, columns) in zip(query.aggregates, layout) {
            var accumulator = AggregateEvaluator.Accumulator(aggregate)
            switch aggregate.function {
            case .count:
                if case .int(let n) = row.value(columns[0]) { accumulator.merge(count: n) }
            case .sum, .average:
                guard columns.count == 4 else { break }
                let ints: Int64? = if case .int(let i) = row.value(columns[0]) { i } else { nil }
                let reals: Int64 = if case .int(let n) = row.value(columns[3]) { n } else { 0 }
                let doubles: Double? = switch row.value(columns[1]) {
                case .double(let d): d
                case .int(let i): Double(i)
                default: reals > 0 ? .nan : nil
                }
                let numbers: Int64 = if case .int(let n) = row.value(columns[2]) { n } else { 0 }
                accumulator.merge(intSum: ints, doubleSum: doubles, numbers: numbers)
            case .min, .max:
                guard columns.count == 5 else { break }
                var candidates: [FieldValue] = []
                if case .int(let b) = row.value(columns[0]) { candidates.append(.bool(b != 0)) }
                if case .int(let i) = row.value(columns[1]) { candidates.append(.int(i)) }
                if case .double(let d) = row.value(columns[2]) { candidates.append(.double(d)) }
                if case .text(let s) = row.value(columns[3]) { candidates.append(.string(s)) }
                if case .blob(let b) = row.value(columns[4]) { candidates.append(.bytes(b)) }
                // An int id is read as a number; the kind columns above cover fields.
                accumulator.merge(candidates: candidates)
            }
            accumulators.append(accumulator)
        }
        return try AggregateEvaluator.row(query, key: key, accumulators: accumulators, collection: collection)
    }
}

/// What decides the text of a partial update of one record by id and its constant
/// parameters (``SQLiteTransaction/update(_:applying:in:)``): the table, the id's kind, the
/// columns removed and set, and per column set whether its value is a bool, nested (array or
/// object) or neither (each writes a different type tag).
struct PartialUpdateKey: Hashable {
    var table: String
    var idKind: IDKind
    var removed: [String]
    var set: [String]
    var kinds: [UInt8]
}

/// A change's ``PartialUpdateKey`` and the values it sets, in the order of their names:
/// the fields the collection has a column for, as the statement names them.
struct PartialUpdateShape {
    var key: PartialUpdateKey
    var values: [SQLValue]

    init(_ meta: CollectionMeta, _ change: FieldChange) {
        var removed: [String] = []
        for name in change.remove.sorted() {
            if let index = meta.position[name] { removed.append(meta.columns[index]) }
        }
        var set: [String] = [], kinds: [UInt8] = [], values: [SQLValue] = []
        for name in change.set.keys.sorted() {
            guard let index = meta.position[name], let value = change.set[name] else { continue }
            set.append(meta.columns[index])
            switch value {
            case .bool: kinds.append(1)
            case .array, .object: kinds.append(2)
            default: kinds.append(0)
            }
            values.append(SQLiteQueryTranslator.sqlValue(value))
        }
        key = PartialUpdateKey(table: meta.quotedTable, idKind: meta.idKind, removed: removed, set: set, kinds: kinds)
        self.values = values
    }
}

/// The statement of one ``PartialUpdateKey``, as the general path built it the first time,
/// and its parameters with the slots of the values set and of the id left open.
struct PartialUpdatePlan {
    let sql: String
    private let template: [SQLValue]
    private let valueSlots: [Int]
    private let idSlot: Int

    /// - Parameters:
    ///   - bound: the parameters the general path bound for the statement.
    ///   - valueSlots: where in `bound` the values set are, in the order of their names.
    ///   - idSlot: where in `bound` the id is.
    init(sql: String, bound: [SQLValue], valueSlots: [Int], idSlot: Int) {
        self.sql = sql
        template = bound
        self.valueSlots = valueSlots
        self.idSlot = idSlot
    }

    /// The statement's parameters for another change of the same shape.
    func parameters(values: [SQLValue], id: SQLValue) -> [SQLValue] {
        var out = template
        for (slot, value) in zip(valueSlots, values) { out[slot] = value }
        out[idSlot] = id
        return out
    }
}
