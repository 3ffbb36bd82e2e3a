import DepotCore
import DepotMemory
import DepotServer
import DepotSync
import DepotWire
import Foundation
import Testing

@Suite("Sync against a real DepotServer on loopback")
struct SyncEndToEndTests {
    let notes = name("notes")
    let tasks = name("tasks")

    func client(_ url: URL, policy: ConflictPolicy = .serverWins, transport: (any HTTPTransport)? = nil, feed: SyncEndpoint.ChangeFeed = .automatic,
                assignment: SyncEndpoint.IDAssignment = .client, mapping: [String: String] = [:], collection: CollectionName) async throws -> (SyncCoordinator, Store) {
        let driver = try await clientStore()
        let coordinator = SyncCoordinator(
            store: driver, transport: transport ?? URLSessionTransport(timeout: 10), conflictPolicy: policy,
            retryPolicy: RetryPolicy(baseDelay: .milliseconds(1), maxDelay: .milliseconds(5), maxAttempts: 4), sleeper: RecordingSleeper(),
            random: SeededRandomSource(seed: 1)
        )
        var endpoint = SyncEndpoint(baseURL: url, path: "/" + collection.rawValue, idAssignment: assignment)
        endpoint.changeFeed = feed
        endpoint.pageSize = 7
        endpoint.fieldMapping = mapping
        try await coordinator.attach(collection, to: endpoint)
        return (coordinator, driver)
    }

    @Test("push creates, updates and deletes; a second client pulls them through the change feed")
    func pushThenPull() async throws {
        try await withSyncServer { _, serverDriver, url in
            let (a, aStore) = try await client(url, collection: notes)
            let (b, bStore) = try await client(url, collection: notes)
            for i in 0..<20 { try await LocalWrites.save(aStore, notes, Record(id: .string("n\(i)"), fields: ["i": .int(Int64(i))])) }
            try await LocalWrites.save(aStore, notes, Record(id: "n3", fields: ["i": 33, "edited": true]))
            try await LocalWrites.delete(aStore, notes, "n4")
            let pushed = try await a.sync(notes)
            #expect(pushed.pushed == 22)
            #expect(pushed.succeeded)
            #expect(try await LocalWrites.outboxCount(aStore) == 0)
            let server = try await LocalWrites.all(serverDriver, notes)
            #expect(server.count == 19)
            #expect(server.first { $0.id == "n3" }?.fields == ["i": 33, "edited": true])
            let pulled = try await b.sync(notes)
            #expect(pulled.pulled == 19)
            #expect(try await LocalWrites.all(bStore, notes) == server)
            // A deletion on the server reaches b as a tombstone.
            try await LocalWrites.delete(bStore, notes, "n5")
            _ = try await b.sync(notes)
            let again = try await a.sync(notes)
            #expect(again.remoteDeletions == 1)
            #expect(try await LocalWrites.all(aStore, notes) == LocalWrites.all(serverDriver, notes))
        }
    }

    @Test("without a change feed: paged listing, checkpoints and deletion reconciliation")
    func listingPull() async throws {
        try await withSyncServer { _, serverDriver, url in
            let (a, aStore) = try await client(url, collection: notes)
            for i in 0..<30 { try await LocalWrites.save(aStore, notes, Record(id: .string("n\(i)"), fields: ["i": .int(Int64(i))])) }
            _ = try await a.sync(notes)
            let (b, bStore) = try await client(url, feed: .none, collection: notes)
            let first = try await b.sync(notes)
            #expect(first.pulled == 30)
            try await LocalWrites.delete(aStore, notes, "n7")
            try await LocalWrites.delete(aStore, notes, "n21")
            _ = try await a.sync(notes)
            let second = try await b.sync(notes)
            #expect(second.remoteDeletions == 2)
            #expect(try await LocalWrites.all(bStore, notes) == LocalWrites.all(serverDriver, notes))
            // A local record b never pushed survives reconciliation.
            try await LocalWrites.save(bStore, notes, Record(id: "local", fields: ["i": -1]))
            _ = try await b.sync(notes, pull: true, push: false)
            #expect(try await bStore.read { tx in try tx.get("local", from: name("notes")) } != nil)
        }
    }

