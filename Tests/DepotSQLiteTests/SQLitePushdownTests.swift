import DepotCore
import DepotSQLite
import Foundation
import Testing

/// Differential tests: random filters, sorts and pages over records holding every kind of
/// value must give, in SQLite, exactly what the shared evaluator gives.
@Suite struct SQLitePushdownTests {
    static let pool: [FieldValue] = [
        .null, .bool(true), .bool(false), .int(0), .int(1), .int(-1), .double(1.0), .double(-0.0), .double(0.0), .double(0.5),
        .int(9_007_199_254_740_993), .double(9_007_199_254_740_992.0), .int(.max), .int(.min), .double(.infinity),
        .double(-.infinity), .double(9_223_372_036_854_775_808.0), .string(""), .string("a"), .string("A"), .string("ab"),
        .string("a%"), .string("a_b"), .string("%"), .string("é"), .string("\u{0}x"), .string("a\u{0}b"), .string("{}"),
        .string("[1]"), .string("1"), .string("true"), .bytes(Data()), .bytes(Data([0])), .bytes(Data([1, 2])), .bytes(Data("a".utf8)),
        .array([]), .array([.int(1)]), .array([.double(1.0)]), .array([.string("a")]), .object([:]), .object(["a": .int(1)]),
        .object(["$bytes": .string("x")]), .object(["$object": .object(["$double": .string("x")])]), .object(["k": .array([.bytes(Data([7])), .double(-0.0), .double(.infinity)])]),
    ]
    static let fields = ["a", "b", "A", "name", "Name"]

    typealias Generator = SplitMix64

    static func records(intIDs: Bool, using g: inout Generator) -> [Record] {
        var out: [Record] = []
        var seen = Set<RecordID>()
        while out.count < 60 {
            let id: RecordID = intIDs ? .int(Int64.random(in: -50...200, using: &g)) : .string(["x", "X", "y", "a%", "é", "z1", "z10", "z2", "0"].randomElement(using: &g)! + String(Int.random(in: 0...30, using: &g)))
            guard seen.insert(id).inserted else { continue }
            var fields: [String: FieldValue] = [:]
            for field in fields_(using: &g) { fields[field] = pool.randomElement(using: &g)! }
            out.append(Record(id: id, fields: fields).withoutNulls)
        }
        return out
    }

    static func fields_(using g: inout Generator) -> [String] { fields.filter { _ in Bool.random(using: &g) } }

    static func filter(depth: Int, using g: inout Generator) -> Filter {
        let field = (fields + ["id", "missing"]).randomElement(using: &g)!
        let operand = pool.randomElement(using: &g)!
        let choice = Int.random(in: 0..<(depth > 0 ? 17 : 14), using: &g)
        switch choice {
        case 0: return .equal(field, operand)
        case 1: return .notEqual(field, operand)
        case 2: return .less(field, operand)
        case 3: return .lessOrEqual(field, operand)
        case 4: return .greater(field, operand)
        case 5: return .greaterOrEqual(field, operand)
        case 6: return .isIn(field, (0..<Int.random(in: 0...3, using: &g)).map { _ in pool.randomElement(using: &g)! })
        case 7: return .notIn(field, (0..<Int.random(in: 0...3, using: &g)).map { _ in pool.randomElement(using: &g)! })
        case 8: return .isNull(field)
        case 9: return .isNotNull(field)
        case 10: return .hasPrefix(field, ["", "a", "A", "%", "a_", "\u{0}", "é", "{"].randomElement(using: &g)!)
        case 11: return .contains(field, ["", "b", "_", "%", "\u{0}", "}", "x"].randomElement(using: &g)!)
        case 12, 13: return .equal(field, operand)
        case 14: return .and((0..<Int.random(in: 0...3, using: &g)).map { _ in filter(depth: depth - 1, using: &g) })
        case 15: return .or((0..<Int.random(in: 0...3, using: &g)).map { _ in filter(depth: depth - 1, using: &g) })
        default: return .not(filter(depth: depth - 1, using: &g))
        }
    }

