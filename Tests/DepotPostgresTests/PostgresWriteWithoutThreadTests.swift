import DepotCore
@testable import DepotPostgres
import Foundation
import PostgresNIO
import Testing

/// Writes without a thread (Docs/PostgresDriver.md, "Transactions"): an async write of one
/// statement that runs on its own, on an idle write connection while no other write of the
/// driver runs, sends it and suspends, no thread waiting; any other write runs on the
/// driver's write thread, with the same outcome.
@Suite struct PostgresWriteWithoutThreadTests {
    @Test func aWriteOfOneStatementRunsWithoutAThreadAndAnyOtherOnOne() async throws {
        let settings = try PostgresTestServer.settings(for: "write-no-thread-\(UUID().uuidString)")
        let driver = try await PostgresDriver(settings: settings)
        let store = try await Store(driver: driver)
        let items = try store.collection("items")
        // The first insert creates the table (on a thread); the full writes after it read the
        // table's shape once (on a thread too); each kind of write then prepares its
        // statement on the write connection.
        try await items.insert(Record(id: 1, fields: ["v": 1]))
        try await items.insert(Record(id: 5, fields: ["v": 5]))
        try await items.update(Record(id: 1, fields: ["v": 1]))
        try await items.save(Record(id: 1, fields: ["v": 1]))
        try await items.update(1, FieldChange(set: ["v": 1]))
        let start = driver.writesWithoutThread
        let sent = driver.statementsSent

        try await items.insert(Record(id: 2, fields: ["v": 2]))
        try await items.update(Record(id: 2, fields: ["v": 3]))
        #expect(try await items.save(Record(id: 3, fields: ["v": 3])) == .inserted)
        #expect(try await items.update(2, FieldChange(set: ["v": 4])))
        #expect(try await items.update(99, FieldChange(set: ["v": 4])) == false)
        #expect(driver.writesWithoutThread == start + 5)
        #expect(driver.statementsSent - sent == 5, "one statement each")
        #expect(try await items.get(2) == Record(id: 2, fields: ["v": 4]))
        #expect(try await items.get(3) == Record(id: 3, fields: ["v": 3]))
        #expect(try await items.get(99) == nil)

        // A duplicate insert: its one statement changes nothing; the typed error, nothing stored.
        let before = driver.writesWithoutThread
        await #expect(throws: DepotError.self) { try await items.insert(Record(id: 2, fields: ["v": 0])) }
        #expect(try await items.get(2) == Record(id: 2, fields: ["v": 4]))

        // A full update of a missing record changes nothing and then reads the catalog entry
        // again: on a thread, from the start, with the same error.
        do {
            try await items.update(Record(id: 98, fields: ["v": 0]))
            Issue.record("a missing record was updated")
        } catch let error as DepotError {
            #expect(error.code == .notFound)
        }
        #expect(driver.writesWithoutThread == before + 1, "only the duplicate insert settled without a thread")
        #expect(try await items.get(98) == nil)

        // Two writes in one transaction: on a thread, inside BEGIN, both or neither.
        try await store.write { tx in
            try tx.insert(Record(id: 10, fields: ["v": 10]), into: items.name)
            try tx.insert(Record(id: 11, fields: ["v": 11]), into: items.name)
        }
        await #expect(throws: DepotError.self) {
            try await store.write { tx in
                try tx.insert(Record(id: 12, fields: ["v": 12]), into: items.name)
                try tx.insert(Record(id: 10, fields: ["v": 0]), into: items.name)
            }
        }
        #expect(driver.writesWithoutThread == before + 1)
        #expect(try await items.count() == 6)
        #expect(try await items.get(12) == nil)
        try await store.close()
    }

    /// While a write of the driver runs on a thread, an async write does not run beside it:
    /// it goes to the write thread and waits there, and runs once the first has committed.
    @Test func aWriteWaitsForTheDriversRunningWrite() async throws {
        let settings = try PostgresTestServer.settings(for: "write-no-thread-gate-\(UUID().uuidString)")
        let driver = try await PostgresDriver(settings: settings)
        let store = try await Store(driver: driver)
        let items = try store.collection("items")
        try await items.insert(Record(id: 1, fields: ["v": 0]))
        try await items.insert(Record(id: 2, fields: ["v": 0]))
        try await items.update(1, FieldChange(set: ["v": 1]))
        // Two idle write connections: only the gate keeps the second write from running
        // on the one the first does not use.
        let one = try driver.pool.acquire(forWrites: true), two = try driver.pool.acquire(forWrites: true)
        driver.pool.release(one)
        driver.pool.release(two)
        let start = driver.writesWithoutThread
        let inside = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let first = Thread {
            _ = try? driver.writeBlocking { tx in
                try tx.update(1, applying: FieldChange(set: ["v": 2]), in: items.name)
                inside.signal()
                release.wait()
                return true
            }
        }
        first.start()
        inside.wait()
        // Another record: nothing in the server would hold the second write back.
        let second = Task { try await items.update(2, FieldChange(set: ["v": 3])) }
        // Time for the second write to try (it cannot run: the first holds the driver's
        // write gate).
        try await Task.sleep(nanoseconds: 200_000_000)
        #expect(driver.writesWithoutThread == start, "the second write ran beside the first")
        #expect(try await items.get(2) == Record(id: 2, fields: ["v": 0]))
        release.signal()
        #expect(try await second.value)
        #expect(driver.writesWithoutThread == start, "the second write went to the write thread")
        #expect(try await items.get(1) == Record(id: 1, fields: ["v": 2]))
        #expect(try await items.get(2) == Record(id: 2, fields: ["v": 3]))
        try await store.close()
    }

    /// The write connection's server process ended while idle: a write without a thread on
    /// it fails with `.remote` (or, when the close was seen first, runs on a new connection);
    /// it is never run a second time, and the writes after it get a new connection.
    @Test func aWriteOnAnEndedConnectionIsATypedErrorAndThePoolRecovers() async throws {
        let settings = try PostgresTestServer.settings(for: "write-no-thread-ended-\(UUID().uuidString)")
        let driver = try await PostgresDriver(settings: settings)
        let store = try await Store(driver: driver)
        let items = try store.collection("items")
        try await items.insert(Record(id: 1, fields: ["n": 0]))
        try await items.update(1, FieldChange(set: ["n": 1]))
        let pid = try driver.writeBlocking { tx -> Int64 in
            guard let tx = tx as? PostgresTransaction, let row = try tx.run(PostgresQuery(unsafeSQL: "SELECT pg_backend_pid()::bigint")).rows.first else {
                throw DepotError(.internal, "no backend pid")
            }
            return try row.decode(Int64.self)
        }
        let admin = try await PostgresDriver(settings: settings)
        let ended = try admin.readBlocking { tx -> Bool in
            let sql = SQLBuilder()
            guard let tx = tx as? PostgresTransaction, let row = try tx.run(sql.query("SELECT pg_terminate_backend(\(sql.int(pid))::int)")).rows.first else {
                throw DepotError(.internal, "no answer")
            }
            return try row.decode(Bool.self)
        }
        #expect(ended)
        try await admin.close()
        var applied = 1
        do {
            #expect(try await items.update(1, FieldChange(set: ["n": 2])))
            applied = 2
        } catch let error as DepotError {
            #expect(error.code == .remote, "a lost connection is .remote: \(error)")
        }
        // The connection was gone before the statement was sent: nothing of a failed write
        // was stored.
        #expect(try await items.get(1) == Record(id: 1, fields: ["n": .int(Int64(applied))]))
        for n in 3...5 { #expect(try await items.update(1, FieldChange(set: ["n": .int(Int64(n))]))) }
        #expect(try await items.get(1) == Record(id: 1, fields: ["n": 5]))
        try await store.close()
    }
}