    @Test("a server that assigns ids: local records are re-keyed, never duplicated, even when ids collide")
    func serverAssignedIDs() async throws {
        try await withSyncServer { _, serverDriver, url in
            // The server has used ids 1...3 already, so its ids differ from the clients' local ones.
            let taskName = tasks
            try await serverDriver.write { tx in
                for _ in 0..<3 { _ = try tx.insert(fields: ["tag": "gone"], into: taskName) }
                _ = try tx.delete(matching: .all, from: taskName)
            }
            let (a, aStore) = try await client(url, assignment: .server, collection: tasks)
            let (b, bStore) = try await client(url, assignment: .server, collection: tasks)
            let a1 = try await LocalWrites.insert(aStore, tasks, ["tag": "a1"])
            _ = try await LocalWrites.insert(aStore, tasks, ["tag": "a2"])
            let b1 = try await LocalWrites.insert(bStore, tasks, ["tag": "b1"])
            #expect(a1 == b1)  // both clients used local id 1
            try await LocalWrites.save(bStore, tasks, Record(id: b1, fields: ["tag": "b1", "done": true]))
            let events = await a.events()
            _ = try await a.sync(tasks)
            let report = try await b.sync(tasks)
            #expect(report.succeeded)
            let server = try await LocalWrites.all(serverDriver, tasks)
            #expect(server.map { $0["tag"] } == ["a1", "a2", "b1"])
            #expect(server.last?["done"] == true)
            _ = try await a.sync(tasks)
            #expect(try await LocalWrites.all(aStore, tasks) == server)
            #expect(try await LocalWrites.all(bStore, tasks) == server)
            #expect(server.map(\.id) == [4, 5, 6])
            var rekeyed: [RecordID] = []
            for await event in events {
                if case .rekeyed(_, let from, let to) = event { rekeyed.append(contentsOf: [from, to]) }
                if case .finished = event { break }
            }
            #expect(rekeyed == [1, 4, 2, 5])
        }
    }

    @Test("a POST whose answer never came is settled before the next pull: no second local copy, a later delete leaves nothing")
    func inDoubtPostSettledBeforePull() async throws {
        // The server commits every POST but loses its answer while `lose` is on.
        let lose = Locked(true)
        let faults = ServerFaults { method, _ in method == "POST" && lose.withLock { $0 } ? .loseResponseAfterCommit : nil }
        try await withSyncServer(faults: faults) { _, serverDriver, url in
            let (a, aStore) = try await client(url, assignment: .server, collection: tasks)
            let local = try await LocalWrites.insert(aStore, tasks, ["tag": "t"])
            let first = try await a.push(tasks)
            #expect(!first.succeeded)
            #expect(try await a.outbox(for: tasks).first?.sent == true)
            #expect(try await LocalWrites.all(serverDriver, tasks).count == 1)  // created once, whatever the retries
            lose.withLock { $0 = false }
            // The user deletes the task before its id is known; the pull must not bring it back.
            try await LocalWrites.delete(aStore, tasks, local)
            let pulled = try await a.pull(tasks)
            #expect(pulled.failures.isEmpty)
            #expect(try await LocalWrites.all(aStore, tasks).isEmpty)
            let report = try await a.sync(tasks)
            #expect(report.succeeded)
            #expect(try await LocalWrites.all(serverDriver, tasks).isEmpty)
            #expect(try await LocalWrites.all(aStore, tasks).isEmpty)
            #expect(try await LocalWrites.outboxCount(aStore) == 0)
        }
    }

