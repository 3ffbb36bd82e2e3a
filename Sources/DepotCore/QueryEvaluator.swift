/// The shared in-memory query engine: the reference semantics of
/// Docs/Semantics.md, "Queries".
///
/// Drivers without a query engine (GDBM, JSON files, memory) answer queries with it, and
/// drivers with an engine must give exactly what it gives. All functions are pure.
public enum QueryEvaluator {
    /// `true` when `record` satisfies `filter`. Logic is two-valued: `not` inverts exactly.
    public static func matches(_ filter: Filter, _ record: Record) -> Bool {
        switch filter {
        case .all:
            return true
        case let .equal(field, operand):
            return equals(record[field], operand)
        case let .notEqual(field, operand):
            return !equals(record[field], operand)
        case let .less(field, operand):
            return rangeCompare(record[field], operand).map { $0 < 0 } ?? false
        case let .lessOrEqual(field, operand):
            return rangeCompare(record[field], operand).map { $0 <= 0 } ?? false
        case let .greater(field, operand):
            return rangeCompare(record[field], operand).map { $0 > 0 } ?? false
        case let .greaterOrEqual(field, operand):
            return rangeCompare(record[field], operand).map { $0 >= 0 } ?? false
        case let .isIn(field, operands):
            let value = record[field]
            return operands.contains { equals(value, $0) }
        case let .notIn(field, operands):
            let value = record[field]
            return !operands.contains { equals(value, $0) }
        case let .isNull(field):
            return record[field].isNull
        case let .isNotNull(field):
            return !record[field].isNull
        case let .hasPrefix(field, prefix):
            guard case .string(let s) = record[field] else { return false }
            return s.utf8.starts(with: prefix.utf8)
        case let .contains(field, needle):
            guard case .string(let s) = record[field] else { return false }
            return containsBytes(Array(s.utf8), Array(needle.utf8))
        case let .and(filters):
            return filters.allSatisfy { matches($0, record) }
        case let .or(filters):
            return filters.contains { matches($0, record) }
        case let .not(inner):
            return !matches(inner, record)
        }
    }

    /// Query equality: numbers by exact value across int and double, strings by bytes,
    /// bools only with bools, null with null (missing is null), arrays and objects by exact
    /// structure (``FieldValue/==(_:_:)``).
    public static func equals(_ value: FieldValue, _ operand: FieldValue) -> Bool {
        switch (value, operand) {
        case (.null, .null): return true
        case (.int, .int), (.int, .double), (.double, .int), (.double, .double):
            return compareNumbers(value, operand) == 0
        default:
            return value == operand
        }
    }

    /// Compares `value` with `operand` for `<`, `<=`, `>`, `>=`: `nil` unless both are of the
    /// same orderable kind (bool, number, string, bytes).
    public static func rangeCompare(_ value: FieldValue, _ operand: FieldValue) -> Int? {
        guard value.kind == operand.kind else { return nil }
        switch value.kind {
        case .bool, .number, .string, .bytes: return compareSameKind(value, operand)
        case .null, .array, .object: return nil
        }
    }

    /// The total order used for sorting: kinds first (null < bool < number < string < bytes
    /// < array < object), then values within a kind; arrays and objects tie.
    /// Returns a negative number, zero or a positive number.
    public static func sortCompare(_ a: FieldValue, _ b: FieldValue) -> Int {
        let ka = a.kind, kb = b.kind
        if ka != kb { return ka < kb ? -1 : 1 }
        return compareSameKind(a, b)
    }

    /// `true` when `a` comes before `b` under `sort`, with the id ascending as final tie-breaker.
    public static func precedes(_ a: Record, _ b: Record, sort: [SortKey]) -> Bool {
        for key in sort {
            let c = sortCompare(a[key.field], b[key.field])
            if c != 0 { return key.descending ? c > 0 : c < 0 }
        }
        return a.id < b.id
    }

    /// Runs a whole query over `records` (any order): filter, sort, offset, limit.
    public static func execute(_ query: Query, over records: some Sequence<Record>) -> [Record] {
        let matched = records.filter { matches(query.filter, $0) }
        return sortedPage(matched, offset: query.offset, limit: query.limit) { precedes($0, $1, sort: query.sort) }
    }

    /// The largest page (`offset + limit`) for which ``sortedPage(_:offset:limit:by:)`` keeps
    /// the best items by insertion instead of sorting everything.
    @usableFromInline package static let selectionLimit = 256

