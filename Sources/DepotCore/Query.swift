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
    /// The field equals the value under query equality (`1 == 1.0`; `== .null` also matches a
    /// missing field).
    case equal(String, FieldValue)
    /// The field does not equal the value; null and missing fields match when the value is not null.
    case notEqual(String, FieldValue)
    /// The field is less than the value, which must be of the same kind (never matches null).
    case less(String, FieldValue)
    /// The field is less than or equal to the value, which must be of the same kind.
    case lessOrEqual(String, FieldValue)
    /// The field is greater than the value, which must be of the same kind (never matches null).
    case greater(String, FieldValue)
    /// The field is greater than or equal to the value, which must be of the same kind.
    case greaterOrEqual(String, FieldValue)
    /// The field equals one of the values (a chain of ``equal(_:_:)`` joined by `or`).
    case isIn(String, [FieldValue])
    /// The field equals none of the values (a chain of ``notEqual(_:_:)``); matches null and missing.
    case notIn(String, [FieldValue])
    /// The field is null or missing.
    case isNull(String)
    /// The field holds a value other than null.
    case isNotNull(String)
    /// The field is a string starting with the given text, compared byte by byte (case-sensitive,
    /// no wildcards).
    case hasPrefix(String, String)
    /// The field is a string containing the given text, compared byte by byte (case-sensitive,
    /// no wildcards).
    case contains(String, String)
    /// Every filter matches; an empty list matches every record.
    case and([Filter])
    /// At least one filter matches; an empty list matches nothing.
    case or([Filter])
    /// The filter does not match (an exact complement: logic has two values, never unknown).
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

    /// Both filters must match; nested `and`s are flattened and ``all`` is dropped.
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

    /// Either filter may match; nested `or`s are flattened into one list.
    public static func || (lhs: Filter, rhs: Filter) -> Filter {
        switch (lhs, rhs) {
        case let (.or(a), .or(b)): return .or(a + b)
        case let (.or(a), _): return .or(a + [rhs])
        case let (_, .or(b)): return .or([lhs] + b)
        default: return .or([lhs, rhs])
        }
    }

    /// The opposite of `filter`: ``not(_:)``.
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
    /// The top-level field name, or `id` for the record id.
    public let name: String
    /// Names a top-level field (`"id"` for the record id). The name is checked when the query runs.
    public init(_ name: String) { self.name = name }
    /// Names a field with a string literal: `let year: Field = "year"`.
    public init(stringLiteral value: String) { self.name = value }
    /// The record id.
    public static let id = Field("id")

    /// Matches records whose field equals `rhs` under query equality (see ``Filter/equal(_:_:)``).
    public static func == (lhs: Field, rhs: some FieldValueConvertible) -> Filter { .equal(lhs.name, rhs.fieldValue) }
    /// Matches records whose field does not equal `rhs`, null and missing included when `rhs` is
    /// not null (see ``Filter/notEqual(_:_:)``).
    public static func != (lhs: Field, rhs: some FieldValueConvertible) -> Filter { .notEqual(lhs.name, rhs.fieldValue) }
    /// Matches records whose field is a value of `rhs`'s kind less than `rhs`.
    public static func < (lhs: Field, rhs: some FieldValueConvertible) -> Filter { .less(lhs.name, rhs.fieldValue) }
    /// Matches records whose field is a value of `rhs`'s kind less than or equal to `rhs`.
    public static func <= (lhs: Field, rhs: some FieldValueConvertible) -> Filter { .lessOrEqual(lhs.name, rhs.fieldValue) }
    /// Matches records whose field is a value of `rhs`'s kind greater than `rhs`.
    public static func > (lhs: Field, rhs: some FieldValueConvertible) -> Filter { .greater(lhs.name, rhs.fieldValue) }
    /// Matches records whose field is a value of `rhs`'s kind greater than or equal to `rhs`.
    public static func >= (lhs: Field, rhs: some FieldValueConvertible) -> Filter { .greaterOrEqual(lhs.name, rhs.fieldValue) }
    /// Matches records whose field equals one of `values`.
    public func `in`(_ values: [any FieldValueConvertible]) -> Filter { .isIn(name, values.map(\.fieldValue)) }
    /// Matches records whose field equals none of `values` (null and missing fields match).
    public func notIn(_ values: [any FieldValueConvertible]) -> Filter { .notIn(name, values.map(\.fieldValue)) }
    /// Matches records where the field is null or missing.
    public var isNull: Filter { .isNull(name) }
    /// Matches records where the field holds a non-null value.
    public var isNotNull: Filter { .isNotNull(name) }
    /// Matches string fields that start with `prefix`, byte by byte and case-sensitive;
    /// `%`, `_`, `*`, `?` and `[` are ordinary characters.
    public func hasPrefix(_ prefix: String) -> Filter { .hasPrefix(name, prefix) }
    /// Matches string fields that contain `text`, byte by byte and case-sensitive;
    /// `%`, `_`, `*`, `?` and `[` are ordinary characters.
    public func contains(_ text: String) -> Filter { .contains(name, text) }
    /// A sort key on this field, smallest first (null and missing first).
    public var ascending: SortKey { SortKey(name) }
    /// A sort key on this field, largest first (null and missing last).
    public var descending: SortKey { SortKey(name, descending: true) }
}

/// One key of a sort: a field (or `id`) and a direction.
///
/// Ascending puts null and missing first; descending puts them last. Values of several
/// kinds order null < bool < number < string < bytes < array < object (arrays and objects
/// tie among themselves). The record id ascending is always the final tie-breaker.
public struct SortKey: Hashable, Sendable {
    /// The field to sort by: a top-level field name, or `id`.
    public var field: String
    /// `true` to sort largest first.
    public var descending: Bool
    /// Sorts by `field`, ascending unless `descending` is `true`.
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
    /// Which records match; ``Filter/all`` by default.
    public var filter: Filter
    /// The sort keys, most significant first; the id ascending always breaks remaining ties.
    public var sort: [SortKey]
    /// How many matching records to skip, after sorting; must not be negative.
    public var offset: Int
    /// The most records to return after the offset; `nil` for no limit, never negative.
    public var limit: Int?

    /// Makes a query; with the defaults it returns every record in id order.
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

    /// The backend a plan names when the driver kept the default
    /// ``ReadTransaction/explain(_:in:)``: the shared evaluator did everything.
    public static let evaluatorBackend = "evaluator"

    /// Describes how a driver ran (or would run) a query; drivers make these in `explain`.
    public init(backend: String, filterInEngine: Bool, sortInEngine: Bool, pagingInEngine: Bool, indexesUsed: [String] = [], detail: String = "") {
        self.backend = backend
        self.filterInEngine = filterInEngine
        self.sortInEngine = sortInEngine
        self.pagingInEngine = pagingInEngine
        self.indexesUsed = indexesUsed
        self.detail = detail
    }

    /// One line naming the backend, where each part ran, the indexes used and the detail.
    public var description: String {
        func part(_ name: String, _ inEngine: Bool) -> String { "\(name) in \(inEngine ? "engine" : "memory")" }
        var text = "\(backend): " + [part("filter", filterInEngine), part("sort", sortInEngine), part("paging", pagingInEngine)].joined(separator: ", ")
        if !indexesUsed.isEmpty { text += "; indexes: " + indexesUsed.joined(separator: ", ") }
        if !detail.isEmpty { text += "; " + detail }
        return text
    }
}
