import DepotCore
import Foundation

/// What the driver knows about one collection's table.
struct CollectionMeta: Sendable {
    var idKind: IDKind
    /// The field columns the table has (not `id`, not the doubles column).
    var columns: Set<String>
    var schema: CollectionSchema
    /// The table's identity and column count as the server reported them together with
    /// ``columns``; `nil` when this process made or changed the table since it last read
    /// them. A full-record write's column check compares it (Docs/PostgresDriver.md,
    /// "Catalog cache").
    var shape: TableShape? = nil
}

/// A table's OID and `pg_class.relnatts` (its columns ever added, dropped ones included),
/// read with its column names: as long as both are unchanged, no column was added, and
/// one dropped since makes any statement naming it fail with undefined_column (retried
/// with the catalog read anew).
struct TableShape: Sendable, Equatable {
    var oid: Int64
    var natts: Int64
}

/// Translates Depot filters and sorts into PostgreSQL with exactly the semantics of
/// ``QueryEvaluator`` (Docs/Semantics.md, "Queries"; Docs/PostgresDriver.md, "Queries").
///
/// Field columns hold ``ValueKey``s, so every comparison is a `bytea` comparison (binary,
/// no collation) against a bound key, bracketed by the kind's byte range; string ids are
/// `text COLLATE "C"` and compared with `COLLATE "C"`; integer ids are `bigint`, compared
/// with bounds computed exactly from a double operand. Every predicate is two-valued (never
/// SQL `NULL`), so `NOT` is an exact complement. Every value is bound.
struct PostgresQueryTranslator {
    let meta: CollectionMeta
    let sql: SQLBuilder

    init(meta: CollectionMeta, builder: SQLBuilder = SQLBuilder()) {
        self.meta = meta
        self.sql = builder
    }

    private enum Ref {
        case id(IDKind)
        case column(String)
        case absent
    }

    private func ref(_ field: String) -> Ref {
        if field == "id" { return .id(meta.idKind) }
        return meta.columns.contains(field) ? .column(PostgresSQL.quote(field)) : .absent
    }

    /// The WHERE expression (`TRUE` for everything).
    mutating func filter(_ filter: Filter) -> String {
        switch filter {
        case .all: return "TRUE"
        case .equal(let field, let operand): return equal(ref(field), operand)
        case .notEqual(let field, let operand): return "(NOT " + equal(ref(field), operand) + ")"
        case .less(let field, let operand): return range(ref(field), "<", operand)
        case .lessOrEqual(let field, let operand): return range(ref(field), "<=", operand)
        case .greater(let field, let operand): return range(ref(field), ">", operand)
        case .greaterOrEqual(let field, let operand): return range(ref(field), ">=", operand)
        case .isIn(let field, let operands):
            if operands.isEmpty { return "FALSE" }
            let r = ref(field)
            return "(" + operands.map { equal(r, $0) }.joined(separator: " OR ") + ")"
        case .notIn(let field, let operands):
            if operands.isEmpty { return "TRUE" }
            let r = ref(field)
            return "(NOT (" + operands.map { equal(r, $0) }.joined(separator: " OR ") + "))"
        case .isNull(let field): return isNull(ref(field))
        case .isNotNull(let field): return "(NOT " + isNull(ref(field)) + ")"
        case .hasPrefix(let field, let prefix): return hasPrefix(ref(field), prefix)
        case .contains(let field, let needle): return contains(ref(field), needle)
        case .and(let filters):
            if filters.isEmpty { return "TRUE" }
            return "(" + filters.map { self.filter($0) }.joined(separator: " AND ") + ")"
        case .or(let filters):
            if filters.isEmpty { return "FALSE" }
            return "(" + filters.map { self.filter($0) }.joined(separator: " OR ") + ")"
        case .not(let inner):
            return "(NOT " + self.filter(inner) + ")"
        }
    }

    private func isNull(_ r: Ref) -> String {
        switch r {
        case .id: return "FALSE"
        case .absent: return "TRUE"
        case .column(let c): return "(\(c) IS NULL)"
        }
    }

    private mutating func equal(_ r: Ref, _ operand: FieldValue) -> String {
        if case .null = operand { return isNull(r) }
        switch r {
        case .absent: return "FALSE"
        case .column(let c):
            return "(\(c) IS NOT NULL AND \(c) = \(sql.bytes(ValueKey.encode(operand).key)))"
        case .id(.int):
            switch operand {
            case .int(let i): return "(\"id\" = \(sql.int(i)))"
            case .double(let d):
                guard let i = Self.exactInt(d) else { return "FALSE" }
                return "(\"id\" = \(sql.int(i)))"
            default: return "FALSE"
            }
        case .id(.string):
            guard case .string(let s) = operand else { return "FALSE" }
            return "(\"id\" = \(sql.text(s)) COLLATE \"C\")"
        }
    }

