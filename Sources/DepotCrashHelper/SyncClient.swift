// depot-crash-helper sync STORE BASE_URL SEED LABEL WRITES [final]
//
// A sync client for the kill tests of DepotSync (Tests/DepotSyncTests/SyncKillTests.swift):
// opens the local store STORE through `Store`, attaches `notes` (client-chosen string ids)
// and `tasks` (the server assigns integer ids on POST, so the client re-keys) to the
// DepotServer at BASE_URL, then runs two tasks at once until killed:
//
// - the writer commits the local writes LABEL-n for n = 1...WRITES, each in its own store
//   transaction (which records its outbox entry) together with the progress record
//   `helper_progress/progress` (`n`), so a restarted client resumes after the last commit;
// - the syncer pulls and pushes both collections over and over, with seeded offline periods
//   (every request fails at once, as with no network).
//
// Once all WRITES are committed the syncer drains the outbox, prints `DONE` and exits 0.
// With `final` it writes nothing and syncs, online, until the outbox is empty and a round
// pulls nothing, then prints `CLEAN` (exit 0) or `UNCLEAN ...` (exit 3).
//
// Every line goes out with one write(2) on stdout, so it is never lost in a buffer:
//   START <n>                              the last committed write when the process began
//   WILL <n> <notes|tasks> <insert|edit|delete> <key>   write n is about to commit
//   ACK <n>                                write n committed (its outbox entry with it)
//   OFFLINE <ms>                           an offline period began
//   SYNC pushed=<n> conflicts=<n> dead=<n>  what a round of syncs did (when not nothing)
//   ANOMALY <kind> <collection> <key>      the app saw one of its own records wrong (see checkLocalView)
//   DONE / CLEAN / UNCLEAN <why>
// A notes key is the record id; a tasks key is the `tag` field (the id changes on re-key).
// Fields: notes {v: n, by: LABEL} (+ edited: true), tasks {tag, v: n, by: LABEL} (+ edited: true).
import Depot
import DepotCore
import Foundation

enum SyncClient {
    static let usage = "usage: depot-crash-helper sync STORE BASE_URL SEED LABEL WRITES [final]\n"

    /// Parses the arguments after `sync` and runs the client; returns the exit status.
    static func main(_ arguments: [String]) async -> Int32 {
        guard arguments.count == 5 || (arguments.count == 6 && arguments[5] == "final"),
            let base = URL(string: arguments[1]), let seed = UInt64(arguments[2]), let writes = Int64(arguments[4]),
            !arguments[3].isEmpty, arguments[3].allSatisfy({ $0.isLetter || $0.isNumber })
        else {
            FileHandle.standardError.write(Data(usage.utf8))
            return 2
        }
        do {
            let store = try await Store.open(arguments[0])
            let client = try await SyncClient.Run(store: store, base: base, seed: seed, label: arguments[3], writes: writes)
            return try await arguments.count == 6 ? client.settle() : client.run()
        } catch {
            FileHandle.standardError.write(Data("depot-crash-helper sync: \(String(reflecting: error))\n".utf8))
            return 1
        }
    }

    /// Writes one line to stdout with a single write(2): no buffering, whole lines only.
    static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// Prints what two syncs did, when they pushed or met a conflict.
    static func tally(_ a: SyncReport, _ b: SyncReport) {
        let pushed = a.pushed + b.pushed, conflicts = a.conflicts + b.conflicts, dead = a.deadLettered + b.deadLettered
        if pushed + conflicts + dead > 0 { say("SYNC pushed=\(pushed) conflicts=\(conflicts) dead=\(dead)") }
    }

    /// A flag shared by the writer and the syncer.
    final class Flag: Sendable {
        private let state: Locked<Bool>
        init(_ value: Bool) { state = Locked(value) }
        var value: Bool { state.withLock { $0 } }
        func set() { state.withLock { $0 = true } }
    }

    /// A transport that fails every request at once while offline.
    final class OfflineTransport: HTTPTransport {
        let inner = URLSessionTransport(timeout: 10)
        let offline = Locked(false)

        func send(_ request: HTTPRequestSpec) async throws -> HTTPAnswer {
            if offline.withLock({ $0 }) { throw DepotError(.remote, "offline") }
            return try await inner.send(request)
        }
    }

    /// One process's run over the store.
    struct Run: Sendable {
        let store: Store
        let coordinator: SyncCoordinator
        let transport = OfflineTransport()
        let label: String
        let writes: Int64
        let random: SeededRandomSource
        let notes: CollectionName
        let tasks: CollectionName
        let progress: CollectionName
        let memory: CollectionName
        let start: Int64