    @Test("a task deleted before its POST was answered stays deleted when a fresh local id lands on its server id")
    func freshLocalIDNeverTakesATrackedServerID() async throws {
        // Found by SyncKillTests (`ANOMALY resurrected`). The server's next id is 11; the
        // client's local ids run 1...10. The task X (local 1) is deleted before its POST is
        // answered: the POST gives it server id 11 and its DELETE waits (DELETEs fail here)
        // under id 11 — an id the client holds only in its outbox and sync state, never as a
        // local record. A pull then moves local records aside from server ids 2...10; the
        // first fresh local id must not be 11, or X's sync state is overwritten (its DELETE
        // would be dropped unsent) and the pulled X comes back locally.
        let failDeletes = Locked(true)
        let inner = URLSessionTransport(timeout: 10)
        let transport = ScriptedTransport { request in
            if request.method == "DELETE", failDeletes.withLock({ $0 }) { throw DepotError(.remote, "DELETE dropped") }
            return try await inner.send(request)
        }
        try await withSyncServer { _, serverDriver, url in
            try await serverDriver.write { tx in
                for i in 1...10 { try tx.insert(Record(id: .int(Int64(i)), fields: ["tag": .string("server-\(i)")]), into: tasks) }
            }
            let (a, aStore) = try await client(url, transport: transport, assignment: .server, collection: tasks)
            // One request per entry: X's failing DELETE must halt the drain before the local
            // tasks go (in a batch they would all go together, and none would be moved aside).
            await a.setPushBatchSize(1)
            let x = try await LocalWrites.insert(aStore, tasks, ["tag": "X"])
            try await LocalWrites.delete(aStore, tasks, x)
            for i in 2...10 { _ = try await LocalWrites.insert(aStore, tasks, ["tag": .string("local-\(i)")]) }
            let pushed = try await a.push(tasks)
            #expect(pushed.pushed == 1 && !pushed.succeeded)  // X's POST went (server id 11), its DELETE did not
            let pulled = try await a.pull(tasks)
            #expect(pulled.failures.isEmpty)
            let tags = try await LocalWrites.all(aStore, tasks).compactMap { $0["tag"].stringValue }
            #expect(!tags.contains("X"), "the deleted task came back locally: \(tags.sorted())")
            failDeletes.withLock { $0 = false }
            let report = try await a.sync(tasks)
            #expect(report.succeeded)
            let serverTags = try await LocalWrites.all(serverDriver, tasks).compactMap { $0["tag"].stringValue }
            #expect(!serverTags.contains("X"), "the deleted task is still on the server")
            #expect(serverTags.count == 19)  // 10 server records, 9 local ones pushed
            let localTags = try await LocalWrites.all(aStore, tasks).compactMap { $0["tag"].stringValue }
            #expect(localTags.sorted() == serverTags.sorted())
            #expect(try await LocalWrites.outboxCount(aStore) == 0)
        }
    }

    @Test("a local edit is never silently overwritten: server wins, client wins, last writer wins, merge")
    func conflicts() async throws {
        try await withSyncServer { _, serverDriver, url in
            let policies: [(String, ConflictPolicy)] = [
                ("server", .serverWins), ("client", .clientWins), ("lww", .lastWriterWins(field: "at")),
                ("merge", .merge { c in (c.server?.fields ?? [:]).merging(c.local?.fields ?? [:]) { s, l in .string("\(s.stringValue ?? "")+\(l.stringValue ?? "")") } }),
            ]
            for (n, (label, policy)) in policies.enumerated() {
                let id = RecordID.string("r\(n)")
                let (a, aStore) = try await client(url, policy: policy, collection: notes)
                let (b, bStore) = try await client(url, collection: notes)
                try await LocalWrites.save(aStore, notes, Record(id: id, fields: ["v": "base", "at": 1]))
                _ = try await a.sync(notes)
                _ = try await b.sync(notes)
                // b edits and pushes first; a edits offline, then syncs.
                try await LocalWrites.save(bStore, notes, Record(id: id, fields: ["v": "b", "at": 3]))
                _ = try await b.sync(notes)
                try await LocalWrites.save(aStore, notes, Record(id: id, fields: ["v": "a", "at": 2]))
                let events = await a.events()
                let report = try await a.sync(notes)
                #expect(report.conflicts >= 1, "\(label)")
                #expect(report.succeeded, "\(label)")
                let server = try await serverDriver.read { tx in try tx.get(id, from: name("notes")) }
                let local = try await aStore.read { tx in try tx.get(id, from: name("notes")) }
                #expect(server == local, "\(label)")
                switch label {
                case "server", "lww": #expect(server?["v"] == "b", "\(label)")
                case "client": #expect(server?["v"] == "a", "\(label)")
                default: #expect(server?["v"] == "b+a", "\(label)")
                }
                var sawConflict = false
                for await event in events {
                    if case .conflict = event { sawConflict = true }
                    if case .finished = event { break }
                }
                #expect(sawConflict, "\(label)")
            }
        }
    }

