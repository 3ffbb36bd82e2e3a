/// One aggregate of an ``AggregateQuery``: a function over a field, and the name its
/// result takes in each ``AggregateRow``.
///
/// The semantics are the same on every driver (Docs/Aggregates.md):
/// - null and missing values are ignored by every function but `count` without a field;
/// - `sum` and `average` read numbers only (ints and doubles); other kinds are ignored;
/// - `min` and `max` order bools, numbers, strings and bytes as sorting does (kinds first,
///   then values); arrays and objects are ignored;
/// - a function with no value to read gives null (`count` gives 0), and so does a sum or
///   average of both infinities;
///
/// ```swift
/// let stats = try await posts.aggregate(
///     [.count(), .sum("views"), .average("rating", as: "rating")],
///     groupBy: ["author"]
/// )
/// ```
public struct Aggregate: Hashable, Sendable {
    /// What an aggregate computes.
    public enum Function: String, Hashable, Sendable, CaseIterable {
        /// The number of records (no field), or of records whose field is not null.
        case count
        /// The sum of the field's numbers: an int when every one is an int (a total outside
        /// the 64-bit range is `.invalidValue`, never a wrap, whatever the order of the
        /// values), otherwise a double.
        case sum
        /// The smallest bool, number, string or bytes value under the sort order.
        case min
        /// The largest bool, number, string or bytes value under the sort order.
        case max
        /// The mean of the field's numbers, as a double.
        case average
    }

    /// The function.
    public var function: Function
    /// The field it reads (a top-level field or `id`); `nil` only for `count` of records.
    public var field: String?
    /// The name of the result in each row: a valid field name, distinct from the group
    /// fields and the other aggregates.
    public var name: String

    /// An aggregate; `name` defaults to `count` for a count of records, otherwise the
    /// function and the field joined by `_` (`sum_views`, `avg_rating`).
    public init(_ function: Function, _ field: String?, as name: String? = nil) {
        self.function = function
        self.field = field
        if let name {
            self.name = name
        } else if let field {
            self.name = (function == .average ? "avg" : function.rawValue) + "_" + field
        } else {
            self.name = function.rawValue
        }
    }

    /// Counts records (no field) or records whose `field` is not null.
    public static func count(_ field: String? = nil, as name: String? = nil) -> Aggregate { Aggregate(.count, field, as: name) }
    /// Sums the numbers of `field`.
    public static func sum(_ field: String, as name: String? = nil) -> Aggregate { Aggregate(.sum, field, as: name) }
    /// The smallest value of `field`.
    public static func min(_ field: String, as name: String? = nil) -> Aggregate { Aggregate(.min, field, as: name) }
    /// The largest value of `field`.
    public static func max(_ field: String, as name: String? = nil) -> Aggregate { Aggregate(.max, field, as: name) }
    /// The mean of the numbers of `field`.
    public static func average(_ field: String, as name: String? = nil) -> Aggregate { Aggregate(.average, field, as: name) }
}

/// A grouped query: the records `filter` matches are put in groups by the values of
/// `groupBy` (one group for all of them when it is empty), each group gives one row with
/// its group values and its aggregates, then `having` filters the rows, `sort` orders them
/// and `offset`/`limit` page them.
///
/// Groups are keyed by query equality: `1` and `1.0` are one group (reported as `1`), null
/// and missing are one group (reported as null), strings by bytes, arrays and objects by
/// exact structure. Without `groupBy` there is always exactly one row, also for no records.
/// Rows sort by `sort` over row names (group fields and aggregate names), then by the group
/// values ascending; with no sort keys, by the group values.
///
/// ```swift
/// var q = AggregateQuery(groupBy: ["author"], aggregates: [.count(), .sum("views")])
/// q.having = Field("count") >= 2
/// q.sort = [Field("sum_views").descending]
/// let rows = try await store.read { tx in try tx.aggregate(q, in: posts) }
/// ```
public struct AggregateQuery: Hashable, Sendable {
    /// Which records are grouped.
    public var filter: Filter
    /// The fields whose values key the groups, in order (top-level fields or `id`).
    public var groupBy: [String]
    /// The aggregates each row has.
    public var aggregates: [Aggregate]
    /// A filter over the rows (their group fields and aggregate names).
    public var having: Filter
    /// Sort keys over the rows' names; the group values ascending break ties.
    public var sort: [SortKey]
    /// How many rows to skip after sorting.
    public var offset: Int
    /// The most rows to return; `nil` for all.
    public var limit: Int?

    /// Makes a grouped query; by default one row counting every record.
    public init(
        filter: Filter = .all, groupBy: [String] = [], aggregates: [Aggregate] = [.count()], having: Filter = .all,
        sort: [SortKey] = [], offset: Int = 0, limit: Int? = nil
    ) {
        self.filter = filter
        self.groupBy = groupBy
        self.aggregates = aggregates
        self.having = having
        self.sort = sort
        self.offset = offset
        self.limit = limit
    }