    /// An in-memory store whose collection `things` holds ``records(intIDs:using:)``.
    static func loaded(intIDs: Bool, using g: inout Generator) async throws -> (SQLiteDriver, CollectionName, [Record]) {
        let driver = try await SQLiteDriver(path: ":memory:")
        let things = try CollectionName("things")
        let records = Self.records(intIDs: intIDs, using: &g)
        try await driver.write { tx in for record in records { try tx.insert(record, into: things) } }
        return (driver, things, records)
    }

    @Test(arguments: [true, false])
    func randomQueriesMatchTheEvaluator(intIDs: Bool) async throws {
        var g = Generator(seed: intIDs ? 42 : 7)
        let (driver, things, records) = try await Self.loaded(intIDs: intIDs, using: &g)
        let stored = try await driver.read { tx in try tx.query(Query(), in: things) }
        #expect(stored == records.sorted { $0.id < $1.id }, "every record round-trips exactly")
        for round in 0..<400 {
            var sort: [SortKey] = []
            for _ in 0..<Int.random(in: 0...2, using: &g) {
                sort.append(SortKey((Self.fields + ["id", "missing"]).randomElement(using: &g)!, descending: Bool.random(using: &g)))
            }
            let query = Query(
                filter: Self.filter(depth: 3, using: &g), sort: sort, offset: Int.random(in: 0...3, using: &g) == 0 ? 5 : 0,
                limit: Bool.random(using: &g) ? Int.random(in: 0...20, using: &g) : nil)
            let expected = QueryEvaluator.execute(query, over: records)
            let (got, count) = try await driver.read { tx in (try tx.query(query, in: things), try tx.count(query.filter, in: things)) }
            #expect(got.map(\.id) == expected.map(\.id), "round \(round): \(query)")
            #expect(got == expected, "round \(round): records")
            let expectedCount = records.filter { QueryEvaluator.matches(query.filter, $0) }.count
            #expect(count == expectedCount, "round \(round): count of \(query.filter)")
            if got.map(\.id) != expected.map(\.id) { break }
        }
        try await driver.close()
    }

    /// Random filters on the id alone (ranges, lists, their negations; operands of every kind,
    /// including ids that exist) sorted by id either way: exactly the evaluator's results.
    @Test(arguments: [true, false])
    func randomIDQueriesMatchTheEvaluator(intIDs: Bool) async throws {
        var g = Generator(seed: intIDs ? 11 : 13)
        let (driver, things, records) = try await Self.loaded(intIDs: intIDs, using: &g)
        let ids = records.map { record -> FieldValue in
            switch record.id {
            case .int(let i): .int(i)
            case .string(let s): .string(s)
            }
        }
        // An existing id, the same number as a double (equal to an int id), or any value.
        func operand() -> FieldValue {
            switch Int.random(in: 0..<3, using: &g) {
            case 0: return ids.randomElement(using: &g)!
            case 1:
                if case .int(let i) = ids.randomElement(using: &g)! { return .double(Double(i)) }
                return Self.pool.randomElement(using: &g)!
            default: return Self.pool.randomElement(using: &g)!
            }
        }
        for round in 0..<300 {
            let filter: Filter
            switch Int.random(in: 0..<7, using: &g) {
            case 0: filter = .isIn("id", (0..<Int.random(in: 0...4, using: &g)).map { _ in operand() })
            case 1: filter = .notIn("id", (0..<Int.random(in: 0...4, using: &g)).map { _ in operand() })
            case 2: filter = .greaterOrEqual("id", operand())
            case 3: filter = .and([.greater("id", operand()), .lessOrEqual("id", operand())])
            case 4: filter = .less("id", operand())
            case 5: filter = .equal("id", operand())
            default: filter = .not(.isIn("id", [operand(), operand()]))
            }
            let sort: [SortKey] = Bool.random(using: &g) ? [SortKey("id", descending: Bool.random(using: &g))] : []
            let query = Query(filter: filter, sort: sort, offset: Int.random(in: 0...3, using: &g) == 0 ? 2 : 0, limit: Bool.random(using: &g) ? Int.random(in: 0...10, using: &g) : nil)
            let got = try await driver.read { tx in try tx.query(query, in: things) }
            #expect(got == QueryEvaluator.execute(query, over: records), "round \(round): \(query)")
        }
        try await driver.close()
    }

