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
        let pid = try driver.writeBlocking { tx in try PostgresReadWithoutThreadTests.serverPid(tx) }
        try await PostgresReadWithoutThreadTests.endServerProcess(pid, settings)
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

    /// A write goes without a thread only on the store's word that every run of its closure
    /// asks for the same write (``WriteTransaction/nextCallEndsTransaction(sameOnEveryRun:)``):
    /// a closure that asks for a different write on each run, without that word, runs on the
    /// write thread and stores its write once; with the word broken, the write committed by
    /// the first run stands, the closure is not run a third time, and the error says so.
    @Test func aWriteGoesWithoutAThreadOnlyWhenEveryRunAsksTheSame() async throws {
        let settings = try PostgresTestServer.settings(for: "write-no-thread-same-\(UUID().uuidString)")
        let driver = try await PostgresDriver(settings: settings)
        let store = try await Store(driver: driver)
        let items = try store.collection("items")
        try await items.insert(Record(id: 1, fields: ["v": 1]))
        try await items.insert(Record(id: 2, fields: ["v": 2]))
        let start = driver.writesWithoutThread
        let runs = Runs()

        // No word: each run draws the next id; on the thread, one run, one record.
        try await driver.write { tx in
            let id = 100 + runs.next()
            tx.nextCallEndsTransaction()
            try tx.write(Record(id: .int(id), fields: ["v": 0]), as: .insert, into: items.name)
        }
        #expect(driver.writesWithoutThread == start)
        #expect(try await items.count() == 3, "stored once")

        // The word given and broken: the first run's write committed; the second asked for
        // another and was refused; nothing ran a third time.
        runs.reset()
        do {
            try await driver.write { tx in
                let id = 200 + runs.next()
                tx.nextCallEndsTransaction(sameOnEveryRun: true)
                try tx.write(Record(id: .int(id), fields: ["v": 0]), as: .insert, into: items.name)
            }
            Issue.record("a write whose runs asked for different writes succeeded")
        } catch let error as DepotError {
            #expect(error.code == .internal)
        }
        #expect(runs.count == 2)
        #expect(try await items.get(201) != nil)
        #expect(try await items.count() == 4, "stored once")

        // A model's write through a repository gives no word (its encoding runs inside the
        // closure): on the thread, whatever its encoding draws.
        let repository = try await store.repository(Nonced.self)
        try await repository.insert(Nonced(id: 1, v: 1))
        let before = driver.writesWithoutThread
        try await repository.update(Nonced(id: 1, v: 2))
        #expect(driver.writesWithoutThread == before)
        #expect(try await repository.find(id: 1)?.v == 2)
        // A record's write through a collection gives it.
        try await items.update(1, FieldChange(set: ["v": 5]))
        #expect(driver.writesWithoutThread == before + 1)
        try await store.close()
    }

    /// Counts a closure's runs.
    final class Runs: @unchecked Sendable {
        // @unchecked: `value` is read and written with `lock` held.
        private let lock = NSLock()
        private var value: Int64 = 0
        var count: Int64 { lock.withLock { value } }
        /// Counts a run; its number.
        func next() -> Int64 {
            lock.withLock {
                value += 1
                return value
            }
        }
        func reset() { lock.withLock { value = 0 } }
    }

    /// A model whose encoding differs on every call: a fresh nonce beside its fields.
    struct Nonced: Model {
        var id: Int64
        var v: Int
        enum CodingKeys: String, CodingKey { case id, v, nonce }
        init(id: Int64, v: Int) {
            self.id = id
            self.v = v
        }
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decode(Int64.self, forKey: .id)
            v = try container.decode(Int.self, forKey: .v)
        }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encode(v, forKey: .v)
            try container.encode(UUID().uuidString, forKey: .nonce)
        }
    }
}
