import DepotCore
import DepotMemory
import DepotServer
import DepotWire
import Foundation
import Testing

/// `POST /_batch` answers every entry exactly as the entry's own request would be answered
/// (Docs/Server.md, "Batched writes").
@Suite("DepotServer POST /_batch")
struct BatchRouteTests {
    /// One write request: what a single request sends and what a batch entry carries.
    struct Step {
        var method: String
        var path: String
        var body: String?
        var headers: [String: String] = [:]
    }

    /// The batch body holding `steps`, in order.
    static func batchBody(_ steps: [Step]) -> String {
        let requests: [FieldValue] = steps.map { step in
            var entry: [String: FieldValue] = [
                "method": .string(step.method), "path": .string(step.path),
                "headers": .object(step.headers.mapValues { .string($0) }),
            ]
            if let body = step.body { entry["body"] = .string(body) }
            return .object(entry)
        }
        return JSONText.serialize(.object(["requests": .array(requests)]))
    }

    /// The per-entry answers of a batch answer, as single answers.
    static func results(_ answer: Answer) throws -> [Answer] {
        let items = try #require(answer.json.objectValue?["results"]?.arrayValue)
        return try items.map { item in
            let object = try #require(item.objectValue)
            let status = try #require(object["status"]?.intValue)
            var headers: [String: String] = [:]
            for (name, value) in object["headers"]?.objectValue ?? [:] { headers[name] = value.stringValue }
            return Answer(status: Int(status), headers: headers, body: Data((object["body"]?.stringValue ?? "").utf8))
        }
    }

    /// What must agree between a single answer and a batch entry's answer.
    static func summary(_ answer: Answer) -> String {
        let body = String(decoding: answer.body, as: UTF8.self)
        let headers = ["ETag", "Location", "Idempotent-Replayed"].map { "\($0)=\(answer.header($0) ?? "-")" }
        return "\(answer.status) \(headers.joined(separator: " ")) \(body)"
    }

    /// Everything the writes left in the served store: user records, idempotency records
    /// and the change feed.
    static func state(_ live: LiveServer) async throws -> String {
        var out: [String] = []
        for name in ["notes", "posts", "comments"] {
            let collection = try CollectionName(name)
            let records = try await live.driver.read { tx in try tx.schema(of: collection) == nil ? [] : tx.query(Query(), in: collection) }
            out.append("\(name): " + records.map { $0.jsonText }.joined(separator: " "))
        }
        let keys = try await live.driver.read { tx in try tx.query(Query(sort: [SortKey("id")]), in: WireCollections.idempotency) }
        // Each record is stamped with the time it was written ("at", for retention): not compared.
        out.append("keys: " + keys.map { Record(id: $0.id, fields: $0.fields.filter { $0.key != "at" }).jsonText }.joined(separator: " "))
        let feed = try await live.send("GET", "/_changes?since=0&limit=100")
        out.append("feed: " + String(decoding: feed.body, as: UTF8.self))
        return out.joined(separator: "\n")
    }

