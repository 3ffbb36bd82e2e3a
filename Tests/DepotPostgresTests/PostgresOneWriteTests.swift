import DepotCore
@testable import DepotPostgres
import Foundation
import Testing

/// A transaction of one write by id runs as that one statement, outside `BEGIN`
/// (Docs/PostgresDriver.md, "Transactions"): one round trip, committed by itself, on a
/// connection whose default isolation is SERIALIZABLE, and heard by other processes. When
/// the store may have work after the write (a reference check, a write observer), the
/// transaction begins as before, and a failure of that work still leaves nothing.
@Suite struct PostgresOneWriteTests {
    @Test func aWriteOfOneRecordIsOneStatement() async throws {
        let settings = try PostgresTestServer.settings(for: "one-write-\(UUID().uuidString)")
        let (listener, changes) = try await PostgresChangeFeedTests.listeningStore(settings)

        let driver = try await PostgresDriver(settings: settings)
        let store = try await Store(driver: driver)
        let items = try store.collection("items")
        // The first insert creates the table; the second prepares the insert's statement.
        try await items.insert(Record(id: 1, fields: ["v": 0]))
        try await items.insert(Record(id: 2, fields: ["v": 0]))

        // What `body` returned, and how many statements it sent.
        func counted<T>(_ body: () async throws -> T) async rethrows -> (T, Int) {
            let before = driver.statementsSent
            let value = try await body()
            return (value, driver.statementsSent - before)
        }
        func statements(_ body: () async throws -> Void) async rethrows -> Int { try await counted(body).1 }
        #expect(try await statements { try await items.insert(Record(id: 3, fields: ["v": 3])) } == 1)
        try await items.update(Record(id: 3, fields: ["v": 4]))
        #expect(try await statements { try await items.update(Record(id: 3, fields: ["v": 5])) } == 1)
        try await items.save(Record(id: 3, fields: ["v": 6]))
        let replaced = try await counted { try await items.save(Record(id: 3, fields: ["v": 7])) }
        #expect(replaced == (.updated, 1))
        let added = try await counted { try await items.save(Record(id: 4, fields: ["v": 7])) }
        #expect(added == (.inserted, 1))
        try await items.update(3, FieldChange(set: ["v": 8]))
        let updated = try await counted { try await items.update(3, FieldChange(set: ["v": 9])) }
        #expect(updated == (true, 1))
        // Writes that change nothing: one statement each, nothing stored, the store usable.
        let missing = try await counted { try await items.update(99, FieldChange(set: ["v": 1])) }
        #expect(missing == (false, 1))
        await #expect(throws: DepotError.self) { try await items.insert(Record(id: 3, fields: ["v": 0])) }
        await #expect(throws: DepotError.self) { try await items.update(Record(id: 98, fields: ["v": 0])) }
        #expect(try await items.get(3) == Record(id: 3, fields: ["v": 9]))
        #expect(try await items.get(98) == nil)
        #expect(try await items.count() == 4)

        // Another process hears each change that committed, in order, and none of the
        // writes that changed nothing (each statement announced its own change).
        try await items.insert(Record(id: 100, fields: ["v": 0]))
        let seen = try await PostgresChangeFeedTests.collect(changes) { $0.id == 100 }
        let events = try #require(seen, "the other driver's commits not heard within 30 s")
        let inserted = { (id: RecordID) in ChangeEvent(collection: items.name, kind: .inserted, id: id) }
        let three = ChangeEvent(collection: items.name, kind: .updated, id: 3)
        #expect(events == [inserted(1), inserted(2), inserted(3), three, three, three, three, inserted(4), three, three, inserted(100)])

        // The write's connection is serializable by default; a read's first statement runs
        // on one of the server's default.
        let writeDefault = try driver.writeBlocking { tx in
            try #require(tx as? PostgresTransaction).session.run("SHOW default_transaction_isolation").rows.first?.decode(String.self)
        }
        #expect(writeDefault == "serializable")
        let readDefault = try driver.readBlocking { tx in
            try #require(tx as? PostgresTransaction).session.run("SHOW default_transaction_isolation").rows.first?.decode(String.self)
        }
        #expect(readDefault == "read committed")
        try await store.close()
        try await listener.close()
    }

