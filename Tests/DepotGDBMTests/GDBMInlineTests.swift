import DepotCore
import Foundation
import Testing

@testable import DepotGDBM

/// Small transactions run on the caller's thread; larger ones are abandoned at their budget
/// and run again on the store's threads, exactly once in effect.
@Suite struct GDBMInlineTests {
    let users: CollectionName

    init() throws { users = try CollectionName("users") }

    static func open(_ dir: TemporaryDirectory, _ options: String = "?durability=normal") async throws -> GDBMDriver {
        try await GDBMDriver(location: StoreLocation("gdbm:" + dir.path + "/store" + options))
    }

    @Test func smallReadsRunOnceLargeReadsRunAgainOnThePool() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let users = self.users
        let driver = try await Self.open(dir)
        try await driver.write { tx in for i in 1...200 { try tx.insert(Record(id: .int(Int64(i)), fields: ["n": .int(Int64(i))]), into: users) } }
        let calls = Locked(0)
        // One get: inline, one call.
        let one = try await driver.read { tx in
            calls.withLock { $0 += 1 }
            return try tx.get(7, from: users)?.fields["n"]
        }
        #expect(one == 7)
        #expect(calls.withLock { $0 } == 1)
        // 150 gets: over the inline budget, abandoned and run again; the answer is whole.
        calls.withLock { $0 = 0 }
        let sum = try await driver.read { tx in
            calls.withLock { $0 += 1 }
            var total: Int64 = 0
            for i in 1...150 { total += try tx.get(.int(Int64(i)), from: users)?.fields["n"]?.intValue ?? 0 }
            return total
        }
        #expect(sum == Int64(150 * 151 / 2))
        #expect(calls.withLock { $0 } == 2)
        // A scan is never inline; a closure that swallows the abandonment is run again anyway.
        calls.withLock { $0 = 0 }
        let count = try await driver.read { tx -> Int in
            calls.withLock { $0 += 1 }
            do { return try tx.count(.greater("n", 100), in: users) } catch { return -1 }
        }
        #expect(count == 100)
        #expect(calls.withLock { $0 } == 2)
        try await driver.close()
    }

    /// `readWithoutWaiting` (what `Collection.get` tries first) runs a small read right here
    /// and declines, without running it, wherever `read` would wait or hop: on the writer
    /// thread, while a commit holds the files; a read over the inline budget is abandoned.
    @Test func readsWithoutWaitingRunHereOrDecline() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let users = self.users
        let driver = try await Self.open(dir)
        try await driver.write { tx in for i in 1...200 { try tx.insert(Record(id: .int(Int64(i)), fields: ["n": .int(Int64(i))]), into: users) } }
        var calls = 0
        var seen: FieldValue?
        #expect(try driver.readWithoutWaiting { tx in
            calls += 1
            seen = try tx.get(7, from: users)?.fields["n"]
        })
        #expect(seen == 7 && calls == 1)
        // A commit made since is seen by the next one.
        try await driver.write { tx in try tx.update(Record(id: 7, fields: ["n": 70]), in: users) }
        #expect(try driver.readWithoutWaiting { tx in seen = try tx.get(7, from: users)?.fields["n"] })
        #expect(seen == 70)
        // Over the budget: abandoned, `false`.
        calls = 0
        #expect(try !driver.readWithoutWaiting { tx in
            calls += 1
            for i in 1...150 { _ = try tx.get(.int(Int64(i)), from: users) }
        })
        #expect(calls == 1)
        // The files held for writing (a commit being applied): declined, not run.
        calls = 0
        driver.engine.filesLock.writeLock()
        let whileApplying = try driver.readWithoutWaiting { _ in calls += 1 }
        driver.engine.filesLock.unlock()
        #expect(!whileApplying && calls == 0)
        // On the writer thread: declined, not run (`read` runs it there).
        let onWriter = try await driver.engine.thread.run { try driver.readWithoutWaiting { _ in Issue.record("ran on the writer thread") } }
        #expect(!onWriter)
        // Through a store: `Collection.get` answers as a read transaction does.
        let store = try await Store(driver: driver)
        let collection = store.collection(users)
        for id in [RecordID.int(7), 150, 999] {
            let direct = try await driver.read { tx in try tx.get(id, from: users) }
            #expect(try await collection.get(id) == direct)
        }
        try await driver.close()
        #expect(throws: DepotError.self) { try driver.readWithoutWaiting { _ in } }
    }

    @Test func largeWritesCommitExactlyOnce() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let users = self.users
        let driver = try await Self.open(dir)
        // The first commit after opening (or after a sync point) fsyncs its journal record on
        // the writer thread and is never tried inline: make it, so the next one is tried inline.
        try await driver.write { tx in try tx.insert(Record(id: 1, fields: [:]), into: try CollectionName("warmup")) }
        let calls = Locked(0)
        // 300 inserts, some swallowing errors: abandoned inline, committed once on the writer thread.
        let outcome = try await driver.write { tx -> Int in
            calls.withLock { $0 += 1 }
            var failed = 0
            for i in 1...300 {
                do { try tx.insert(Record(id: .int(Int64(i)), fields: ["n": .int(Int64(i))]), into: users) } catch { failed += 1 }
            }
            return failed
        }
        #expect(outcome == 0)
        #expect(calls.withLock { $0 } == 2)
        #expect(try await driver.read { tx in try tx.query(Query(), in: users).map(\.id) } == (1...300).map { RecordID.int(Int64($0)) })
        // Small updates commit inline, each once; update and save still see missing records.
        for i in 1...20 {
            try await driver.write { tx in try tx.update(Record(id: .int(Int64(i)), fields: ["n": .int(Int64(-i))]), in: users) }
        }
        await #expect(throws: DepotError.self) {
            try await driver.write { tx in try tx.update(Record(id: 999, fields: [:]), in: users) }
        }
        let saved = try await driver.write { tx in [try tx.save(Record(id: 5, fields: ["n": 5]), into: users), try tx.save(Record(id: 301, fields: ["n": 301]), into: users)] }
        #expect(saved == [.updated, .inserted])
        #expect(try await driver.read { tx in try tx.count(.less("n", 0), in: users) } == 19)
        #expect(try await driver.read { tx in try tx.count(.all, in: users) } == 301)
        #expect(try await driver.integrityCheck().isEmpty)
        try await driver.close()
        let reopened = try await Self.open(dir)
        #expect(try await reopened.read { tx in try tx.get(3, from: users)?.fields["n"] } == -3)
        #expect(try await reopened.read { tx in try tx.count(.all, in: users) } == 301)
        try await reopened.close()
    }

    @Test func streamIDsKeepOrderOffsetAndLimit() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let users = self.users
        let driver = try await Self.open(dir)
        let ids = (1...1000).map { Int64(($0 * 7919) % 1000 + 1) }
        try await driver.write { tx in for i in ids { try tx.insert(Record(id: .int(i), fields: ["m": .int(i % 3)]), into: users) } }
        let shapes: [Query] = [
            Query(), Query(filter: .greater("m", 0)), Query(sort: [SortKey("id", descending: true)], offset: 10, limit: 25),
            Query(sort: [SortKey("m"), SortKey("id", descending: true)], offset: 990, limit: 50), Query(offset: 2000),
        ]
        for query in shapes {
            var streamed: [RecordID] = []
            for try await record in driver.stream(query, from: users) { streamed.append(record.id) }
            let expected = try await driver.read { tx in try tx.query(query, in: users).map(\.id) }
            #expect(streamed == expected)
        }
        let compact = try await driver.engine.readers.run {
            try driver.engine.read { tx in try tx.orderedIDs(Query(filter: .greater("m", 0)), in: users) }
        }
        guard case .ints(let held) = compact else {
            Issue.record("integer ids in id order are held as [Int64]")
            return
        }
        #expect(held.count == 667)
        #expect(held == held.sorted())
        try await driver.close()
    }
}