    /// A script that takes every kind of answer a write can get: applied (201, 200),
    /// conflicts (409 taken id, 412 stale `If-Match`), rejected (400 bad field, 404 missing
    /// record or id of the wrong kind), an idempotent replay and a reused key (422), a nested
    /// resource, and writes after each failure.
    static var script: [Step] {
        let etagA1 = WireETag.of(Record(id: "a", fields: ["v": 1]))
        return [
            Step(method: "POST", path: "/notes", body: #"{"id":"a","v":1}"#, headers: ["Idempotency-Key": "k1"]),
            Step(method: "POST", path: "/notes", body: #"{"id":"a","v":2}"#, headers: ["Idempotency-Key": "k2"]),
            Step(method: "PUT", path: "/notes/a", body: #"{"v":3}"#, headers: ["If-Match": "\"0000\"", "Idempotency-Key": "k3"]),
            Step(method: "PUT", path: "/notes/a", body: #"{"v":4}"#, headers: ["If-Match": etagA1, "Idempotency-Key": "k4"]),
            Step(method: "POST", path: "/notes", body: #"{"id":"b","bad name":1}"#),
            Step(method: "POST", path: "/posts", body: #"{"title":"x"}"#, headers: ["Idempotency-Key": "k6"]),
            Step(method: "PATCH", path: "/posts/1", body: #"{"title":null,"n":2}"#),
            Step(method: "DELETE", path: "/notes/zzz"),
            Step(method: "POST", path: "/posts/1/comments", body: #"{"text":"t"}"#),
            Step(method: "DELETE", path: "/posts/1", headers: ["Idempotency-Key": "k9"]),
            Step(method: "POST", path: "/notes", body: #"{"id":"a","v":1}"#, headers: ["Idempotency-Key": "k1"]),
            Step(method: "POST", path: "/notes", body: #"{"id":"c"}"#, headers: ["Idempotency-Key": "k1"]),
            Step(method: "PUT", path: "/posts/abc", body: #"{"title":"y"}"#),
            Step(method: "POST", path: "/notes", body: #"{"id":"d","v":"after every failure"}"#, headers: ["Idempotency-Key": "k13"]),
        ]
    }

    @Test("each entry gets exactly its single request's answer, and the store ends identical")
    func sameAnswersAsSingleRequests() async throws {
        let steps = Self.script
        var single: [String] = []
        var singleState = ""
        try await withServer { live in
            for step in steps {
                single.append(Self.summary(try await live.send(step.method, step.path, json: step.body, headers: step.headers)))
            }
            singleState = try await Self.state(live)
        }
        try await withServer { live in
            let answer = try await live.send("POST", "/_batch", json: Self.batchBody(steps))
            #expect(answer.status == 200)
            let batched = try Self.results(answer).map(Self.summary)
            #expect(batched.count == steps.count)
            for (n, (one, many)) in zip(single, batched).enumerated() {
                #expect(one == many, "entry \(n): single \(one) / batch \(many)")
            }
            #expect(try await Self.state(live) == singleState)
            // The script really takes each kind of answer.
            #expect(single.map { Int($0.prefix(3)) ?? 0 } == [201, 409, 412, 200, 400, 201, 200, 404, 201, 200, 201, 422, 404, 201])
            #expect(single[10].contains("Idempotent-Replayed=true"))
        }
    }

    @Test("a failed entry rolls back only itself: the rest commit in one transaction before it and one after")
    func fewTransactions() async throws {
        try await withServer { live in
            let commits = Locked(0)
            let sentinel = try CollectionName("sentinel")
            let stream = live.store.changes()
            let counter = Task {
                for await batch in stream {
                    if batch.collections.contains(sentinel) { return }
                    if batch.collections.contains(where: { $0.rawValue == "notes" }) { commits.withLock { $0 += 1 } }
                }
            }
            var steps = (1...20).map { Step(method: "POST", path: "/notes", body: "{\"id\":\"n\($0)\"}", headers: ["Idempotency-Key": "key-\($0)"]) }
            let first = try await live.send("POST", "/_batch", json: Self.batchBody(steps))
            #expect(try Self.results(first).allSatisfy { $0.status == 201 })
            // Entry 11 is refused (the id is taken): 10 entries before it, 9 after.
            steps = (21...40).map { Step(method: "POST", path: "/notes", body: "{\"id\":\"n\($0)\"}") }
            steps[10] = Step(method: "POST", path: "/notes", body: #"{"id":"n1"}"#)
            let second = try await live.send("POST", "/_batch", json: Self.batchBody(steps))
            let statuses = try Self.results(second).map(\.status)
            #expect(statuses == Array(repeating: 201, count: 10) + [409] + Array(repeating: 201, count: 9))
            try await live.store.write { tx in try tx.save(Record(id: 1, fields: [:]), into: sentinel) }
            await counter.value
            #expect(commits.withLock { $0 } == 3)  // 1 for the first batch, 2 for the second
            let notes = try await live.driver.read { tx in try tx.count(.all, in: CollectionName("notes")) }
            #expect(notes == 39)
        }
    }

    @Test("a whole batch sent again replays every answer and writes nothing; keys work across single requests and batches")
    func idempotentReplay() async throws {
        try await withServer { live in
            let steps = [
                Step(method: "POST", path: "/notes", body: #"{"id":"a","v":1}"#, headers: ["Idempotency-Key": "ka"]),
                Step(method: "POST", path: "/posts", body: #"{"title":"p"}"#, headers: ["Idempotency-Key": "kp"]),
                Step(method: "DELETE", path: "/notes/a", headers: ["Idempotency-Key": "kd"]),
            ]
            let body = Self.batchBody(steps)
            let first = try Self.results(try await live.send("POST", "/_batch", json: body))
            let before = try await Self.state(live)
            let again = try Self.results(try await live.send("POST", "/_batch", json: body))
            #expect(first.map(\.status) == [201, 201, 200])
            #expect(again.map(\.status) == first.map(\.status))
            #expect(again.map { String(decoding: $0.body, as: UTF8.self) } == first.map { String(decoding: $0.body, as: UTF8.self) })
            #expect(again.allSatisfy { $0.header("Idempotent-Replayed") == "true" })
            #expect(first.allSatisfy { $0.header("Idempotent-Replayed") == nil })
            #expect(try await Self.state(live) == before)  // nothing written twice: records, keys, feed
            // One entry first sent alone, then inside a batch beside a new one: replayed, the
            // new one applied; and a key first used in a batch replays for a single request.
            let alone = try await live.send("POST", "/posts", json: #"{"title":"q"}"#, headers: ["Idempotency-Key": "kq"])
            let mixed = try Self.results(try await live.send("POST", "/_batch", json: Self.batchBody([
                Step(method: "POST", path: "/posts", body: #"{"title":"q"}"#, headers: ["Idempotency-Key": "kq"]),
                Step(method: "POST", path: "/posts", body: #"{"title":"r"}"#, headers: ["Idempotency-Key": "kr"]),
            ])))
            #expect(mixed.map(\.status) == [201, 201])
            #expect(mixed[0].header("Idempotent-Replayed") == "true" && mixed[0].body == alone.body)
            #expect(mixed[1].header("Idempotent-Replayed") == nil)
            let single = try await live.send("POST", "/posts", json: #"{"title":"p"}"#, headers: ["Idempotency-Key": "kp"])
            #expect(single.header("Idempotent-Replayed") == "true" && single.body == first[1].body)
            let posts = try await live.driver.read { tx in try tx.query(Query(), in: CollectionName("posts")) }
            #expect(posts.compactMap { $0["title"].stringValue } == ["p", "q", "r"])
        }
    }

    @Test("too many entries or too many bytes is 413 batchTooLarge and applies nothing; a bad batch is 400; reads are not entries")
    func limits() async throws {
        let store = try await Store(driver: MemoryDriver())
        var configuration = DepotServer.Configuration()
        configuration.maxBatchEntries = 5
        configuration.maxBatchBodySize = 1_000
        configuration.maxBodySize = 300
        let server = DepotServer(store: store, configuration: configuration)
        let port = try await server.start()
        let live = LiveServer(server: server, driver: MemoryDriver(), base: "http://127.0.0.1:\(port)")
        do {
            let six = (1...6).map { Step(method: "POST", path: "/notes", body: "{\"id\":\"n\($0)\"}") }
            let tooMany = try await live.send("POST", "/_batch", json: Self.batchBody(six))
            #expect(tooMany.status == 413 && tooMany.errorCode == "batchTooLarge")
            let big = String(repeating: "x", count: 250)
            let heavy = (1...5).map { Step(method: "POST", path: "/notes", body: "{\"id\":\"h\($0)\",\"t\":\"\(big)\"}") }
            let tooBig = try await live.send("POST", "/_batch", json: Self.batchBody(heavy))
            #expect(tooBig.status == 413 && tooBig.errorCode == "batchTooLarge")
            #expect(try await store.read { tx in try tx.schema(of: CollectionName("notes")) } == nil)  // nothing applied
            // One entry over the single-request limit is refused as its own request would be.
            let mixed = try await live.send("POST", "/_batch", json: Self.batchBody([
                Step(method: "POST", path: "/notes", body: "{\"id\":\"big\",\"t\":\"\(big)\(big)\"}"),
                Step(method: "POST", path: "/notes", body: #"{"id":"small"}"#),
            ]))
            let alone = try await live.send("POST", "/notes", json: "{\"id\":\"big\",\"t\":\"\(big)\(big)\"}")
            #expect(try Self.results(mixed).map(\.status) == [413, 201])
            #expect(alone.status == 413)
            for bad in [#"[]"#, #"{"requests":{}}"#, #"{"requests":[{"path":"/notes"}]}"#, "not json"] {
                #expect(try await live.send("POST", "/_batch", json: bad).status == 400, "\(bad)")
            }
            let reads = try Self.results(try await live.send("POST", "/_batch", json: Self.batchBody([
                Step(method: "GET", path: "/notes"), Step(method: "POST", path: "/_batch", body: "{\"requests\":[]}"),
                Step(method: "POST", path: "/_changes", body: "{}"),
            ])))
            #expect(reads.map(\.status) == [405, 405, 405])
            let limits = try await live.send("GET", "/_batch")
            #expect(limits.status == 200 && limits.json == ["maxEntries": 5, "maxBytes": 1_000])
            #expect(try await live.send("PUT", "/_batch", json: "{}").status == 405)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    @Test("loseResponseMidBatch commits the first half of a batch and answers nothing")
    func midBatchFault() async throws {
        let faults = ServerFaults { method, path in method == "POST" && path == "/_batch" ? .loseResponseMidBatch : nil }
        try await withServer(faults: faults) { live in
            let steps = (1...5).map { Step(method: "POST", path: "/notes", body: "{\"id\":\"n\($0)\"}") }
            await #expect(throws: (any Error).self) { _ = try await live.send("POST", "/_batch", json: Self.batchBody(steps)) }
            let ids = try await live.driver.read { tx in try tx.query(Query(), in: CollectionName("notes")) }.map(\.id)
            #expect(ids == ["n1", "n2", "n3"])
        }
    }
}