    /// The names every row has: the group fields, then the aggregates.
    public var rowNames: [String] { groupBy + aggregates.map(\.name) }

    /// Checks names, operands, offset and limit.
    /// - Throws: ``DepotError`` `.invalidQuery`.
    public func validate() throws {
        try filter.validate()
        guard !aggregates.isEmpty || !groupBy.isEmpty else {
            throw DepotError(.invalidQuery, "A grouped query needs at least one aggregate or group field.")
        }
        var names = Set<String>()
        for field in groupBy {
            guard field == "id" || FieldName.isValid(field) else {
                throw DepotError(.invalidQuery, "Group by names field \(CollectionName.quotedForMessage(field)), which is not a valid field name.")
            }
            guard names.insert(field).inserted else { throw DepotError(.invalidQuery, "Group by names '\(field)' twice.") }
        }
        for aggregate in aggregates {
            if let field = aggregate.field, field != "id", !FieldName.isValid(field) {
                throw DepotError(.invalidQuery, "\(aggregate.function.rawValue) names field \(CollectionName.quotedForMessage(field)), which is not a valid field name.")
            }
            if aggregate.field == nil, aggregate.function != .count {
                throw DepotError(.invalidQuery, "\(aggregate.function.rawValue) needs a field.")
            }
            guard FieldName.isValid(aggregate.name) else {
                throw DepotError(.invalidQuery, "Aggregate name \(CollectionName.quotedForMessage(aggregate.name)) is not a valid field name; give one with `as:`.")
            }
            guard names.insert(aggregate.name).inserted else {
                throw DepotError(.invalidQuery, "Two results of a grouped query are named '\(aggregate.name)'; give one another name with `as:`.")
            }
        }
        for name in having.fieldNames where !names.contains(name) {
            throw DepotError(.invalidQuery, "Having names '\(name)', which is neither a group field nor an aggregate.")
        }
        try having.validate()
        for key in sort where !names.contains(key.field) {
            throw DepotError(.invalidQuery, "Sort names '\(key.field)', which is neither a group field nor an aggregate.")
        }
        guard offset >= 0 else { throw DepotError(.invalidQuery, "Offset must not be negative.") }
        if let limit, limit < 0 { throw DepotError(.invalidQuery, "Limit must not be negative.") }
    }
}

/// One row of a grouped query: its group values and its aggregates, by name.
public struct AggregateRow: Hashable, Sendable, CustomStringConvertible {
    /// The row's values by name (group fields and aggregate names). Null results are
    /// present as `.null`.
    public var values: [String: FieldValue]

    /// A row with these values.
    public init(_ values: [String: FieldValue]) { self.values = values }

    /// The value named `name`; `.null` when there is none.
    public subscript(name: String) -> FieldValue { values[name] ?? .null }

    /// The row as JSON text with sorted keys.
    public var description: String { JSONText.serialize(.object(values)) }
}

// MARK: - The shared evaluator

/// The reference semantics of grouped queries (Docs/Aggregates.md): drivers without an
/// engine compute groups with it, and every driver's rows are finished by it (having,
/// sort, paging).
public enum AggregateEvaluator {
    /// The running state of one aggregate in one group.
    public struct Accumulator: Sendable {
        let aggregate: Aggregate
        var count: Int64 = 0
        // 128 bits: the sum of any number of int64s a store can hold is exact, so an
        // overflow depends on the total only, never on the order of the values.
        var intSum: Int128 = 0
        var doubleSum: Double = 0
        var numbers: Int64 = 0
        var sawDouble = false
        var best: FieldValue?

        /// An empty accumulator for `aggregate`.
        public init(_ aggregate: Aggregate) { self.aggregate = aggregate }

        /// Adds one record's value of the aggregate's field (`.null` when missing).
        public mutating func add(_ value: FieldValue) {
            switch aggregate.function {
            case .count:
                if aggregate.field == nil || !value.isNull { count += 1 }
            case .sum, .average:
                switch value {
                case .int(let i):
                    numbers += 1
                    intSum += Int128(i)
                case .double(let d):
                    numbers += 1
                    sawDouble = true
                    doubleSum += d
                default:
                    break
                }
            case .min, .max:
                switch value.kind {
                case .bool, .number, .string, .bytes:
                    guard let current = best else { best = value; return }
                    let c = QueryEvaluator.sortCompare(value, current)
                    let better = aggregate.function == .min ? c < 0 : c > 0
                    // Equal numbers of both kinds (1 and 1.0): the int wins, on every driver.
                    if better || (c == 0 && value.intValue != nil && current.intValue == nil) { best = value }
                default:
                    break
                }
            }
        }

