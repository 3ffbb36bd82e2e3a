import DepotCore
@testable import DepotSQLite
import Foundation
import Logging
import Testing

/// Raw SQL (Docs/SQLiteDriver.md, "Raw SQL"): statements of the caller's with bound
/// parameters, inside Depot's transactions, under the authorizer's refusals.
@Suite struct SQLiteRawSQLTests {
    let books: CollectionName
    init() throws { books = try CollectionName("books") }

    /// A store over a new file holding three books (one with a unique ISBN constraint).
    func makeStore(_ dir: ScratchDirectory, durability: Durability = .full) async throws -> Store {
        let store = try await Store(driver: try await SQLiteDriver(path: dir.store, durability: durability))
        try await store.write { tx in
            try tx.prepare(CollectionSchema(name: self.books, idKind: .int, uniqueConstraints: [UniqueConstraint(["isbn"])]))
            try tx.insert(Record(id: 1, fields: ["title": "Dune", "year": 1965, "isbn": "a", "sf": true, "tags": ["x"]]), into: self.books)
            try tx.insert(Record(id: 2, fields: ["title": "Emma", "year": 1815, "isbn": "b"]), into: self.books)
            try tx.insert(Record(id: 3, fields: ["title": "Solaris", "year": 1961, "isbn": "c"]), into: self.books)
        }
        return store
    }

    @Test func selectsWithPositionalAndNumberedParameters() async throws {
        let dir = try ScratchDirectory()
        let store = try await makeStore(dir)
        defer { Task { try await store.close() } }
        let result = try await store.sql("SELECT id, title, year FROM books WHERE year >= ? AND title <> ? ORDER BY year", [1900, "Solaris"])
        #expect(result.columns == ["id", "title", "year"])
        #expect(result.rows.map(\.values) == [[1, "Dune", 1965]])
        #expect(result.changes == 0)
        #expect(result.rows.first?["title"] == "Dune")
        #expect(result.rows.first?["nope"] == nil)

        // ?2 before ?1: parameters are bound by number, not by where they appear.
        let numbered = try await store.sql("SELECT ?2 AS second, ?1 AS first", ["one", .bytes(Data([0, 1]))])
        #expect(numbered.rows.first?.values == [.bytes(Data([0, 1])), "one"])

        // SQLite's own values: a Depot bool is an integer, an array its JSON text, NULL is .null.
        let raw = try await store.read { tx in try tx.sql("SELECT sf, tags, sf IS NULL FROM books WHERE id = ?", [2]) }
        #expect(raw.rows.first?.values == [.null, .null, 1])
        let dune = try await store.read { tx in try tx.sql("SELECT sf, tags FROM books WHERE id = 1") }
        #expect(dune.rows.first?.values == [1, #"["x"]"#])
        #expect(dune.rows.first?.fields == ["sf": 1, "tags": #"["x"]"#])
    }

