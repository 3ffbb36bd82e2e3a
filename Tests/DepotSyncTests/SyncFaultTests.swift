import DepotCore
import DepotHTTPClient
import DepotMemory
import DepotServer
import DepotSync
import DepotWire
import Foundation
import Testing

/// Two clients, one DepotServer on loopback, seeded faults on both sides of the wire, offline
/// periods and clients killed mid-sync; at the end everything must agree with nothing lost
/// or duplicated.
///
/// `DEPOT_SYNC_SEEDS` and `DEPOT_SYNC_OPS` set the size (defaults: 6 seeds × 250 operations,
/// CI-friendly). The full run of the issue is `DEPOT_SYNC_SEEDS=50 DEPOT_SYNC_OPS=1000`.
@Suite("Sync under seeded faults")
struct SyncFaultTests {
    static let seedCount = Int(ProcessInfo.processInfo.environment["DEPOT_SYNC_SEEDS"] ?? "") ?? 6
    static let operations = Int(ProcessInfo.processInfo.environment["DEPOT_SYNC_OPS"] ?? "") ?? 250
    static let seeds: [UInt64] = (1...max(1, seedCount)).map { UInt64($0) }
    static let totals = Locked([String: Int]())

    /// One simulated app: a local store, its coordinator (replaced when "killed"), its fault
    /// layer, and what the user wrote (the truth the end state must match).
    final class Client: @unchecked Sendable {
        // @unchecked Sendable: used by one test task at a time, never concurrently.
        let label: String
        let store: Store
        let transport: FaultyTransport
        var coordinator: SyncCoordinator
        let url: URL
        let policy: ConflictPolicy
        var notes: [String: [String: FieldValue]] = [:]  // own note id -> fields
        var tasks: [String: [String: FieldValue]] = [:]  // own task tag -> fields
        var counter = 0

        init(label: String, url: URL, seed: UInt64, rate: Double, policy: ConflictPolicy = .serverWins, overNIO: Bool = false) async throws {
            self.label = label
            self.url = url
            self.policy = policy
            let inner: any HTTPTransport = overNIO ? NIOHTTPTransport(timeout: 10) : URLSessionTransport(timeout: 10)
            transport = FaultyTransport(inner: inner, seed: seed, rate: rate)
            store = try await clientStore()
            coordinator = SyncCoordinator(store: store)
            try await restart()
        }

        /// A new process over the same store: a new coordinator, attachments read again.
        func restart() async throws {
            coordinator = SyncCoordinator(
                store: store, transport: transport, conflictPolicy: policy,
                retryPolicy: RetryPolicy(baseDelay: .milliseconds(1), maxDelay: .milliseconds(20), maxAttempts: 4),
                sleeper: RecordingSleeper(), random: SeededRandomSource(seed: UInt64(counter) &+ 99)
            )
            try await coordinator.attach(name("notes"), to: SyncEndpoint(baseURL: url, path: "/notes"))
            var tasksEndpoint = SyncEndpoint(baseURL: url, path: "/tasks", idAssignment: .server)
            tasksEndpoint.pageSize = 50
            try await coordinator.attach(name("tasks"), to: tasksEndpoint)
        }
    }

    @Test("two clients converge: identical data, 0 lost, 0 duplicated, outboxes empty", arguments: seeds)
    func converge(seed: UInt64) async throws {
        try await converge(seed: seed, overNIO: false)
    }

    /// The same over ``NIOHTTPTransport`` (what `depot sync` uses for `http://`), on half the
    /// seeds: kept-alive connections cut by the server's dropped connections and lost answers.
    @Test("over the NIO transport too: two clients converge, 0 lost, 0 duplicated", arguments: seeds.filter { $0 % 2 == 1 })
    func convergeOverNIO(seed: UInt64) async throws {
        try await converge(seed: seed, overNIO: true)
    }

