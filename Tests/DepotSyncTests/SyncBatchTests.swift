import DepotCore
import DepotMemory
import DepotSQLite
import DepotServer
import DepotSync
import DepotWire
import Foundation
import Testing

/// Batched push (Docs/Sync.md, "Batched push"): the outbox goes in `POST /_batch` requests,
/// each entry handled exactly as its own request would be, and one request per entry to a
/// peer without the route.
@Suite("Batched push")
struct SyncBatchTests {
    let notes = name("notes")
    let tasks = name("tasks")

    /// Every request the server saw, as `METHOD /path`.
    final class RequestLog: Sendable {
        let lines = Locked<[String]>([])
        func count(_ line: String) -> Int { lines.withLock { $0.filter { $0 == line }.count } }
        func count(prefix: String) -> Int { lines.withLock { $0.filter { $0.hasPrefix(prefix) }.count } }
    }

    /// Server faults that log every request and inject what `decide` says.
    static func logging(_ log: RequestLog, _ decide: @escaping @Sendable (String, String) -> ServerFault? = { _, _ in nil }) -> ServerFaults {
        ServerFaults { method, path in
            log.lines.withLock { $0.append(method + " " + path) }
            return decide(method, path)
        }
    }

    func client(_ url: URL, policy: ConflictPolicy = .serverWins, assignment: SyncEndpoint.IDAssignment = .client, collection: CollectionName, batchSize: Int = SyncCoordinator.defaultPushBatchSize) async throws -> (SyncCoordinator, Store) {
        let store = try await clientStore()
        let coordinator = SyncCoordinator(
            store: store, transport: URLSessionTransport(timeout: 10), conflictPolicy: policy,
            retryPolicy: RetryPolicy(baseDelay: .milliseconds(1), maxDelay: .milliseconds(5), maxAttempts: 4), sleeper: RecordingSleeper(),
            random: SeededRandomSource(seed: 1), pushBatchSize: batchSize
        )
        try await coordinator.attach(collection, to: SyncEndpoint(baseURL: url, path: "/" + collection.rawValue, idAssignment: assignment))
        return (coordinator, store)
    }

    @Test("the outbox goes in batches of the configured size; each batch is acknowledged in one local transaction")
    func batchesAndOneLocalTransaction() async throws {
        let log = RequestLog()
        try await withSyncServer(faults: Self.logging(log)) { _, serverDriver, url in
            let (a, store) = try await client(url, collection: notes, batchSize: 16)
            for i in 1...40 { try await LocalWrites.save(store, notes, Record(id: .string("n\(i)"), fields: ["v": .int(Int64(i))])) }
            let localCommits = Locked(0)
            let changes = store.changes()
            let counter = Task {
                for await batch in changes {
                    if batch.collections.contains(name("sentinel")) { return }
                    if batch.collections.contains(WireCollections.outbox) { localCommits.withLock { $0 += 1 } }
                }
            }
            let report = try await a.push(notes)
            try await store.write { tx in try tx.save(Record(id: 1, fields: [:]), into: name("sentinel")) }
            await counter.value
            #expect(report.succeeded && report.pushed == 40)
            #expect(log.count("GET /_batch") == 1)
            #expect(log.count("POST /_batch") == 3)  // 16 + 16 + 8
            #expect(log.count("POST /notes") == 0)
            #expect(localCommits.withLock { $0 } == 3)  // one per batch
            #expect(try await LocalWrites.all(serverDriver, notes) == LocalWrites.all(store, notes))
            #expect(try await LocalWrites.outboxCount(store) == 0)
            // The ETags the batch answered are remembered: edits go as PUTs with If-Match, no conflict.
            for i in 1...5 { try await LocalWrites.save(store, notes, Record(id: .string("n\(i)"), fields: ["v": "edited"])) }
            let edits = try await a.push(notes)
            #expect(edits.succeeded && edits.pushed == 5 && edits.conflicts == 0)
            #expect(log.count("GET /_batch") == 1)  // the limits are asked once
            #expect(log.count("POST /_batch") == 4)
            #expect(try await LocalWrites.all(serverDriver, notes).filter { $0["v"] == "edited" }.count == 5)
        }
    }

