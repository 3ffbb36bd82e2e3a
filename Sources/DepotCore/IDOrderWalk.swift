/// Queries answered by walking a collection's records in id order instead of sorting them:
/// what the drivers that keep records in memory share (the memory driver through
/// ``InMemoryCollection``, the JSON-file driver through its own order), Docs/Semantics.md,
/// "Queries".
///
/// A query whose sort is by id alone (no keys, or `id` first: ids are unique, so later keys
/// never decide) gives the same results, in the same order, as the shared evaluator when its
/// records are visited in id order: bounds on `id` in the filter's top-level conjuncts narrow
/// the walk by binary search, every record walked is still matched against the whole filter,
/// and offset and limit count only matching records.
package enum IDOrderWalk {
    /// `false` (ascending) or `true` (descending) when `sort` orders by id alone; `nil` otherwise.
    package static func direction(_ sort: [SortKey]) -> Bool? {
        guard let first = sort.first else { return false }
        return first.field == "id" ? first.descending : nil
    }

    /// The positions `0 ..< count` (ids ascending, `id(i)` the id at position `i`) that can
    /// match `filter`, from its top-level bounds on `id` of the ids' own kind (a bound of
    /// another kind is left to the per-record match). Everything outside certainly fails.
    package static func range(count: Int, id: (Int) -> RecordID, _ filter: Filter) -> (Int, Int) {
        guard count > 0 else { return (0, 0) }
        var lower = 0, upper = count
        let sample = id(0).fieldValue
        let conjuncts: [Filter]
        switch filter {
        case .and(let filters): conjuncts = filters
        default: conjuncts = [filter]
        }
        /// The first position whose id compares with `operand` so that `satisfied` holds for
        /// it and every later id (the comparison is monotonic along the positions).
        func partition(_ operand: FieldValue, _ satisfied: (Int) -> Bool) -> Int {
            var low = 0, high = count
            while low < high {
                let mid = (low + high) / 2
                if let c = QueryEvaluator.rangeCompare(id(mid).fieldValue, operand), satisfied(c) { high = mid } else { low = mid + 1 }
            }
            return low
        }
        for conjunct in conjuncts {
            switch conjunct {
            case .greater("id", let v) where QueryEvaluator.rangeCompare(sample, v) != nil:
                lower = max(lower, partition(v) { $0 > 0 })
            case .greaterOrEqual("id", let v) where QueryEvaluator.rangeCompare(sample, v) != nil:
                lower = max(lower, partition(v) { $0 >= 0 })
            case .less("id", let v) where QueryEvaluator.rangeCompare(sample, v) != nil:
                upper = min(upper, partition(v) { $0 >= 0 })
            case .lessOrEqual("id", let v) where QueryEvaluator.rangeCompare(sample, v) != nil:
                upper = min(upper, partition(v) { $0 > 0 })
            default:
                break
            }
        }
        return (lower, upper)
    }

    /// Calls `body` with each result of `query` over the positions `0 ..< count` (ids
    /// ascending) in the direction asked, until it returns `false`. `record(i)` is the record
    /// at position `i`, or `nil` when that id no longer has one (it is skipped).
    package static func walk(
        count: Int, descending: Bool, _ query: Query, id: (Int) -> RecordID, record: (Int) -> Record?, _ body: (Record) throws -> Bool
    ) rethrows {
        let (lower, upper) = range(count: count, id: id, query.filter)
        guard lower < upper else { return }
        var page = Page(query)
        if descending {
            for i in stride(from: upper - 1, through: lower, by: -1) where try !page.visit(record(i), body) { return }
        } else {
            for i in lower..<upper where try !page.visit(record(i), body) { return }
        }
    }

    /// ``walk(count:descending:_:id:record:_:)`` over the union of two ascending id arrays
    /// (an id in both is visited once): `record(id)` is the record with `id`, or `nil` when
    /// there is none (skipped).
    package static func walk(
        _ a: [RecordID], _ b: [RecordID], descending: Bool, _ query: Query, record: (RecordID) -> Record?, _ body: (Record) throws -> Bool
    ) rethrows {
        var (i, iEnd) = range(count: a.count, id: { a[$0] }, query.filter)
        var (j, jEnd) = range(count: b.count, id: { b[$0] }, query.filter)
        var page = Page(query)
        var last: RecordID?
        if descending {
            while iEnd > i || jEnd > j {
                let id: RecordID
                if jEnd == j || (iEnd > i && b[jEnd - 1] < a[iEnd - 1]) {
                    iEnd -= 1
                    id = a[iEnd]
                } else {
                    jEnd -= 1
                    id = b[jEnd]
                }
                if id == last { continue }
                last = id
                guard try page.visit(record(id), body) else { return }
            }
        } else {
            while i < iEnd || j < jEnd {
                let id: RecordID
                if j == jEnd || (i < iEnd && a[i] < b[j]) {
                    id = a[i]
                    i += 1
                } else {
                    id = b[j]
                    j += 1
                }
                if id == last { continue }
                last = id
                guard try page.visit(record(id), body) else { return }
            }
        }
    }

    /// Offset, limit and the filter applied to the records of a walk, in order.
    private struct Page {
        let filter: Filter
        let matchesAll: Bool
        var skip: Int
        var left: Int

        init(_ query: Query) {
            filter = query.filter
            if case .all = query.filter { matchesAll = true } else { matchesAll = false }
            skip = query.offset
            left = query.limit ?? Int.max
        }

        /// Offers the next record (`nil`: none under this id); `false` once the walk is done.
        mutating func visit(_ record: Record?, _ body: (Record) throws -> Bool) rethrows -> Bool {
            guard left > 0 else { return false }
            guard let record else { return true }
            guard matchesAll || QueryEvaluator.matches(filter, record) else { return true }
            if skip > 0 {
                skip -= 1
                return true
            }
            left -= 1
            return try body(record) && left > 0
        }
    }
}
