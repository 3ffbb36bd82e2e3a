import DepotCore

/// `count` and `exists` (Docs/Semantics.md, "Counts").
enum CountChecks {
    static let all: [ConformanceCheck] = [
        .driver("count.emptyAndMissingCollections") { driver, expect in
            let items = try Fixture.items
            try expect.equal(try await driver.count(in: items), 0, "count of a collection that does not exist")
            try await driver.write { tx in try tx.prepare(CollectionSchema(name: items, idKind: .int)) }
            try expect.equal(try await driver.count(in: items), 0, "count of an empty collection")
            let exists = try await driver.read { tx in try tx.exists(.all, in: items) }
            try expect.equal(exists, false, "exists in an empty collection")
        },
        .driver("count.allAndFiltered") { driver, expect in
            let items = try Fixture.items
            try await driver.seed((1...25).map { Record(id: .int(Int64($0)), fields: ["n": .int(Int64($0)), "odd": .bool($0 % 2 == 1)]) }, into: items)
            try expect.equal(try await driver.count(in: items), 25, "count of all")
            try expect.equal(try await driver.count(.equal("odd", true), in: items), 13, "odd records")
            try expect.equal(try await driver.count(.and([.greater("n", 10), .lessOrEqual("n", 20)]), in: items), 10, "10 < n <= 20")
            try expect.equal(try await driver.count(.equal("n", 99), in: items), 0, "nothing matches")
        },
        .driver("count.followsWrites") { driver, expect in
            let items = try Fixture.items
            try await driver.seed((1...10).map { Record(id: .int(Int64($0))) }, into: items)
            _ = try await driver.write { tx in try tx.delete(3, from: items) }
            try await driver.write { tx in try tx.insert(Record(id: 11), into: items) }
            _ = try await driver.write { tx in try tx.save(Record(id: 4, fields: ["x": 1]), into: items) }
            try expect.equal(try await driver.count(in: items), 10, "after one delete, one insert, one update")
            _ = try await driver.write { tx in try tx.delete(matching: .less("id", 6), from: items) }
            try expect.equal(try await driver.count(in: items), 6, "after deleting ids below 6")
        },
        .driver("count.existsMatchesFilter") { driver, expect in
            let items = try Fixture.items
            try await driver.seed(FilterChecks.mixed, into: items)
            let answers = try await driver.read { tx in
                [try tx.exists(.equal("v", "abc"), in: items), try tx.exists(.equal("v", "ABC"), in: items),
                 try tx.exists(.isNull("v"), in: items), try tx.exists(.greater("v", .int(.max)), in: items)]
            }
            try expect.equal(answers, [true, false, true, false], "exists for 'abc', 'ABC', null, > Int64.max")
        },
        .driver("count.countsNullSemantics") { driver, expect in
            let items = try Fixture.items
            try await driver.seed(FilterChecks.pairs, into: items)
            try expect.equal(try await driver.count(.notEqual("a", 1), in: items), 4, "a != 1 counts missing a")
            try expect.equal(try await driver.count(.notIn("b", ["x"]), in: items), 3, "b notIn [x] counts missing b")
            try expect.equal(try await driver.count(.isNull("a"), in: items), 2, "a is null")
        },
        .driver("count.insideWriteSeesOwnWrites") { driver, expect in
            let items = try Fixture.items
            try await driver.seed((1...5).map { Record(id: .int(Int64($0)), fields: ["n": .int(Int64($0))]) }, into: items)
            let counts = try await driver.write { tx -> [Int] in
                let before = try tx.count(.all, in: items)
                try tx.insert(Record(id: 6, fields: ["n": 6]), into: items)
                _ = try tx.delete(1, from: items)
                try tx.update(Record(id: 2, fields: ["n": 20]), in: items)
                return [before, try tx.count(.all, in: items), try tx.count(.greater("n", 5), in: items)]
            }
            try expect.equal(counts, [5, 5, 2], "counts before, after, and of n > 5 inside the transaction")
        },
        .driver("count.firstAndExistsOnEmptyResult") { driver, expect in
            let items = try Fixture.items
            try await driver.seed([Record(id: 1, fields: ["n": 1])], into: items)
            let first = try await driver.read { tx in try tx.first(Query(filter: .equal("n", 2)), in: items) }
            try expect.equal(first, nil, "first of nothing")
        },
    ]
}
