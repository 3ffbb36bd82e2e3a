import DepotCore
import Foundation

/// Translates Depot filters and sorts into SQLite SQL with exactly the semantics of
/// ``QueryEvaluator``. Every value is a bound parameter; every predicate is two-valued
/// (never SQL NULL), so `NOT` inverts exactly.
///
/// A field's kind is read from the column's storage class and the row's type tags:
/// INTEGER is a number unless tagged `b` (bool); TEXT is a string unless tagged `j`
/// (JSON of an array, `[...`, or an object, `{...`); REAL is a number; BLOB is bytes.
struct SQLiteQueryTranslator {
    let meta: CollectionMeta
    private(set) var parameters: [SQLValue] = []

    init(meta: CollectionMeta) { self.meta = meta }

    enum Ref {
        case id(IDKind)
        case column(quoted: String, name: String)
        case absent
    }

    func ref(_ field: String) -> Ref {
        if field == "id" { return .id(meta.idKind) }
        guard let index = meta.position[field] else { return .absent }
        let column = meta.columns[index]
        return .column(quoted: quoteIdentifier(column), name: column)
    }

    mutating func bind(_ value: SQLValue) -> String {
        parameters.append(value)
        // Numbered, so the order in which the SQL text is assembled does not matter.
        return "?\(parameters.count)"
    }

    private static let tags = "COALESCE(\"\(SQLiteLayout.tagColumn)\", '')"

    mutating func tagged(_ column: String, _ tag: String) -> String {
        "instr(\(SQLiteQueryTranslator.tags), \(bind(.text(",\(column):\(tag),")))) > 0"
    }

    // MARK: Kind predicates (never NULL)

    mutating func isBool(_ r: Ref) -> String {
        switch r {
        case .id, .absent: return "0"
        case .column(let q, let name): return "(typeof(\(q)) = 'integer' AND \(tagged(name, "b")))"
        }
    }

    mutating func isNumber(_ r: Ref) -> String {
        switch r {
        case .id(let kind): return kind == .int ? "1" : "0"
        case .absent: return "0"
        case .column(let q, let name): return "(typeof(\(q)) = 'real' OR (typeof(\(q)) = 'integer' AND NOT \(tagged(name, "b"))))"
        }
    }

    mutating func isString(_ r: Ref) -> String {
        switch r {
        case .id(let kind): return kind == .string ? "1" : "0"
        case .absent: return "0"
        case .column(let q, let name): return "(typeof(\(q)) = 'text' AND NOT \(tagged(name, "j")))"
        }
    }

    mutating func isBytes(_ r: Ref) -> String {
        switch r {
        case .id, .absent: return "0"
        case .column(let q, _): return "(typeof(\(q)) = 'blob')"
        }
    }

    mutating func isJSON(_ r: Ref) -> String {
        switch r {
        case .id, .absent: return "0"
        case .column(let q, let name): return "(typeof(\(q)) = 'text' AND \(tagged(name, "j")))"
        }
    }

    func expression(_ r: Ref) -> String {
        switch r {
        case .id: return "\"id\""
        case .absent: return "NULL"
        case .column(let q, _): return q
        }
    }

    // MARK: Values

    /// The SQL value a field value is stored as (top level).
    static func sqlValue(_ value: FieldValue) -> SQLValue {
        switch value {
        case .null: return .null
        case .bool(let b): return .int(b ? 1 : 0)
        case .int(let i): return .int(i)
        case .double(let d): return .double(d)
        case .string(let s): return .text(s)
        case .bytes(let d): return .blob(d)
        case .array, .object: return .text(NestedJSON.encode(value))
        }
    }

    // MARK: Filters

    /// The WHERE expression for `filter` (never NULL).
    mutating func filter(_ filter: Filter) -> String {
        switch filter {
        case .all: return "1"
        case .equal(let field, let operand): return equal(ref(field), operand)
        case .notEqual(let field, let operand): return "NOT " + equal(ref(field), operand)
        case .less(let field, let operand): return range(ref(field), "<", operand)
        case .lessOrEqual(let field, let operand): return range(ref(field), "<=", operand)
        case .greater(let field, let operand): return range(ref(field), ">", operand)
        case .greaterOrEqual(let field, let operand): return range(ref(field), ">=", operand)
        case .isIn(let field, let operands): return anyEqual(ref(field), operands)
        case .notIn(let field, let operands): return "NOT " + anyEqual(ref(field), operands)
        case .isNull(let field):
            let r = ref(field)
            return "(\(expression(r)) IS NULL)"
        case .isNotNull(let field):
            let r = ref(field)
            return "(\(expression(r)) IS NOT NULL)"
        case .hasPrefix(let field, let prefix):
            let r = ref(field)
            let kind = isString(r)
            if kind == "0" { return "0" }
            let bytes = Data(prefix.utf8)
            if bytes.isEmpty { return kind }
            // COALESCE: substr of an empty value is NULL in SQLite.
            return "(\(kind) AND COALESCE(substr(CAST(\(expression(r)) AS BLOB), 1, \(bind(.int(Int64(bytes.count))))) = \(bind(.blob(bytes))), 0))"
        case .contains(let field, let needle):
            let r = ref(field)
            let kind = isString(r)
            if kind == "0" { return "0" }
            let bytes = Data(needle.utf8)
            if bytes.isEmpty { return kind }
            return "(\(kind) AND COALESCE(instr(CAST(\(expression(r)) AS BLOB), \(bind(.blob(bytes)))), 0) > 0)"
        case .and(let filters):
            if filters.isEmpty { return "1" }
            var parts: [String] = []
            for f in filters { parts.append(self.filter(f)) }
            return "(" + parts.joined(separator: " AND ") + ")"
        case .or(let filters):
            if filters.isEmpty { return "0" }
            var parts: [String] = []
            for f in filters { parts.append(self.filter(f)) }
            return "(" + parts.joined(separator: " OR ") + ")"
        case .not(let inner):
            return "NOT " + self.filter(inner)
        }
    }

