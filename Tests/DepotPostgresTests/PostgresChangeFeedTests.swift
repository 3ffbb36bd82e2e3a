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
        var waited = 0
        while !driver.isListeningForChanges && waited < 200 {
            try await Task.sleep(for: .milliseconds(25))
            waited += 1
        }
        #expect(driver.isListeningForChanges, "the listener subscribed within 5 s")

        let helper = try ChildProcess(path: try CrashTrials.helperPath(), arguments: [try PostgresTestServer.storeString(for: directory), "7"])
        let accounts = try CollectionName("accounts"), ledger = try CollectionName("ledger")
        let seen = try await withThrowingTaskGroup(of: [ChangeEvent]?.self) { group in
            group.addTask {
                var events: [ChangeEvent] = []
                for await batch in changes {
                    events += batch.changes
                    if events.contains(where: { $0.collection == accounts && $0.id == .int(3) }) { return events }
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
        helper.kill(SIGKILL)
        _ = await helper.exit()
        let events = try #require(seen, "no change from the other process within 30 s")
        // The helper's transaction n saves accounts[n], ledger[n] and meta["last"], in that order.
        #expect(events.contains(ChangeEvent(collection: accounts, kind: .inserted, id: .int(1))))
        #expect(events.contains(ChangeEvent(collection: ledger, kind: .inserted, id: .int(2))))
        #expect(events.contains { $0.collection.rawValue == "meta" && $0.id == "last" && $0.kind == .updated })
        try await store.close()
    }

    /// The embedded drivers do not hear other processes, and say so.
    @Test func onlyTheServerDriverDeclaresIt() {
        #expect(!DriverCapabilities.complete.contains(.crossProcessChanges))
        #expect(DriverCapabilities.crossProcessChanges.description == "crossProcessChanges")
    }
}
