import DepotCore

/// Streaming large results in order, early termination (Docs/Semantics.md, "Streaming").
enum StreamingChecks {
    static let large = 20_000

    static func largeRecords() -> [Record] {
        (1...large).map { Record(id: .int(Int64($0)), fields: ["n": .int(Int64($0)), "group": .int(Int64($0 % 7)), "s": .string("r\($0)")]) }
    }

    static let all: [ConformanceCheck] = [
        .driver("stream.largeResultInOrder") { driver, expect in
            let items = try Fixture.items
            try await driver.seed(largeRecords(), into: items)
            var expected: Int64 = 1
            for try await record in driver.stream(Query(), from: items) {
                guard record.id == .int(expected), record.fields["n"] == .int(expected), record.fields["s"] == .string("r\(expected)") else {
                    throw expect.failure("record \(expected) of the stream: got \(record)")
                }
                expected += 1
            }
            try expect.equal(expected - 1, Int64(large), "records streamed")
        },
        .driver("stream.largeFilteredSortedPaged") { driver, expect in
            let items = try Fixture.items
            try await driver.seed(largeRecords(), into: items)
            // group 3: ids 3, 10, 17, ... ; descending by n, skip 10, take 1000.
            let query = Query(filter: .equal("group", 3), sort: [SortKey("n", descending: true)], offset: 10, limit: 1000)
            let ids = try await driver.streamed(query, from: items).map(\.id)
            let group3 = stride(from: Int64(large), through: 1, by: -1).filter { $0 % 7 == 3 }
            try expect.equal(ids, Array(group3.dropFirst(10).prefix(1000)).map { RecordID.int($0) }, "streamed page")
        },
        .driver("stream.earlyTermination") { driver, expect in
            let items = try Fixture.items
            try await driver.seed(largeRecords(), into: items)
            let firstTen = try await driver.streamed(from: items, stopAfter: 10)
            try expect.equal(firstTen.map(\.id), (1...10).map { RecordID.int(Int64($0)) }, "first ten")
            // The abandoned stream must not hold the store: writing and streaming again work.
            try await withTimeout(60, expect, "a write after abandoning a stream") {
                try await driver.write { tx in try tx.insert(Record(id: .int(Int64(large + 1))), into: items) }
            }
            let again = try await withTimeout(60, expect, "a new stream after abandoning one") {
                try await driver.streamed(Query(offset: large - 2), from: items).map(\.id)
            }
            try expect.equal(again, [.int(Int64(large - 1)), .int(Int64(large)), .int(Int64(large + 1))], "last records of a second stream")
        },
        .driver("stream.manyAbandonedStreams") { driver, expect in
            let items = try Fixture.items
            try await driver.seed((1...2_000).map { Record(id: .int(Int64($0))) }, into: items)
            for round in 0..<20 {
                let got = try await withTimeout(60, expect, "abandoned stream \(round)") {
                    try await driver.streamed(Query(offset: round), from: items, stopAfter: 3).map(\.id)
                }
                try expect.equal(got, [.int(Int64(round + 1)), .int(Int64(round + 2)), .int(Int64(round + 3))], "stream \(round)")
            }
            try expect.equal(try await driver.count(in: items), 2_000, "store still answers")
        },
        .driver("stream.emptyAndMissing") { driver, expect in
            let items = try Fixture.items
            try expect.equal(try await driver.streamed(from: items).count, 0, "stream of a collection that does not exist")
            try await driver.seed([Record(id: 1, fields: ["n": 1])], into: items)
            try expect.equal(try await driver.streamed(Query(filter: .equal("n", 2)), from: items).count, 0, "stream matching nothing")
            try expect.equal(try await driver.streamed(Query(limit: 0), from: items).count, 0, "stream with limit 0")
        },
        .driver("stream.invalidQueryFails") { driver, expect in
            let items = try Fixture.items
            try await driver.seed([Record(id: 1, fields: ["n": 1])], into: items)
            try await expect.throwsCode(.invalidQuery, "stream with a negative limit") {
                try await driver.streamed(Query(limit: -1), from: items)
            }
            try await expect.throwsCode(.invalidQuery, "stream filtering on an invalid field name") {
                try await driver.streamed(Query(filter: .equal("bad name", 1)), from: items)
            }
        },
        .driver("stream.writesWhileStreaming", requires: [.streaming, .snapshotReads]) { driver, expect in
            let items = try Fixture.items
            try await driver.seed((1...3_000).map { Record(id: .int(Int64($0 * 2))) }, into: items)
            let seen = try await withTimeout(60, expect, "streaming while writing") {
                var seen: [RecordID] = []
                for try await record in driver.stream(Query(), from: items) {
                    seen.append(record.id)
                    if seen.count % 500 == 0 {
                        let n = Int64(seen.count)
                        try await driver.write { tx in
                            try tx.insert(Record(id: .int(n * 4 + 1)), into: items)
                            _ = try tx.delete(.int(n * 2), from: items)
                        }
                    }
                }
                return seen
            }
            try expect.that(zip(seen, seen.dropFirst()).allSatisfy { $0 < $1 }, "streamed ids strictly increase")
            let original = Set((1...3_000).map { RecordID.int(Int64($0 * 2)) })
            let missed = original.subtracting(seen).filter { id in
                // Records deleted while streaming may be missing; no other.
                if case .int(let i) = id { return !(i % 1000 == 0 && i <= 6000) }
                return true
            }
            try expect.that(missed.isEmpty, "records never deleted are all streamed; missing: \(missed.sorted().prefix(5))")
        },
    ]
}