    private mutating func anyEqual(_ r: Ref, _ operands: [FieldValue]) -> String {
        if operands.isEmpty { return "0" }
        if case .id(let kind) = r {
            // `"id" IN (...)` with the operands of the id's kind (the others match nothing; the
            // id is never NULL): one primary-key search that returns rows in id order, where an
            // OR of `IS` tests is a multi-index OR followed by a sort.
            var marks: [String] = []
            for operand in operands {
                switch (kind, operand) {
                case (.int, .int), (.int, .double), (.string, .string):
                    marks.append(bind(SQLiteQueryTranslator.sqlValue(operand)))
                default:
                    continue
                }
            }
            return marks.isEmpty ? "0" : "(\"id\" IN (" + marks.joined(separator: ", ") + "))"
        }
        var parts: [String] = []
        for operand in operands { parts.append(equal(r, operand)) }
        return "(" + parts.joined(separator: " OR ") + ")"
    }

    private mutating func equal(_ r: Ref, _ operand: FieldValue) -> String {
        if case .null = operand { return "(\(expression(r)) IS NULL)" }
        if case .absent = r { return "0" }
        let kind: String
        switch operand {
        case .null: return "0"
        case .bool: kind = isBool(r)
        case .int, .double: kind = isNumber(r)
        case .string: kind = isString(r)
        case .bytes: kind = isBytes(r)
        case .array, .object: kind = isJSON(r)
        }
        if kind == "0" { return "0" }
        let test = "\(expression(r)) IS \(bind(SQLiteQueryTranslator.sqlValue(operand)))"
        return kind == "1" ? "(\(test))" : "(\(test) AND \(kind))"
    }

    private mutating func range(_ r: Ref, _ op: String, _ operand: FieldValue) -> String {
        let kind: String
        switch operand {
        case .null, .array, .object: return "0"
        case .bool: kind = isBool(r)
        case .int, .double: kind = isNumber(r)
        case .string: kind = isString(r)
        case .bytes: kind = isBytes(r)
        }
        if kind == "0" { return "0" }
        let test = "\(expression(r)) \(op) \(bind(SQLiteQueryTranslator.sqlValue(operand)))"
        return kind == "1" ? "(\(test))" : "(\(kind) AND \(test))"
    }

    // MARK: Sorting

    /// The ORDER BY list: per key, the kind rank then the value (arrays and objects tie),
    /// then the id ascending. A key on `id` ends the list: ids are unique, so later keys and
    /// the tie-breaker are redundant, and repeating `"id"` made SQLite sort a primary-key
    /// range in a temporary B-tree instead of reading it in key order.
    mutating func orderBy(_ sort: [SortKey]) -> String {
        var terms: [String] = []
        for key in sort {
            let direction = key.descending ? " DESC" : ""
            switch ref(key.field) {
            case .absent:
                continue
            case .id:
                terms.append("\"id\"" + direction)
                return terms.joined(separator: ", ")
            case .column(let q, let name):
                terms.append(kindRank(quoted: q, name: name) + direction)
                let jsonAgain = tagged(name, "j")
                terms.append("(CASE WHEN typeof(\(q)) = 'text' AND \(jsonAgain) THEN NULL ELSE \(q) END)" + direction)
            }
        }
        terms.append("\"id\"")
        return terms.joined(separator: ", ")
    }

    /// A column's kind rank as sorting orders kinds: 0 null, 1 bool, 2 number, 3 string,
    /// 4 bytes, 5 array, 6 object.
    mutating func kindRank(quoted q: String, name: String) -> String {
        let isBoolTag = tagged(name, "b")
        let isJSONTag = tagged(name, "j")
        return "(CASE typeof(\(q)) WHEN 'null' THEN 0 WHEN 'integer' THEN (CASE WHEN \(isBoolTag) THEN 1 ELSE 2 END) WHEN 'real' THEN 2 WHEN 'text' THEN (CASE WHEN \(isJSONTag) THEN (CASE WHEN substr(\(q), 1, 1) = '[' THEN 5 ELSE 6 END) ELSE 3 END) ELSE 4 END)"
    }

    /// The full SELECT for a query, with paging.
    mutating func select(_ query: Query) -> String {
        select(query, head: meta.selectSQL)
    }

    /// `head` (a `SELECT … FROM` the collection's table) with the query's WHERE, ORDER BY
    /// and paging.
    mutating func select(_ query: Query, head: String) -> String {
        var sql = head
        let whereClause = filter(query.filter)
        if whereClause != "1" { sql += " WHERE " + whereClause }
        sql += " ORDER BY " + orderBy(query.sort)
        if query.limit != nil || query.offset > 0 {
            sql += " LIMIT \(bind(.int(Int64(query.limit ?? -1)))) OFFSET \(bind(.int(Int64(query.offset))))"
        }
        return sql
    }
}