        init(store: Store, base: URL, seed: UInt64, label: String, writes: Int64) async throws {
            self.store = store
            self.label = label
            self.writes = writes
            notes = try CollectionName("notes")
            tasks = try CollectionName("tasks")
            progress = try CollectionName("helper_progress")
            memory = try CollectionName("helper_memory")
            let progressName = progress
            start = try await store.read { tx in try tx.get("progress", from: progressName)?["n"].intValue ?? 0 }
            // A different sequence for every restart: seed, label and where this run begins.
            var mix = seed &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(bitPattern: start)
            for byte in label.utf8 { mix = (mix &* 31) &+ UInt64(byte) }
            random = SeededRandomSource(seed: mix)
            coordinator = SyncCoordinator(
                store: store, transport: transport, conflictPolicy: .serverWins,
                retryPolicy: RetryPolicy(baseDelay: .milliseconds(5), maxDelay: .milliseconds(40), maxAttempts: 3),
                random: SeededRandomSource(seed: mix &+ 1)
            )
            try await coordinator.attach(notes, to: SyncEndpoint(baseURL: base, path: "/notes"))
            var tasksEndpoint = SyncEndpoint(baseURL: base, path: "/tasks", idAssignment: .server)
            tasksEndpoint.pageSize = 50
            try await coordinator.attach(tasks, to: tasksEndpoint)
            SyncClient.say("START \(start)")
            if ProcessInfo.processInfo.environment["DEPOT_SYNC_DEBUG"] != nil {
                let events = await coordinator.events()
                Task {
                    for await event in events {
                        switch event {
                        case .pulled, .pullStarted, .finished, .retrying: continue
                        default: SyncClient.say("EVENT \(event)")
                        }
                    }
                }
            }
        }