    @Test("412 on push goes through the policy (a client that pushes without pulling)")
    func preconditionOnPush() async throws {
        try await withSyncServer { _, serverDriver, url in
            let (a, aStore) = try await client(url, policy: .clientWins, collection: notes)
            let (b, bStore) = try await client(url, collection: notes)
            try await LocalWrites.save(aStore, notes, Record(id: "x", fields: ["v": 1]))
            _ = try await a.sync(notes)
            _ = try await b.sync(notes)
            try await LocalWrites.save(bStore, notes, Record(id: "x", fields: ["v": 2]))
            _ = try await b.sync(notes)
            try await LocalWrites.save(aStore, notes, Record(id: "x", fields: ["v": 3]))
            let report = try await a.sync(notes, pull: false, push: true)
            #expect(report.conflicts == 1)
            #expect(report.pushed == 1)
            #expect(try await serverDriver.read { tx in try tx.get("x", from: name("notes")) }?["v"] == 3)
        }
    }

    @Test("a permanent 4xx is dead-lettered with the server's answer; other records still go")
    func deadLetter() async throws {
        try await withSyncServer { _, serverDriver, url in
            // `badName` goes to the server as a field name it refuses (400) for good.
            let (a, aStore) = try await client(url, mapping: ["badName": "bad-name"], collection: notes)
            try await LocalWrites.save(aStore, notes, Record(id: "ok", fields: ["v": 1]))
            _ = try await a.sync(notes)
            try await LocalWrites.save(aStore, notes, Record(id: "bad", fields: ["badName": 2]))
            try await LocalWrites.save(aStore, notes, Record(id: "bad", fields: ["badName": 3]))
            try await LocalWrites.save(aStore, notes, Record(id: "fine", fields: ["v": 4]))
            let report = try await a.sync(notes, pull: false)
            #expect(report.deadLettered == 1)
            #expect(report.pushed == 1)
            #expect(report.deadLeft == 1)
            #expect(report.pendingLeft == 1)  // the later edit of "bad" waits behind the dead one
            #expect(!report.succeeded)
            let outbox = try await a.outbox(for: notes)
            #expect(outbox.first?.state == .dead)
            #expect(outbox.first?.lastError?.hasPrefix("HTTP 400") == true)
            #expect(try await serverDriver.read { tx in try tx.get("fine", from: name("notes")) } != nil)
        }
    }

    @Test("retries with backoff on 503/429, then success; the waits come from the injected clock")
    func retries() async throws {
        let failures = Locked(3)
        let faults = ServerFaults { method, _ in
            guard method == "POST" else { return nil }
            return failures.withLock { n in
                guard n > 0 else { return nil }
                n -= 1
                return n == 1 ? .status(429) : .status(503)
            }
        }
        try await withSyncServer(faults: faults) { _, serverDriver, url in
            let sleeper = RecordingSleeper()
            let driver = try await clientStore()
            let sync = SyncCoordinator(
                store: driver, transport: URLSessionTransport(), retryPolicy: RetryPolicy(baseDelay: .milliseconds(100), maxDelay: .seconds(1), maxAttempts: 5),
                sleeper: sleeper, random: SeededRandomSource(seed: 3)
            )
            try await sync.attach(notes, to: SyncEndpoint(baseURL: url, path: "/notes"))
            try await LocalWrites.save(driver, notes, Record(id: "r", fields: ["v": 1]))
            let report = try await sync.sync(notes, pull: false)
            #expect(report.retries == 3)
            #expect(report.pushed == 1)
            let waits = sleeper.waits.withLock { $0 }
            #expect(waits.count == 3)
            #expect(waits[0] <= .milliseconds(100) && waits[1] <= .milliseconds(200) && waits[2] <= .milliseconds(400))
            #expect(try await LocalWrites.all(serverDriver, notes).count == 1)
        }
    }

