import DepotCore
@testable import DepotPostgres
import Foundation
import PostgresNIO
import Testing

/// Who a write notifies (Docs/PostgresDriver.md, "Change events across processes"): a
/// listening driver registers in the schema's listeners table, and a write sends its
/// `pg_notify` only when a driver other than its own is registered.
@Suite struct PostgresListenerRegistryTests {
    @Test func aWriteNotifiesOnlyWhenAnotherDriverListens() async throws {
        let settings = try PostgresTestServer.settings(for: "feed-listeners-\(UUID().uuidString)")
        let items = try CollectionName("items")
        let alone = try await PostgresDriver(settings: settings)
        let store = try await Store(driver: alone)
        alone.deliverChanges(to: store)
        try await PostgresChangeFeedTests.waitUntilListening(alone)

        // Alone on the schema: a write announced in its own statement and a transaction whose
        // second change would be announced before COMMIT send nothing. A notification sent
        // after them by another session arrives after any they sent (commit order), so once
        // it is heard, theirs would have been.
        try await alone.write { tx in try tx.insert(Record(id: 1, fields: ["n": 1]), into: items) }
        try await alone.write { tx in
            try tx.insert(Record(id: 2, fields: ["n": 2]), into: items)
            try tx.insert(Record(id: 3, fields: ["n": 3]), into: items)
        }
        let admin = try await PostgresDriver(settings: settings)
        try Self.notify(admin, alone.feed.channel, #"{"o":"a test's sentinel","c":[]}"#)
        try await Self.waitUntilHeard(alone, 1)
        #expect(alone.feed.heard.load(ordering: .relaxed) == 1, "only the sentinel: the writes sent nothing")

        // Another driver listens: writes are sent, heard there, and come back here too.
        let other = try await PostgresDriver(settings: settings)
        let otherStore = try await Store(driver: other)
        other.deliverChanges(to: otherStore)
        try await PostgresChangeFeedTests.waitUntilListening(other)
        let changes = otherStore.changes()
        try await alone.write { tx in try tx.insert(Record(id: 4, fields: ["n": 4]), into: items) }
        let seen = try await PostgresChangeFeedTests.collect(changes) { $0.id == 4 }
        #expect(seen == [ChangeEvent(collection: items, kind: .inserted, id: 4)])
        try await Self.waitUntilHeard(alone, 2)
        #expect(alone.feed.heard.load(ordering: .relaxed) == 2, "its own write came back once")
        try await otherStore.close()
        try await store.close()
        try await admin.close()
    }

    /// A registration whose server session is gone (a process killed before it could remove
    /// it) is dropped by the next listener to start, so writers stop notifying for it.
    @Test func aListenerOfAGoneSessionIsDropped() async throws {
        let settings = try PostgresTestServer.settings(for: "feed-gone-\(UUID().uuidString)")
        let admin = try await PostgresDriver(settings: settings)
        let table = PostgresSQL.quote(settings.schema) + "." + PostgresSQL.quote(PostgresSQL.listenersTable)
        // A pid no session has (pids are positive and far below 2^31 - 1 on Linux).
        try admin.writeBlocking { tx in
            guard let tx = tx as? PostgresTransaction else { throw DepotError(.internal, "not PostgreSQL") }
            try tx.run(PostgresQuery(unsafeSQL: "INSERT INTO \(table) (origin, pid) VALUES ('gone', 2147483647)"))
        }
        #expect(try Self.origins(admin, table) == ["gone"])
        let listening = try await PostgresDriver(settings: settings)
        let store = try await Store(driver: listening)
        listening.deliverChanges(to: store)
        try await PostgresChangeFeedTests.waitUntilListening(listening)
        #expect(try Self.origins(admin, table) == [listening.feed.origin])
        try await store.close()
        try await admin.close()
    }

    /// A listener whose registration fails (here its listeners table was dropped under it)
    /// closes the connection it opened before trying again, so failed attempts leave no
    /// server session behind (a connection let go open also stops debug builds), and it
    /// subscribes once the table is back.
    @Test func aListenerThatCannotRegisterClosesItsConnection() async throws {
        let settings = try PostgresTestServer.settings(for: "feed-failing-\(UUID().uuidString)")
        let admin = try await PostgresDriver(settings: settings)
        let table = PostgresSQL.quote(settings.schema) + "." + PostgresSQL.quote(PostgresSQL.listenersTable)
        let listening = try await PostgresDriver(settings: settings)
        try admin.writeBlocking { tx in
            guard let tx = tx as? PostgresTransaction else { throw DepotError(.internal, "not PostgreSQL") }
            try tx.run(PostgresQuery(unsafeSQL: "DROP TABLE \(table)"))
        }
        let store = try await Store(driver: listening)
        listening.deliverChanges(to: store)
        var waited = 0
        while listening.feed.failedAttempts.load(ordering: .relaxed) < 3 && waited < 400 {
            try await Task.sleep(for: .milliseconds(25))
            waited += 1
        }
        #expect(listening.feed.failedAttempts.load(ordering: .relaxed) >= 3, "three failed registrations within 10 s")
        #expect(!listening.isListeningForChanges)
        // Each failed attempt's session ended its last statement with the listeners table;
        // the one failing right now may not have closed yet.
        let left = try admin.readBlocking { tx in
            guard let tx = tx as? PostgresTransaction else { throw DepotError(.internal, "not PostgreSQL") }
            let sql = SQLBuilder()
            let rows = try tx.run(sql.query("SELECT count(*) FROM pg_stat_activity WHERE starts_with(query, \(sql.text("DELETE FROM " + table)))")).rows
            return try rows.first?.decode(Int64.self)
        }
        #expect(try #require(left) <= 1, "sessions of failed attempts left open")
        // Another driver opening the schema creates the table again: the listener subscribes.
        let third = try await PostgresDriver(settings: settings)
        try await PostgresChangeFeedTests.waitUntilListening(listening)
        #expect(try Self.origins(admin, table) == [listening.feed.origin])
        try await store.close()
        try await third.close()
        try await admin.close()
    }

    /// Sends `payload` on `channel` from `driver`'s session, in a transaction of its own.
    static func notify(_ driver: PostgresDriver, _ channel: String, _ payload: String) throws {
        try driver.writeBlocking { tx in
            guard let tx = tx as? PostgresTransaction else { throw DepotError(.internal, "not PostgreSQL") }
            let sql = SQLBuilder()
            try tx.run(sql.query("SELECT pg_notify(\(sql.text(channel)), \(sql.text(payload)))"))
        }
    }

    /// The origins registered in `table`, in order.
    static func origins(_ driver: PostgresDriver, _ table: String) throws -> [String] {
        try driver.readBlocking { tx in
            guard let tx = tx as? PostgresTransaction else { throw DepotError(.internal, "not PostgreSQL") }
            return try tx.run(PostgresQuery(unsafeSQL: "SELECT origin FROM \(table) ORDER BY origin COLLATE \"C\"")).rows.map { try $0.decode(String.self) }
        }
    }

    /// Waits (up to 10 s) until `driver`'s listener has heard `count` notifications.
    static func waitUntilHeard(_ driver: PostgresDriver, _ count: Int) async throws {
        var waited = 0
        while driver.feed.heard.load(ordering: .relaxed) < count && waited < 400 {
            try await Task.sleep(for: .milliseconds(25))
            waited += 1
        }
    }
}