    @Test("the limits question unanswered (no answer, or a 503 after every retry): the first batch's entries count a failed attempt, nothing is posted, the drain halts; the next push asks again and sends everything", arguments: [ServerFault.dropConnection, .status(503)])
    func limitsUnanswered(fault: ServerFault) async throws {
        let log = RequestLog()
        let down = Locked(true)
        let faults = Self.logging(log) { method, path in
            method == "GET" && path == "/_batch" && down.withLock { $0 } ? fault : nil
        }
        try await withSyncServer(faults: faults) { _, serverDriver, url in
            let (a, store) = try await client(url, collection: notes, batchSize: 16)
            for i in 1...20 { try await LocalWrites.save(store, notes, Record(id: .string("n\(i)"), fields: ["v": .int(Int64(i))])) }
            let report = try await a.push(notes)
            #expect(!report.succeeded && report.pushed == 0)
            #expect(log.count("GET /_batch") >= 1 && log.count(prefix: "POST") == 0)
            let outbox = try await a.outbox(for: notes)
            #expect(outbox.count == 20)
            #expect(outbox.prefix(16).allSatisfy { $0.attempts == 1 && $0.state == .pending })
            #expect(outbox.dropFirst(16).allSatisfy { $0.attempts == 0 })
            down.withLock { $0 = false }
            let again = try await a.push(notes)
            #expect(again.succeeded && again.pushed == 20)
            #expect(log.count("POST /_batch") == 2 && log.count("POST /notes") == 0)
            #expect(try await LocalWrites.all(serverDriver, notes) == LocalWrites.all(store, notes))
            #expect(try await LocalWrites.outboxCount(store) == 0)
        }
    }

