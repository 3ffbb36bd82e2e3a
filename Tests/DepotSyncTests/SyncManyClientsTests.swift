import DepotCore
import DepotServer
import DepotSync
import DepotWire
import Foundation
import Testing

/// Fifty clients, each with its own local store, against one DepotServer on loopback, all
/// syncing at once under the seeded faults of ``SyncFaultTests`` (server: dropped connections,
/// 500/503/429, delays, answers lost after the commit, batches cut in half; client: requests
/// dropped, answers lost, requests duplicated). Each round every client goes offline, edits
/// its own notes and tasks and notes shared with the others (some deleted, some inserted by
/// several clients at once), comes back and syncs while the others do; about one client in
/// ten per round is killed mid-sync (its sync cancelled at a random instant, then a new
/// coordinator over the same store, as in ``SyncFaultTests``). Then, faults off,
/// settling rounds until nothing moves: every store equals the server, no write is lost or
/// duplicated, every outbox is empty.
///
/// The clients resolve conflicts by last writer wins on `at`, a stamp from one counter for
/// the whole run, taken just before each shared write: a client's write always gets a greater
/// stamp than any write it has seen, so the greatest stamp is the last write in time and
/// must be the one left; a deletion wins over an edit (Docs/Sync.md, "Conflicts").
///
/// What each client writes is fixed by the seed; how the 50 tasks interleave is not (nor, so,
/// the server's seeded draws, nor whether a shared note is still there for a late edit), and
/// the checks hold for every interleaving. Size: `DEPOT_SYNC_MANY_SEEDS` seeds (default 3) from
/// `DEPOT_SYNC_MANY_FIRST_SEED` (1), `DEPOT_SYNC_MANY_CLIENTS` clients (50, at least 20),
/// `DEPOT_SYNC_MANY_ROUNDS` rounds (4).
@Suite("Sync: many clients at once under seeded faults")
struct SyncManyClientsTests {
    static let environment = ProcessInfo.processInfo.environment
    static let seedCount = Int(environment["DEPOT_SYNC_MANY_SEEDS"] ?? "") ?? 3
    static let firstSeed = UInt64(environment["DEPOT_SYNC_MANY_FIRST_SEED"] ?? "") ?? 1
    static let clientCount = max(20, Int(environment["DEPOT_SYNC_MANY_CLIENTS"] ?? "") ?? 50)
    static let rounds = max(2, Int(environment["DEPOT_SYNC_MANY_ROUNDS"] ?? "") ?? 4)
    static let seeds: [UInt64] = (0..<UInt64(max(1, seedCount))).map { firstSeed &+ $0 }
    /// Shared notes `S-0` … made before the first round; the last two are deleted in round 2.
    static let sharedCount = 8
    static let doomed = 2
    /// Settling rounds allowed before the run counts as never quiescent.
    static let maxSettleRounds = 8

    /// Every write to a shared note (`S-k`, and `R<round>-k` inserted by several clients in
    /// one round), and the run's one stamp counter.
    final class Ledger: Sendable {
        struct Write: Sendable {
            var stamp: Int64
            var fields: [String: FieldValue]?  // nil: deleted
            var by: String
        }
        private let clock = Locked<Int64>(0)
        let writes = Locked([String: [Write]]())

        func nextStamp() -> Int64 {
            clock.withLock {
                $0 += 1
                return $0
            }
        }

        func record(_ id: String, _ write: Write) { writes.withLock { $0[id, default: []].append(write) } }

        /// What last writer wins must leave: nothing when anyone deleted the note, otherwise
        /// the write with the greatest stamp.
        func expected() -> [RecordID: [String: FieldValue]] {
            var out: [RecordID: [String: FieldValue]] = [:]
            for (id, writes) in writes.withLock({ $0 }) {
                if writes.contains(where: { $0.fields == nil }) { continue }
                if let last = writes.max(by: { $0.stamp < $1.stamp }), let fields = last.fields { out[.string(id)] = fields }
            }
            return out
        }
    }