    @Test("unreachable server: entries stay pending with their reason; the next sync delivers them")
    func offlineThenOnline() async throws {
        try await withSyncServer { _, serverDriver, url in
            let faulty = FaultyTransport(seed: 1, rate: 0)
            let (a, aStore) = try await client(url, transport: faulty, collection: notes)
            try await LocalWrites.save(aStore, notes, Record(id: "r", fields: ["v": 1]))
            faulty.setOffline(true)
            let offline = try await a.sync(notes)
            #expect(!offline.succeeded)
            #expect(offline.pendingLeft == 1)
            #expect(offline.failures.first?.contains("no answer") == true)
            #expect(try await a.outbox(for: notes).first?.state == .pending)
            faulty.setOffline(false)
            let online = try await a.sync(notes)
            #expect(online.succeeded)
            #expect(try await LocalWrites.all(serverDriver, notes).count == 1)
        }
    }

    @Test("read policies and paged load-more")
    func reads() async throws {
        try await withSyncServer { _, _, url in
            let (a, aStore) = try await client(url, collection: notes)
            for i in 0..<25 { try await LocalWrites.save(aStore, notes, Record(id: .string(String(format: "n%02d", i)), fields: ["i": .int(Int64(i))])) }
            _ = try await a.sync(notes)
            let (b, _) = try await client(url, collection: notes)
            #expect(try await b.read(notes, policy: .localOnly).records.isEmpty)
            let first = try await b.loadMore(notes, pageIndex: 0, pageSize: 10)
            #expect(first.count == 10)
            let cached = try await b.read(notes, policy: .localElseRemote)
            #expect(cached.source == .local)
            #expect(cached.records.count == 10)  // only what load-more fetched
            #expect(try await b.loadMore(notes, pageIndex: 0, pageSize: 10) == first)
            #expect(try await b.loadMore(notes, pageIndex: 1, pageSize: 10).count == 10)
            let third = try await b.loadMore(notes, pageIndex: 2, pageSize: 10)
            #expect(third.map { $0["i"] } == (20..<25).map { .int(Int64($0)) })
            try await LocalWrites.save(aStore, notes, Record(id: "n99", fields: ["i": 99]))
            _ = try await a.sync(notes)
            let remote = try await b.read(notes, policy: .remoteOnly)
            #expect(remote.records.count == 26)
            let swr = try await b.read(notes, policy: .localThenRefresh)
            #expect(swr.source == .local)
            #expect(try await swr.refreshed?.value.count == 26)
            let (c, _) = try await client(url, transport: ScriptedTransport { _ in throw DepotError(.remote, "down") }, collection: notes)
            let fallback = try await c.read(notes, policy: .remoteElseLocal)
            #expect(fallback.source == .local)
            await #expect(throws: DepotError.self) { _ = try await c.read(notes, policy: .remoteOnly) }
        }
    }

    @Test("plain json-server style: envelope, field mapping, hooks, no ETags, no feed")
    func plainServer() async throws {
        let seen = Locked<[HTTPRequestSpec]>([])
        let transport = ScriptedTransport { request in
            seen.withLock { $0.append(request) }
            if request.method == "GET", request.url.path == "/api/items" {
                let page = URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == "_page" }?.value
                let body = page == "1" ? #"{"data":{"list":[{"_id":"a","item_name":"x","n":1}]}}"# : #"{"data":{"list":[]}}"#
                return HTTPAnswer(status: 200, headers: ["X-Total-Count": "1"], body: Data(body.utf8))
            }
            if request.method == "GET" { return HTTPAnswer(status: 404) }
            return HTTPAnswer(status: 201, body: request.body ?? Data())
        }
        let driver = try await clientStore()
        let sync = SyncCoordinator(store: driver, transport: transport, sleeper: RecordingSleeper())
        var endpoint = SyncEndpoint(baseURL: try #require(URL(string: "https://example.com/api")), path: "/items")
        endpoint.idField = "_id"
        endpoint.fieldMapping = ["name": "item_name"]
        endpoint.envelope = "data.list"
        endpoint.requestHook = { request in
            request.headers["Authorization"] = "Bearer token"
            request.setQueryItem("api_version", "2")
        }
        let items = name("items")
        try await sync.attach(items, to: endpoint)
        let report = try await sync.sync(items)
        #expect(report.pulled == 1)
        #expect(try await driver.read { tx in try tx.get("a", from: items) }?.fields == ["name": "x", "n": 1])
        try await LocalWrites.save(driver, items, Record(id: "b", fields: ["name": "y"]))
        let pushed = try await sync.sync(items, pull: false)
        #expect(pushed.pushed == 1)
        let requests = seen.withLock { $0 }
        let post = try #require(requests.last)
        #expect(post.method == "POST")
        #expect(try JSONText.parse([UInt8](post.body ?? Data())) == ["_id": "b", "item_name": "y"])
        #expect(post.headers["Idempotency-Key"] != nil)
        #expect(post.sensitiveHeaders.contains("Authorization"))
        #expect(requests.allSatisfy { $0.url.query?.contains("api_version=2") == true })
    }