        /// Writes and syncs at once until every write is committed and pushed.
        func run() async throws -> Int32 {
            let writerDone = Flag(start >= writes)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    try await writeAll()
                    writerDone.set()
                }
                group.addTask {
                    var offlineUntil: ContinuousClock.Instant?
                    while true {
                        let now = ContinuousClock.now
                        if let until = offlineUntil, now >= until {
                            transport.offline.withLock { $0 = false }
                            offlineUntil = nil
                        } else if offlineUntil == nil, random.nextUnit() < 0.08 {
                            let ms = 30 + Int(random.next() % 300)
                            transport.offline.withLock { $0 = true }
                            offlineUntil = now.advanced(by: .milliseconds(ms))
                            SyncClient.say("OFFLINE \(ms)")
                        }
                        let done = writerDone.value
                        if done, offlineUntil != nil {
                            transport.offline.withLock { $0 = false }
                            offlineUntil = nil
                        }
                        let a = try await coordinator.sync(notes)
                        let b = try await coordinator.sync(tasks)
                        SyncClient.tally(a, b)
                        if done, a.succeeded, b.succeeded, a.pendingLeft + b.pendingLeft + a.deadLeft + b.deadLeft == 0 { return }
                        try await Task.sleep(for: .milliseconds(Int64(random.next() % 8)))
                    }
                }
                try await group.waitForAll()
            }
            SyncClient.say("DONE")
            return 0
        }

        /// Commits writes start+1 ... writes, each with its progress record.
        func writeAll() async throws {
            var n = start
            while n < writes {
                n += 1
                try await writeOne(n, rolls: (random.nextUnit(), random.nextUnit(), random.next()))
                SyncClient.say("ACK \(n)")
                try await Task.sleep(for: .microseconds(Int64(random.next() % 6000)))
            }
        }

        /// One local write, chosen inside its transaction from what the store holds: insert a
        /// new record, edit or delete one of this client's own records.
        func writeOne(_ n: Int64, rolls: (Double, Double, UInt64)) async throws {
            let (notes, tasks, progress, memory, label) = (self.notes, self.tasks, self.progress, self.memory, self.label)
            try await store.write { tx in
                let useNotes = rolls.0 < 0.5
                let collection = useNotes ? notes : tasks
                let own = try tx.query(Query(filter: Field("by") == label), in: collection)
                var keys = own.compactMap { record -> String? in
                    if !useNotes { return record["tag"].stringValue }
                    if case .string(let id) = record.id { return id }
                    return nil
                }
                try checkLocalView(tx, collection: collection.rawValue, own: own, byTag: !useNotes)
                keys = Array(Set(keys)).sorted()
                let kind = keys.isEmpty || rolls.1 < 0.4 ? "insert" : rolls.1 < 0.85 ? "edit" : "delete"
                let key = kind == "insert" ? "\(label)-\(useNotes ? "n" : "t")\(n)" : keys[Int(rolls.2 % UInt64(keys.count))]
                SyncClient.say("WILL \(n) \(collection.rawValue) \(kind) \(key)")
                var fields: [String: FieldValue] = ["v": .int(n), "by": .string(label)]
                if kind == "edit" { fields["edited"] = true }
                if useNotes {
                    let id = RecordID.string(key)
                    if kind == "delete" { try tx.delete(id, from: notes) } else { try tx.save(Record(id: id, fields: fields), into: notes) }
                } else {
                    fields["tag"] = .string(key)
                    if kind == "insert" {
                        _ = try tx.insert(fields: fields, into: tasks)
                    } else {
                        // Every local copy of the task (a pulled copy may sit beside the
                        // local one until its POST is acknowledged).
                        for match in own where match["tag"].stringValue == key {
                            if kind == "delete" { try tx.delete(match.id, from: tasks) } else { try tx.save(Record(id: match.id, fields: fields), into: tasks) }
                        }
                    }
                }
                try tx.save(Record(id: "progress", fields: ["n": .int(n)]), into: progress)
                let memo: [String: FieldValue] = ["collection": .string(collection.rawValue), "key": .string(key), "live": .bool(kind != "delete"), "fields": .object(fields)]
                try tx.save(Record(id: .string("\(collection.rawValue)/\(key)"), fields: memo), into: memory)
            }
        }

        /// What the app sees must be what it wrote: compares this client's own records in the
        /// store with the memo of its writes (`helper_memory`, written with each write) and
        /// prints `ANOMALY <kind> <collection> <key>` for a record that is missing, has other
        /// fields, came back after its deletion, or is there twice.
        func checkLocalView(_ tx: StoreWriteTransaction, collection: String, own: [Record], byTag: Bool) throws {
            var expected: [String: [String: FieldValue]] = [:]
            var deleted: Set<String> = []
            for memo in try tx.query(Query(filter: Field("collection") == collection), in: memory) {
                guard let key = memo["key"].stringValue else { continue }
                if memo["live"].boolValue == true, let fields = memo["fields"].objectValue { expected[key] = fields } else { deleted.insert(key) }
            }
            var copies: [String: Int] = [:]
            for record in own {
                let key: String
                if byTag { key = record["tag"].stringValue ?? "?" } else if case .string(let id) = record.id { key = id } else { key = "?" }
                copies[key, default: 0] += 1
                if deleted.contains(key) {
                    SyncClient.say("ANOMALY resurrected \(collection) \(key) id \(record.id)")
                    if ProcessInfo.processInfo.environment["DEPOT_SYNC_DEBUG"] != nil {
                        let outbox = try tx.query(Query(filter: Field("collection") == collection), in: try CollectionName(reserved: "_depot_outbox"))
                        for entry in outbox where entry["recordId"] == record.id.fieldValue { SyncClient.say("DETAIL outbox \(entry)") }
                        let states = try tx.query(Query(filter: Field("collection") == collection), in: try CollectionName(reserved: "_depot_sync_records"))
                        for state in states where state["recordId"] == record.id.fieldValue { SyncClient.say("DETAIL state \(state)") }
                    }
                } else if let fields = expected[key], fields != record.fields {
                    SyncClient.say("ANOMALY changed \(collection) \(key)")
                } else if expected[key] == nil {
                    SyncClient.say("ANOMALY unknown \(collection) \(key)")
                }
            }
            for (key, count) in copies where count > 1 { SyncClient.say("ANOMALY duplicated \(collection) \(key)") }
            for key in expected.keys where copies[key] == nil { SyncClient.say("ANOMALY missing \(collection) \(key)") }
        }

        /// Online, no writes: syncs until the outbox is empty and a round pulls nothing.
        func settle() async throws -> Int32 {
            var last = ""
            for _ in 0..<40 {
                let a = try await coordinator.sync(notes)
                let b = try await coordinator.sync(tasks)
                SyncClient.tally(a, b)
                last = "pending \(a.pendingLeft + b.pendingLeft), dead \(a.deadLeft + b.deadLeft), pulled \(a.pulled + b.pulled), failures \(a.failures + b.failures)"
                if a.succeeded, b.succeeded, a.pendingLeft + b.pendingLeft + a.deadLeft + b.deadLeft == 0, a.pulled + b.pulled + a.remoteDeletions + b.remoteDeletions == 0 {
                    SyncClient.say("CLEAN")
                    return 0
                }
            }
            SyncClient.say("UNCLEAN \(last)")
            return 3
        }
    }
}
