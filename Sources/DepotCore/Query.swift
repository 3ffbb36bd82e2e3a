/// A condition on records, evaluated with the same semantics on every backend
/// (Docs/Semantics.md, "Queries").
///
/// Field names are top-level fields; the name `id` means the record id. Build filters
/// with the operators on ``Field``:
///
/// ```swift
/// let adults: Filter = Field("age") >= 18 && Field("name").hasPrefix("A")
/// ```
///
/// Semantics, the same on every driver:
/// - numbers compare by value across ints and doubles (exactly, also past 2^53);
/// - strings compare by UTF-8 bytes; `hasPrefix`/`contains` are case-sensitive and treat
///   `%`, `_`, `*`, `?`, `[` as plain characters;
/// - `== null` matches null and missing; `!= x` (x not null) matches null and missing too;
///   `in` is a chain of `==`, `notIn` a chain of `!=`;
/// - `<`, `<=`, `>`, `>=` match only values of the operand's kind (never null, never a
///   string for a number operand); `hasPrefix`/`contains` match only strings;
/// - bools are not numbers: `true` never equals `1`;
/// - arrays and objects can be tested with `==`/`!=`/`in`/`notIn` (exact structure) and for null.
public indirect enum Filter: Hashable, Sendable {
    /// Matches every record.
    case all
    case equal(String, FieldValue)
    case notEqual(String, FieldValue)
    case less(String, FieldValue)
    case lessOrEqual(String, FieldValue)
    case greater(String, FieldValue)
    case greaterOrEqual(String, FieldValue)
    case isIn(String, [FieldValue])
    case notIn(String, [FieldValue])
    case isNull(String)
    case isNotNull(String)
    case hasPrefix(String, String)
    case contains(String, String)
    case and([Filter])
    case or([Filter])
    case not(Filter)

    /// Every field name the filter reads.
    public var fieldNames: Set<String> {
        switch self {
        case .all: return []
        case .equal(let f, _), .notEqual(let f, _), .less(let f, _), .lessOrEqual(let f, _),
            .greater(let f, _), .greaterOrEqual(let f, _), .isIn(let f, _), .notIn(let f, _),
            .isNull(let f), .isNotNull(let f), .hasPrefix(let f, _), .contains(let f, _):
            return [f]
        case .and(let fs), .or(let fs): return fs.reduce(into: []) { $0.formUnion($1.fieldNames) }
        case .not(let f): return f.fieldNames
        }
    }

    /// Checks field names (top-level names or `id`) and operand values.
    /// - Throws: ``DepotError`` `.invalidQuery`.
    public func validate() throws {
        for name in fieldNames where name != "id" && !FieldName.isValid(name) {
            throw DepotError(.invalidQuery, "Filter names field \(CollectionName.quotedForMessage(name)), which is not a valid field name.")
        }
        try forEachOperand { value in
            do { try value.validate(field: "filter") } catch { throw DepotError(.invalidQuery, "A filter operand is invalid: NaN or nested too deeply.") }
        }
    }

    func forEachOperand(_ body: (FieldValue) throws -> Void) throws {
        switch self {
        case .all, .isNull, .isNotNull, .hasPrefix, .contains: break
        case .equal(_, let v), .notEqual(_, let v), .less(_, let v), .lessOrEqual(_, let v), .greater(_, let v), .greaterOrEqual(_, let v):
            try body(v)
        case .isIn(_, let vs), .notIn(_, let vs): for v in vs { try body(v) }
        case .and(let fs), .or(let fs): for f in fs { try f.forEachOperand(body) }
        case .not(let f): try f.forEachOperand(body)
        }
    }

    public static func && (lhs: Filter, rhs: Filter) -> Filter {
        switch (lhs, rhs) {
        case (.all, _): return rhs
        case (_, .all): return lhs
        case let (.and(a), .and(b)): return .and(a + b)
        case let (.and(a), _): return .and(a + [rhs])
        case let (_, .and(b)): return .and([lhs] + b)
        default: return .and([lhs, rhs])
        }
    }

    public static func || (lhs: Filter, rhs: Filter) -> Filter {
        switch (lhs, rhs) {
        case let (.or(a), .or(b)): return .or(a + b)
        case let (.or(a), _): return .or(a + [rhs])
        case let (_, .or(b)): return .or([lhs] + b)
        default: return .or([lhs, rhs])
        }
    }

    public static prefix func ! (filter: Filter) -> Filter { .not(filter) }
}

/// Names a field in a filter or sort; `Field.id` is the record id.
///
/// ```swift
/// Field("views") > 5
/// Field("tag").in(["a", "b"])
/// Field.id == 42
/// ```
public struct Field: Hashable, Sendable, ExpressibleByStringLiteral {
    public let name: String
    public init(_ name: String) { self.name = name }
    public init(stringLiteral value: String) { self.name = value }
    /// The record id.
    public static let id = Field("id")

