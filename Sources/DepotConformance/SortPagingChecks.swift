import DepotCore
import Foundation

/// Sorting and paging: multi-key, directions, mixed kinds, nulls, the id tie-breaker,
/// offset and limit (Docs/Semantics.md, "Ordering" and "Paging").
enum SortPagingChecks {
    /// Group and score, with ties and a missing group.
    static let scores: [Record] = [
        Record(id: 1, fields: ["g": "b", "s": 2]),
        Record(id: 2, fields: ["g": "a", "s": 1]),
        Record(id: 3, fields: ["g": "b", "s": 1]),
        Record(id: 4, fields: ["g": "a", "s": 3]),
        Record(id: 5, fields: ["s": 5]),
        Record(id: 6, fields: ["g": "a", "s": 3.0]),
    ]

    /// A check that `query` over `fixture` returns exactly `expected`, in order.
    static func order(_ name: String, _ fixture: [Record], _ query: Query, _ expected: [RecordID]) -> ConformanceCheck {
        .driver("sort." + name) { driver, expect in
            let items = try Fixture.items
            try await driver.seed(fixture, into: items)
            try expect.equal(try await driver.ids(query, in: items), expected, "ids of \(query)")
            try expect.equal(try await driver.streamed(query, from: items).map(\.id), expected, "streamed ids of \(query)")
        }
    }

    static func page(_ name: String, _ fixture: [Record], _ query: Query, _ expected: [RecordID]) -> ConformanceCheck {
        .driver("paging." + name) { driver, expect in
            let items = try Fixture.items
            try await driver.seed(fixture, into: items)
            try expect.equal(try await driver.ids(query, in: items), expected, "ids of \(query)")
            try expect.equal(try await driver.streamed(query, from: items).map(\.id), expected, "streamed ids of \(query)")
        }
    }

    static let all: [ConformanceCheck] = sorting + paging

    static let sorting: [ConformanceCheck] = [
        order("defaultIsIdOrder", scores.reversed(), Query(), [1, 2, 3, 4, 5, 6]),
        order("singleKeyAscendingTiesById", scores, Query(sort: [SortKey("s")]), [2, 3, 1, 4, 6, 5]),
        order("singleKeyDescendingTiesByIdAscending", scores, Query(sort: [SortKey("s", descending: true)]), [5, 4, 6, 1, 2, 3]),
        order("multiKeyAscDesc", scores, Query(sort: [SortKey("g"), SortKey("s", descending: true)]), [5, 4, 6, 2, 1, 3]),
        order("multiKeyDescAsc", scores, Query(sort: [SortKey("g", descending: true), SortKey("s")]), [3, 1, 2, 4, 6, 5]),
        order("idDescending", scores, Query(sort: [SortKey("id", descending: true)]), [6, 5, 4, 3, 2, 1]),
        order("idAsSecondKey", scores, Query(sort: [SortKey("g"), SortKey("id", descending: true)]), [5, 6, 4, 2, 3, 1]),
        order("sortWithFilter", scores, Query(filter: .equal("g", "a"), sort: [SortKey("s", descending: true)]), [4, 6, 2]),
        order("mixedKindsAscending", FilterChecks.mixed, Query(sort: [SortKey("v")]), [1, 2, 3, 8, 4, 5, 6, 7, 17, 16, 9, 10, 12, 11, 13, 14, 15]),
        order("mixedKindsDescending", FilterChecks.mixed, Query(sort: [SortKey("v", descending: true)]), [15, 14, 13, 11, 12, 10, 9, 16, 17, 7, 5, 6, 4, 8, 3, 2, 1]),
        order("numbersAtTheEdges", FilterChecks.numbers, Query(sort: [SortKey("n")]), [6, 9, 4, 1, 2, 3, 10, 8, 5, 7]),
        order("numbersAtTheEdgesDescending", FilterChecks.numbers, Query(sort: [SortKey("n", descending: true)]), [7, 5, 8, 10, 1, 2, 3, 4, 9, 6]),
        order("past2to53", [
            Record(id: 1, fields: ["n": .int(9_007_199_254_740_993)]), Record(id: 2, fields: ["n": .double(9_007_199_254_740_992.0)]),
            Record(id: 3, fields: ["n": .int(9_007_199_254_740_992)]), Record(id: 4, fields: ["n": .double(9_007_199_254_740_994.0)]),
        ], Query(sort: [SortKey("n")]), [2, 3, 1, 4]),
        order("stringsBinaryOrder", [
            Record(id: 1, fields: ["s": "b"]), Record(id: 2, fields: ["s": "B"]), Record(id: 3, fields: ["s": "a"]), Record(id: 4, fields: ["s": "Z"]),
            Record(id: 5, fields: ["s": "\u{E9}"]), Record(id: 6, fields: ["s": "e"]), Record(id: 7, fields: ["s": ""]), Record(id: 8, fields: ["s": "aa"]),
            Record(id: 9, fields: ["s": "a b"]), Record(id: 10, fields: ["s": "😀"]), Record(id: 11, fields: ["s": "\u{FFFD}"]), Record(id: 12, fields: ["s": "a\u{0}"]),
        ], Query(sort: [SortKey("s")]), [7, 2, 4, 3, 12, 9, 8, 1, 6, 5, 11, 10]),
        order("bytesOrder", [
            Record(id: 1, fields: ["b": .bytes(Data([2]))]), Record(id: 2, fields: ["b": .bytes(Data([1, 255]))]), Record(id: 3, fields: ["b": .bytes(Data())]),
            Record(id: 4, fields: ["b": .bytes(Data([1]))]), Record(id: 5, fields: ["b": .bytes(Data([255]))]), Record(id: 6, fields: ["b": .bytes(Data([0]))]),
        ], Query(sort: [SortKey("b")]), [3, 6, 4, 2, 1, 5]),
        order("boolsFalseFirst", [
            Record(id: 1, fields: ["f": true]), Record(id: 2, fields: ["f": false]), Record(id: 3, fields: ["f": true]), Record(id: 4, fields: ["f": false]),
        ], Query(sort: [SortKey("f")]), [2, 4, 1, 3]),
        order("arraysAndObjectsTie", [
            Record(id: 1, fields: ["c": [2]]), Record(id: 2, fields: ["c": [1]]), Record(id: 3, fields: ["c": ["z": 1]]),
            Record(id: 4, fields: ["c": ["a": 1]]), Record(id: 5, fields: ["c": [0, 0]]),
        ], Query(sort: [SortKey("c", descending: true)]), [3, 4, 1, 2, 5]),
        order("nullsFirstAscending", [
            Record(id: 1, fields: ["x": 1]), Record(id: 2), Record(id: 3, fields: ["x": 0]), Record(id: 4, fields: ["x": .null]),
        ], Query(sort: [SortKey("x")]), [2, 4, 3, 1]),
        order("nullsLastDescending", [
            Record(id: 1, fields: ["x": 1]), Record(id: 2), Record(id: 3, fields: ["x": 0]), Record(id: 4, fields: ["x": .null]),
        ], Query(sort: [SortKey("x", descending: true)]), [1, 3, 2, 4]),
        order("unknownFieldKeepsIdOrder", scores, Query(sort: [SortKey("nothere", descending: true)]), [1, 2, 3, 4, 5, 6]),
        order("threeKeys", [
            Record(id: 1, fields: ["a": 1, "b": 1, "c": "z"]), Record(id: 2, fields: ["a": 1, "b": 1, "c": "y"]),
            Record(id: 3, fields: ["a": 1, "b": 0, "c": "x"]), Record(id: 4, fields: ["a": 0, "b": 5, "c": "w"]),
            Record(id: 5, fields: ["a": 1, "b": 1, "c": "y"]),
        ], Query(sort: [SortKey("a", descending: true), SortKey("b"), SortKey("c")]), [3, 2, 5, 1, 4]),
        .driver("sort.stringIdsDescending") { driver, expect in
            let tags = try Fixture.tags
            try await driver.seed(["b", "B", "a", "é"].map { Record(id: .string($0)) }, into: tags)
            try expect.equal(try await driver.ids(Query(sort: [SortKey("id", descending: true)]), in: tags), ["é", "b", "a", "B"], "string ids descending")
        },
    ]

