import Depot
@testable import DepotCore
import Foundation
import Testing

struct Person: Model, Equatable {
    var id: Int64?
    var email: String
    var name: String
    var age: Int = 30
    var nickname: String? = nil
    static let collectionName = "people"
    static let uniqueConstraints = [UniqueConstraint(["email"])]
    static let indexes = [IndexDefinition(["name"])]
}

struct Note: Model, Equatable {
    var id: String
    var text: String
}

@Suite struct StoreTests {
    func store() async throws -> Store { try await Store.open("memory:") }

    @Test func assignedIdsAndTypedRoundTrip() async throws {
        let store = try await store()
        let people = try await store.repository(Person.self)
        let ada = try await people.insert(Person(id: nil, email: "ada@x", name: "Ada"))
        let bob = try await people.insert(Person(id: nil, email: "bob@x", name: "Bob"))
        #expect(ada.id == 1 && bob.id == 2)
        #expect(try await people.find(id: 1) == ada)
        #expect(try await people.count() == 2)
        #expect(try await store.collection("people").schema()?.uniqueConstraints == [UniqueConstraint(["email"])])
    }

    @Test func uniqueViolationNamesTheConstraintAndUpsertByNaturalKey() async throws {
        let store = try await store()
        let people = try await store.repository(Person.self)
        _ = try await people.insert(Person(id: nil, email: "ada@x", name: "Ada"))
        do {
            _ = try await people.insert(Person(id: nil, email: "ada@x", name: "Other"))
            Issue.record("duplicate email accepted")
        } catch let error as DepotError {
            #expect(error.code == .uniqueViolation)
            #expect(error.constraint == "email_unique")
        }
        let updated = try await people.upsert(Person(id: nil, email: "ada@x", name: "Ada Lovelace"), uniqueOn: "email_unique")
        #expect(updated.id == 1 && updated.name == "Ada Lovelace")
        let inserted = try await people.upsert(Person(id: nil, email: "new@x", name: "New"), uniqueOn: "email_unique")
        #expect(inserted.id == 2)
        #expect(try await people.count() == 2)
    }

    @Test func queryBuilderAndQueryByExample() async throws {
        let store = try await store()
        let people = try await store.repository(Person.self)
        try await people.save([
            Person(id: 1, email: "a", name: "Cy", age: 40), Person(id: 2, email: "b", name: "Al", age: 20),
            Person(id: 3, email: "c", name: "Bo", age: 40),
        ])
        let olderByName = try await people.query().filter(Field("age") >= 30).sort("name").all().map(\.id)
        #expect(olderByName == [3, 1])
        #expect(try await people.query().sort("age", descending: true).limit(1).offset(1).all().map(\.id) == [3])
        #expect(try await people.query().filter(Field("name") == "Al").exists())
        let byExample = try await people.find(matching: Person(id: nil, email: "c", name: "Bo", age: 40))
        #expect(byExample.map(\.id) == [3])
    }