    private mutating func range(_ r: Ref, _ op: String, _ operand: FieldValue) -> String {
        guard let kind = ValueKey.kindByte(operand), kind < ValueKey.arrayKind else { return "FALSE" }
        switch r {
        case .absent: return "FALSE"
        case .column(let c):
            let key = sql.bytes(ValueKey.encode(operand).key)
            // The kind's keys are exactly those >= [kind] and < [kind + 1].
            let bound = op.hasPrefix("<") ? "\(c) >= \(sql.bytes([kind]))" : "\(c) < \(sql.bytes([kind + 1]))"
            return "(\(c) IS NOT NULL AND \(c) \(op) \(key) AND \(bound))"
        case .id(.int):
            switch operand {
            case .int(let i): return "(\"id\" \(op) \(sql.int(i)))"
            case .double(let d): return intIDRange(op, d)
            default: return "FALSE"
            }
        case .id(.string):
            guard case .string(let s) = operand else { return "FALSE" }
            return "(\"id\" \(op) \(sql.text(s)) COLLATE \"C\")"
        }
    }

    /// `id op d` for an integer id and a double, exactly: the double becomes the integer
    /// bound that selects the same ids (an id below 2.5 is an id up to 2).
    private mutating func intIDRange(_ op: String, _ d: Double) -> String {
        let low = -9_223_372_036_854_775_808.0, high = 9_223_372_036_854_775_808.0
        switch op {
        case "<", ">=":
            let c = d.rounded(.up)
            if c >= high { return op == "<" ? "TRUE" : "FALSE" }
            if c <= low { return op == "<" ? "FALSE" : "TRUE" }
            return "(\"id\" \(op) \(sql.int(Int64(c))))"
        default:  // "<=", ">"
            let f = d.rounded(.down)
            if f >= high { return op == "<=" ? "TRUE" : "FALSE" }
            if f < low { return op == "<=" ? "FALSE" : "TRUE" }
            return "(\"id\" \(op) \(sql.int(Int64(f))))"
        }
    }

    static func exactInt(_ d: Double) -> Int64? {
        guard d.isFinite, d.rounded(.towardZero) == d, d >= -9_223_372_036_854_775_808.0, d < 9_223_372_036_854_775_808.0 else { return nil }
        return Int64(d)
    }

    private mutating func hasPrefix(_ r: Ref, _ prefix: String) -> String {
        let bytes = Array(prefix.utf8)
        switch r {
        case .absent, .id(.int): return "FALSE"
        case .id(.string):
            if bytes.isEmpty { return "TRUE" }
            return "(substring(convert_to(\"id\", 'UTF8') from 1 for \(bytes.count)) = \(sql.bytes(bytes)))"
        case .column(let c):
            let key = [ValueKey.stringKind] + bytes
            return "(\(c) IS NOT NULL AND substring(\(c) from 1 for \(key.count)) = \(sql.bytes(key)))"
        }
    }

    private mutating func contains(_ r: Ref, _ needle: String) -> String {
        let bytes = Array(needle.utf8)
        switch r {
        case .absent, .id(.int): return "FALSE"
        case .id(.string):
            if bytes.isEmpty { return "TRUE" }
            return "(position(\(sql.bytes(bytes)) in convert_to(\"id\", 'UTF8')) > 0)"
        case .column(let c):
            let kind = "substring(\(c) from 1 for 1) = \(sql.bytes([ValueKey.stringKind]))"
            if bytes.isEmpty { return "(\(c) IS NOT NULL AND \(kind))" }
            return "(\(c) IS NOT NULL AND \(kind) AND position(\(sql.bytes(bytes)) in substring(\(c) from 2)) > 0)"
        }
    }

    // MARK: Sorting

    /// The ORDER BY list: per key, the key column (arrays and objects cut to their kind
    /// byte, so that they tie), null first ascending and last descending, then the id.
    mutating func orderBy(_ sort: [SortKey]) -> String {
        var terms: [String] = []
        let idTerm = meta.idKind == .string ? "\"id\" COLLATE \"C\"" : "\"id\""
        for key in sort {
            switch ref(key.field) {
            case .absent: continue
            case .id:
                terms.append(idTerm + (key.descending ? " DESC" : ""))
                return terms.joined(separator: ", ")
            case .column(let c):
                let nested = sql.bytes([ValueKey.arrayKind])
                let expression = "(CASE WHEN \(c) >= \(nested) THEN substring(\(c) from 1 for 1) ELSE \(c) END)"
                terms.append(expression + (key.descending ? " DESC NULLS LAST" : " ASC NULLS FIRST"))
            }
        }
        terms.append(idTerm)
        return terms.joined(separator: ", ")
    }

    /// The WHERE, ORDER BY and paging of a query, after `FROM table`.
    mutating func tail(_ query: Query) -> String {
        var text = ""
        let whereClause = filter(query.filter)
        if whereClause != "TRUE" { text += " WHERE " + whereClause }
        text += " ORDER BY " + orderBy(query.sort)
        if let limit = query.limit { text += " LIMIT \(sql.int(Int64(limit)))" }
        if query.offset > 0 { text += " OFFSET \(sql.int(Int64(query.offset)))" }
        return text
    }
}
