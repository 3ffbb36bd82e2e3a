import DepotCore
import Foundation

/// Grouped queries (Docs/Aggregates.md): every check states the rows it expects and also
/// compares the driver's rows with the shared evaluator's over the same records.
enum AggregateChecks {
    /// Runs `query` through a store over `driver`, as an app does.
    static func rows(_ driver: any StorageDriver, _ query: AggregateQuery, in collection: CollectionName) async throws -> [AggregateRow] {
        let store = try await Store(driver: driver)
        return try await store.read { tx in try tx.aggregate(query, in: collection) }
    }

    /// The rows the shared evaluator gives for `query` over `records`.
    static func reference(_ records: [Record], _ query: AggregateQuery, in collection: CollectionName) throws -> [AggregateRow] {
        AggregateEvaluator.finish(try AggregateEvaluator.groups(query, over: records, collection: collection), query, collection: collection)
    }

    /// Seeds `records`, runs `query`, and checks the rows equal `expected` (values compared
    /// exactly: an int is not a double) and the evaluator's rows.
    static func check(_ name: String, _ records: [Record], _ query: AggregateQuery, _ expected: [[String: FieldValue]]) -> ConformanceCheck {
        .driver("aggregate." + name) { driver, expect in
            let items = try Fixture.items
            if !records.isEmpty { try await driver.seed(records, into: items) }
            let rows = try await Self.rows(driver, query, in: items)
            try expect.equal(rows.map(\.values), expected, "rows of \(query)")
            let reference = try Self.reference(records, query, in: items)
            try expect.equal(reference.map(\.values), expected, "the shared evaluator's rows (the check's own expectation)")
        }
    }

    static let sales: [Record] = [
        Record(id: 1, fields: ["region": "north", "amount": 10, "rating": 4, "tag": "a"]),
        Record(id: 2, fields: ["region": "north", "amount": 2.5, "rating": 5]),
        Record(id: 3, fields: ["region": "south", "amount": 7, "rating": 3, "tag": "b"]),
        Record(id: 4, fields: ["region": "south", "amount": "n/a", "tag": "a"]),
        Record(id: 5, fields: ["region": "east", "amount": 1, "rating": 2]),
        Record(id: 6, fields: ["region": "north", "amount": 0.5, "tag": "b"]),
        Record(id: 7, fields: ["amount": 100]),
        Record(id: 8, fields: ["region": "south", "amount": .null, "rating": 1]),
    ]

