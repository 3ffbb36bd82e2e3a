import DepotCore
import DepotMemory
import Dispatch
import Foundation
import Testing
@testable import DepotJSONFile

/// Read transactions take the published committed snapshot on the caller's thread: they never
/// wait for a writer, never see an uncommitted change, always see one whole commit, see
/// every commit acknowledged before they began, and answer queries in id order without
/// sorting exactly as the shared evaluator does.
@Suite struct JSONReadPathTests {
    final class Flags: Sendable {
        let inserted = Locked(false)
        let readFinished = DispatchSemaphore(value: 0)
        let writerTimedOut = Locked(false)
    }

    @Test func aReadDuringAnOpenWriteNeitherWaitsNorSeesIt() async throws {
        let dir = TestDirectory()
        let items = try CollectionName("items")
        let driver = try await JSONFileDriver(path: dir.store, configuration: .init(durability: .normal))
        try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["v": 1]), into: items) }
        let flags = Flags()
        // The write inserts, then holds the driver's thread (not the cooperative pool) until
        // the read below has finished, for at most 20 s. A read that needed the driver's
        // thread could only finish after that timeout.
        async let write: Void = driver.write { tx in
            try tx.insert(Record(id: 2, fields: ["v": 2]), into: items)
            try tx.update(Record(id: 1, fields: ["v": 10]), in: items)
            flags.inserted.withLock { $0 = true }
            if flags.readFinished.wait(timeout: .now() + 20) == .timedOut { flags.writerTimedOut.withLock { $0 = true } }
        }
        let deadline = ContinuousClock.now + .seconds(20)
        while !flags.inserted.withLock({ $0 }), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(2)) }
        let during = try await driver.read { tx in try tx.query(Query(), in: items) }
        flags.readFinished.signal()
        try await write
        #expect(!flags.writerTimedOut.withLock { $0 }, "the read finished while the writer held the driver's thread")
        #expect(during == [Record(id: 1, fields: ["v": 1])], "the open write's changes are invisible")
        #expect(try driver.store.unchangedSnapshot() != nil, "after its own commit the driver reads without its thread")
        let after = try await driver.read { tx in try tx.query(Query(), in: items) }
        #expect(after == [Record(id: 1, fields: ["v": 10]), Record(id: 2, fields: ["v": 2])], "the acknowledged write is visible")
        // A change by another program sends the next read to the driver's thread, which reloads.
        try dir.write(#"{"items":[{"id":7,"v":7}]}"#)
        #expect(try driver.store.unchangedSnapshot() == nil)
        #expect(try await driver.read { tx in try tx.query(Query(), in: items) } == [Record(id: 7, fields: ["v": 7])])
        #expect(try driver.store.unchangedSnapshot() != nil, "after reloading the driver reads without its thread again")
        try await driver.close()
        await expectError(.closed) { _ = try await driver.read { tx in try tx.count(.all, in: items) } }
    }

    /// One writer sets every record's `g` to 1, 2, … in one transaction each while readers
    /// read all records: each read sees a single `g` on every record (one whole commit), a
    /// reader's `g` never goes back, and the writer reads its own commit right after it.
    @Test func concurrentReadsSeeWholeCommitsInOrder() async throws {
        let dir = TestDirectory()
        let items = try CollectionName("items")
        let driver = try await JSONFileDriver(path: dir.store, configuration: .init(durability: .normal))
        let count = 40, rounds: Int64 = 40
        try await driver.write { tx in
            for i in 0..<count { try tx.insert(Record(id: .int(Int64(i)), fields: ["g": 0]), into: items) }
        }
        let problems = try await withThrowingTaskGroup(of: [String].self) { group in
            group.addTask {
                var problems: [String] = []
                for g in 1...rounds {
                    try await driver.write { tx in
                        for i in 0..<count { try tx.update(Record(id: .int(Int64(i)), fields: ["g": .int(g)]), in: items) }
                    }
                    let seen = try await driver.read { tx in try tx.get(.int(Int64(count - 1)), from: items)?.fields["g"] }
                    if seen != .int(g) { problems.append("after commit \(g) the writer read \(String(describing: seen))") }
                }
                return problems
            }
            for reader in 0..<2 {
                group.addTask {
                    var problems: [String] = []
                    var last: Int64 = 0
                    var reads = 0
                    while last < rounds, reads < 1_000_000, problems.isEmpty {
                        reads += 1
                        let gs = try await driver.read { tx in try tx.query(Query(), in: items).map { $0.fields["g"]?.intValue ?? -1 } }
                        let distinct = Set(gs)
                        if gs.count != count || distinct.count != 1 { problems.append("reader \(reader) saw \(gs.count) records with g \(distinct.sorted())") }
                        let g = gs.first ?? -1
                        if g < last { problems.append("reader \(reader) went back from \(last) to \(g)") }
                        last = max(last, g)
                        await Task.yield()
                    }
                    if last < rounds { problems.append("reader \(reader) never saw the last commit") }
                    return problems
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(problems.isEmpty, "\(problems.prefix(5))")
        try await driver.close()
    }

    /// Queries in id order walk the kept order (with id bounds narrowing the walk), other
    /// sorts use the evaluator; both must give the reference's answer, in read transactions
    /// and in write transactions before and after they change the collection.
    @Test func queriesInIDOrderMatchTheReference() async throws {
        let dir = TestDirectory()
        let json = try await JSONFileDriver(path: dir.store, configuration: .init(durability: .normal))
        let memory = MemoryDriver()
        let ints = try CollectionName("ints"), strings = try CollectionName("strings")
        let stringIDs = ["a", "b", "k1", "k10", "k2", "k20", "k3", "z", "Z", "é", "ab", "k", "user10", "user9", "user100"]
        let seed: @Sendable (any WriteTransaction) throws -> Void = { tx in
            for i in 1...30 where i % 4 != 0 {
                try tx.insert(Record(id: .int(Int64(i)), fields: ["v": .int(Int64(i % 3)), "s": .string("x\(i % 5)")]), into: ints)
            }
            for (n, id) in stringIDs.enumerated() { try tx.insert(Record(id: .string(id), fields: ["v": .int(Int64(n % 3))]), into: strings) }
        }
        try await json.write(seed)
        try await memory.write(seed)
        let queries: [Query] = [
            Query(),
            Query(sort: [SortKey("id", descending: true)]),
            Query(filter: .greaterOrEqual("id", 7), sort: [SortKey("id")], limit: 5),
            Query(filter: .greater("id", 7), sort: [SortKey("id", descending: true)], offset: 2, limit: 4),
            Query(filter: .and([.greater("id", 3), .lessOrEqual("id", 21), .equal("v", 1)]), offset: 1),
            Query(filter: .and([.less("id", 10.5), .greaterOrEqual("id", 2.5)]), sort: [SortKey("id"), SortKey("v")]),
            Query(filter: .lessOrEqual("id", 0)),
            Query(filter: .greater("id", 1000)),
            Query(filter: .greater("id", "k")),
            Query(filter: .greaterOrEqual("id", "k"), sort: [SortKey("id")], limit: 3),
            Query(filter: .and([.greater("id", "a"), .less("id", "user10")]), sort: [SortKey("id", descending: true)], offset: 1, limit: 100),
            Query(filter: .or([.less("id", 5), .greater("id", 25)])),
            Query(filter: .not(.greaterOrEqual("id", 10)), limit: 3),
            Query(filter: .and([.greater("id", 20), .less("id", 10)])),
            Query(filter: .equal("v", 2), sort: [SortKey("v"), SortKey("id", descending: true)]),
            Query(sort: [SortKey("s")], limit: 7),
            Query(limit: 0),
            Query(offset: 100),
        ]
        func answers(_ driver: any StorageDriver) async throws -> [[Record]] {
            try await driver.read { tx in try queries.flatMap { q in [try tx.query(q, in: ints), try tx.query(q, in: strings)] } }
        }
        #expect(try await answers(json) == (try await answers(memory)), "after a commit")
        // Reopened: the order is rebuilt from the file.
        try await json.close()
        let reopened = try await JSONFileDriver(path: dir.store)
        #expect(try await answers(reopened) == (try await answers(memory)), "after loading")
        // Inside a write transaction, before and after it writes.
        let change: @Sendable (any WriteTransaction) throws -> [[Record]] = { tx in
            var out = try queries.map { try tx.query($0, in: ints) }
            try tx.delete(5, from: ints)
            try tx.insert(Record(id: 4, fields: ["v": 1]), into: ints)
            _ = try tx.insert(fields: ["v": 2], into: ints)
            try tx.insert(Record(id: "k15", fields: ["v": 0]), into: strings)
            out += try queries.flatMap { q in [try tx.query(q, in: ints), try tx.query(q, in: strings)] }
            return out
        }
        #expect(try await reopened.write(change) == (try await memory.write(change)), "inside a write transaction")
        #expect(try await answers(reopened) == (try await answers(memory)), "after a commit that changed the order")
        try await reopened.close()
    }
}
