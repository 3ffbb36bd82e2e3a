import DepotCore
import DepotMemory
import DepotServer
import DepotSync
import DepotWire
import Foundation
import Testing

/// Not a test of speed: it measures and prints, and runs only with `DEPOT_SYNC_BENCH=1`
/// (`DEPOT_SYNC_BENCH=1 swift test --filter SyncBenchmark`). It checks correctness only.
@Suite("SyncBenchmark")
struct SyncBenchmark {
    static let enabled = ProcessInfo.processInfo.environment["DEPOT_SYNC_BENCH"] == "1"

    @Test("pull 10,000 records and push 1,000 outbox entries over loopback", .enabled(if: enabled))
    func pullAndPush() async throws {
        try await withSyncServer { _, serverDriver, url in
            let items = name("items")
            try await serverDriver.write { tx in
                for i in 0..<10_000 {
                    let id = RecordID.int(Int64(i + 1))
                    let record = Record(id: id, fields: ["title": .string("item \(i)"), "n": .int(Int64(i)), "ok": .bool(i % 2 == 0)])
                    try tx.insert(record, into: items)
                }
            }
            for (label, feed, pageSize) in [("listing", SyncEndpoint.ChangeFeed.none, 1000), ("listing", .none, 100)] {
                let sync = SyncCoordinator(store: try await clientStore(), transport: URLSessionTransport())
                var endpoint = SyncEndpoint(baseURL: url, path: "/items")
                endpoint.changeFeed = feed
                endpoint.pageSize = pageSize
                try await sync.attach(items, to: endpoint)
                let start = ContinuousClock.now
                let report = try await sync.sync(items, pull: true, push: false)
                let seconds = RetryPolicy.secondsForBenchmark(ContinuousClock.now - start)
                #expect(report.pulled == 10_000)
                print("bench pull \(label) pageSize=\(pageSize): 10000 records in \(String(format: "%.2f", seconds)) s = \(Int(10_000 / seconds)) records/s")
            }
            let store = try await clientStore()
            let sync = SyncCoordinator(store: store, transport: URLSessionTransport())
            let notes = name("notes")
            try await sync.attach(notes, to: SyncEndpoint(baseURL: url, path: "/notes"))
            try await store.write { tx in
                for i in 0..<1000 { try tx.save(Record(id: .string("n\(i)"), fields: ["n": .int(Int64(i))]), into: notes) }
            }
            let start = ContinuousClock.now
            let report = try await sync.sync(notes, pull: false, push: true)
            let seconds = RetryPolicy.secondsForBenchmark(ContinuousClock.now - start)
            #expect(report.pushed == 1000)
            print("bench push: 1000 outbox entries in \(String(format: "%.2f", seconds)) s = \(Int(1000 / seconds)) entries/s")
        }
    }
}

extension RetryPolicy {
    static func secondsForBenchmark(_ d: Duration) -> Double {
        let (s, atto) = d.components
        return Double(s) + Double(atto) / 1e18
    }
}