    /// Which clients insert the contested notes of a round, and which delete the doomed ones.
    struct Plan {
        /// Round → note id → the clients inserting it.
        var inserts: [Int: [String: [Int]]] = [:]
        /// Client index → the shared notes it deletes in round 2.
        var deletes: [Int: [String]] = [:]

        init(seed: UInt64, clients: Int, rounds: Int) {
            let random = SeededRandomSource(seed: seed &* 104_729)
            func distinct(_ n: Int) -> [Int] {
                var picked: [Int] = []
                while picked.count < n {
                    let index = Int(random.next() % UInt64(clients))
                    if !picked.contains(index) { picked.append(index) }
                }
                return picked
            }
            for round in 1...rounds {
                for k in 0..<2 { inserts[round, default: [:]]["R\(round)-\(k)"] = distinct(3) }
            }
            for k in 0..<SyncManyClientsTests.doomed {
                let index = distinct(1)[0]
                deletes[index, default: []].append("S-\(SyncManyClientsTests.sharedCount - 1 - k)")
            }
        }
    }

    @Test("50 clients converge: identical data, 0 lost, 0 duplicated, outboxes empty, no dead letters", arguments: seeds)
    func converge(seed: UInt64) async throws {
        let started = ContinuousClock.now
        let notes = name("notes")
        let tasks = name("tasks")
        let serverFaults = SeededServerFaults(seed: seed &* 7919, rate: 0.12)
        serverFaults.setOn(false)
        try await withSyncServer(faults: serverFaults.faults) { server, serverDriver, url in
            let ledger = Ledger()
            let plan = Plan(seed: seed, clients: Self.clientCount, rounds: Self.rounds)
            var made: [SyncFaultTests.Client] = []
            for index in 0..<Self.clientCount {
                let client = try await SyncFaultTests.Client(
                    label: String(format: "c%02d", index), url: url, seed: seed &* 1_000_003 &+ UInt64(index), rate: 0.12,
                    policy: .lastWriterWins(field: "at"))
                client.transport.disable()
                made.append(client)
            }
            let clients = made

            // The shared notes, written through the server's store (so they are in its
            // change feed), and every client's first pull, without faults.
            for k in 0..<Self.sharedCount {
                let stamp = ledger.nextStamp()
                let fields: [String: FieldValue] = ["at": .int(stamp), "by": .string("server"), "v": .int(0)]
                try await server.store.write { tx in try tx.save(Record(id: .string("S-\(k)"), fields: fields), into: notes) }
                ledger.record("S-\(k)", .init(stamp: stamp, fields: fields, by: "server"))
            }
            try await Self.everyClient(clients) { client in
                for collection in [notes, tasks] {
                    let report = try await client.coordinator.sync(collection)
                    #expect(report.succeeded, "seed \(seed) \(client.label): first pull \(report.failures)")
                }
                let shared = try await LocalWrites.all(client.store, notes).count
                #expect(shared == Self.sharedCount, "seed \(seed) \(client.label): \(shared) shared notes after the first pull")
            }

            // The rounds, faults on.
            serverFaults.setOn(true)
            for client in clients { client.transport.enable() }
            let conflicts = Locked(0)
            let kills = Locked(0)
            for round in 1...Self.rounds {
                try await Self.everyClient(clients) { client in
                    guard let index = clients.firstIndex(where: { $0 === client }) else { return }
                    let random = SeededRandomSource(seed: seed &* 31 &+ UInt64(round) &* 1_000_003 &+ UInt64(index))
                    client.transport.setOffline(true)
                    for _ in 0..<(2 + Int(random.next() % 3)) {
                        try await SyncFaultTests.userWrite(client, random: random, notes: notes, tasks: tasks)
                    }
                    if random.nextUnit() < 0.6 {
                        try await Self.sharedWrite(client, "S-\(random.next() % UInt64(Self.sharedCount))", delete: false, ledger: ledger, notes: notes)
                    }
                    for id in plan.inserts[round]?.filter({ $0.value.contains(index) }).keys.sorted() ?? [] {
                        try await Self.sharedWrite(client, id, delete: false, ledger: ledger, notes: notes, insert: true)
                    }
                    if round == 2 {
                        for id in plan.deletes[index] ?? [] { try await Self.sharedWrite(client, id, delete: true, ledger: ledger, notes: notes) }
                    }
                    if random.nextUnit() < 0.3 {
                        // A sync while offline: nothing leaves, nothing is lost.
                        let offline = try await client.coordinator.sync(notes)
                        #expect(offline.pushed == 0 && offline.pulled == 0, "seed \(seed) \(client.label): moved records while offline: \(offline)")
                    }
                    client.transport.setOffline(false)
                    if random.nextUnit() < 0.1 {
                        // Killed mid-sync: the sync cancelled at a random instant, then a new
                        // coordinator over the same store, as a restarted process would have.
                        kills.withLock { $0 += 1 }
                        let coordinator = client.coordinator
                        let running = Task { try await coordinator.sync(notes) }
                        try await Task.sleep(for: .microseconds(Int64(random.next() % 3000)))
                        running.cancel()
                        _ = await running.result
                        try await client.restart()
                    }
                    for collection in [notes, tasks] {
                        let report = try await client.coordinator.sync(collection)
                        conflicts.withLock { $0 += report.conflicts }
                    }
                }
            }

            // Faults off: settle until a whole round moves nothing.
            serverFaults.setOn(false)
            for client in clients {
                client.transport.setOffline(false)
                client.transport.disable()
            }
            var quiescentAfter: Int?
            var lastMoves = 0
            for settle in 1...Self.maxSettleRounds {
                let moves = Locked(0)
                let unsettled = Locked([String]())
                try await Self.everyClient(clients) { client in
                    for collection in [notes, tasks] {
                        let report = try await client.coordinator.sync(collection)
                        moves.withLock { $0 += report.pushed + report.pulled + report.remoteDeletions + report.conflicts }
                        conflicts.withLock { $0 += report.conflicts }
                        if !report.succeeded { unsettled.withLock { $0.append("\(client.label) \(collection): \(report.failures)") } }
                    }
                }
                lastMoves = moves.withLock { $0 }
                let failures = unsettled.withLock { $0 }
                if lastMoves == 0 && failures.isEmpty {
                    quiescentAfter = settle
                    break
                }
            }
            #expect(quiescentAfter != nil, "seed \(seed): still moving after \(Self.maxSettleRounds) settling rounds (\(lastMoves) in the last)")

            // Checks.
            let serverNotes = try await LocalWrites.all(serverDriver, notes)
            let serverTasks = try await LocalWrites.all(serverDriver, tasks)
            var expectedNotes = ledger.expected()
            var expectedTags: [String: [String: FieldValue]] = [:]
            var differing: [String] = []
            for client in clients {
                let outbox = try await LocalWrites.outboxCount(client.store)
                let dead = try await client.store.read { tx in try tx.count(Field("state") == "dead", in: WireCollections.outbox) }
                #expect(outbox == 0 && dead == 0, "seed \(seed) \(client.label): \(outbox) outbox entries left, \(dead) dead letters")
                if try await LocalWrites.all(client.store, notes) != serverNotes { differing.append("\(client.label) notes") }
                if try await LocalWrites.all(client.store, tasks) != serverTasks { differing.append("\(client.label) tasks") }
                for (id, fields) in client.notes { expectedNotes[.string(id)] = fields }
                for (tag, fields) in client.tasks { expectedTags[tag] = fields }
            }
            #expect(differing.isEmpty, "seed \(seed): stores differing from the server: \(differing)")
            let tally = SyncTally(serverNotes: serverNotes, serverTasks: serverTasks, expectedNotes: expectedNotes, expectedTags: expectedTags)
            #expect(tally.lostNotes == 0 && tally.extraNotes == 0, "seed \(seed): notes lost \(tally.lostNotes), unexpected \(tally.extraNotes)")
            #expect(
                tally.lostTasks == 0 && tally.extraTasks == 0 && tally.duplicatedTasks == 0,
                "seed \(seed): tasks lost \(tally.lostTasks), unexpected \(tally.extraTasks), duplicated \(tally.duplicatedTasks)")
            if tally.lostNotes + tally.extraNotes > 0 {
                let actual = Dictionary(serverNotes.map { ($0.id, $0.fields) }, uniquingKeysWith: { a, _ in a })
                for (id, fields) in expectedNotes.sorted(by: { "\($0.key)" < "\($1.key)" }) where actual[id] != fields {
                    Issue.record("seed \(seed): note \(id) expected \(FieldValue.object(fields)), server \(actual[id].map { FieldValue.object($0).description } ?? "missing")")
                }
                for (id, fields) in actual where expectedNotes[id] == nil {
                    Issue.record("seed \(seed): note \(id) unexpected on the server: \(FieldValue.object(fields))")
                }
            }

            // The run must have been what it claims: faults of both sides, batches cut in
            // half, shared notes written by several clients, conflicts settled, deletions.
            var clientFaults: [String: Int] = [:]
            for client in clients { for (k, v) in client.transport.counts.withLock({ $0 }) { clientFaults[k, default: 0] += v } }
            let batches = serverFaults.batches.withLock { $0 }
            let sharedWrites = ledger.writes.withLock { $0 }
            let contested = sharedWrites.values.filter { Set($0.map(\.by)).count > 2 }.count
            let deleted = sharedWrites.values.filter { $0.contains { $0.fields == nil } }.count
            let conflictCount = conflicts.withLock { $0 }
            #expect(serverFaults.count.withLock { $0 } > 0 && batches.cut > 0, "seed \(seed): server faults \(serverFaults.count.withLock { $0 }), batches \(batches)")
            #expect(["dropped", "lost", "duplicated", "offline"].allSatisfy { clientFaults[$0, default: 0] > 0 }, "seed \(seed): client faults \(clientFaults)")
            #expect(contested > 0 && deleted == Self.doomed && conflictCount > 0, "seed \(seed): shared notes written by more than two clients \(contested), deleted \(deleted), conflicts \(conflictCount)")
            let seconds = Double((ContinuousClock.now - started).components.seconds)
            print(
                "sync many clients: seed \(seed), \(Self.clientCount) clients × \(Self.rounds) rounds, \(serverNotes.count) notes, \(serverTasks.count) tasks, "
                    + "\(sharedWrites.values.map(\.count).reduce(0, +)) shared writes, \(conflictCount) conflicts, server faults \(serverFaults.count.withLock { $0 }), "
                    + "batches \(batches.sent) (\(batches.cut) cut), client faults \(clientFaults.sorted { $0.key < $1.key }), "
                    + "\(kills.withLock { $0 }) kills, quiescent after \(quiescentAfter.map(String.init) ?? "-") settling rounds, about \(Int(seconds)) s")
        }
    }

    /// Runs `body` for every client at once, one task each.
    static func everyClient(_ clients: [SyncFaultTests.Client], _ body: @escaping @Sendable (SyncFaultTests.Client) async throws -> Void) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for client in clients { group.addTask { try await body(client) } }
            try await group.waitForAll()
        }
    }

    /// One write to a shared note in `client`'s store, recorded in the ledger with a new
    /// stamp. An edit or deletion needs the note in the store (a client edits what it sees;
    /// a note already deleted there is left alone); an insert writes it in any case.
    static func sharedWrite(_ client: SyncFaultTests.Client, _ id: String, delete: Bool, ledger: Ledger, notes: CollectionName, insert: Bool = false) async throws {
        let recordID = RecordID.string(id)
        if !insert {
            let present = try await client.store.read { tx in try tx.get(recordID, from: notes) } != nil
            guard present else { return }
        }
        client.counter += 1
        let stamp = ledger.nextStamp()
        if delete {
            try await LocalWrites.delete(client.store, notes, recordID)
            ledger.record(id, .init(stamp: stamp, fields: nil, by: client.label))
        } else {
            let fields: [String: FieldValue] = ["at": .int(stamp), "by": .string(client.label), "v": .int(Int64(client.counter))]
            try await LocalWrites.save(client.store, notes, Record(id: recordID, fields: fields))
            ledger.record(id, .init(stamp: stamp, fields: fields, by: client.label))
        }
    }
}