    func converge(seed: UInt64, overNIO: Bool) async throws {
        // Batches seen by the server, and batches it cut in half (applied the first half,
        // lost the answer): both must happen for the run to prove anything about batches.
        let server = SeededServerFaults(seed: seed &* 7919, rate: 0.12)
        try await withSyncServer(faults: server.faults) { _, serverDriver, url in
            let random = SeededRandomSource(seed: seed)
            let clients = [
                try await Client(label: "A", url: url, seed: seed &+ 1000, rate: 0.12, overNIO: overNIO),
                try await Client(label: "B", url: url, seed: seed &+ 2000, rate: 0.12, overNIO: overNIO),
            ]
            let notes = name("notes")
            let tasks = name("tasks")
            var kills = 0
            var offlineToggles = 0
            for _ in 0..<Self.operations {
                let client = clients[Int(random.next() % 2)]
                let roll = random.nextUnit()
                if roll < 0.55 {
                    try await Self.userWrite(client, random: random, notes: notes, tasks: tasks)
                } else if roll < 0.62 {
                    offlineToggles += 1
                    client.transport.setOffline(random.nextUnit() < 0.6)
                } else {
                    let collection = random.next() % 2 == 0 ? notes : tasks
                    if random.nextUnit() < 0.15 {
                        // Killed between sending and acknowledging: cancel mid-sync, then a new
                        // coordinator over the same store, as a restarted process would have.
                        kills += 1
                        let coordinator = client.coordinator
                        let running = Task { try await coordinator.sync(collection) }
                        try await Task.sleep(for: .microseconds(Int64(random.next() % 3000)))
                        running.cancel()
                        _ = await running.result
                        try await client.restart()
                    } else {
                        _ = try await client.coordinator.sync(collection)
                    }
                }
            }
            // Back online, faults off: sync until everything has settled.
            server.setOn(false)
            for client in clients { client.transport.setOffline(false) }
            let quiet = FaultyTransportSwitch.off(clients)
            for _ in 0..<4 {
                for client in quiet {
                    for collection in [notes, tasks] { _ = try await client.coordinator.sync(collection) }
                }
            }
            // Checks.
            let serverNotes = try await LocalWrites.all(serverDriver, notes)
            let serverTasks = try await LocalWrites.all(serverDriver, tasks)
            var expectedNotes: [RecordID: [String: FieldValue]] = [:]
            var expectedTags: [String: [String: FieldValue]] = [:]
            for client in quiet {
                #expect(try await LocalWrites.outboxCount(client.store) == 0, "seed \(seed) client \(client.label): outbox not empty")
                #expect(try await LocalWrites.all(client.store, notes) == serverNotes, "seed \(seed) client \(client.label): notes differ")
                #expect(try await LocalWrites.all(client.store, tasks) == serverTasks, "seed \(seed) client \(client.label): tasks differ")
                for (id, fields) in client.notes { expectedNotes[.string(id)] = fields }
                for (tag, fields) in client.tasks { expectedTags[tag] = fields }
            }
            let tally = SyncTally(serverNotes: serverNotes, serverTasks: serverTasks, expectedNotes: expectedNotes, expectedTags: expectedTags)
            let (lostNotes, extraNotes) = (tally.lostNotes, tally.extraNotes)
            let (lostTasks, extraTasks, duplicated) = (tally.lostTasks, tally.extraTasks, tally.duplicatedTasks)
            let (actualTags, tagCounts) = (tally.actualTags, tally.tagCounts)
            if lostTasks + extraTasks + duplicated > 0, ProcessInfo.processInfo.environment["DEPOT_SYNC_DEBUG"] != nil {
                for (tag, fields) in expectedTags.sorted(by: { $0.key < $1.key }) where actualTags[tag] != fields {
                    let keys = try await serverDriver.read { tx in try tx.query(Query(), in: WireCollections.idempotency) }
                    for k in keys where k["body"].stringValue?.contains("\"\(tag)\"") == true {
                        print("seed \(seed) \(tag) idempotency: \(k["fingerprint"]) -> \(k["status"]) \(k["body"])")
                    }
                    print("seed \(seed) expected \(tag) = \(FieldValue.object(fields)), server \(actualTags[tag].map { FieldValue.object($0).description } ?? "missing") x\(tagCounts[tag] ?? 0)")
                }
                for (tag, fields) in actualTags where expectedTags[tag] == nil { print("seed \(seed) unexpected \(tag) = \(FieldValue.object(fields))") }
                for (tag, n) in tagCounts where n > 1 { print("seed \(seed) duplicated \(tag) x\(n)") }
            }
            let batchCounts = server.batches.withLock { $0 }
            #expect(batchCounts.sent > 0 && batchCounts.cut > 0, "seed \(seed): batches sent \(batchCounts.sent), cut in half \(batchCounts.cut)")
            #expect(lostNotes == 0 && extraNotes == 0, "seed \(seed): notes lost \(lostNotes), unexpected \(extraNotes)")
            #expect(lostTasks == 0 && extraTasks == 0 && duplicated == 0, "seed \(seed): tasks lost \(lostTasks), unexpected \(extraTasks), duplicated \(duplicated)")
            var faultsSeen: [String: Int] = [:]
            for client in clients { for (k, v) in client.transport.counts.withLock({ $0 }) { faultsSeen[k, default: 0] += v } }
            // The totals printed are those of the URLSession runs (all seeds).
            let finished = overNIO ? nil : Self.totals.withLock { totals -> [String: Int]? in
                totals["seeds", default: 0] += 1
                totals["operations", default: 0] += Self.operations
                totals["kills", default: 0] += kills
                totals["server.faults", default: 0] += server.count.withLock { $0 }
                totals["server.batches", default: 0] += batchCounts.sent
                totals["server.batchesCutInHalf", default: 0] += batchCounts.cut
                totals["offlineToggles", default: 0] += offlineToggles
                totals["records", default: 0] += serverNotes.count + serverTasks.count
                for (k, v) in faultsSeen { totals["client." + k, default: 0] += v }
                return totals["seeds"] == Self.seeds.count ? totals : nil
            }
            if let finished { print("sync fault totals: \(finished.sorted { $0.key < $1.key })") }
        }
    }

