import DepotConformance
import DepotCore
@testable import DepotPostgres
import Foundation
import PostgresNIO
import Testing

/// What the conformance suite cannot see: two drivers on one schema (as two processes
/// are), serialization failures retried, passwords kept out of every text, store strings.
@Suite struct PostgresDriverTests {
    /// Two drivers increment one counter at once: SERIALIZABLE makes one of each clashing
    /// pair fail, the driver runs its closure again, and no increment is lost. A writer that
    /// keeps losing to the other gives up after its attempts with the typed `.conflict` (the
    /// documented outcome), and the test then runs that increment again, as an application
    /// would.
    @Test func concurrentWritersOfTwoDriversLoseNothing() async throws {
        let settings = try PostgresTestServer.settings(for: "twowriters-\(UUID().uuidString)")
        let a = try await PostgresDriver(settings: settings), b = try await PostgresDriver(settings: settings)
        let counters = try CollectionName("counters")
        try await a.write { tx in try tx.insert(Record(id: 1, fields: ["n": 0]), into: counters) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for driver in [a, b] {
                group.addTask {
                    var done = 0
                    var conflicts = 0
                    while done < 40 {
                        do {
                            try await driver.write { tx in
                                let n = try tx.get(1, from: counters)?.fields["n"]?.intValue ?? -1_000
                                try tx.update(Record(id: 1, fields: ["n": .int(n + 1)]), in: counters)
                            }
                            done += 1
                        } catch let error as DepotError where error.code == .conflict {
                            conflicts += 1
                            try #require(conflicts < 100, "a writer gave up 100 times")
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let final = try await a.read { tx in try tx.get(1, from: counters)?.fields["n"] }
        #expect(final == .int(80))
        print("postgres: \(a.serializationRetries + b.serializationRetries) write transactions ran again after a serialization failure")
        try await a.close()
        try await b.close()
    }

    /// A driver whose catalog cache predates another driver's new column still replaces
    /// whole records and finds the new field in queries.
    @Test func anotherDriversNewColumnIsSeen() async throws {
        let settings = try PostgresTestServer.settings(for: "columns-\(UUID().uuidString)")
        let a = try await PostgresDriver(settings: settings), b = try await PostgresDriver(settings: settings)
        let items = try CollectionName("items")
        try await a.write { tx in try tx.insert(Record(id: 1, fields: ["n": 1]), into: items) }
        _ = try await a.read { tx in try tx.get(1, from: items) }
        try await b.write { tx in try tx.update(Record(id: 1, fields: ["n": 2, "extra": "x"]), in: items) }
        #expect(try await a.read { tx in try tx.count(.equal("extra", "x"), in: items) } == 1)
        try await a.write { tx in try tx.update(Record(id: 1, fields: ["n": 3]), in: items) }
        #expect(try await b.read { tx in try tx.get(1, from: items) } == Record(id: 1, fields: ["n": 3]))
        try await b.write { tx in try tx.save(Record(id: 1, fields: ["n": 4, "more": true]), into: items) }
        try await a.write { tx in try tx.save(Record(id: 1, fields: ["n": 5]), into: items) }
        #expect(try await b.read { tx in try tx.get(1, from: items) } == Record(id: 1, fields: ["n": 5]))
        try await a.close()
        try await b.close()
    }

    /// A full-record write checks that the table still has the columns the catalog entry
    /// lists by the table's OID and column count (Docs/PostgresDriver.md, "Catalog cache"): one
    /// statement when nothing changed, the field a record lacks cleared when another driver
    /// added its column, and a column another program dropped taken out of the entry.
    @Test func fullWritesCheckColumnsByTheTablesShape() async throws {
        let settings = try PostgresTestServer.settings(for: "shape-\(UUID().uuidString)")
        let a = try await PostgresDriver(settings: settings), b = try await PostgresDriver(settings: settings)
        let store = try await Store(driver: a)
        let items = try CollectionName("items")
        let aItems = try store.collection("items")
        try await aItems.insert(Record(id: 1, fields: ["n": 1, "m": 1]))
        #expect(a.cachedMeta(items)?.shape == nil, "a made the table: its shape is not read yet")
        // The first full write reads it once (and prepares the statements); each of the next
        // ones is one statement (sent alone: Docs/PostgresDriver.md, "Transactions").
        try await aItems.update(Record(id: 1, fields: ["n": 2, "m": 2]))
        try await aItems.save(Record(id: 1, fields: ["n": 2, "m": 2]))
        #expect(a.cachedMeta(items)?.shape != nil)
        var before = a.statementsSent
        try await aItems.update(Record(id: 1, fields: ["n": 3, "m": 3]))
        try await aItems.save(Record(id: 1, fields: ["n": 4, "m": 4]))
        #expect(a.statementsSent - before == 2)
        // b adds a column a's entry does not list: a's check fails, and its update clears it.
        try await b.write { tx in try tx.update(Record(id: 1, fields: ["n": 5, "extra": "x"]), in: items) }
        try await aItems.update(Record(id: 1, fields: ["n": 6]))
        #expect(try await b.read { tx in try tx.get(1, from: items) } == Record(id: 1, fields: ["n": 6]))
        try await b.write { tx in try tx.save(Record(id: 1, fields: ["n": 7, "more": true]), into: items) }
        try await aItems.save(Record(id: 1, fields: ["n": 8]))
        #expect(try await b.read { tx in try tx.get(1, from: items) } == Record(id: 1, fields: ["n": 8]))
        // Another program drops a column a's entry lists: the column count stays (dropped
        // columns count), so the update names the column, fails with undefined_column and
        // runs again with the entry read anew.
        let table = PostgresSQL.quote(settings.schema) + "." + PostgresSQL.quote(items.rawValue)
        try await b.write { tx in
            guard let tx = tx as? PostgresTransaction else { throw DepotError(.internal, "not PostgreSQL") }
            try tx.run(PostgresQuery(unsafeSQL: "ALTER TABLE \(table) DROP COLUMN \"m\""))
        }
        let retries = a.serializationRetries
        try await aItems.update(Record(id: 1, fields: ["n": 9]))
        #expect(a.serializationRetries == retries + 1)
        #expect(try await b.read { tx in try tx.get(1, from: items) } == Record(id: 1, fields: ["n": 9]))
        // The entry read anew counts the dropped column in the table's shape: one statement.
        before = a.statementsSent
        try await aItems.update(Record(id: 1, fields: ["n": 10]))
        #expect(a.statementsSent - before == 1)
        // The field comes back in a new column; the shape is read once more.
        try await aItems.update(Record(id: 1, fields: ["n": 11, "m": 11]))
        try await aItems.update(Record(id: 1, fields: ["n": 12]))
        #expect(try await b.read { tx in try tx.get(1, from: items) } == Record(id: 1, fields: ["n": 12]))
        try await store.close()
        try await b.close()
    }

    /// Opening a driver reads every catalog entry in one statement (Docs/PostgresDriver.md,
    /// "Catalog cache"): its transactions send no catalog statement for collections that
    /// exist; after the cache is emptied, a transaction's first lookup reads it whole
    /// again; a missing collection is looked up when asked for, and found once another
    /// driver creates it.
    @Test func openingReadsTheWholeCatalog() async throws {
        let settings = try PostgresTestServer.settings(for: "catalog-\(UUID().uuidString)")
        let a = try await PostgresDriver(settings: settings)
        let items = try CollectionName("items"), other = try CollectionName("other")
        let absent = try CollectionName("absent")
        try await a.write { tx in
            try tx.insert(Record(id: 1, fields: ["n": 1]), into: items)
            try tx.insert(Record(id: "x", fields: ["s": "y"]), into: other)
        }
        let b = try await PostgresDriver(settings: settings)
        #expect(b.catalogReads.current == 1)
        #expect(b.cachedMeta(items)?.idKind == .int)
        #expect(b.cachedMeta(other)?.idKind == .string)
        let found = try await b.write { tx in [try tx.get(1, from: items), try tx.get("x", from: other)] }
        #expect(found == [Record(id: 1, fields: ["n": 1]), Record(id: "x", fields: ["s": "y"])])
        #expect(try await b.read { tx in try tx.get("x", from: other) } == Record(id: "x", fields: ["s": "y"]))
        #expect(b.catalogReads.current == 1)
        // Once the cache is emptied (another program dropped a column b's entry lists, so
        // b's update fails and runs again), the run's first lookup reads the whole catalog
        // again, and a collection it did not list is missing for the rest of that run.
        let table = PostgresSQL.quote(settings.schema) + "." + PostgresSQL.quote(items.rawValue)
        try await a.write { tx in
            guard let tx = tx as? PostgresTransaction else { throw DepotError(.internal, "not PostgreSQL") }
            try tx.run(PostgresQuery(unsafeSQL: "ALTER TABLE \(table) DROP COLUMN \"n\""))
        }
        let retries = b.serializationRetries
        let missing = try await b.write { tx in
            try tx.update(Record(id: 1, fields: ["n": 2]), in: items)
            return try tx.get(1, from: try CollectionName("also_absent"))
        }
        #expect(missing == nil)
        #expect(b.serializationRetries == retries + 1)
        #expect(b.catalogReads.current == 2)
        // Missing: looked up when asked for (another process may create it) ...
        #expect(try await b.read { tx in try tx.get(2, from: absent) } == nil)
        #expect(b.catalogReads.current == 3)
        // ... and found by the next transaction that asks once another driver has.
        try await a.write { tx in try tx.insert(Record(id: 2, fields: ["m": 2]), into: absent) }
        #expect(try await b.read { tx in try tx.get(2, from: absent) } == Record(id: 2, fields: ["m": 2]))
        try await b.write { tx in try tx.insert(Record(id: 3, fields: ["m": 3]), into: absent) }
        #expect(try await a.read { tx in try tx.count(.all, in: absent) } == 2)
        try await a.close()
        try await b.close()
    }

    @Test func passwordsAppearNowhere() async throws {
        let server = try PostgresTestServer.server()
        let password = try #require(server.password, "the test server has a password (scripts/postgres-cluster makes one)")
        #expect(!server.description.contains(password))
        #expect(try !StoreLocation(server.secretStoreString).description.contains(password))
        var wrong = server
        wrong.password = "not-the-password-\(UUID().uuidString)"
        do {
            _ = try await PostgresDriver(settings: wrong)
            Issue.record("a wrong password was accepted")
        } catch let error as DepotError {
            #expect(error.code == .remote)
            let texts = [error.description, error.debugDescription, String(describing: error)]
            #expect(texts.allSatisfy { !$0.contains(wrong.password ?? "") && !$0.contains(password) }, "\(texts)")
        }
        let driver = try await PostgresDriver(settings: try PostgresTestServer.settings(for: "explain-\(UUID().uuidString)"))
        let items = try CollectionName("items")
        try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["secret": "s3cr3t-value"]), into: items) }
        let plan = try await driver.read { tx in try tx.explain(Query(filter: .equal("secret", "s3cr3t-value")), in: items) }
        #expect(plan.backend == "postgres" && plan.filterInEngine && plan.sortInEngine && plan.pagingInEngine)
        #expect(plan.detail.contains("SELECT") && plan.detail.contains("plan:"))
        #expect(!plan.description.contains("s3cr3t-value") && !plan.description.contains(password))
        try await driver.close()
    }

    @Test func storeStrings() throws {
        let s = try PostgresSettings(StoreLocation("postgresql://ann:p%40ss@[::1]:6543/db%20x?schema=app&durability=normal&sslmode=require&pool=3&retries=2"))
        #expect(s.user == "ann" && s.password == "p@ss" && s.host == "::1" && s.port == 6543 && s.database == "db x")
        #expect(s.schema == "app" && s.durability == .normal && s.tls == .require && s.poolSize == 3 && s.attempts == 3)
        #expect(!s.description.contains("p@ss") && s.description.contains("ann:***@"))
        let back = try PostgresSettings(StoreLocation(s.secretStoreString))
        #expect(back.password == "p@ss" && back.database == "db x" && back.host == "::1")
        for bad in ["postgres://host/db", "postgres://u@host", "postgres://u@host:0/db", "postgres://u@h/db?schema=a-b", "postgres://u@h/db?bogus=1", "postgres:db", "mysql://u:s3cret@h/db"] {
            #expect(throws: DepotError.self, "\(bad)") { try PostgresSettings(StoreLocation(bad)) }
        }
        do {
            _ = try PostgresSettings(StoreLocation("mysql://u:s3cret@h/db"))
        } catch let error as DepotError {
            #expect(error.message.contains("postgres:") && !error.message.contains("s3cret"), "\(error.message)")
        }
    }
}
