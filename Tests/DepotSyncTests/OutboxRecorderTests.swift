import DepotCore
import DepotMemory
import DepotServer
import DepotSQLite
import DepotSync
import DepotWire
import Foundation
import Testing

@Suite("The outbox recorder: the store's write observer that makes sync transactional")
struct OutboxRecorderTests {
    let notes = name("notes")

    func attach(_ store: Store, _ collection: CollectionName) async throws {
        try await store.write { tx in
            try tx.save(Record(id: .string(collection.rawValue), fields: ["remote": "http://127.0.0.1:1", "path": "/notes"]), into: WireCollections.sync)
        }
    }

    @Test("writes to attached collections record entries in the same transaction; excluded and rolled-back writes record none")
    func recordsInTheSameTransaction() async throws {
        let store = try await clientStore()
        let recorder = OutboxRecorder.installed(on: store)
        #expect(OutboxRecorder.installed(on: store) === recorder)
        #expect(store.writeObservers.count == 1)
        try await attach(store, notes)
        let notes = store.collection(self.notes), other = try store.collection("other")
        try await notes.save(Record(id: "a", fields: ["t": 1]))
        try await other.save(Record(id: "x", fields: ["t": 1]))
        _ = try await notes.delete("a")
        let collection = self.notes
        try await store.write(excluding: [recorder]) { tx in try tx.save(Record(id: "b", fields: [:]), into: collection) }
        struct Boom: Error {}
        await #expect(throws: Boom.self) {
            try await store.write { tx in
                try tx.save(Record(id: "c", fields: [:]), into: collection)
                throw Boom()
            }
        }
        let outbox = try await store.read { tx in try Outbox.entries(in: tx) }
        #expect(outbox.map(\.operation) == [.upsert, .delete])
        #expect(outbox.map(\.recordID) == ["a", "a"])
        #expect(outbox.first?.fields == ["t": 1])
        #expect(outbox.allSatisfy { $0.state == .pending && $0.idempotencyKey == $0.idempotencyKey.uppercased() && UUID(uuidString: $0.idempotencyKey) != nil })
    }

    @Test("entries read without their fields are the entries, fields aside, in commit order, on SQLite and in memory; a damaged one is .corrupted")
    func entriesWithoutFields() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("depot-outbox-heads-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let onDisk = try await Store(driver: try await SQLiteDriver(try StoreLocation("sqlite:\(directory.path)/client.sqlite")))
        for store in [try await clientStore(), onDisk] {
            _ = OutboxRecorder.installed(on: store)
            try await attach(store, notes)
            let notes = store.collection(self.notes)
            try await notes.save(Record(id: "a", fields: ["t": 1, "s": "x"]))
            try await notes.save(Record(id: "n", fields: ["nested": ["k": [1, 2]]]))
            _ = try await notes.delete("a")
            let whole = try await store.read { tx in try Outbox.entries(in: tx) }
            let heads = try await store.read { tx in try Outbox.entriesWithoutFields(in: tx) }
            #expect(whole.count == 3 && whole.contains { $0.fields != nil })
            #expect(heads.allSatisfy { $0.fields == nil })
            #expect(heads == whole.map { entry in
                var head = entry
                head.fields = nil
                return head
            })
            // An entry without its collection, written behind the recorder's back.
            try await store.write(excluding: [OutboxRecorder.installed(on: store)]) { tx in
                _ = try tx.insert(fields: ["recordId": "b", "op": "upsert", "idempotencyKey": "K"], into: WireCollections.outbox)
            }
            do {
                _ = try await store.read { tx in try Outbox.entriesWithoutFields(in: tx) }
                Issue.record("an entry without its collection was read")
            } catch let error as DepotError {
                #expect(error.code == .corrupted)
            }
            try await store.close()
        }
    }

    @Test("models written straight into the driver carry their fields into the entry")
    func modelsCarryTheirFields() async throws {
        struct Note: Model, Equatable {
            var id: String?
            var text: String
            static let collectionName = "notes"
        }
        let store = try await clientStore()
        _ = OutboxRecorder.installed(on: store)
        try await attach(store, notes)
        let repository = try await store.repository(Note.self)
        try await repository.save(Note(id: "n1", text: "hello"))
        let outbox = try await store.read { tx in try Outbox.entries(in: tx) }
        #expect(outbox.map(\.fields) == [["text": "hello"]])
    }

    @Test("partial updates of an attached collection record the whole new record, one entry per record changed")
    func partialUpdatesRecordWholeRecords() async throws {
        let store = try await clientStore()
        _ = OutboxRecorder.installed(on: store)
        try await attach(store, notes)
        let notes = store.collection(self.notes)
        try await notes.save(Record(id: "a", fields: ["t": 1, "keep": "x"]))
        try await notes.save(Record(id: "b", fields: ["t": 2, "drop": true]))
        try await notes.update("a", FieldChange(set: ["t": 10]))
        try await notes.update(matching: .isNotNull("drop"), FieldChange(set: ["t": 20], remove: ["drop"]))
        let outbox = try await store.read { tx in try Outbox.entries(in: tx) }
        #expect(outbox.map(\.recordID) == ["a", "b", "a", "b"])
        #expect(outbox.suffix(2).map(\.fields) == [["t": 10, "keep": "x"], ["t": 20]])
        #expect(outbox.allSatisfy { $0.operation == .upsert })
    }

    @Test("an attachment made in a transaction counts from then on in it; a rolled-back one never counts")
    func attachmentsFollowCommits() async throws {
        let store = try await clientStore()
        _ = OutboxRecorder.installed(on: store)
        let collection = notes
        try await store.write { tx in try tx.save(Record(id: "before", fields: [:]), into: collection) }  // caches: nothing attached
        struct Boom: Error {}
        await #expect(throws: Boom.self) {
            try await store.write { tx in
                try tx.save(Record(id: "notes", fields: ["remote": "http://127.0.0.1:1", "path": "/notes"]), into: WireCollections.sync)
                try tx.save(Record(id: "rolledBack", fields: [:]), into: collection)
                throw Boom()
            }
        }
        try await store.write { tx in try tx.save(Record(id: "after", fields: [:]), into: collection) }
        #expect(try await store.read { tx in try Outbox.entries(in: tx) }.isEmpty)
        try await store.write { tx in
            try tx.save(Record(id: "notes", fields: ["remote": "http://127.0.0.1:1", "path": "/notes"]), into: WireCollections.sync)
            try tx.save(Record(id: "same", fields: [:]), into: collection)
        }
        try await store.write { tx in try tx.save(Record(id: "later", fields: [:]), into: collection) }
        #expect(try await store.read { tx in try Outbox.entries(in: tx) }.map(\.recordID) == ["same", "later"])
    }

    @Test("a damaged outbox entry is a typed error naming it, never skipped")
    func damagedEntry() async throws {
        let driver = MemoryDriver()
        let store = try await Store(driver: driver)
        try await driver.write { tx in _ = try tx.insert(fields: ["collection": "notes", "op": "upsert", "idempotencyKey": "k"], into: WireCollections.outbox) }
        let sync = SyncCoordinator(store: store)
        do {
            _ = try await sync.outbox(for: notes)
            Issue.record("a damaged entry was read")
        } catch let error as DepotError {
            #expect(error.code == .corrupted)
            #expect(error.id == 1)
        }
    }

    @Test("a store whose outbox an older Depot wrote (UUID keys in either case, the core's field set) pushes, keys sent exactly as stored")
    func olderStoreKeepsWorking() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("depot-old-outbox-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let location = try StoreLocation("sqlite:\(directory)/old.sqlite")
        // What the older core wrote, byte for byte the same fields: an attachment, a record and
        // its entry with an uppercase key, and a lowercase one from a merge of DepotSync's.
        let upper = UUID().uuidString, lower = UUID().uuidString.lowercased()
        let old = try await SQLiteDriver(location)
        try await old.write { tx in
            try tx.save(Record(id: "notes", fields: ["remote": "http://127.0.0.1:1", "path": "/notes"]), into: WireCollections.sync)
            try tx.save(Record(id: "n1", fields: ["t": "one"]), into: try CollectionName("notes"))
            try tx.save(Record(id: "n2", fields: ["t": "two"]), into: try CollectionName("notes"))
            for (id, key) in [("n1", upper), ("n2", lower)] {
                _ = try tx.insert(fields: [
                    "collection": "notes", "recordId": .string(id), "op": "upsert", "idempotencyKey": .string(key),
                    "state": "pending", "attempts": 0, "record": ["t": .string(id == "n1" ? "one" : "two")],
                ], into: WireCollections.outbox)
            }
        }
        try await old.close()
        try await withSyncServer { _, serverDriver, url in
            let store = try await Store(driver: try await SQLiteDriver(location))
            let sync = SyncCoordinator(store: store, transport: URLSessionTransport(timeout: 10), sleeper: RecordingSleeper())
            try await sync.attach(notes, to: SyncEndpoint(baseURL: url, path: "/notes"))
            #expect(try await sync.outbox(for: notes).map(\.idempotencyKey) == [upper, lower])
            let report = try await sync.sync(notes, pull: false)
            #expect(report.pushed == 2)
            #expect(try await LocalWrites.all(serverDriver, notes).map(\.fields) == [["t": "one"], ["t": "two"]])
            let keys = try await serverDriver.read { tx in try tx.query(Query(), in: WireCollections.idempotency) }.map(\.id)
            #expect(Set(keys) == [.string(upper), .string(lower)])
            // New entries use the canonical (upper-case) form.
            try await store.collection(notes).save(Record(id: "n3", fields: ["t": "three"]))
            let fresh = try #require(try await sync.outbox(for: notes).first)
            #expect(fresh.idempotencyKey == fresh.idempotencyKey.uppercased() && fresh.idempotencyKey == UUID(uuidString: fresh.idempotencyKey)?.canonicalText)
            try await store.close()
        }
    }
}
