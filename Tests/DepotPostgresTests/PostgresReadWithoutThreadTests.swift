import DepotCore
@testable import DepotPostgres
import Foundation
import PostgresNIO
import Testing

/// Reads without a thread (Docs/PostgresDriver.md, "Reads without a thread"): an async read
/// of one statement on an idle connection sends it and suspends, no thread waiting; any
/// other read runs on one of the driver's threads, with the same answers.
@Suite struct PostgresReadWithoutThreadTests {
    @Test func aReadOfOneStatementRunsWithoutAThreadAndAnyOtherOnOne() async throws {
        let settings = try PostgresTestServer.settings(for: "no-thread-\(UUID().uuidString)")
        let driver = try await PostgresDriver(settings: settings)
        let items = try CollectionName("items")
        try await driver.write { tx in
            for n in 1...20 { try tx.insert(Record(id: .int(Int64(n)), fields: ["n": .int(Int64(21 - n))]), into: items) }
        }
        // The first read loads the catalog entry (two statements: on a thread).
        #expect(try await driver.read { tx in try tx.get(1, from: items) } == Record(id: 1, fields: ["n": 20]))
        let start = driver.readsWithoutThread
        let sent = driver.statementsSent

        #expect(try await driver.read { tx in try tx.get(3, from: items) } == Record(id: 3, fields: ["n": 18]))
        #expect(try await driver.read { tx in try tx.get(99, from: items) } == nil)
        #expect(driver.readsWithoutThread == start + 2)
        #expect(driver.statementsSent - sent == 2, "one statement each, prepared on the connection by the first read")

        // A query with a low limit is one statement whose answer is small.
        let lowest = Query(sort: [SortKey("n")], limit: 3)
        #expect(try await driver.read { tx in try tx.query(lowest, in: items).map(\.id) } == [20, 19, 18])
        #expect(try await driver.read { tx in try tx.count(Field("n") > 10, in: items) } == 10)
        #expect(driver.readsWithoutThread == start + 4)

        // A query without a limit may be large: on a thread, its rows read as they arrive.
        let everything = try await driver.read { tx in try tx.query(Query(), in: items) }
        #expect(everything.map(\.id) == (1...20).map { RecordID.int(Int64($0)) })
        // Two statements: on a thread, inside BEGIN.
        let pair = try await driver.read { tx in [try tx.get(1, from: items), try tx.get(2, from: items)] }
        #expect(pair == [Record(id: 1, fields: ["n": 20]), Record(id: 2, fields: ["n": 19])])
        #expect(driver.readsWithoutThread == start + 4)

        // What the closure throws after its statement is the read's error; a value it
        // returns after catching the statement's own failure stands as it would on a thread.
        await #expect(throws: DepotError.self) {
            try await driver.read { tx in
                _ = try tx.get(1, from: items)
                throw DepotError(.invalidValue, "the closure's own error")
            }
        }
        #expect(driver.readsWithoutThread == start + 5)

