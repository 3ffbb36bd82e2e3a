import DepotCore
import Testing

@Suite struct QueryEvaluatorTests {
    @Test func intAndDoubleCompareExactlyPast2to53() {
        #expect(QueryEvaluator.compareIntDouble(9_007_199_254_740_993, 9_007_199_254_740_992.0) == 1)
        #expect(QueryEvaluator.equals(.int(1), .double(1.0)))
        #expect(!QueryEvaluator.equals(.bool(true), .int(1)))
    }
}

@Suite struct EvaluatorSemanticsTests {
    let records: [Record] = [
        Record(id: 1, fields: ["v": 1]),
        Record(id: 2, fields: ["v": 1.0]),
        Record(id: 3, fields: ["v": true]),
        Record(id: 4, fields: ["v": "abc"]),
        Record(id: 5, fields: [:]),
        Record(id: 6, fields: ["v": 7.5]),
        Record(id: 7, fields: ["v": "a%_*?[c"]),
        Record(id: 8, fields: ["v": ["x": 1]]),
    ]

    func ids(_ filter: Filter, sort: [SortKey] = []) -> [RecordID] {
        QueryEvaluator.execute(Query(filter: filter, sort: sort), over: records.reversed()).map(\.id)
    }

    @Test func equalityAcrossIntAndDoubleButNotBool() {
        #expect(ids(Field("v") == 1) == [1, 2])
        #expect(ids(Field("v") == true) == [3])
    }

    @Test func rangeOnlyWithinKind() {
        #expect(ids(Field("v") > 5) == [6])
        #expect(ids(Field("v") >= "a") == [4, 7])
    }

    @Test func nullRules() {
        #expect(ids(Field("v") == FieldValue.null) == [5])
        #expect(ids(Field("v") != 1) == [3, 4, 5, 6, 7, 8])
        #expect(ids(Field("v").notIn([1, "abc"])) == [3, 5, 6, 7, 8])
        #expect(ids(Field("v").in([FieldValue.null, 7.5])) == [5, 6])
        #expect(ids(!(Field("v") > 5)) == [1, 2, 3, 4, 5, 7, 8])
    }

    @Test func wildcardsArePlainCharacters() {
        #expect(ids(Field("v").hasPrefix("a%_")) == [7])
        #expect(ids(Field("v").contains("_*?[")) == [7])
        #expect(ids(Field("v").hasPrefix("A")) == [])
    }

    @Test func sortAcrossKindsNullsFirstThenIdTieBreak() {
        // "a%_*?[c" < "abc" because '%' (0x25) < 'b' (0x62); 1 and 1.0 tie, so ids decide.
        #expect(ids(.all, sort: [SortKey("v")]) == [5, 3, 1, 2, 6, 7, 4, 8])
        #expect(ids(.all, sort: [SortKey("v", descending: true)]) == [8, 4, 7, 6, 1, 2, 3, 5])
    }

    @Test func stringsOrderByBytesNotByUnicodeRules() {
        let rs = [Record(id: 1, fields: ["s": "é"]), Record(id: 2, fields: ["s": "e\u{301}"]), Record(id: 3, fields: ["s": "z"])]
        let sorted = QueryEvaluator.execute(Query(sort: [SortKey("s")]), over: rs).map(\.id)
        #expect(sorted == [2, 3, 1])  // "e"+U+0301 (0x65) < "z" (0x7A) < "é" (0xC3)
        #expect(!QueryEvaluator.equals("é", "e\u{301}"))
    }
}

@Suite struct SortedPageTests {
    /// Item `(key, position)`: keys repeat, positions tell ties apart in the reference.
    private struct Item: Equatable { var key: Int; var position: Int }

    @Test("selected pages equal a stable sort then offset/limit, ties kept in input order")
    func matchesSortThenPage() {
        var rng = SystemRandomNumberGenerator()
        var selected = 0
        for _ in 0..<400 {
            let count = Int.random(in: 0...1_500, using: &rng)
            let keys = Int.random(in: 1...3, using: &rng) == 1 ? 20 : 1_000_000  // many ties, or few
            var items = (0..<count).map { Item(key: Int.random(in: 0..<keys, using: &rng), position: $0) }
            if Bool.random(using: &rng) { items.sort { $0.key > $1.key } }  // adversarial: descending input
            for i in items.indices { items[i].position = i }
            let offset = Int.random(in: 0...120, using: &rng)
            let limit: Int? = Int.random(in: 0...5, using: &rng) == 0 ? nil : Int.random(in: 0...150, using: &rng)
            let reference = items.sorted { ($0.key, $0.position) < ($1.key, $1.position) }
            let end = limit.map { min(reference.count, offset + $0) } ?? reference.count
            let expected = offset < end ? Array(reference[offset..<end]) : []
            let page = QueryEvaluator.sortedPage(items, offset: offset, limit: limit) { $0.key < $1.key }
            #expect(page == expected, "count \(count) offset \(offset) limit \(String(describing: limit))")
            if let limit, offset + limit <= 256, (offset + limit) * 4 <= count { selected += 1 }
        }
        #expect(selected > 50, "the selection path ran \(selected) times")
        #expect(QueryEvaluator.sortedPage([3, 1, 2], offset: 0, limit: .max, by: <) == [1, 2, 3])
        #expect(QueryEvaluator.sortedPage([3, 1, 2], offset: 5, limit: 1, by: <) == [])
    }
}