        /// Merges partial results computed by an engine: a count, an int sum, a double sum,
        /// how many numbers those sums read, and the best value of each kind seen.
        public mutating func merge(count: Int64 = 0, intSum: Int64? = nil, doubleSum: Double? = nil, numbers: Int64 = 0, candidates: [FieldValue] = []) {
            self.count += count
            if let intSum { self.intSum += Int128(intSum) }
            if let doubleSum {
                sawDouble = true
                self.doubleSum += doubleSum
            }
            self.numbers += numbers
            for candidate in candidates where !candidate.isNull { add(candidate) }
        }

        /// The aggregate's result.
        /// - Throws: `.invalidValue` when a sum of ints only is outside the 64-bit range (an
        ///   average, or a sum with doubles, is a double and never overflows).
        public func result(collection: CollectionName) throws -> FieldValue {
            switch aggregate.function {
            case .count:
                return .int(count)
            case .sum, .average:
                guard numbers > 0 else { return .null }
                if aggregate.function == .sum, !sawDouble {
                    guard let exact = Int64(exactly: intSum) else {
                        throw DepotError(.invalidValue, "sum(\(aggregate.field ?? "")) is outside the 64-bit integer range.", collection: collection.rawValue)
                    }
                    return .int(exact)
                }
                // ∞ + -∞ has no value: null, as SQL engines answer.
                let total = Double(intSum) + doubleSum
                if total.isNaN { return .null }
                return .double(aggregate.function == .sum ? total : total / Double(numbers))
            case .min, .max:
                // -0.0 and 0.0 tie; which one an engine meets first is not defined.
                if case .double(let d)? = best, d == 0 { return .double(0) }
                return best ?? .null
            }
        }
    }

    /// The key a value has as a group value: numbers equal under query equality are one
    /// key (an integral double within the int range becomes that int; `-0.0` is `0`).
    public static func groupKey(_ value: FieldValue) -> FieldValue {
        UniqueConstraint.normalize(value)
    }

    /// The unfinished rows of `query` over `records` (any order): one per group, in no
    /// particular order. ``finish(_:_:collection:)`` applies having, sort and paging.
    /// - Throws: `.invalidValue` for an int sum that overflows.
    public static func groups(_ query: AggregateQuery, over records: some Sequence<Record>, collection: CollectionName) throws -> [AggregateRow] {
        var order: [[FieldValue]] = []
        var states: [[FieldValue]: [Accumulator]] = [:]
        let fresh = query.aggregates.map { Accumulator($0) }
        if query.groupBy.isEmpty {
            order.append([])
            states[[]] = fresh
        }
        for record in records where QueryEvaluator.matches(query.filter, record) {
            let key = query.groupBy.map { groupKey(record[$0]) }
            if states[key] == nil {
                order.append(key)
                states[key] = fresh
            }
            for i in query.aggregates.indices {
                let field = query.aggregates[i].field
                states[key]?[i].add(field.map { record[$0] } ?? .null)
            }
        }
        return try order.map { key in
            try row(query, key: key, accumulators: states[key] ?? fresh, collection: collection)
        }
    }

    /// The row of one group: its key values under the group field names, and each
    /// accumulator's result.
    public static func row(_ query: AggregateQuery, key: [FieldValue], accumulators: [Accumulator], collection: CollectionName) throws -> AggregateRow {
        var values: [String: FieldValue] = [:]
        for (field, value) in zip(query.groupBy, key) { values[field] = groupKey(value) }
        for (aggregate, accumulator) in zip(query.aggregates, accumulators) {
            values[aggregate.name] = try accumulator.result(collection: collection)
        }
        return AggregateRow(values)
    }

    /// Applies `query`'s having, sort and paging to unfinished rows.
    public static func finish(_ rows: [AggregateRow], _ query: AggregateQuery, collection: CollectionName) -> [AggregateRow] {
        let kept = rows.filter { row in QueryEvaluator.matches(query.having, Record(id: .int(0), fields: row.values)) }
        return QueryEvaluator.sortedPage(kept, offset: query.offset, limit: query.limit) { a, b in
            for key in query.sort {
                let c = QueryEvaluator.sortCompare(a[key.field], b[key.field])
                if c != 0 { return key.descending ? c > 0 : c < 0 }
            }
            for field in query.groupBy {
                let c = QueryEvaluator.sortCompare(a[field], b[field])
                if c != 0 { return c < 0 }
                // Arrays and objects tie under the sort order: their JSON text decides.
                let ja = JSONText.serialize(a[field]), jb = JSONText.serialize(b[field])
                if ja != jb { return ja.utf8.lexicographicallyPrecedes(jb.utf8) }
            }
            return false
        }
    }
}