    /// One user action on a client's local store (what the app would do through the Store).
    static func userWrite(_ client: Client, random: SeededRandomSource, notes: CollectionName, tasks: CollectionName) async throws {
        client.counter += 1
        let value: FieldValue = .int(Int64(client.counter))
        if random.next() % 2 == 0 {
            let own = client.notes.keys.sorted()
            let roll = random.nextUnit()
            if own.isEmpty || roll < 0.4 {
                let id = "\(client.label)-\(client.counter)"
                let fields: [String: FieldValue] = ["v": value, "by": .string(client.label)]
                try await LocalWrites.save(client.store, notes, Record(id: .string(id), fields: fields))
                client.notes[id] = fields
            } else if roll < 0.85 {
                let id = own[Int(random.next() % UInt64(own.count))]
                let fields: [String: FieldValue] = ["v": value, "by": .string(client.label), "edited": true]
                try await LocalWrites.save(client.store, notes, Record(id: .string(id), fields: fields))
                client.notes[id] = fields
            } else {
                let id = own[Int(random.next() % UInt64(own.count))]
                try await LocalWrites.delete(client.store, notes, .string(id))
                client.notes[id] = nil
            }
        } else {
            let own = client.tasks.keys.sorted()
            let roll = random.nextUnit()
            if own.isEmpty || roll < 0.4 {
                let tag = "\(client.label)-\(client.counter)"
                let fields: [String: FieldValue] = ["tag": .string(tag), "v": value]
                _ = try await LocalWrites.insert(client.store, tasks, fields)
                client.tasks[tag] = fields
            } else {
                let tag = own[Int(random.next() % UInt64(own.count))]
                let matches = try await client.store.read { tx in try tx.query(Query(filter: Field("tag") == tag), in: tasks) }
                guard let local = matches.first else { return }
                if roll < 0.85 {
                    let fields: [String: FieldValue] = ["tag": .string(tag), "v": value, "edited": true]
                    for match in matches { try await LocalWrites.save(client.store, tasks, Record(id: match.id, fields: fields)) }
                    client.tasks[tag] = fields
                } else {
                    for match in matches { try await LocalWrites.delete(client.store, tasks, match.id) }
                    _ = local
                    client.tasks[tag] = nil
                }
            }
        }
    }
}

/// Turns the client-side fault layer off for the settling phase.
enum FaultyTransportSwitch {
    static func off(_ clients: [SyncFaultTests.Client]) -> [SyncFaultTests.Client] {
        for client in clients { client.transport.disable() }
        return clients
    }
}