        // The same answers as the blocking path for the same reads.
        let blocking = try driver.readBlocking { tx in try tx.query(lowest, in: items) }
        #expect(try await driver.read { tx in try tx.query(lowest, in: items) } == blocking)
        try await driver.close()
    }

    /// A table another process dropped under this process's cached catalog: the statement
    /// sent without a thread fails as a catalog change, and the read runs again on a thread
    /// with the catalog read anew, as a read on a thread would.
    @Test func aTableAnotherProcessDroppedIsReadAgainOnAThread() async throws {
        let settings = try PostgresTestServer.settings(for: "no-thread-drop-\(UUID().uuidString)")
        let reader = try await PostgresDriver(settings: settings), other = try await PostgresDriver(settings: settings)
        let items = try CollectionName("items")
        try await other.write { tx in try tx.insert(Record(id: 1, fields: ["n": 1]), into: items) }
        #expect(try await reader.read { tx in try tx.get(1, from: items) } == Record(id: 1, fields: ["n": 1]))
        #expect(try await reader.read { tx in try tx.get(1, from: items) } == Record(id: 1, fields: ["n": 1]))
        let start = reader.readsWithoutThread
        #expect(try await other.write { tx in try tx.dropCollection(items) })
        #expect(try await reader.read { tx in try tx.get(1, from: items) } == nil)
        #expect(reader.readsWithoutThread == start, "settled on a thread")
        // Created again by the other process: found again.
        try await other.write { tx in try tx.insert(Record(id: 2, fields: ["n": 2]), into: items) }
        #expect(try await reader.read { tx in try tx.get(2, from: items) } == Record(id: 2, fields: ["n": 2]))
        try await reader.close()
        try await other.close()
    }

    /// Connections ended by the server while idle in the pool: a read without a thread on
    /// one of them fails with `.remote` (or, when the close was seen first, runs on a new
    /// connection); it never waits forever, and the reads after it get new connections.
    @Test func aReadOnAnEndedConnectionIsATypedErrorAndThePoolRecovers() async throws {
        let settings = try PostgresTestServer.settings(for: "no-thread-ended-\(UUID().uuidString)")
        let driver = try await PostgresDriver(settings: settings)
        let items = try CollectionName("items")
        let one = Record(id: 1, fields: ["n": 1])
        try await driver.write { tx in try tx.insert(one, into: items) }
        #expect(try await driver.read { tx in try tx.get(1, from: items) } == one)
        #expect(try await driver.read { tx in try tx.get(1, from: items) } == one)
        // The read connection's server process ends (only this driver's: other tests share
        // the database).
        let pid = try driver.readBlocking { tx in try Self.serverPid(tx) }
        try await Self.endServerProcess(pid, settings)
        do {
            #expect(try await driver.read { tx in try tx.get(1, from: items) } == one)
        } catch let error as DepotError {
            #expect(error.code == .remote, "a lost connection is .remote: \(error)")
        }
        for _ in 0..<3 { #expect(try await driver.read { tx in try tx.get(1, from: items) } == one) }
        try await driver.close()
    }

    /// The process id of the server session `tx` runs on.
    static func serverPid(_ tx: any ReadTransaction) throws -> Int64 {
        guard let tx = tx as? PostgresTransaction, let row = try tx.run(PostgresQuery(unsafeSQL: "SELECT pg_backend_pid()::bigint")).rows.first else {
            throw DepotError(.internal, "no backend pid")
        }
        return try row.decode(Int64.self)
    }

    /// Ends server process `pid` with `pg_terminate_backend` from a driver of its own and
    /// waits (up to 10 s) until it is gone: the function only signals the process, and
    /// until it has ended, a statement may still be answered on its connection and the next
    /// one fail. Once it returns, only the next statement on that connection can meet it.
    static func endServerProcess(_ pid: Int64, _ settings: PostgresSettings) async throws {
        let admin = try await PostgresDriver(settings: settings)
        let ended = try admin.readBlocking { tx -> Bool in
            let sql = SQLBuilder()
            guard let tx = tx as? PostgresTransaction, let row = try tx.run(sql.query("SELECT pg_terminate_backend(\(sql.int(pid))::int)")).rows.first else {
                throw DepotError(.internal, "no answer")
            }
            return try row.decode(Bool.self)
        }
        #expect(ended)
        var waited = 0
        while try sessions(withPid: pid, admin) > 0 && waited < 400 {
            try await Task.sleep(for: .milliseconds(25))
            waited += 1
        }
        #expect(try sessions(withPid: pid, admin) == 0, "the ended server process gone within 10 s")
        try await admin.close()
    }

    /// How many server sessions have process id `pid`, as `driver` sees them.
    static func sessions(withPid pid: Int64, _ driver: PostgresDriver) throws -> Int64 {
        try driver.readBlocking { tx in
            let sql = SQLBuilder()
            guard let tx = tx as? PostgresTransaction, let row = try tx.run(sql.query("SELECT count(*) FROM pg_stat_activity WHERE pid = \(sql.int(pid))::int")).rows.first else {
                throw DepotError(.internal, "no answer")
            }
            return try row.decode(Int64.self)
        }
    }
}