    @Test func writesCommitAndRollBackWithTheTransactionAndCountTheirChanges() async throws {
        let dir = try ScratchDirectory()
        let store = try await makeStore(dir)
        defer { Task { try await store.close() } }
        let changed = try await store.sql("UPDATE books SET year = year + 1 WHERE year < ?", [1962])
        #expect(changed.changes == 2)
        #expect(changed.columns.isEmpty)
        let returned = try await store.sql("UPDATE books SET year = ? WHERE id = ? RETURNING id, year", [2000, 3])
        #expect(returned.changes == 1)
        #expect(returned.rows.map(\.values) == [[3, 2000]])

        // A write transaction that throws takes its raw writes back with it.
        struct Abort: Error {}
        await #expect(throws: Abort.self) {
            try await store.write { tx in
                try tx.insert(Record(id: 4, fields: ["title": "Ubik", "isbn": "d"]), into: self.books)
                #expect(try tx.sql("DELETE FROM books WHERE id = ?", [1]).changes == 1)
                #expect(try tx.get(1, from: self.books) == nil)
                throw Abort()
            }
        }
        let after = try await store.read { tx in try tx.query(Query(), in: self.books).map(\.id) }
        #expect(after == [1, 2, 3])
        // Depot reads back what raw SQL wrote, through the same columns.
        let emma = try await store.read { tx in try tx.get(2, from: self.books) }
        #expect(emma?.fields["year"] == 1816)
    }

    /// A raw DELETE of the largest id raises the table's id mark through the driver's
    /// trigger, so the next assigned id is still past it; the mark itself stays out of reach.
    @Test func rawDeletesOfTheLargestIDKeepAssignedIDsAboveIt() async throws {
        let dir = try ScratchDirectory()
        let store = try await makeStore(dir)
        defer { Task { try await store.close() } }
        #expect(try await store.sql("DELETE FROM books WHERE id = (SELECT max(id) FROM books)").changes == 1)
        let assigned = try await store.write { tx in try tx.insert(fields: ["title": "Ubik", "isbn": "u"], into: self.books) }
        #expect(assigned == 4)
        let refused = await errorCode { _ = try await store.sql(#"UPDATE "_depotsys_idmarks" SET mark = 0"#) }
        #expect(refused == .unsupported)
    }

    @Test func rawWritesAreInvisibleToTheChangeFeed() async throws {
        let dir = try ScratchDirectory()
        let store = try await makeStore(dir)
        defer { Task { try await store.close() } }
        let feed = store.changes()
        try await store.sql("DELETE FROM books WHERE id = ?", [1])
        try await store.write { tx in try tx.insert(Record(id: 9, fields: ["title": "Kindred", "isbn": "k"]), into: self.books) }
        var iterator = feed.makeAsyncIterator()
        let first = await iterator.next()
        // The first batch published is the Depot write: the raw delete made none.
        #expect(first?.changes == [ChangeEvent(collection: books, kind: .inserted, id: 9)])
    }

    @Test func rawWritesEmptyTheResultCache() async throws {
        let dir = try ScratchDirectory()
        let store = try await makeStore(dir)
        defer { Task { try await store.close() } }
        let books = store.collection(self.books)
        #expect(try await books.query(Query(), cached: true).map(\.id) == [1, 2, 3])
        try await store.sql("DELETE FROM books WHERE id = ?", [1])
        #expect(try await books.query(Query(), cached: true).map(\.id) == [2, 3], "a cached query after a raw delete")
        try await store.write { tx in _ = try tx.sql("UPDATE books SET year = 2000 WHERE id = 2") }
        #expect(try await books.query(Query(filter: .equal("id", 2)), cached: true).first?["year"] == 2000, "after a raw update inside a write")
    }

    @Test func refusesWhatWouldBreakTheDriver() async throws {
        let dir = try ScratchDirectory()
        let store = try await makeStore(dir)
        defer { Task { try await store.close() } }
        let refused = [
            "BEGIN", "COMMIT", "SAVEPOINT x", "ROLLBACK",
            "INSERT INTO _depotsys_meta(key, value) VALUES ('x', 1)",
            "UPDATE \"_depotsys_collections\" SET info = '{}'",
            "CREATE TABLE _depot_outbox(x)",
            "DROP TABLE books", "ALTER TABLE books ADD COLUMN extra", "ALTER TABLE books RENAME TO b2",
            "DROP INDEX \"books__isbn_unique\"",
            "CREATE TRIGGER t AFTER INSERT ON books BEGIN DELETE FROM books; END",
            "PRAGMA journal_mode = DELETE", "PRAGMA query_only = OFF",
            "ATTACH DATABASE ':memory:' AS other",
        ]
        for statement in refused {
            let code = await errorCode { try await store.sql(statement) }
            #expect(code == .unsupported, "\(statement): \(String(describing: code))")
        }
        // Reserved collections are Depot's too.
        try await store.migrate([Migration(version: 1, [])])
        #expect(await errorCode { try await store.sql("DELETE FROM _depot_meta") } == .unsupported)
        #expect(try await store.schemaVersion() == 1)

        let malformed: [(String, [FieldValue])] = [
            ("SELEC 1", []), ("SELECT 1; SELECT 2", []), ("SELECT ?", []), ("SELECT ?, ?", [1]), ("SELECT 1", [1]),
            ("   ", []), ("SELECT * FROM missing", []), ("SELECT ?", [.double(.nan)]), ("SELECT 1\u{0}; DROP TABLE books", []),
        ]
        for (statement, parameters) in malformed {
            let code = await errorCode { try await store.sql(statement, parameters) }
            #expect(code == .invalidQuery, "\(statement.debugDescription): \(String(describing: code))")
        }
        // Allowed: comments after the statement, describing pragmas, tables of one's own,
        // extra indexes on a collection's table.
        #expect(try await store.sql("SELECT 1 AS one; -- a comment").rows.first?["one"] == 1)
        #expect(try await store.sql("PRAGMA table_info(books)").rows.count >= 5)
        #expect(try await store.sql("CREATE TABLE notes(x)").changes == 0)
        #expect(try await store.sql("INSERT INTO notes VALUES (?), (?)", [1, "two"]).changes == 2)
        try await store.sql("CREATE INDEX books_by_year ON books(year)")
        // The store still works: nothing of Depot's was touched.
        #expect(try await store.read { tx in try tx.count(.all, in: self.books) } == 3)
        try await store.write { tx in try tx.insert(Record(id: 5, fields: ["title": "Ubik", "isbn": "u"]), into: self.books) }
        #expect(await errorCode { try await store.write { tx in try tx.insert(Record(id: 6, fields: ["isbn": "u"]), into: self.books) } } == .uniqueViolation)
    }

    @Test(arguments: [false, true])
    func aReadTransactionRefusesStatementsThatWrite(inMemory: Bool) async throws {
        let dir = try ScratchDirectory()
        let store = try await Store(driver: try await SQLiteDriver(path: inMemory ? ":memory:" : dir.store))
        defer { Task { try await store.close() } }
        try await store.write { tx in try tx.insert(Record(id: 1, fields: ["title": "Dune"]), into: self.books) }
        let code = await errorCode { _ = try await store.read { tx in try tx.sql("DELETE FROM books") } }
        #expect(code == .unsupported)
        #expect(try await store.read { tx in try tx.sql("SELECT count(*) FROM books").rows.first?[0].value } == 1)
        // The plan of a statement that writes is fine in a read transaction: nothing runs.
        let plan = try await store.explainSQL("DELETE FROM books WHERE id = ?", [1])
        #expect(plan.backend == "sqlite")
        #expect(try await store.read { tx in try tx.count(.all, in: self.books) } == 1)
    }

    @Test func explainSaysWhatSQLiteWouldRun() async throws {
        let dir = try ScratchDirectory()
        let store = try await makeStore(dir)
        defer { Task { try await store.close() } }
        let byISBN = try await store.explainSQL("SELECT title FROM books WHERE isbn = ?", ["a"])
        #expect(byISBN.backend == "sqlite")
        #expect(byISBN.detail.contains("SELECT title FROM books WHERE isbn = ?"))
        #expect(byISBN.indexesUsed.contains { $0.contains("isbn") }, "\(byISBN)")
        let byID = try await store.explainSQL("SELECT title FROM books WHERE id = 2")
        #expect(byID.indexesUsed == ["id"], "\(byID)")
        let scan = try await store.explainSQL("SELECT title FROM books WHERE title = 'Dune'")
        #expect(scan.indexesUsed.isEmpty)
        #expect(scan.detail.contains("SCAN"), "\(scan)")
        #expect(await errorCode { _ = try await store.explainSQL("BEGIN") } == .unsupported)
    }

    @Test func theBlockingTwinsRunTheSameStatements() async throws {
        let dir = try ScratchDirectory()
        let store = try await makeStore(dir)
        defer { Task { try await store.close() } }
        let blocking = store.blocking
        let changed = try await Task.detached { try blocking.sql("UPDATE books SET year = ? WHERE id = ?", [1966, 1]).changes }.value
        #expect(changed == 1)
        let plan = try await Task.detached { try blocking.explainSQL("SELECT year FROM books WHERE id = ?", [1]) }.value
        #expect(plan.indexesUsed == ["id"])
        let year = try await Task.detached { try blocking.read { tx in try tx.sql("SELECT year FROM books WHERE id = 1").rows.first?["year"] } }.value
        #expect(year == 1966)
        // Inside a transaction of the same store, the blocking call refuses instead of waiting.
        let nested = await errorCode { try await store.write { _ in _ = try blocking.sql("SELECT 1") } }
        #expect(nested == .unsupported)
    }

    @Test func rawStatementsInsideAQueryLoopLeaveTheLoopRunning() async throws {
        let dir = try ScratchDirectory()
        let store = try await makeStore(dir)
        defer { Task { try await store.close() } }
        // Installing the authorizer expires the connection's statements, the one stepping
        // the loop included: the loop must still see every row.
        let seen = try await store.read { tx -> [String] in
            var titles: [String] = []
            try tx.forEach(Query(), in: self.books) { record in
                let n = try tx.sql("SELECT count(*) FROM books WHERE year < ?", [record.fields["year"] ?? .null]).rows.first?[0].value
                titles.append("\(record.fields["title"]?.stringValue ?? "?"):\(n ?? .null)")
                return true
            }
            return titles
        }
        #expect(seen == ["Dune:2", "Emma:0", "Solaris:1"])
    }

    @Test func capabilityIsDeclaredAndNamed() async throws {
        let driver = try await SQLiteDriver(path: ":memory:")
        #expect(driver.capabilities.contains(.rawSQL))
        #expect(driver.capabilities.isSuperset(of: .complete))
        #expect(driver.capabilities.description.hasSuffix("multiProcess, rawSQL"))
        try await driver.close()
    }

    @Test func largeRawStatementsRunOnceEvenWhenInlineOutgrowsItsBudget() async throws {
        let dir = try ScratchDirectory()
        let store = try await makeStore(dir, durability: .normal)
        defer { Task { try await store.close() } }
        try await store.sql("CREATE TABLE counter(n)")
        try await store.sql("INSERT INTO counter VALUES (0)")
        // 500 rows read (past the inline write budget of 64 steps) and one write: the
        // transaction is abandoned inline and runs again on the writer's thread, once.
        let result = try await store.write { tx -> Int in
            _ = try tx.sql("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 500) SELECT i FROM r")
            return try tx.sql("UPDATE counter SET n = n + 1").changes
        }
        #expect(result == 1)
        #expect(try await store.sql("SELECT n FROM counter").rows.first?["n"] == 1)
    }
}

/// What a logger handed to the driver received (each message with the `connection` label it
/// was logged under), and the level it lets through.
final class LogCapture: Sendable {
    private let state = Locked<(level: Logger.Level, entries: [(message: String, connection: String)])>((.debug, []))

    var level: Logger.Level {
        get { state.withLock { $0.level } }
        set { state.withLock { $0.level = newValue } }
    }

    var entries: [(message: String, connection: String)] { state.withLock { $0.entries } }

    var messages: [String] { entries.map(\.message) }

    func append(_ message: String, connection: String) { state.withLock { $0.entries.append((message, connection)) } }

    /// A logger writing here, whose level is this capture's (changing it changes the logger's).
    var logger: Logger { Logger(label: "depot.sqlite") { _ in CapturingHandler(capture: self) } }
}

struct CapturingHandler: LogHandler {
    let capture: LogCapture
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level {
        get { capture.level }
        set { capture.level = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        capture.append("\(event.message)", connection: event.metadata?["connection"].map { "\($0)" } ?? "")
    }
}

/// The statement log (Docs/SQLiteDriver.md, "Statement log").
@Suite struct SQLiteStatementLogTests {
    let secrets: CollectionName
    init() throws { secrets = try CollectionName("secrets") }

    @Test func logsEveryStatementWithValuesRedacted() async throws {
        let dir = try ScratchDirectory()
        let capture = LogCapture()
        let driver = try await SQLiteDriver(path: dir.store, logger: capture.logger)
        try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["token": "s3cr3t-token"]), into: self.secrets) }
        _ = try await driver.read { tx in try tx.query(Query(filter: .equal("token", "s3cr3t-token")), in: self.secrets) }
        let store = try await Store(driver: driver)
        _ = try await store.sql("SELECT ?1 || ?2 AS joined", ["hunter2-password", "x"])
        try await store.close()
        let log = capture.messages
        // Opening, BEGIN, the write, the query and the raw statement are all there.
        #expect(log.contains { $0.hasPrefix("PRAGMA journal_mode") })
        #expect(log.contains { $0.hasPrefix("BEGIN IMMEDIATE") })
        #expect(log.contains { $0.hasPrefix("INSERT INTO \"secrets\"") && $0.contains("?1=<redacted>") }, "\(log)")
        #expect(log.contains { $0.hasPrefix("SELECT") && $0.contains("\"token\"") && $0.contains("<redacted>") }, "\(log)")
        #expect(log.contains { $0 == "SELECT ?1 || ?2 AS joined [?1=<redacted>, ?2=<redacted>]" }, "\(log)")
        #expect(!log.contains { $0.contains("s3cr3t") || $0.contains("hunter2") })
    }

    @Test func showsValuesOnlyWhenAsked() async throws {
        let dir = try ScratchDirectory()
        let capture = LogCapture()
        let location = try StoreLocation("sqlite:\(dir.store)?log_values=true")
        let driver = try await SQLiteDriver(location, logger: capture.logger)
        #expect(driver.logsValues)
        try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["token": "visible-value"]), into: self.secrets) }
        try await driver.close()
        #expect(capture.messages.contains { $0.hasPrefix("INSERT INTO \"secrets\"") && $0.contains("'visible-value'") }, "\(capture.messages)")
        #expect(await errorCode { _ = try await SQLiteDriver(try StoreLocation("sqlite:\(dir.store)?log_values=yes")) } == .invalidStore)
    }

    @Test func logsNothingAboveDebugAndFollowsTheLevelPerTransaction() async throws {
        let dir = try ScratchDirectory()
        let capture = LogCapture()
        capture.level = .info
        let driver = try await SQLiteDriver(path: dir.store, logger: capture.logger)
        try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["n": 1]), into: self.secrets) }
        _ = try await driver.read { tx in try tx.get(1, from: self.secrets) }
        #expect(capture.messages.isEmpty)
        // The level is read when a transaction begins: debug from the next one on.
        capture.level = .debug
        try await driver.write { tx in try tx.insert(Record(id: 2, fields: ["n": 2]), into: self.secrets) }
        #expect(capture.messages.contains { $0.hasPrefix("INSERT INTO \"secrets\"") })
        let count = capture.messages.count
        capture.level = .notice
        try await driver.write { tx in try tx.insert(Record(id: 3, fields: ["n": 3]), into: self.secrets) }
        #expect(capture.messages.count == count)
        try await driver.close()
    }
}