    /// Queries that SQLite can answer in primary-key order: the plan reads the table (or an id
    /// range of it) in id order, with no temporary B-tree for the ORDER BY, and the results are
    /// the evaluator's.
    @Test(arguments: [true, false])
    func idOrderUsesThePrimaryKey(intIDs: Bool) async throws {
        let driver = try await SQLiteDriver(path: ":memory:")
        let things = try CollectionName("things")
        let records = (0..<40).map { i in
            Record(id: intIDs ? .int(Int64(i)) : .string("user\(i)"), fields: ["n": .int(Int64(i % 7)), "s": i.isMultiple(of: 3) ? .bool(true) : .string("v\(i)")])
        }
        try await driver.write { tx in for record in records { try tx.insert(record, into: things) } }
        let low: FieldValue = intIDs ? .int(15) : .string("user15")
        let high: FieldValue = intIDs ? .int(30) : .string("user30")
        let queries: [(String, Query, searches: Bool)] = [
            ("id >= low, sorted by id, limit 10", Query(filter: .greaterOrEqual("id", low), sort: [SortKey("id")], limit: 10), true),
            ("id >= low, sorted by id descending", Query(filter: .greaterOrEqual("id", low), sort: [SortKey("id", descending: true)], limit: 10), true),
            ("id > low and id < high, sorted by id", Query(filter: .and([.greater("id", low), .less("id", high)]), sort: [SortKey("id")]), true),
            ("id <= high, no sort", Query(filter: .lessOrEqual("id", high), limit: 5), true),
            ("sorted by id, no filter", Query(sort: [SortKey("id")], limit: 10), false),
            ("sorted by id descending, no filter", Query(sort: [SortKey("id", descending: true)], offset: 3, limit: 10), false),
            ("no filter, no sort", Query(limit: 10), false),
            ("a filter on a field, sorted by id descending", Query(filter: .equal("n", .int(3)), sort: [SortKey("id", descending: true)]), false),
            ("id in a list, sorted by id", Query(filter: .isIn("id", [high, low, .null, .bool(true), intIDs ? .double(3.0) : .string("user3")]), sort: [SortKey("id")]), true),
            ("sorted by id, then by a field (redundant)", Query(filter: .greaterOrEqual("id", low), sort: [SortKey("id"), SortKey("n")], limit: 10), true),
        ]
        for (name, query, searches) in queries {
            let plan = try await driver.read { tx in try tx.explain(query, in: things) }
            #expect(!plan.detail.contains("TEMP B-TREE"), "\(name): \(plan.detail)")
            if searches {
                #expect(plan.detail.contains("SEARCH") && plan.detail.contains("PRIMARY KEY"), "\(name): \(plan.detail)")
                #expect(plan.indexesUsed == ["id"], "\(name): \(plan.indexesUsed)")
            } else {
                #expect(plan.indexesUsed.isEmpty, "\(name): \(plan.indexesUsed)")
            }
            let got = try await driver.read { tx in try tx.query(query, in: things) }
            #expect(got == QueryEvaluator.execute(query, over: records), "\(name)")
        }
        try await driver.close()
    }

    @Test func explainShowsSQL() async throws {
        let driver = try await SQLiteDriver(path: ":memory:")
        let things = try CollectionName("things")
        try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["views": 3]), into: things) }
        let plan = try await driver.read { tx in try tx.explain(Query(filter: Field("views") > 2, sort: [Field("views").descending], limit: 3), in: things) }
        #expect(plan.backend == "sqlite")
        #expect(plan.filterInEngine && plan.sortInEngine && plan.pagingInEngine)
        #expect(plan.detail.contains("SELECT"))
        #expect(plan.detail.contains("LIMIT"))
        try await driver.close()
    }
}