    public static func == (lhs: Field, rhs: some FieldValueConvertible) -> Filter { .equal(lhs.name, rhs.fieldValue) }
    public static func != (lhs: Field, rhs: some FieldValueConvertible) -> Filter { .notEqual(lhs.name, rhs.fieldValue) }
    public static func < (lhs: Field, rhs: some FieldValueConvertible) -> Filter { .less(lhs.name, rhs.fieldValue) }
    public static func <= (lhs: Field, rhs: some FieldValueConvertible) -> Filter { .lessOrEqual(lhs.name, rhs.fieldValue) }
    public static func > (lhs: Field, rhs: some FieldValueConvertible) -> Filter { .greater(lhs.name, rhs.fieldValue) }
    public static func >= (lhs: Field, rhs: some FieldValueConvertible) -> Filter { .greaterOrEqual(lhs.name, rhs.fieldValue) }
    public func `in`(_ values: [any FieldValueConvertible]) -> Filter { .isIn(name, values.map(\.fieldValue)) }
    public func notIn(_ values: [any FieldValueConvertible]) -> Filter { .notIn(name, values.map(\.fieldValue)) }
    public var isNull: Filter { .isNull(name) }
    public var isNotNull: Filter { .isNotNull(name) }
    public func hasPrefix(_ prefix: String) -> Filter { .hasPrefix(name, prefix) }
    public func contains(_ text: String) -> Filter { .contains(name, text) }
    public var ascending: SortKey { SortKey(name) }
    public var descending: SortKey { SortKey(name, descending: true) }
}

/// One key of a sort: a field (or `id`) and a direction.
///
/// Ascending puts null and missing first; descending puts them last. Values of several
/// kinds order null < bool < number < string < bytes < array < object (arrays and objects
/// tie among themselves). The record id ascending is always the final tie-breaker.
public struct SortKey: Hashable, Sendable {
    public var field: String
    public var descending: Bool
    public init(_ field: String, descending: Bool = false) {
        self.field = field
        self.descending = descending
    }
}

/// A query over one collection: a filter, sort keys, then offset and limit.
///
/// Without sort keys, records come in id order (integer ids numerically, string ids by
/// their UTF-8 bytes). Paging is deterministic on every backend because the id always
/// breaks ties.
public struct Query: Hashable, Sendable {
    public var filter: Filter
    public var sort: [SortKey]
    public var offset: Int
    public var limit: Int?

    public init(filter: Filter = .all, sort: [SortKey] = [], offset: Int = 0, limit: Int? = nil) {
        self.filter = filter
        self.sort = sort
        self.offset = offset
        self.limit = limit
    }

    /// Checks names, operands, offset and limit.
    /// - Throws: ``DepotError`` `.invalidQuery`.
    public func validate() throws {
        try filter.validate()
        for key in sort where key.field != "id" && !FieldName.isValid(key.field) {
            throw DepotError(.invalidQuery, "Sort names field \(CollectionName.quotedForMessage(key.field)), which is not a valid field name.")
        }
        guard offset >= 0 else { throw DepotError(.invalidQuery, "Offset must not be negative.") }
        if let limit, limit < 0 { throw DepotError(.invalidQuery, "Limit must not be negative.") }
    }
}

/// What a driver did with a query: which parts ran in its engine and which in memory.
///
/// ```swift
/// let plan = try await users.explain(Query(filter: Field("age") > 3))
/// print(plan) // "sqlite: filter, sort, paging in engine; SQL: SELECT ..."
/// ```
public struct QueryPlan: Sendable, Hashable, CustomStringConvertible {
    /// The backend that answered (`"memory"`, `"sqlite"`, `"gdbm"`, `"json"`).
    public var backend: String
    /// `true` when the filter ran in the engine; otherwise the shared evaluator applied it.
    public var filterInEngine: Bool
    /// `true` when sorting ran in the engine.
    public var sortInEngine: Bool
    /// `true` when offset and limit ran in the engine.
    public var pagingInEngine: Bool
    /// The indexes the engine used to find candidates (empty: a full scan).
    public var indexesUsed: [String]
    /// Engine-specific text: the SQL, the index lookups, the scan.
    public var detail: String

    public init(backend: String, filterInEngine: Bool, sortInEngine: Bool, pagingInEngine: Bool, indexesUsed: [String] = [], detail: String = "") {
        self.backend = backend
        self.filterInEngine = filterInEngine
        self.sortInEngine = sortInEngine
        self.pagingInEngine = pagingInEngine
        self.indexesUsed = indexesUsed
        self.detail = detail
    }

    public var description: String {
        func part(_ name: String, _ inEngine: Bool) -> String { "\(name) in \(inEngine ? "engine" : "memory")" }
        var text = "\(backend): " + [part("filter", filterInEngine), part("sort", sortInEngine), part("paging", pagingInEngine)].joined(separator: ", ")
        if !indexesUsed.isEmpty { text += "; indexes: " + indexesUsed.joined(separator: ", ") }
        if !detail.isEmpty { text += "; " + detail }
        return text
    }
}
