@testable import DepotCore
import Testing

/// Queries in id order over an ``InMemoryCollection`` walk its ordered ids instead of
/// sorting: they must give exactly what the shared evaluator gives, through inserts in any
/// order, removals, re-insertions, direct changes of `records` and copies that diverge.
@Suite struct InMemoryCollectionOrderTests {
    /// Every query shape the walk serves (id bounds of both kinds, directions, paging, a
    /// field filter) plus one it does not (a field sort), over `collection`.
    static func queries(_ span: Int64) -> [Query] {
        var out: [Query] = []
        let bounds: [Filter] = [
            .all, .greaterOrEqual("id", .int(span / 3)), .greater("id", .int(span / 2)),
            .less("id", .int(span / 4)), .lessOrEqual("id", .double(Double(span) / 2 + 0.5)),
            .and([.greaterOrEqual("id", .int(5)), .less("id", .int(span - 5))]),
            .and([.greaterOrEqual("id", .int(10)), .less("n", .int(50))]),
            .greaterOrEqual("id", .string("a")),
        ]
        for filter in bounds {
            for sort in [[], [SortKey("id")], [SortKey("id", descending: true)], [SortKey("n"), SortKey("id")]] {
                for (offset, limit) in [(0, nil), (0, 7), (3, 5), (0, 0)] as [(Int, Int?)] {
                    out.append(Query(filter: filter, sort: sort, offset: offset, limit: limit))
                }
            }
        }
        return out
    }

    static func results(_ collection: InMemoryCollection, _ query: Query) -> [Record] {
        var out: [Record] = []
        collection.forEach(query) { out.append($0); return true }
        return out
    }

    static func expected(_ collection: InMemoryCollection, _ query: Query) -> [Record] {
        QueryEvaluator.execute(query, over: collection.records.map { Record(id: $0.key, fields: $0.value) })
    }

    static func check(_ collection: InMemoryCollection, _ span: Int64, _ step: String) {
        for query in queries(span) {
            #expect(results(collection, query) == expected(collection, query), "\(step): \(query)")
        }
    }

    @Test func walksGiveTheEvaluatorsResultsThroughWrites() throws {
        var collection = InMemoryCollection(schema: CollectionSchema(name: try CollectionName("items"), idKind: .int))
        var generator = SplitMix64(seed: 19)
        let span: Int64 = 200
        // Ascending inserts (appended), then a first query builds the order.
        for i in Int64(1)...40 { try collection.insert(Record(id: .int(i), fields: ["n": .int(i % 70)])) }
        Self.check(collection, span, "ascending inserts")
        for round in 0..<30 {
            // Inserts out of order (pending), removals (stale), re-insertions of removed ids.
            for _ in 0..<12 {
                let id = Int64(generator.next() % UInt64(span))
                switch generator.next() % 3 {
                case 0: _ = collection.remove(.int(id))
                default: _ = try collection.save(Record(id: .int(id), fields: ["n": .int(Int64(generator.next() % 100))]))
                }
            }
            // A copy diverges: neither sees the other's writes, through their order either.
            var copy = collection
            _ = copy.remove(.int(Int64(round)))
            try copy.save(Record(id: .int(span + Int64(round)), fields: ["n": 1]))
            Self.check(copy, span * 2, "copy, round \(round)")
            Self.check(collection, span * 2, "round \(round)")
        }
        // Removing most records makes the order compact itself; results stay exact.
        for id in collection.records.keys where id != .int(7) { _ = collection.remove(id) }
        Self.check(collection, span, "after removing all but one")
        // More out-of-order inserts than the pending ids hold before a merge, checked before
        // and after the merge, with removals among them.
        for n in 0..<(OrderedIDs.mergeThreshold * 2 + 100) {
            let id = Int64(generator.next() % 5_000)
            if n % 10 == 0 { _ = collection.remove(.int(id)) } else { try collection.save(Record(id: .int(id), fields: ["n": .int(id % 100)])) }
            if n == OrderedIDs.mergeThreshold - 10 || n == OrderedIDs.mergeThreshold + 10 || n == OrderedIDs.mergeThreshold * 2 + 99 {
                Self.check(collection, 5_000, "after \(n) scattered writes")
            }
        }
        // A direct change of `records` drops the order; the next query rebuilds it.
        collection.records[.int(3)] = ["n": 3]
        Self.check(collection, span, "after a direct change")
    }

    @Test func stringIDsWalkInTheEvaluatorsOrder() throws {
        var collection = InMemoryCollection(schema: CollectionSchema(name: try CollectionName("names"), idKind: .string))
        for name in ["b", "a", "é", "Z", "aa", "a b", "ä", "~", "0"] {
            try collection.insert(Record(id: .string(name), fields: ["n": .int(Int64(name.utf8.count))]))
            _ = Self.results(collection, Query())
        }
        for query in [Query(), Query(filter: .greaterOrEqual("id", .string("a"))), Query(filter: .less("id", .string("é")), sort: [SortKey("id", descending: true)], offset: 0, limit: 3)] {
            #expect(Self.results(collection, query) == Self.expected(collection, query), "\(query)")
        }
    }
}