    @Test func transactionsAcrossRepositoriesRollBackTogether() async throws {
        let store = try await store()
        _ = try await store.repository(Person.self)
        struct Boom: Error {}
        await #expect(throws: Boom.self) {
            try await store.write { tx in
                try tx.repository(Person.self).insert(Person(id: 1, email: "a", name: "A"))
                try tx.repository(Note.self).insert(Note(id: "n", text: "t"))
                throw Boom()
            }
        }
        #expect(try await store.repository(Person.self).count() == 0)
        #expect(try await store.repository(Note.self).count() == 0)
    }

    @Test func changeEventsAndObservedQueries() async throws {
        let store = try await store()
        let notes = try await store.repository(Note.self)
        let changes = store.changes()
        var observed = notes.observe(notes.query().sort("text")).makeAsyncIterator()
        #expect(try await observed.next()?.map(\.id) == [])
        try await notes.save(Note(id: "a", text: "z"))
        #expect(try await observed.next()?.map(\.text) == ["z"])
        try await notes.save(Note(id: "a", text: "y"))
        #expect(try await observed.next()?.map(\.text) == ["y"])
        _ = try await notes.delete(id: "a")
        #expect(try await observed.next()?.map(\.id) == [])
        var iterator = changes.makeAsyncIterator()
        let first = await iterator.next(), second = await iterator.next(), third = await iterator.next()
        #expect(first?.changes.map(\.kind) == [.inserted])
        #expect(second?.changes.map(\.kind) == [.updated])
        #expect(third?.changes == [ChangeEvent(collection: try CollectionName("Note"), kind: .deleted, id: "a")])
    }

    @Test func readCacheIsNeverStaleAfterACommit() async throws {
        let store = try await store()
        let notes = try await store.repository(Note.self, cacheCapacity: 2)
        try await notes.save(Note(id: "a", text: "1"))
        #expect(try await notes.find(id: "a")?.text == "1")
        #expect(try await notes.find(id: "a")?.text == "1")
        try await store.collection("Note").save(Record(id: "a", fields: ["text": "2"]))
        #expect(try await notes.find(id: "a")?.text == "2")
        try await notes.save(Note(id: "b", text: "b"))
        try await notes.save(Note(id: "c", text: "c"))
        for id in ["a", "b", "c"] { _ = try await notes.find(id: id) }
        #expect(notes.cache?.count == 2)
    }

    @Test func migrationsRunOnceInOrderAndRefuseNewerStores() async throws {
        let store = try await store()
        let people = try store.collection("people")
        try await people.save(Record(id: 1, fields: ["name": "ada", "email": "A@X"]))
        try await people.save(Record(id: 2, fields: ["name": "bob"]))
        let migrations = [
            Migration(version: 1, [.addField("people", "active", default: true)]),
            Migration(version: 2, [.renameField("people", from: "name", to: "fullName"), .addIndex("people", IndexDefinition(["fullName"]))]),
            Migration(version: 3, [.transform("people") { record in
                if case .string(let e) = record["email"] { record.fields["email"] = .string(e.lowercased()) }
            }, .addUnique("people", UniqueConstraint(["email"]))]),
        ]
        #expect(try await store.migrate(migrations) == 3)
        #expect(try await people.get(1) == Record(id: 1, fields: ["fullName": "ada", "email": "a@x", "active": true]))
        #expect(try await people.get(2) == Record(id: 2, fields: ["fullName": "bob", "active": true]))
        #expect(try await people.schema()?.indexes.map(\.name) == ["fullName_idx"])
        #expect(try await store.migrate(migrations) == 3)
        do {
            try await store.migrate(Array(migrations.prefix(2)))
            Issue.record("an older program migrated a newer store")
        } catch let error as DepotError {
            #expect(error.code == .schemaMismatch)
        }
    }

    @Test func failingMigrationLeavesNothingHalfDone() async throws {
        let store = try await store()
        let people = try store.collection("people")
        try await people.save(Record(id: 1, fields: ["email": "same"]))
        try await people.save(Record(id: 2, fields: ["email": "same"]))
        do {
            try await store.migrate([Migration(version: 1, [.addField("people", "flag", default: 1), .addUnique("people", UniqueConstraint(["email"]))])])
            Issue.record("a unique constraint over duplicates was added")
        } catch let error as DepotError {
            #expect(error.code == .uniqueViolation)
        }
        #expect(try await store.schemaVersion() == 0)
        #expect(try await people.get(1)?.fields["flag"] == nil)
    }

    /// A store opened from a string through the standard registry, or one built from it
    /// with a third-party driver added, records the outbox of an attached collection without
    /// any coordinator in the process; a registry of its own (no setups) does not.
    @Test func storesOpenedThroughTheStandardRegistryRecordTheOutbox() async throws {
        var extended = DriverRegistry.standard
        extended.register("other") { _ in MemoryDriver() }
        var bare = DriverRegistry()
        MemoryDriver.register(in: &bare)
        for (registry, string, records) in [(DriverRegistry.standard, "memory:", true), (extended, "other:", true), (bare, "memory:", false)] {
            let store = try await Store.open(string, registry: registry)
            try await store.collection(try CollectionName(reserved: "_depot_sync")).save(Record(id: "notes", fields: ["remote": "http://127.0.0.1:1", "path": "/notes"]))
            try await store.collection("notes").save(Record(id: "a", fields: ["t": 1]))
            let entries = try await store.read { tx in try Outbox.entries(in: tx) }
            #expect(entries.map(\.recordID) == (records ? ["a"] : []), "\(string) records: \(records)")
            #expect(store.writeObservers.contains { $0 is OutboxRecorder } == records)
        }
    }

    @Test func badInputGetsTypedErrors() async throws {
        let store = try await store()
        let c = try store.collection("c")
        await #expect(throws: DepotError.self) { try await c.save(Record(id: "a", fields: ["bad name": 1])) }
        await #expect(throws: DepotError.self) { try await c.save(Record(id: "a", fields: ["x": .double(.nan)])) }
        await #expect(throws: DepotError.self) { try await c.save(Record(id: "", fields: [:])) }
        await #expect(throws: DepotError.self) { try await c.query(Query(limit: -1)) }
        #expect(try await c.count() == 0)
        await #expect(throws: DepotError.self) { _ = try await Store.open("memory:extra") }
        await #expect(throws: DepotError.self) { _ = try await Store.open("nosuch:x") }
    }
}

/// References are checked when a transaction's closure returns, unless the transaction
/// turned the check off (what the sync coordinator does for records from the server).
@Suite struct ReferenceCheckSwitchTests {
    @Test func aTransactionCanLeaveReferencesUnchecked() async throws {
        let store = try await Store.open("memory:")
        let children = try store.collection("children")
        try await store.write { tx in
            try tx.prepare(CollectionSchema(name: children.name, idKind: .int, references: [Reference("parent", field: "parentID", to: "parents", onDelete: .cascade)]))
        }
        await #expect(throws: DepotError.self) { try await children.insert(Record(id: 1, fields: ["parentID": 7])) }
        try await store.write { tx in
            tx.checksReferences = false
            try tx.insert(Record(id: 1, fields: ["parentID": 7]), into: children.name)
        }
        #expect(try await children.count() == 1, "the unchecked record was kept")
        // The parent arriving later makes the reference whole; deleting it cascades.
        try await store.collection("parents").insert(Record(id: 7))
        _ = try await store.collection("parents").delete(7)
        #expect(try await children.count() == 0, "the cascade applies to records written unchecked")
    }
}