    @Test("with a Store: attaching makes the store record outbox entries; pulled records record none")
    func throughStore() async throws {
        try await withSyncServer { _, serverDriver, url in
            let store = try await Store(driver: MemoryDriver())
            let sync = SyncCoordinator(store: store, transport: URLSessionTransport(), sleeper: RecordingSleeper())
            try await sync.attach(notes, to: SyncEndpoint(baseURL: url, path: "/notes"))
            let changes = store.changes()
            let collection = notes
            try await store.write { tx in try tx.save(Record(id: "s1", fields: ["v": 1]), into: collection) }
            #expect(try await sync.outbox(for: notes).count == 1)
            let report = try await sync.sync(notes)
            #expect(report.pushed == 1)
            #expect(report.succeeded)
            try await serverDriver.write { tx in
                try tx.save(Record(id: "s2", fields: ["v": 2]), into: collection)
            }
            // s2 went in behind the server's back (no change-log entry): pull by listing.
            let (b, bStore) = try await client(url, feed: .none, collection: notes)
            _ = try await b.sync(notes)
            #expect(try await LocalWrites.all(bStore, notes).count == 2)
            let other = try await client(url, collection: notes)
            try await LocalWrites.save(other.1, notes, Record(id: "s3", fields: ["v": 3]))
            _ = try await other.0.sync(notes)
            let pulled = try await sync.sync(notes)
            #expect(pulled.pulled == 1)
            #expect(try await sync.outbox(for: notes).isEmpty)
            #expect(try await store.read { tx in try tx.get("s3", from: collection) } != nil)
            // The pulled write went through the store: observers saw it.
            var sawS3 = false
            for await batch in changes {
                if batch.changes.contains(where: { $0.id == "s3" && $0.collection == collection }) { sawS3 = true; break }
            }
            #expect(sawS3)
        }
    }

    @Test("nested resources: a collection synced with /posts/1/comments holds that post's comments only")
    func nestedPath() async throws {
        try await withSyncServer { _, serverDriver, url in
            let comments = name("comments")
            let driver = try await clientStore()
            let sync = SyncCoordinator(store: driver, transport: URLSessionTransport(), sleeper: RecordingSleeper())
            try await sync.attach(comments, to: SyncEndpoint(baseURL: url, path: "/posts/1/comments"))
            try await LocalWrites.save(driver, comments, Record(id: "c1", fields: ["text": "mine"]))
            try await LocalWrites.save(driver, comments, Record(id: "inf", fields: ["x": .double(.infinity)]))
            let pushed = try await sync.sync(comments)
            #expect(pushed.pushed == 2)  // infinity travels as {"$double":"Infinity"}
            #expect(pushed.deadLettered == 0)
            #expect(try await serverDriver.read { tx in try tx.get("inf", from: comments) }?["x"] == .double(.infinity))
            #expect(try await serverDriver.read { tx in try tx.get("c1", from: comments) }?["postId"] == 1)
            try await serverDriver.write { tx in
                try tx.save(Record(id: "c2", fields: ["text": "other post", "postId": 2]), into: comments)
                try tx.save(Record(id: "c3", fields: ["text": "same post", "postId": 1]), into: comments)
            }
            let pulled = try await sync.sync(comments)
            #expect(pulled.pulled == 1)  // c3; c1 already holds the server's answer to its POST
            #expect(try await driver.read { tx in try tx.get("c1", from: comments) }?["postId"] == 1)
            let local = try await LocalWrites.all(driver, comments).map(\.id)
            #expect(local == ["c1", "c3", "inf"])
        }
    }
}
