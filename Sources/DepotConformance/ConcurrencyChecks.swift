import DepotCore

/// Many tasks reading and writing one store at once (Docs/Semantics.md, "Transactions").
enum ConcurrencyChecks {
    static let all: [ConformanceCheck] = [
        .driver("concurrency.manyTasksWrite") { driver, expect in
            let items = try Fixture.items
            try await withTimeout(60, expect, "16 tasks × 50 writes") {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for task in 0..<16 {
                        group.addTask {
                            for i in 0..<50 {
                                let id = Int64(task * 1000 + i)
                                try await driver.write { tx in try tx.insert(Record(id: .int(id), fields: ["task": .int(Int64(task)), "i": .int(Int64(i))]), into: items) }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            try expect.equal(try await driver.count(in: items), 800, "records written")
            for task in 0..<16 {
                try expect.equal(try await driver.count(.equal("task", .int(Int64(task))), in: items), 50, "records of task \(task)")
            }
            let sample = try await driver.record(.int(15 * 1000 + 49), in: items)
            try expect.equal(sample, Record(id: .int(15_049), fields: ["task": 15, "i": 49]), "last record of the last task")
        },
        .driver("concurrency.counterIncrementsAreSerializable") { driver, expect in
            let items = try Fixture.items
            try await driver.seed([Record(id: 1, fields: ["counter": 0])], into: items)
            try await withTimeout(60, expect, "8 tasks × 25 increments") {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<8 {
                        group.addTask {
                            for _ in 0..<25 {
                                try await driver.write { tx in
                                    let current = try tx.get(1, from: items)?.fields["counter"]?.intValue ?? -10_000
                                    try tx.update(Record(id: 1, fields: ["counter": .int(current + 1)]), in: items)
                                }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            try expect.equal(try await driver.record(1, in: items)?.fields["counter"], .int(200), "counter after 200 concurrent increments")
        },
        .driver("concurrency.readersSeeWholeTransactions", requires: .transactions) { driver, expect in
            let items = try Fixture.items
            let torn = try await withTimeout(60, expect, "readers during batch writes") {
                try await withThrowingTaskGroup(of: [Int].self) { group in
                    for writer in 0..<2 {
                        group.addTask {
                            for batch in 0..<20 {
                                try await driver.write { tx in
                                    for i in 0..<10 { try tx.insert(Record(id: .int(Int64(writer * 10_000 + batch * 100 + i)), fields: ["w": .int(Int64(writer))]), into: items) }
                                }
                            }
                            return []
                        }
                    }
                    for _ in 0..<3 {
                        group.addTask {
                            var odd: [Int] = []
                            for _ in 0..<30 {
                                let (a, b) = try await driver.read { tx in (try tx.count(.equal("w", 0), in: items), try tx.count(.equal("w", 1), in: items)) }
                                if a % 10 != 0 { odd.append(a) }
                                if b % 10 != 0 { odd.append(b) }
                                await Task.yield()
                            }
                            return odd
                        }
                    }
                    var all: [Int] = []
                    for try await odd in group { all += odd }
                    return all
                }
            }
            try expect.that(torn.isEmpty, "readers saw counts that are not whole batches of 10: \(torn.prefix(5))")
            try expect.equal(try await driver.count(in: items), 400, "records written")
        },
        .driver("concurrency.concurrentAssignedIds", requires: .assignedIDs) { driver, expect in
            let items = try Fixture.items
            let ids = try await withTimeout(60, expect, "8 tasks × 25 assigned ids") {
                try await withThrowingTaskGroup(of: [RecordID].self) { group in
                    for task in 0..<8 {
                        group.addTask {
                            var ids: [RecordID] = []
                            for _ in 0..<25 { ids.append(try await driver.write { tx in try tx.insert(fields: ["task": .int(Int64(task))], into: items) }) }
                            return ids
                        }
                    }
                    var all: [RecordID] = []
                    for try await ids in group {
                        try expect.that(zip(ids, ids.dropFirst()).allSatisfy { $0 < $1 }, "ids one task received increase: \(ids)")
                        all += ids
                    }
                    return all
                }
            }
            try expect.equal(ids.sorted(), (1...200).map { RecordID.int(Int64($0)) }, "every id from 1 to 200 exactly once")
            try expect.equal(try await driver.count(in: items), 200, "records")
        },
        .driver("concurrency.concurrentReadersAndStreams") { driver, expect in
            let items = try Fixture.items
            try await driver.seed((1...500).map { Record(id: .int(Int64($0)), fields: ["n": .int(Int64($0 % 10))]) }, into: items)
            let results = try await withTimeout(60, expect, "8 concurrent readers") {
                try await withThrowingTaskGroup(of: [Int].self) { group in
                    for reader in 0..<8 {
                        group.addTask {
                            if reader % 2 == 0 {
                                return [try await driver.streamed(Query(filter: .equal("n", .int(Int64(reader)))), from: items).count]
                            }
                            return [try await driver.count(.equal("n", .int(Int64(reader))), in: items)]
                        }
                    }
                    var out: [Int] = []
                    for try await r in group { out += r }
                    return out
                }
            }
            try expect.equal(results, Array(repeating: 50, count: 8), "each reader's result")
        },
        .driver("concurrency.writersToDifferentCollections") { driver, expect in
            let names = try (0..<6).map { try CollectionName("c\($0)") }
            try await withTimeout(60, expect, "6 tasks on 6 collections") {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for name in names {
                        group.addTask {
                            for i in 1...30 { try await driver.write { tx in try tx.insert(Record(id: .int(Int64(i)), fields: ["c": .string(name.rawValue)]), into: name) } }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            for name in names { try expect.equal(try await driver.count(.equal("c", .string(name.rawValue)), in: name), 30, "records in \(name)") }
            try expect.equal(try await driver.read { tx in try tx.collectionNames() }, names, "collections")
        },
    ]
}