    static let paging: [ConformanceCheck] = [
        page("offsetAndLimit", scores, Query(sort: [SortKey("g"), SortKey("s", descending: true)], offset: 2, limit: 3), [6, 2, 1]),
        page("limitOnly", scores, Query(limit: 2), [1, 2]),
        page("offsetOnly", scores, Query(offset: 4), [5, 6]),
        page("limitZero", scores, Query(limit: 0), []),
        page("offsetAtEnd", scores, Query(offset: 6), []),
        page("offsetBeyondEnd", scores, Query(offset: 1000, limit: 5), []),
        page("limitBeyondEnd", scores, Query(offset: 3, limit: 1000), [4, 5, 6]),
        page("pagingAfterFilter", scores, Query(filter: .isNotNull("g"), sort: [SortKey("s")], offset: 1, limit: 2), [3, 1]),
        page("pagingDescending", scores, Query(sort: [SortKey("s", descending: true)], offset: 1, limit: 2), [4, 6]),
        page("hugeLimit", scores, Query(offset: 5, limit: Int.max), [6]),
        .driver("paging.pagesAreDisjointAndComplete") { driver, expect in
            let items = try Fixture.items
            // Many ties on 'k': only the id tie-breaker makes pages deterministic.
            let records = (1...37).map { Record(id: .int(Int64(($0 * 17) % 41)), fields: ["k": .int(Int64($0 % 3))]) }
            try await driver.seed(records, into: items)
            let sort = [SortKey("k", descending: true)]
            let full = try await driver.ids(Query(sort: sort), in: items)
            var paged: [RecordID] = []
            for offset in stride(from: 0, to: 40, by: 5) { paged += try await driver.ids(Query(sort: sort, offset: offset, limit: 5), in: items) }
            try expect.equal(paged, full, "pages of 5 concatenated")
            try expect.equal(Set(paged).count, 37, "no record twice")
            let firstOfK2 = records.filter { $0.fields["k"] == .int(2) }.map(\.id).sorted()
            try expect.equal(Array(full.prefix(firstOfK2.count)), firstOfK2, "records with k = 2 first, by id")
        },
        .driver("paging.repeatableAcrossCalls") { driver, expect in
            let items = try Fixture.items
            try await driver.seed((1...20).map { Record(id: .int(Int64(21 - $0)), fields: ["k": "same"]) }, into: items)
            let query = Query(sort: [SortKey("k")], offset: 7, limit: 4)
            let first = try await driver.ids(query, in: items)
            try expect.equal(first, [8, 9, 10, 11], "page of equal keys")
            for _ in 0..<3 { try expect.equal(try await driver.ids(query, in: items), first, "same page again") }
        },
        .driver("paging.firstHonoursSort") { driver, expect in
            let items = try Fixture.items
            try await driver.seed(scores, into: items)
            let first = try await driver.read { tx in try tx.first(Query(sort: [SortKey("s", descending: true)], offset: 1), in: items) }
            try expect.equal(first?.id, 4, "first of the page")
        },
    ]
}
