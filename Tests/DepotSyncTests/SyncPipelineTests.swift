import DepotCore
import DepotMemory
import DepotServer
import DepotSync
import DepotWire
import Foundation
import Testing

/// Pipelined batches (Docs/Sync.md, "Batched push"): while batches are on the wire the next
/// is sent, never more than three at once, never two entries of one record at once.
@Suite("Pipelined push")
struct SyncPipelineTests {
    let notes = name("notes")

    /// Counts the `POST /_batch` requests on the wire at once; each is held for `delay`
    /// before it goes out, so a batch started while another is held is seen beside it.
    final class OverlapTransport: HTTPTransport {
        let inner = URLSessionTransport(timeout: 10)
        let delay: Duration
        let state = Locked((now: 0, most: 0, batches: 0))
        init(delay: Duration) { self.delay = delay }

        func send(_ request: HTTPRequestSpec) async throws -> HTTPAnswer {
            guard request.method == "POST", request.url.path.hasSuffix("/_batch") else { return try await inner.send(request) }
            state.withLock {
                $0.now += 1
                $0.batches += 1
                $0.most = max($0.most, $0.now)
            }
            defer { state.withLock { $0.now -= 1 } }
            try await Task.sleep(for: delay)
            return try await inner.send(request)
        }
    }

    func client(_ url: URL, transport: any HTTPTransport, batchSize: Int) async throws -> (SyncCoordinator, Store) {
        let store = try await clientStore()
        let coordinator = SyncCoordinator(
            store: store, transport: transport, conflictPolicy: .serverWins,
            retryPolicy: RetryPolicy(baseDelay: .milliseconds(1), maxDelay: .milliseconds(5), maxAttempts: 4), sleeper: RecordingSleeper(),
            random: SeededRandomSource(seed: 7), pushBatchSize: batchSize
        )
        try await coordinator.attach(notes, to: SyncEndpoint(baseURL: url, path: "/notes"))
        return (coordinator, store)
    }

    /// 30 records edited three times each: 90 entries, batches of 8.
    func editThreeTimes(_ store: Store) async throws {
        for round in 1...3 {
            for i in 1...30 { try await LocalWrites.save(store, notes, Record(id: .string("n\(i)"), fields: ["v": .string("e\(round)"), "i": .int(Int64(i))])) }
        }
    }

    @Test("the drain leaves out the records of the batch in flight; they come once it is finished")
    func drainLeavesOutRecordsInFlight() {
        func entry(_ seq: Int64, _ id: RecordID) -> OutboxEntry {
            OutboxEntry(seq: seq, collection: "c", recordID: id, operation: .upsert, fields: [:], idempotencyKey: "k\(seq)", state: .pending)
        }
        var drain = OutboxDrain(entries: [entry(1, 1), entry(2, 2), entry(3, 1), entry(4, 3), entry(5, 2), entry(6, 4)])
        let first = drain.nextBatch(maxCount: 2)
        #expect(first.map(\.seq) == [1, 2])
        let second = drain.nextBatch(maxCount: 2, inFlight: first)
        #expect(second.map(\.seq) == [4, 6])  // 3 and 5 are records 1 and 2, in flight
        for e in first { drain.finish(e, .pushed) }
        #expect(drain.nextBatch(maxCount: 2, inFlight: second).map(\.seq) == [3, 5])
        #expect(drain.nextBatch(maxCount: 2).isEmpty)
    }

    @Test("three batches on the wire at once, never four; each record's edits in order: every record ends at its last edit, no conflict")
    func threeInFlightInOrder() async throws {
        try await withSyncServer { _, serverDriver, url in
            let overlap = OverlapTransport(delay: .milliseconds(40))
            let (a, store) = try await client(url, transport: overlap, batchSize: 8)
            try await editThreeTimes(store)
            let report = try await a.push(notes)
            #expect(report.succeeded && report.pushed == 90 && report.conflicts == 0, "\(report)")
            let seen = overlap.state.withLock { $0 }
            #expect(seen.most == 3, "at most three batches in flight, and three did overlap: \(seen)")
            #expect(seen.batches >= 12, "90 entries of 30 records in batches of at most 8: \(seen)")
            let server = try await LocalWrites.all(serverDriver, notes)
            #expect(server.count == 30 && server.allSatisfy { $0["v"] == "e3" }, "\(server.map(\.jsonText))")
            #expect(try await LocalWrites.all(store, notes) == server)
            #expect(try await LocalWrites.outboxCount(store) == 0)
        }
    }

    @Test("cancelling a push stops the batch on the wire at once; its entries stay in the outbox")
    func cancellationReachesTheBatch() async throws {
        try await withSyncServer { _, _, url in
            let overlap = OverlapTransport(delay: .seconds(20))
            let (a, store) = try await client(url, transport: overlap, batchSize: 8)
            try await editThreeTimes(store)
            let push = Task { try await a.push(notes) }
            while overlap.state.withLock({ $0.now }) == 0 { try await Task.sleep(for: .milliseconds(5)) }
            let started = ContinuousClock.now
            push.cancel()
            _ = await push.result
            let waited = started.duration(to: .now)
            #expect(waited < .seconds(5), "the push ended \(waited) after the cancel; the held batch takes 20 s")
            #expect(try await LocalWrites.outboxCount(store) == 90, "nothing was acknowledged")
        }
    }

    @Test("pipelined batches under dropped requests, lost answers and duplicates: converged, nothing lost, every record at its last edit", arguments: [1, 2, 3] as [UInt64])
    func faultsWhilePipelined(seed: UInt64) async throws {
        try await withSyncServer { _, serverDriver, url in
            let faulty = FaultyTransport(inner: OverlapTransport(delay: .milliseconds(5)), seed: seed, rate: 0.6)
            let (a, store) = try await client(url, transport: faulty, batchSize: 8)
            try await editThreeTimes(store)
            for _ in 0..<30 where try await LocalWrites.outboxCount(store) > 0 {
                _ = try await a.push(notes)
            }
            faulty.disable()
            let last = try await a.push(notes)
            #expect(last.succeeded, "\(last)")
            let counts = faulty.counts.withLock { $0 }
            #expect((counts["lost"] ?? 0) + (counts["dropped"] ?? 0) + (counts["duplicated"] ?? 0) > 0, "faults were injected: \(counts)")
            let server = try await LocalWrites.all(serverDriver, notes)
            #expect(server.count == 30 && server.allSatisfy { $0["v"] == "e3" }, "\(server.map(\.jsonText))")
            #expect(try await LocalWrites.all(store, notes) == server)
            #expect(try await LocalWrites.outboxCount(store) == 0)
        }
    }
}
