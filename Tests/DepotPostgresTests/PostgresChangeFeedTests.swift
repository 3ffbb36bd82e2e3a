import DepotConformance
import DepotCore
import DepotPostgres
import Foundation
import Testing

/// Change events across processes (Docs/PostgresDriver.md, "Change events across
/// processes"): a store in this process hears, through LISTEN/NOTIFY, the commits another
/// process (`depot-crash-helper`) makes on the same schema.
@Suite struct PostgresChangeFeedTests {
    @Test func anObserverSeesCommitsOfAnotherProcess() async throws {
        let directory = "feed-\(UUID().uuidString)"
        var registry = DriverRegistry()
        PostgresDriver.register(in: &registry)
        let store = try await Store.open(try PostgresTestServer.storeString(for: directory), registry: registry)
        let driver = try #require(store.driver as? PostgresDriver)
        #expect(driver.capabilities.contains(.crossProcessChanges))
        let changes = store.changes()
        try await Self.waitUntilListening(driver)

        let helper = try ChildProcess(path: try CrashTrials.helperPath(), arguments: [try PostgresTestServer.storeString(for: directory), "7"])
        let accounts = try CollectionName("accounts"), ledger = try CollectionName("ledger")
        let seen = try await Self.collect(changes) { $0.collection == accounts && $0.id == .int(3) }
        helper.kill(SIGKILL)
        _ = await helper.exit()
        let events = try #require(seen, "no change from the other process within 30 s")
        // The helper's transaction n saves accounts[n], ledger[n] and meta["last"], in that order.
        #expect(events.contains(ChangeEvent(collection: accounts, kind: .inserted, id: .int(1))))
        #expect(events.contains(ChangeEvent(collection: ledger, kind: .inserted, id: .int(2))))
        #expect(events.contains { $0.collection.rawValue == "meta" && $0.id == "last" && $0.kind == .updated })
        // Transaction 1's first change announced itself in its statement, the others before
        // COMMIT: they are still heard in the order they were made.
        let account = try #require(events.firstIndex(of: ChangeEvent(collection: accounts, kind: .inserted, id: .int(1))))
        let entry = try #require(events.firstIndex(of: ChangeEvent(collection: ledger, kind: .inserted, id: .int(1))))
        #expect(account < entry)
        try await store.close()
    }

    /// A transaction's first change announces itself in the statement that makes it
    /// (Docs/PostgresDriver.md, "Change events across processes"): a transaction that rolls
    /// back after it is still never heard, the ones that commit are, in order. Two drivers
    /// on one schema hear each other as two processes do.
    @Test func aRolledBackChangeIsNeverHeard() async throws {
        let settings = try PostgresTestServer.settings(for: "feed-rollback-\(UUID().uuidString)")
        let (store, changes) = try await Self.listeningStore(settings)
        let writer = try await PostgresDriver(settings: settings)
        let items = try CollectionName("items")
        try await writer.write { tx in try tx.insert(Record(id: 1, fields: ["v": 0]), into: items) }
        await #expect(throws: DepotError.self) {
            try await writer.write { tx in
                _ = try tx.update(1, applying: FieldChange(set: ["v": 1]), in: items)
                try tx.insert(Record(id: 9, fields: ["v": 9]), into: items)
                throw DepotError(.invalidValue, "roll back")
            }
        }
        try await writer.write { tx in
            try tx.insert(Record(id: 2, fields: ["v": 0]), into: items)
            try tx.delete(1, from: items)
        }
        let seen = try await Self.collect(changes) { $0.kind == .deleted }
        let events = try #require(seen, "the other driver's commits not heard within 30 s")
        #expect(events == [
            ChangeEvent(collection: items, kind: .inserted, id: 1), ChangeEvent(collection: items, kind: .inserted, id: 2),
            ChangeEvent(collection: items, kind: .deleted, id: 1),
        ])
        try await writer.close()
        try await store.close()
    }

    /// A store on its own driver that hears the commits of other drivers on `settings`'
    /// schema, its listener subscribed, and its stream of changes.
    static func listeningStore(_ settings: PostgresSettings) async throws -> (Store, AsyncStream<ChangeBatch>) {
        let listening = try await PostgresDriver(settings: settings)
        let store = try await Store(driver: listening)
        listening.deliverChanges(to: store)
        try await waitUntilListening(listening)
        return (store, store.changes())
    }

    /// Waits (up to 5 s) for `driver`'s listener to subscribe.
    static func waitUntilListening(_ driver: PostgresDriver) async throws {
        var waited = 0
        while !driver.isListeningForChanges && waited < 200 {
            try await Task.sleep(for: .milliseconds(25))
            waited += 1
        }
        #expect(driver.isListeningForChanges, "the listener subscribed within 5 s")
    }

    /// The events `changes` delivers up to and including the first that `last` accepts;
    /// `nil` when that takes more than 30 s.
    static func collect(_ changes: AsyncStream<ChangeBatch>, until last: @escaping @Sendable (ChangeEvent) -> Bool) async throws -> [ChangeEvent]? {
        try await withThrowingTaskGroup(of: [ChangeEvent]?.self) { group in
            group.addTask {
                var events: [ChangeEvent] = []
                for await batch in changes {
                    events += batch.changes
                    if events.contains(where: last) { return events }
                }
                return events
            }
            group.addTask {
                try await Task.sleep(for: .seconds(30))
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    /// The embedded drivers do not hear other processes, and say so.
    @Test func onlyTheServerDriverDeclaresIt() {
        #expect(!DriverCapabilities.complete.contains(.crossProcessChanges))
        #expect(DriverCapabilities.crossProcessChanges.description == "crossProcessChanges")
    }
}