    /// The items at `offset ..< offset + limit` of `items` ordered by `precedes` (a strict
    /// order; items it cannot tell apart keep their relative order), `limit` `nil` for all.
    ///
    /// A small page (`offset + limit` up to 256, at most a quarter of the items) is selected
    /// without sorting everything: each item is compared with the worst of the best so far
    /// and inserted only when it beats it — about one comparison per item plus a few hundred
    /// insertions for items in random order, against n·log n comparisons for a sort. YCSB's
    /// scans (a page of up to 100 from half the collection) take this path.
    ///
    /// Inlinable so that drivers in other modules get it specialized for their element type:
    /// unspecialized, sorting `[Record]` copied every record it moved (a retain and a release
    /// per move), 63% of a GDBM bulk fetch.
    @inlinable
    public static func sortedPage<T>(_ items: [T], offset: Int, limit: Int?, by precedes: (T, T) -> Bool) -> [T] {
        guard offset < items.count else { return [] }
        // `offset + limit` would overflow for a limit near Int.max: cap the limit first.
        let wanted = limit.map { min(items.count - offset, max(0, $0)) } ?? (items.count - offset)
        guard wanted > 0 else { return [] }
        let k = offset + wanted
        guard k <= selectionLimit, k * 4 <= items.count else {
            var sorted = items
            sorted.sort(by: precedes)
            return Array(sorted[offset..<k])
        }
        var best: [T] = []
        best.reserveCapacity(k + 1)
        for item in items {
            if best.count == k, !precedes(item, best[k - 1]) { continue }
            // After every item it does not precede: ties keep their order, as in a stable sort.
            var low = 0, high = best.count
            while low < high {
                let middle = (low + high) / 2
                if precedes(item, best[middle]) { high = middle } else { low = middle + 1 }
            }
            best.insert(item, at: low)
            if best.count > k { best.removeLast() }
        }
        return Array(best[offset..<k])
    }

    /// Applies offset and limit to an already ordered array.
    public static func page(_ records: [Record], offset: Int, limit: Int?) -> [Record] {
        guard offset < records.count else { return [] }
        // `offset + limit` would overflow for a limit near Int.max: cap the limit first.
        let end = limit.map { offset + min(records.count - offset, max(0, $0)) } ?? records.count
        guard offset < end else { return [] }
        return Array(records[offset..<end])
    }

    /// Exact comparison of two numbers (ints and doubles, no NaN), also past 2^53:
    /// `Int64(9007199254740993) > 9007199254740992.0`.
    public static func compareNumbers(_ a: FieldValue, _ b: FieldValue) -> Int {
        switch (a, b) {
        case let (.int(x), .int(y)): return x < y ? -1 : (x > y ? 1 : 0)
        case let (.double(x), .double(y)): return x < y ? -1 : (x > y ? 1 : 0)
        case let (.int(x), .double(y)): return compareIntDouble(x, y)
        case let (.double(x), .int(y)): return -compareIntDouble(y, x)
        default: return 0
        }
    }

    /// Exact comparison of an integer with a double (no rounding of the integer).
    public static func compareIntDouble(_ i: Int64, _ d: Double) -> Int {
        if d.isNaN { return 0 }
        if d >= 9_223_372_036_854_775_808.0 { return -1 }
        if d < -9_223_372_036_854_775_808.0 { return 1 }
        let truncated = d.rounded(.towardZero)
        let whole = Int64(truncated)
        if i < whole { return -1 }
        if i > whole { return 1 }
        let fraction = d - truncated
        return fraction > 0 ? -1 : (fraction < 0 ? 1 : 0)
    }

    static func compareSameKind(_ a: FieldValue, _ b: FieldValue) -> Int {
        switch (a, b) {
        case let (.bool(x), .bool(y)): return x == y ? 0 : (x ? 1 : -1)
        case (.int, .int), (.int, .double), (.double, .int), (.double, .double): return compareNumbers(a, b)
        case let (.string(x), .string(y)): return BinaryText.compare(x, y)
        case let (.bytes(x), .bytes(y)): return compareBytes(x, y)
        default: return 0
        }
    }

    /// Binary (memcmp-like) order of two byte sequences.
    public static func compareBytes<A: Sequence<UInt8>, B: Sequence<UInt8>>(_ a: A, _ b: B) -> Int {
        var ia = a.makeIterator(), ib = b.makeIterator()
        while true {
            switch (ia.next(), ib.next()) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case let (x?, y?): if x != y { return x < y ? -1 : 1 }
            }
        }
    }

    static func containsBytes(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        if needle.isEmpty { return true }
        guard haystack.count >= needle.count else { return false }
        let first = needle[0]
        var i = 0
        let last = haystack.count - needle.count
        while i <= last {
            if haystack[i] == first {
                var j = 1
                while j < needle.count && haystack[i + j] == needle[j] { j += 1 }
                if j == needle.count { return true }
            }
            i += 1
        }
        return false
    }
}