/// Grouped queries, projections and partial updates in SQL give what the shared evaluator
/// gives over the same random records (every kind of value, infinities, 2^53 and the
/// int64 limits included).
@Suite struct SQLiteAggregatePushdownTests {
    typealias Generator = SplitMix64

    @Test(arguments: [true, false])
    func randomGroupedQueriesMatchTheEvaluator(intIDs: Bool) async throws {
        var g = Generator(seed: intIDs ? 0xA1 : 0xA2)
        for round in 0..<15 {
            let (driver, items, records) = try await SQLitePushdownTests.loaded(intIDs: intIDs, using: &g)
            let fields = SQLitePushdownTests.fields + ["id", "missing"]
            for _ in 0..<8 {
                let groupBy = Array(Set((0..<Int.random(in: 0...2, using: &g)).map { _ in fields.randomElement(using: &g)! })).sorted()
                var aggregates: [Aggregate] = [.count()]
                for (i, function) in Aggregate.Function.allCases.enumerated() where Bool.random(using: &g) {
                    aggregates.append(Aggregate(function, fields.randomElement(using: &g)!, as: "a\(i)"))
                }
                let query = AggregateQuery(
                    filter: SQLitePushdownTests.filter(depth: 1, using: &g), groupBy: groupBy, aggregates: aggregates,
                    sort: [SortKey("count", descending: Bool.random(using: &g))], limit: Int.random(in: 1...30, using: &g))
                let expected: Result<[AggregateRow], DepotError>
                do {
                    expected = .success(AggregateEvaluator.finish(try AggregateEvaluator.groups(query, over: records, collection: items), query, collection: items))
                } catch let error as DepotError { expected = .failure(error) }
                let actual: Result<[AggregateRow], DepotError>
                do {
                    let groups = try await driver.read { tx in try tx.aggregateGroups(query, in: items) }
                    actual = .success(AggregateEvaluator.finish(groups, query, collection: items))
                } catch let error as DepotError { actual = .failure(error) }
                switch (expected, actual) {
                case let (.success(e), .success(a)):
                    let differing = zip(a, e).filter { !Self.same([$0.0], [$0.1]) }.map { "sqlite \($0.0) evaluator \($0.1)" }
                    #expect(Self.same(a, e), "round \(round): \(query)\n\(a.count) vs \(e.count) rows; differing: \(differing)")
                case let (.failure(e), .failure(a)):
                    #expect(e.code == a.code, "round \(round): \(query): \(a) vs \(e)")
                default:
                    Issue.record("round \(round): \(query): sqlite \(actual) vs evaluator \(expected)")
                }
            }
            try await driver.close()
        }
    }

    /// Rows equal value by value; doubles that are NaN equal each other (inf + -inf).
    static func same(_ a: [AggregateRow], _ b: [AggregateRow]) -> Bool {
        guard a.count == b.count else { return false }
        for (x, y) in zip(a, b) {
            guard Set(x.values.keys) == Set(y.values.keys) else { return false }
            for (name, value) in x.values {
                let other = y[name]
                if case .double(let d) = value, case .double(let e) = other, d.isNaN && e.isNaN { continue }
                if value != other { return false }
            }
        }
        return true
    }

    @Test func groupedQueryRunsInSQL() async throws {
        let driver = try await SQLiteDriver(path: ":memory:")
        let items = try CollectionName("items")
        try await driver.write { tx in
            for i in 1...10 { try tx.insert(Record(id: .int(Int64(i)), fields: ["g": .int(Int64(i % 3)), "v": .int(Int64(i))]), into: items) }
        }
        let plan = try await driver.read { tx in try tx.explain(AggregateQuery(groupBy: ["g"], aggregates: [.sum("v")]), in: items) }
        #expect(plan.backend == "sqlite")
        #expect(plan.detail.contains("GROUP BY"), "\(plan)")
        try await driver.close()
    }
}