    /// One client's push of a mixed outbox: an applied create, an applied edit, an edit the
    /// server has overtaken (412, settled by the policy), an entry whose idempotency key the
    /// server already holds for another request (422, dead letter), and a delete. Returns
    /// what it left behind: server records, local records, the outbox, the report's counts.
    func mixedOutbox(batchSize: Int, log: RequestLog) async throws -> String {
        var summary = ""
        try await withSyncServer(faults: Self.logging(log)) { server, serverDriver, url in
            let (a, store) = try await client(url, policy: .serverWins, collection: notes, batchSize: batchSize)
            for id in ["n1", "n2", "n3", "n5"] { try await LocalWrites.save(store, notes, Record(id: .string(id), fields: ["v": "base"])) }
            #expect(try await a.sync(notes).succeeded)
            // Behind the client's back: n2 changes on the server.
            try await server.store.write { tx in try tx.save(Record(id: "n2", fields: ["v": "server"]), into: name("notes")) }
            try await LocalWrites.save(store, notes, Record(id: "n1", fields: ["v": "mine"]))
            try await LocalWrites.save(store, notes, Record(id: "n2", fields: ["v": "mine"]))
            try await LocalWrites.save(store, notes, Record(id: "n3", fields: ["v": "mine"]))
            try await LocalWrites.save(store, notes, Record(id: "n4", fields: ["v": "new"]))
            try await LocalWrites.delete(store, notes, "n5")
            // n3's key is taken on the server by another request: its PUT will be a 422.
            let key = try #require(try await a.outbox(for: notes).first { $0.recordID == "n3" }?.idempotencyKey)
            var spec = HTTPRequestSpec(method: "POST", url: url.appendingPathComponent("other"), headers: ["Idempotency-Key": key, "Content-Type": "application/json"])
            spec.body = Data(#"{"id":"x"}"#.utf8)
            #expect(try await URLSessionTransport(timeout: 10).send(spec).status == 201)
            let report = try await a.push(notes)
            #expect(report.pushed == 3 && report.deadLettered == 1 && report.conflicts == 1 && !report.succeeded)
            let outbox = try await a.outbox(for: notes).map { "\($0.recordID) \($0.state) \($0.lastError?.contains("422") == true)" }
            let server = try await LocalWrites.all(serverDriver, notes).map(\.jsonText)
            let local = try await LocalWrites.all(store, notes).map(\.jsonText)
            summary = "server \(server.joined(separator: " "))\nlocal \(local.joined(separator: " "))\noutbox \(outbox.joined(separator: ", "))"
        }
        return summary
    }

    @Test("each entry's answer in a batch is handled as if it came alone: applied, conflict by the policy, dead letter")
    func perEntryAnswersAsAlone() async throws {
        let batchedLog = RequestLog()
        let batched = try await mixedOutbox(batchSize: 256, log: batchedLog)
        let aloneLog = RequestLog()
        let alone = try await mixedOutbox(batchSize: 1, log: aloneLog)
        #expect(batched == alone)
        let expected = """
            server {"id":"n1","v":"mine"} {"id":"n2","v":"server"} {"id":"n3","v":"base"} {"id":"n4","v":"new"}
            local {"id":"n1","v":"mine"} {"id":"n2","v":"server"} {"id":"n3","v":"mine"} {"id":"n4","v":"new"}
            outbox 'n3' dead true
            """
        #expect(batched == expected)
        #expect(batchedLog.count("POST /_batch") >= 1 && aloneLog.count("POST /_batch") == 0)
        #expect(batchedLog.count(prefix: "PUT /notes/n2") == 0 && aloneLog.count(prefix: "PUT /notes/n2") == 1)
    }

    @Test("SQLite on both sides: a batch with a taken id in the middle commits the rest in two server transactions; the 409 goes through the policy")
    func sqliteRunsAroundARefusedEntry() async throws {
        let server = DepotServer(store: try await Store(driver: try await SQLiteDriver(path: ":memory:")))
        let port = try await server.start()
        let url = try #require(URL(string: "http://127.0.0.1:\(port)"))
        do {
            try await server.store.write { tx in try tx.save(Record(id: "n10", fields: ["v": "theirs"]), into: name("notes")) }
            let commits = Locked(0)
            let changes = server.store.changes()
            let counter = Task {
                for await batch in changes {
                    if batch.collections.contains(name("sentinel")) { return }
                    if batch.collections.contains(name("notes")) { commits.withLock { $0 += 1 } }
                }
            }
            let store = try await Store(driver: try await SQLiteDriver(path: ":memory:"))
            let a = SyncCoordinator(
                store: store, transport: URLSessionTransport(timeout: 10), conflictPolicy: .serverWins,
                retryPolicy: RetryPolicy(baseDelay: .milliseconds(1), maxDelay: .milliseconds(5), maxAttempts: 4), sleeper: RecordingSleeper(),
                random: SeededRandomSource(seed: 1)
            )
            try await a.attach(notes, to: SyncEndpoint(baseURL: url, path: "/notes"))
            try await store.write { tx in
                for i in 1...20 { try tx.save(Record(id: .string("n\(i)"), fields: ["v": .int(Int64(i))]), into: name("notes")) }
            }
            let report = try await a.push(notes)
            try await server.store.write { tx in try tx.save(Record(id: 1, fields: [:]), into: name("sentinel")) }
            await counter.value
            #expect(report.succeeded && report.pushed == 19 && report.conflicts == 1)
            #expect(commits.withLock { $0 } == 2)  // n1...n9, then n11...n20; n10 refused alone
            let serverNotes = try await server.store.read { tx in try tx.query(Query(), in: name("notes")) }
            #expect(serverNotes.count == 20 && serverNotes.first { $0.id == "n10" }?["v"] == "theirs")
            #expect(try await LocalWrites.all(store, notes) == serverNotes)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    @Test("a batch applied in half whose answer is lost: the retry applies nothing twice", arguments: [false, true])
    func halfAppliedAnswerLost(everyAttempt: Bool) async throws {
        // Tasks get server-assigned ids: a POST applied twice would be a second task.
        let cutting = Locked(true)
        let log = RequestLog()
        let faults = Self.logging(log) { method, path in
            guard method == "POST", path == "/_batch", cutting.withLock({ $0 }) else { return nil }
            if !everyAttempt { cutting.withLock { $0 = false } }
            return .loseResponseMidBatch
        }
        try await withSyncServer(faults: faults) { _, serverDriver, url in
            let (a, store) = try await client(url, assignment: .server, collection: tasks)
            for i in 1...10 { _ = try await LocalWrites.insert(store, tasks, ["tag": .string("t\(i)")]) }
            let first = try await a.push(tasks)
            if everyAttempt {
                #expect(!first.succeeded && first.pushed == 0)
                #expect(log.count("POST /_batch") == 4)  // every attempt of the retry policy
                #expect(try await LocalWrites.all(serverDriver, tasks).count == 5)  // the first half, once
                #expect(try await a.outbox(for: tasks).allSatisfy { $0.sent && $0.attempts == 1 })
                cutting.withLock { $0 = false }
                #expect(try await a.sync(tasks).succeeded)  // the in-doubt POSTs are settled first
            } else {
                #expect(first.succeeded && first.pushed == 10)
                #expect(log.count("POST /_batch") == 2)
            }
            let serverTasks = try await LocalWrites.all(serverDriver, tasks)
            #expect(serverTasks.compactMap { $0["tag"].stringValue }.sorted() == (1...10).map { "t\($0)" }.sorted())
            #expect(serverTasks.map(\.id) == (1...10).map { RecordID.int(Int64($0)) })
            #expect(try await LocalWrites.all(store, tasks) == serverTasks)
            #expect(try await LocalWrites.outboxCount(store) == 0)
            let keys = try await serverDriver.read { tx in try tx.count(.all, in: WireCollections.idempotency) }
            #expect(keys == 10)
        }
    }

    @Test("a peer without the batch route gets one request per entry, and the coordinator remembers it", arguments: ["GET 404", "POST 405"])
    func fallbackWithoutBatchRoute(refusal: String) async throws {
        let log = RequestLog()
        let faults = Self.logging(log) { method, path in
            guard path == "/_batch" else { return nil }
            if refusal == "GET 404", method == "GET" { return .status(404) }
            if refusal == "POST 405", method == "POST" { return .status(405) }
            return nil
        }
        try await withSyncServer(faults: faults) { _, serverDriver, url in
            let (a, store) = try await client(url, collection: notes)
            for i in 1...10 { try await LocalWrites.save(store, notes, Record(id: .string("n\(i)"), fields: ["v": .int(Int64(i))])) }
            #expect(try await a.push(notes).pushed == 10)
            for i in 11...15 { try await LocalWrites.save(store, notes, Record(id: .string("n\(i)"), fields: ["v": .int(Int64(i))])) }
            #expect(try await a.push(notes).pushed == 5)
            #expect(log.count("GET /_batch") == 1)
            #expect(log.count("POST /_batch") == (refusal == "POST 405" ? 1 : 0))
            #expect(log.count("POST /notes") == 15)
            #expect(try await LocalWrites.all(serverDriver, notes) == LocalWrites.all(store, notes))
            #expect(try await LocalWrites.outboxCount(store) == 0)
        }
    }

    /// A refused token says nothing about the batch route: remembering it as "no route"
    /// would push one request per entry for the coordinator's life.
    @Test("a 401 or 403 to the limits question is not remembered: that push goes one request per entry with one question, the next asks again and sends batches", arguments: [401, 403])
    func limitsRefusedCredentials(status: Int) async throws {
        let log = RequestLog()
        let refusing = Locked(true)
        let faults = Self.logging(log) { method, path in
            method == "GET" && path == "/_batch" && refusing.withLock { $0 } ? .status(status) : nil
        }
        try await withSyncServer(faults: faults) { _, serverDriver, url in
            let (a, store) = try await client(url, collection: notes, batchSize: 4)
            for i in 1...10 { try await LocalWrites.save(store, notes, Record(id: .string("n\(i)"), fields: ["v": .int(Int64(i))])) }
            #expect(try await a.push(notes).pushed == 10)
            #expect(log.count("GET /_batch") == 1)  // asked once for the whole push, not per batch
            #expect(log.count("POST /_batch") == 0 && log.count("POST /notes") == 10)
            refusing.withLock { $0 = false }
            for i in 11...18 { try await LocalWrites.save(store, notes, Record(id: .string("n\(i)"), fields: ["v": .int(Int64(i))])) }
            #expect(try await a.push(notes).pushed == 8)
            #expect(log.count("GET /_batch") == 2)
            #expect(log.count("POST /_batch") == 2 && log.count("POST /notes") == 10)
            #expect(try await LocalWrites.all(serverDriver, notes) == LocalWrites.all(store, notes))
            #expect(try await LocalWrites.outboxCount(store) == 0)
        }
    }

    @Test("against simple-json-server (a POST to an unknown path makes a record there) nothing is ever posted to /_batch")
    func plainJSONServer() async throws {
        try await JSONServerProcess.with(["notes": []]) { server in
            let store = try await clientStore()
            let a = SyncCoordinator(store: store, transport: URLSessionTransport(timeout: 10), sleeper: RecordingSleeper(), random: SeededRandomSource(seed: 1))
            var endpoint = SyncEndpoint(baseURL: server.url, path: "/notes")
            endpoint.changeFeed = .none
            try await a.attach(notes, to: endpoint)
            for i in 1...12 { try await LocalWrites.save(store, notes, Record(id: .string("n\(i)"), fields: ["v": .int(Int64(i))])) }
            let report = try await a.sync(notes)
            #expect(report.succeeded && report.pushed == 12)
            let database = try #require(try server.database().objectValue)
            #expect(database["_batch"] == nil, "a batch was stored as a record: \(database.keys.sorted())")
            #expect(database["notes"]?.arrayValue?.count == 12)
            #expect(try await LocalWrites.outboxCount(store) == 0)
        }
    }
}
