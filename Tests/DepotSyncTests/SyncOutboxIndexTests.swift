import DepotCore
import DepotGDBM
import DepotMemory
import DepotSQLite
import DepotSync
import DepotWire
import Foundation
import Testing

/// Attaching declares an index on the outbox's (collection, recordId), so finding a record's
/// pending entries (once per pulled record, and in every push) is an index lookup where the
/// driver has indexes, not a scan of every entry.
@Suite struct SyncOutboxIndexTests {
    enum Backend: String, CaseIterable, Sendable { case memory, sqlite, gdbm }

    func open(_ backend: Backend, in directory: String) async throws -> Store {
        switch backend {
        case .memory: try await Store(driver: MemoryDriver())
        case .sqlite: try await Store(driver: SQLiteDriver(path: directory + "/store.sqlite"))
        case .gdbm: try await Store(driver: GDBMDriver(path: directory + "/store.gdbm"))
        }
    }

    @Test(arguments: Backend.allCases)
    func attachIndexesTheOutboxByRecord(_ backend: Backend) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("depot-outbox-index-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try await open(backend, in: directory)
        let notes = try CollectionName("notes")
        let endpoint = SyncEndpoint(baseURL: try #require(URL(string: "http://127.0.0.1:9")), path: "/notes")
        let sync = SyncCoordinator(store: store)
        try await sync.attach(notes, to: endpoint)
        // Attaching again (every app start does) declares it once.
        try await sync.attach(notes, to: endpoint)
        let schema = try await store.driver.read { tx in try tx.schema(of: WireCollections.outbox) }
        #expect(schema?.indexes.filter { $0 == Outbox.recordIndex }.count == 1)

        // Offline writes: two entries for record 7, one for each other record.
        let collection = store.collection(notes)
        for n in 1...20 { try await collection.insert(Record(id: .int(Int64(n)), fields: ["n": .int(Int64(n))])) }
        try await collection.update(Record(id: 7, fields: ["n": 70]))

        let pending = Query(filter: Field("collection") == "notes" && .equal("recordId", .int(7)), sort: [SortKey("id")])
        let (entries, plan) = try await store.driver.read { tx in
            (try tx.query(pending, in: WireCollections.outbox), try tx.explain(pending, in: WireCollections.outbox))
        }
        #expect(entries.count == 2)
        #expect(entries.allSatisfy { $0.fields["recordId"] == .int(7) && $0.fields["collection"] == "notes" })
        if backend != .memory {
            #expect(plan.indexesUsed.contains(Outbox.recordIndex.name), "\(plan)")
        }
        try await store.close()
    }
}
