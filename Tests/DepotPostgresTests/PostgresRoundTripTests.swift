import DepotCore
@testable import DepotPostgres
import Foundation
import Synchronization
import Testing

/// Round trips of a read (Docs/PostgresDriver.md, "Transactions"): a read's first statement
/// is sent without `BEGIN`, so a point read is one statement on the wire; a read that asks
/// for a second statement runs again inside `BEGIN … COMMIT`, so its statements still see
/// one snapshot.
@Suite struct PostgresRoundTripTests {
    @Test func aPointReadIsOneStatementAndALongerReadOneSnapshot() async throws {
        let settings = try PostgresTestServer.settings(for: "round-trips-\(UUID().uuidString)")
        let reader = try await PostgresDriver(settings: settings), writer = try await PostgresDriver(settings: settings)
        let items = try CollectionName("items")
        try await writer.write { tx in
            try tx.insert(Record(id: 1, fields: ["v": 0]), into: items)
            try tx.insert(Record(id: 2, fields: ["v": 0]), into: items)
        }
        // The first read caches the catalog entry and prepares the statement.
        _ = try await reader.read { tx in try tx.get(1, from: items) }
        let before = reader.statementsSent
        #expect(try await reader.read { tx in try tx.get(1, from: items) } == Record(id: 1, fields: ["v": 0]))
        #expect(reader.statementsSent - before == 1)
        // Two statements. The first run (on the caller's thread) sends nothing and learns the
        // first statement, which is sent; the second run gets its answer and stops at the
        // second statement; the run that counts, on a thread, sends BEGIN, both reads and
        // COMMIT (Docs/PostgresDriver.md, "Reads without a thread").
        let beforePair = reader.statementsSent
        let runs = Atomic<Int>(0)
        let pair = try await reader.read { tx -> [Record?] in
            let run = runs.add(1, ordering: .relaxed).newValue
            let first = try tx.get(1, from: items)
            if run == 2 {
                // Another driver commits between the two statements of the run that got the
                // first answer.
                try writer.writeBlocking { w in
                    try w.update(Record(id: 1, fields: ["v": 1]), in: items)
                    try w.update(Record(id: 2, fields: ["v": 1]), in: items)
                }
            }
            return [first, try tx.get(2, from: items)]
        }
        #expect(runs.load(ordering: .relaxed) == 3)
        #expect(pair == [Record(id: 1, fields: ["v": 1]), Record(id: 2, fields: ["v": 1])])
        #expect(reader.statementsSent - beforePair == 5)
        // A closure that catches the second statement's error and returns anyway: that value
        // is discarded, and the run inside a transaction gives the answer.
        let answer = try await reader.read { tx -> String in
            _ = try tx.get(1, from: items)
            do {
                _ = try tx.get(2, from: items)
                return "both read"
            } catch {
                return "second refused"
            }
        }
        #expect(answer == "both read")
        // Writes still begin at once: a failed write leaves nothing, as before.
        await #expect(throws: DepotError.self) {
            try await writer.write { tx in
                try tx.update(Record(id: 1, fields: ["v": 2]), in: items)
                throw DepotError(.invalidValue, "roll back")
            }
        }
        #expect(try await reader.read { tx in try tx.get(1, from: items) } == Record(id: 1, fields: ["v": 1]))
        try await reader.close()
        try await writer.close()
    }

    /// A partial update does not read the record: `BEGIN`, one `UPDATE … RETURNING` that
    /// also sends the change feed's `pg_notify` (the transaction's first change announces
    /// itself), and `COMMIT` through the driver, the `UPDATE` alone through a store (Docs/PostgresDriver.md,
    /// "Partial updates" and "Change events across processes"). A transaction of two writes
    /// sends the second one's notification before `COMMIT`.
    @Test func aPartialUpdateIsOneStatementInsideItsTransaction() async throws {
        let settings = try PostgresTestServer.settings(for: "partial-update-\(UUID().uuidString)")
        let driver = try await PostgresDriver(settings: settings)
        let items = try CollectionName("items")
        try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["v": 0, "w": 1.5]), into: items) }
        // The first update of each shape prepares its statement.
        try await driver.write { tx in _ = try tx.update(1, applying: FieldChange(set: ["v": 1]), in: items) }
        var before = driver.statementsSent
        #expect(try await driver.write { tx in try tx.update(1, applying: FieldChange(set: ["v": 2]), in: items) })
        #expect(driver.statementsSent - before == 3)
        #expect(try await driver.read { tx in try tx.get(1, from: items) } == Record(id: 1, fields: ["v": 2, "w": 1.5]))
        let store = try await Store(driver: driver)
        let collection = store.collection(items)
        try await collection.update(1, FieldChange(set: ["v": 3]))
        // Through a store, a transaction of that one update sends it alone
        // (PostgresOneWriteTests).
        before = driver.statementsSent
        #expect(try await collection.update(1, FieldChange(set: ["v": 4])))
        #expect(driver.statementsSent - before == 1)
        #expect(try await collection.update(2, FieldChange(set: ["v": 4])) == false)
        #expect(try await collection.get(1) == Record(id: 1, fields: ["v": 4, "w": 1.5]))
        // Two writes: the first statement announces itself, the second change is announced
        // before COMMIT (warm-up first, so that no statement is prepared in the count).
        for round in 0..<2 {
            before = driver.statementsSent
            try await driver.write { tx in
                _ = try tx.update(1, applying: FieldChange(set: ["v": .int(Int64(5 + round))]), in: items)
                try tx.save(Record(id: 2, fields: ["v": .int(Int64(round))]), into: items)
            }
            if round == 1 { #expect(driver.statementsSent - before == 5) }
        }
        try await store.close()
    }

    /// A query of 3,000 records hands every one to the closure, in order; a closure that runs
    /// another statement of the transaction while it is called gets its result; one that
    /// stops early or throws leaves the connection in order for the next statement, and its
    /// own error is what the caller sees.
    @Test func aQueryClosureMayRunStatementsStopOrThrow() async throws {
        let settings = try PostgresTestServer.settings(for: "streamed-rows-\(UUID().uuidString)")
        let driver = try await PostgresDriver(settings: settings)
        let items = try CollectionName("items")
        try await driver.write { tx in
            for i in 1...3_000 { try tx.insert(Record(id: .int(Int64(i)), fields: ["n": .int(Int64(i)), "pad": .string(String(repeating: "x", count: 200))]), into: items) }
        }
        let (ids, nested, afterStop) = try await driver.write { tx -> ([Int64], [Int64], Record?) in
            var ids: [Int64] = []
            var nested: [Int64] = []
            try tx.forEach(Query(), in: items) { record in
                if case .int(let id) = record.id { ids.append(id) }
                // Another statement of the same transaction, from inside the query's closure.
                if ids.count % 1_000 == 0, let other = try tx.get(.int(Int64(ids.count / 1_000)), from: items), case .int(let n) = other.id { nested.append(n) }
                return true
            }
            var seen = 0
            try tx.forEach(Query(), in: items) { _ in
                seen += 1
                return seen < 5
            }
            return (ids, nested, try tx.get(3_000, from: items))
        }
        #expect(ids == Array(1...3_000))
        #expect(nested == [1, 2, 3])
        #expect(afterStop?.fields["n"] == .int(3_000))
        struct Stop: Error, Equatable {}
        await #expect(throws: Stop.self) {
            try await driver.read { tx in try tx.forEach(Query(), in: items) { record in if record.id == 10 { throw Stop() }; return true } }
        }
        #expect(try await driver.read { tx in try tx.count(.all, in: items) } == 3_000)
        try await driver.close()
    }
}