    /// A unique violation of a write that ran alone is the usual typed error, naming the
    /// constraint, and stores nothing.
    @Test func aUniqueViolationAloneIsTypedAndStoresNothing() async throws {
        let settings = try PostgresTestServer.settings(for: "one-write-unique-\(UUID().uuidString)")
        let driver = try await PostgresDriver(settings: settings)
        let store = try await Store(driver: driver)
        let users = try store.collection("users")
        try await users.prepare(idKind: .int, uniqueConstraints: [UniqueConstraint(["email"], name: "users_email")])
        try await users.insert(Record(id: 1, fields: ["email": "a@example.com"]))
        try await users.insert(Record(id: 2, fields: ["email": "b@example.com"]))
        let before = driver.statementsSent
        do {
            try await users.insert(Record(id: 3, fields: ["email": "a@example.com"]))
            Issue.record("a duplicate email was stored")
        } catch let error as DepotError {
            #expect(error.code == .uniqueViolation)
            #expect(error.constraint == "users_email")
        }
        #expect(driver.statementsSent - before == 1)
        await #expect(throws: DepotError.self) { try await users.update(2, FieldChange(set: ["email": "a@example.com"])) }
        #expect(try await users.get(3) == nil)
        #expect(try await users.get(2) == Record(id: 2, fields: ["email": "b@example.com"]))
        try await users.insert(Record(id: 3, fields: ["email": "c@example.com"]))
        #expect(try await users.count() == 3)
        try await store.close()
    }

    /// A write followed by a reference check, or seen by a write observer, is not sent
    /// alone: a failed check rolls it back, and the observer's own write commits with it.
    @Test func workAfterTheWriteKeepsItInsideBegin() async throws {
        let settings = try PostgresTestServer.settings(for: "one-write-after-\(UUID().uuidString)")
        let driver = try await PostgresDriver(settings: settings)
        let store = try await Store(driver: driver)
        let authors = try store.collection("authors"), posts = try store.collection("posts")
        try await authors.insert(Record(id: 1, fields: ["name": "Ada"]))
        try await store.write { tx in
            try tx.prepare(CollectionSchema(name: posts.name, idKind: .int, references: [Reference("author", field: "author", to: "authors", onDelete: .deny)]))
        }
        try await posts.insert(Record(id: 1, fields: ["author": 1]))
        let before = driver.statementsSent
        await #expect(throws: DepotError.self) { try await posts.insert(Record(id: 2, fields: ["author": 7])) }
        #expect(driver.statementsSent - before > 1)
        await #expect(throws: DepotError.self) { try await posts.update(1, FieldChange(set: ["author": 7])) }
        #expect(try await posts.get(2) == nil)
        #expect(try await posts.get(1) == Record(id: 1, fields: ["author": 1]))

        let log = ChangeCopier(into: try CollectionName("log"), watching: authors.name)
        store.addWriteObserver(log)
        try await authors.insert(Record(id: 2, fields: ["name": "Grace"]))
        try await authors.update(2, FieldChange(set: ["name": "Hopper"]))
        #expect(try await store.collection("log").count() == 2)
        // The observer refuses a change: the write it saw is not kept.
        await #expect(throws: DepotError.self) { try await authors.insert(Record(id: 3, fields: ["name": "refuse"])) }
        #expect(try await authors.get(3) == nil)
        #expect(try await store.collection("log").count() == 2)
        try await store.close()
    }
}

/// Copies each change of one collection into another, in the same transaction; refuses a
/// record whose `name` is `refuse`.
private final class ChangeCopier: StoreWriteObserver, @unchecked Sendable {
    // @unchecked: immutable after init.
    let log: CollectionName
    let watched: CollectionName

    init(into log: CollectionName, watching watched: CollectionName) {
        self.log = log
        self.watched = watched
    }

    func wantsChanges(of collection: CollectionName, in transaction: StoreWriteTransaction) throws -> Bool { collection == watched }

    func record(_ change: RecordChange, in transaction: StoreWriteTransaction) throws {
        let name = try transaction.get(change.id, from: change.collection)?["name"]
        if name == "refuse" { throw DepotError(.invalidValue, "refused") }
        _ = try transaction.insert(fields: ["of": change.id.fieldValue, "kind": .string(change.kind.rawValue)], into: log)
    }
}