    static let all: [ConformanceCheck] = [
        check("countAll", sales, AggregateQuery(), [["count": 8]]),
        check("emptyCollectionOneRow", [], AggregateQuery(aggregates: [.count(), .sum("x"), .min("x"), .max("x"), .average("x")]),
              [["count": 0, "sum_x": .null, "min_x": .null, "max_x": .null, "avg_x": .null]]),
        check("emptyCollectionNoGroups", [], AggregateQuery(groupBy: ["g"], aggregates: [.count()]), []),
        check("filterMatchesNothing", sales, AggregateQuery(filter: .equal("region", "west"), aggregates: [.count(), .sum("amount")]),
              [["count": 0, "sum_amount": .null]]),
        check("countFieldSkipsNullAndMissing", sales, AggregateQuery(aggregates: [.count("rating"), .count("tag"), .count("nothing")]),
              [["count_rating": 5, "count_tag": 4, "count_nothing": 0]]),
        check("sumOfIntsIsInt", sales, AggregateQuery(filter: .isIn("id", [1, 3, 5, 7]), aggregates: [.sum("amount")]), [["sum_amount": 118]]),
        check("sumMixingIntsAndDoublesIsDouble", sales, AggregateQuery(aggregates: [.sum("amount")]), [["sum_amount": 121.0]]),
        check("sumIgnoresNonNumbers", [
            Record(id: 1, fields: ["v": 2]), Record(id: 2, fields: ["v": true]), Record(id: 3, fields: ["v": "5"]),
            Record(id: 4, fields: ["v": [1]]), Record(id: 5, fields: ["v": .bytes(Data([9]))]), Record(id: 6),
            Record(id: 7, fields: ["v": 3]),
        ], AggregateQuery(aggregates: [.sum("v"), .average("v"), .count("v")]), [["sum_v": 5, "avg_v": 2.5, "count_v": 6]]),
        check("sumExactPast2to53", [
            Record(id: 1, fields: ["v": .int(9_007_199_254_740_993)]), Record(id: 2, fields: ["v": 1]), Record(id: 3, fields: ["v": .int(-2)]),
        ], AggregateQuery(aggregates: [.sum("v")]), [["sum_v": .int(9_007_199_254_740_992)]]),
        check("sumNearInt64LimitsIsExact", [
            Record(id: 1, fields: ["v": .int(.max)]), Record(id: 2, fields: ["v": .int(.max)]), Record(id: 3, fields: ["v": .int(.min)]),
            Record(id: 4, fields: ["v": .int(.min)]), Record(id: 5, fields: ["v": 7]),
        ], AggregateQuery(aggregates: [.sum("v")]), [["sum_v": 5]]),
        check("averageIsDouble", sales, AggregateQuery(aggregates: [.average("rating")]), [["avg_rating": 3.0]]),
        check("averageOfNothingIsNull", sales, AggregateQuery(aggregates: [.average("tag"), .sum("tag")]), [["avg_tag": .null, "sum_tag": .null]]),
        check("minMaxNumbers", sales, AggregateQuery(aggregates: [.min("amount"), .max("amount")]), [["min_amount": 0.5, "max_amount": "n/a"]]),
        check("minMaxPrefersIntOnTie", [
            Record(id: 1, fields: ["v": 2.0]), Record(id: 2, fields: ["v": 2]), Record(id: 3, fields: ["v": 5.0]), Record(id: 4, fields: ["v": 5]),
        ], AggregateQuery(aggregates: [.min("v"), .max("v")]), [["min_v": 2, "max_v": 5]]),
        check("minMaxExactPast2to53", [
            Record(id: 1, fields: ["v": .int(9_007_199_254_740_993)]), Record(id: 2, fields: ["v": .double(9_007_199_254_740_992.0)]),
        ], AggregateQuery(aggregates: [.min("v"), .max("v")]), [["min_v": .double(9_007_199_254_740_992.0), "max_v": .int(9_007_199_254_740_993)]]),
        check("minMaxAcrossKinds", FilterChecks.mixed, AggregateQuery(aggregates: [.min("v"), .max("v")]),
              [["min_v": false, "max_v": .bytes(Data([1]))]]),
        check("minMaxStringsByBytes", [
            Record(id: 1, fields: ["s": "abc"]), Record(id: 2, fields: ["s": "Abc"]), Record(id: 3, fields: ["s": "é"]),
            Record(id: 4, fields: ["s": "Z"]), Record(id: 5, fields: ["s": "a"]),
        ], AggregateQuery(aggregates: [.min("s"), .max("s")]), [["min_s": "Abc", "max_s": "é"]]),
        check("minMaxBools", [Record(id: 1, fields: ["b": true]), Record(id: 2, fields: ["b": false]), Record(id: 3, fields: ["b": true])],
              AggregateQuery(aggregates: [.min("b"), .max("b"), .sum("b")]), [["min_b": false, "max_b": true, "sum_b": .null]]),
        check("minMaxIgnoreArraysAndObjects", [Record(id: 1, fields: ["v": [1, 2]]), Record(id: 2, fields: ["v": ["k": 1]]), Record(id: 3, fields: ["v": 4])],
              AggregateQuery(aggregates: [.min("v"), .max("v")]), [["min_v": 4, "max_v": 4]]),
        check("aggregatesOverID", sales, AggregateQuery(aggregates: [.min("id"), .max("id"), .sum("id"), .count("id")]),
              [["min_id": 1, "max_id": 8, "sum_id": 36, "count_id": 8]]),
        check("groupByString", sales, AggregateQuery(groupBy: ["region"], aggregates: [.count(), .sum("amount")]), [
            ["region": .null, "count": 1, "sum_amount": 100],
            ["region": "east", "count": 1, "sum_amount": 1],
            ["region": "north", "count": 3, "sum_amount": 13.0],
            ["region": "south", "count": 3, "sum_amount": 7],
        ]),
        check("groupByMergesEqualNumbers", [
            Record(id: 1, fields: ["k": 1]), Record(id: 2, fields: ["k": 1.0]), Record(id: 3, fields: ["k": 2.5]),
            Record(id: 4, fields: ["k": .double(-0.0)]), Record(id: 5, fields: ["k": 0]),
        ], AggregateQuery(groupBy: ["k"], aggregates: [.count()]), [["k": 0, "count": 2], ["k": 1, "count": 2], ["k": 2.5, "count": 1]]),
        check("groupByBoolIsNotNumber", [
            Record(id: 1, fields: ["k": true]), Record(id: 2, fields: ["k": 1]), Record(id: 3, fields: ["k": false]), Record(id: 4, fields: ["k": 0]),
        ], AggregateQuery(groupBy: ["k"], aggregates: [.count()]), [["k": false, "count": 1], ["k": true, "count": 1], ["k": 0, "count": 1], ["k": 1, "count": 1]]),
        check("groupByNullAndMissingTogether", [
            Record(id: 1), Record(id: 2, fields: ["k": .null]), Record(id: 3, fields: ["k": "x"]),
        ], AggregateQuery(groupBy: ["k"], aggregates: [.count()]), [["k": .null, "count": 2], ["k": "x", "count": 1]]),
        check("groupByStringsByBytes", [
            Record(id: 1, fields: ["k": "abc"]), Record(id: 2, fields: ["k": "Abc"]), Record(id: 3, fields: ["k": "abc"]), Record(id: 4, fields: ["k": "1"]),
        ], AggregateQuery(groupBy: ["k"], aggregates: [.count()]), [["k": "1", "count": 1], ["k": "Abc", "count": 1], ["k": "abc", "count": 2]]),
        check("groupByArraysAndObjectsExactly", [
            Record(id: 1, fields: ["k": [1, 2]]), Record(id: 2, fields: ["k": [1, 2]]), Record(id: 3, fields: ["k": [2, 1]]),
            Record(id: 4, fields: ["k": ["a": 1]]), Record(id: 5, fields: ["k": ["a": 1]]), Record(id: 6, fields: ["k": "[1,2]"]),
        ], AggregateQuery(groupBy: ["k"], aggregates: [.count()]), [
            ["k": "[1,2]", "count": 1], ["k": [1, 2], "count": 2], ["k": [2, 1], "count": 1], ["k": ["a": 1], "count": 2],
        ]),
        check("groupByTwoFields", sales, AggregateQuery(groupBy: ["region", "tag"], aggregates: [.count()]), [
            ["region": .null, "tag": .null, "count": 1],
            ["region": "east", "tag": .null, "count": 1],
            ["region": "north", "tag": .null, "count": 1],
            ["region": "north", "tag": "a", "count": 1],
            ["region": "north", "tag": "b", "count": 1],
            ["region": "south", "tag": .null, "count": 1],
            ["region": "south", "tag": "a", "count": 1],
            ["region": "south", "tag": "b", "count": 1],
        ]),
        check("groupByWithoutAggregates", sales, AggregateQuery(groupBy: ["tag"], aggregates: []), [["tag": .null], ["tag": "a"], ["tag": "b"]]),
        check("filterBeforeGrouping", sales, AggregateQuery(filter: .greater("rating", 2), groupBy: ["region"], aggregates: [.count(), .average("rating")]), [
            ["region": "north", "count": 2, "avg_rating": 4.5], ["region": "south", "count": 1, "avg_rating": 3.0],
        ]),
        check("havingOnAggregate", sales, AggregateQuery(groupBy: ["region"], aggregates: [.count()], having: .greaterOrEqual("count", 2)), [
            ["region": "north", "count": 3], ["region": "south", "count": 3],
        ]),
        check("havingOnGroupField", sales, AggregateQuery(groupBy: ["region"], aggregates: [.count()], having: .hasPrefix("region", "n")), [
            ["region": "north", "count": 3],
        ]),
        check("havingWithNullAggregate", sales, AggregateQuery(groupBy: ["region"], aggregates: [.max("tag")], having: .isNull("max_tag")), [
            ["region": .null, "max_tag": .null], ["region": "east", "max_tag": .null],
        ]),
        check("sortByAggregateThenGroup", sales, AggregateQuery(groupBy: ["region"], aggregates: [.count()], sort: [SortKey("count", descending: true)]), [
            ["region": "north", "count": 3], ["region": "south", "count": 3], ["region": .null, "count": 1], ["region": "east", "count": 1],
        ]),
        check("sortGroupDescending", sales, AggregateQuery(groupBy: ["region"], aggregates: [.count()], sort: [SortKey("region", descending: true)]), [
            ["region": "south", "count": 3], ["region": "north", "count": 3], ["region": "east", "count": 1], ["region": .null, "count": 1],
        ]),
        check("paging", sales, AggregateQuery(groupBy: ["region"], aggregates: [.count()], offset: 1, limit: 2), [
            ["region": "east", "count": 1], ["region": "north", "count": 3],
        ]),
        check("pagingPastTheEnd", sales, AggregateQuery(groupBy: ["region"], aggregates: [.count()], offset: 10), []),
        check("groupByID", [Record(id: 2, fields: ["v": 1]), Record(id: 1, fields: ["v": 2])], AggregateQuery(groupBy: ["id"], aggregates: [.sum("v")]), [
            ["id": 1, "sum_v": 2], ["id": 2, "sum_v": 1],
        ]),
        check("customNames", sales, AggregateQuery(aggregates: [.count(as: "n"), .sum("amount", as: "total")]), [["n": 8, "total": 121.0]]),
        .driver("aggregate.sumOutsideInt64IsAnError") { driver, expect in
            let items = try Fixture.items
            try await driver.seed([Record(id: 1, fields: ["v": .int(.max)]), Record(id: 2, fields: ["v": 1]), Record(id: 3, fields: ["g": 1])], into: items)
            let error = try await expect.error(.invalidValue, "sum past Int64.max") {
                try await Self.rows(driver, AggregateQuery(aggregates: [.sum("v")]), in: items)
            }
            try expect.that(error.message.contains("sum(v)"), "the error names the aggregate: \(error.message)")
            // A double among the values makes the sum a double, which does not overflow.
            try await driver.write { tx in try tx.insert(Record(id: 4, fields: ["v": 0.5]), into: items) }
            let rows = try await Self.rows(driver, AggregateQuery(aggregates: [.sum("v")]), in: items)
            try expect.equal(rows.first?["sum_v"], .double(Double(Int64.max) + 1.0 + 0.5), "the sum as a double")
        },
        .driver("aggregate.invalidQueriesAreRefused") { driver, expect in
            let items = try Fixture.items
            try await driver.seed(sales, into: items)
            let bad: [(String, AggregateQuery)] = [
                ("no aggregate and no group", AggregateQuery(aggregates: [])),
                ("two results with one name", AggregateQuery(aggregates: [.count(), .count("x", as: "count")])),
                ("a name clashing with a group field", AggregateQuery(groupBy: ["region"], aggregates: [.count(as: "region")])),
                ("having on an unknown name", AggregateQuery(aggregates: [.count()], having: .greater("amount", 1))),
                ("sort on an unknown name", AggregateQuery(aggregates: [.count()], sort: [SortKey("amount")])),
                ("an invalid group field", AggregateQuery(groupBy: ["bad name"], aggregates: [.count()])),
                ("a sum of no field", AggregateQuery(aggregates: [Aggregate(.sum, nil)])),
                ("a negative limit", AggregateQuery(aggregates: [.count()], limit: -1)),
            ]
            for (what, query) in bad {
                try await expect.throwsCode(.invalidQuery, what) { try await Self.rows(driver, query, in: items) }
            }
        },
        .driver("aggregate.insideWriteSeesOwnWrites") { driver, expect in
            let items = try Fixture.items
            try await driver.seed(sales, into: items)
            let store = try await Store(driver: driver)
            let rows = try await store.write { tx -> [AggregateRow] in
                try tx.insert(Record(id: 9, fields: ["region": "east", "amount": 4]), into: items)
                try tx.delete(1, from: items)
                return try tx.aggregate(AggregateQuery(groupBy: ["region"], aggregates: [.count(), .sum("amount")], having: .isIn("region", ["east", "north"])), in: items)
            }
            try expect.equal(rows.map(\.values), [["region": "east", "count": 2, "sum_amount": 5], ["region": "north", "count": 2, "sum_amount": 3.0]], "rows inside the write")
        },
        .driver("aggregate.explainNamesTheEngine") { driver, expect in
            let items = try Fixture.items
            try await driver.seed(sales, into: items)
            let store = try await Store(driver: driver)
            let plan = try await store.collection(items).explain(AggregateQuery(groupBy: ["region"], aggregates: [.count()]))
            try expect.that(!plan.backend.isEmpty && !plan.detail.isEmpty, "a plan names its backend and says what ran where: \(plan)")
        },
        .driver("aggregate.randomAgainstEvaluator") { driver, expect in
            let items = try Fixture.items
            var random = SplitMix64(seed: 0xA66)
            let values: [FieldValue] = [.null, 1, 2, 2.0, 3.5, -1, "a", "b", "B", true, false, .bytes(Data([2])), [1], ["k": "v"], .int(1 << 60)]
            var records: [Record] = []
            for id in 1...300 {
                var fields: [String: FieldValue] = [:]
                for name in ["g", "h", "v", "w"] {
                    let value = values[Int(random.next() % UInt64(values.count))]
                    if !value.isNull { fields[name] = value }
                }
                records.append(Record(id: .int(Int64(id)), fields: fields))
            }
            try await driver.seed(records, into: items)
            let aggregates: [Aggregate] = [.count(), .count("v"), .min("v"), .max("v"), .min("w"), .max("w"), .average("w")]
            let queries = [
                AggregateQuery(groupBy: ["g"], aggregates: aggregates),
                AggregateQuery(groupBy: ["g", "h"], aggregates: aggregates, sort: [SortKey("count", descending: true)], limit: 20),
                AggregateQuery(filter: .greater("v", 1), groupBy: ["h"], aggregates: aggregates, having: .greater("count", 3)),
                AggregateQuery(filter: .not(.isNull("w")), aggregates: aggregates),
                AggregateQuery(groupBy: ["w"], aggregates: [.count(), .max("g")], sort: [SortKey("max_g")], offset: 2, limit: 5),
            ]
            for query in queries {
                let rows = try await Self.rows(driver, query, in: items)
                let reference = try Self.reference(records, query, in: items)
                try expect.equal(rows.map(\.values), reference.map(\.values), "rows of \(query) against the shared evaluator")
            }
        },
    ]
}
