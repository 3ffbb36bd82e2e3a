import DepotCore
import DepotModel
import DepotServer
import DepotSync
import Foundation
import Testing

/// Typed remote resources against DepotServer on loopback, and against scripted answers for
/// the shapes DepotServer never sends (envelopes, error bodies, retries).
@Suite struct RemoteResourceTests {
    func resource(_ url: URL, _ transport: any HTTPTransport = URLSessionTransport(timeout: remoteTestTimeout)) -> RemoteResource<RemotePost> {
        RemoteResource<RemotePost>(baseURL: url, path: "/posts", transport: transport, sleeper: RecordingSleeper())
    }

    @Test("create, fetch, list, replace, patch and delete answer typed models; transformers and key mapping apply on the wire")
    func crudOnDepotServer() async throws {
        try await withSyncServer { _, driver, url in
            var posts = resource(url)
            posts.keyMapping = ["title": "post_title"]
            let created = try await posts.create(post(nil, rank: 1, secret: "kept from the server"))
            let id = try #require(created.id)
            #expect(created.title == "post 1" && created.secret == "kept from the server")
            #expect(created.createdAt == wholeMilliseconds(1_700_000_001_000))

            // What the server holds: mapped key, integer milliseconds, sealed bytes.
            let raw = try #require(try await LocalWrites.all(driver, name("posts")).first)
            #expect(raw.fields["post_title"] == "post 1" && raw.fields["title"] == nil)
            #expect(raw.fields["createdAt"] == .int(1_700_000_001_000))
            let sealed = try #require(raw.fields["secret"]?.bytesValue)
            #expect(sealed.count == 8 + "kept from the server".utf8.count)
            #expect(!String(decoding: sealed, as: UTF8.self).contains("kept"))

            #expect(try await posts.fetch(id: id) == created)
            var changed = created
            changed.title = "renamed"
            changed.secret = nil
            #expect(try await posts.replace(changed) == changed)
            #expect(try await LocalWrites.all(driver, name("posts")).first?.fields["secret"] == nil)

            changed.rank = 9
            changed.title = "not sent"
            let patched = try await posts.patch(changed, fields: ["rank"])
            #expect(patched.rank == 9 && patched.title == "renamed")

            for rank in 2...5 { _ = try await posts.create(post(nil, rank: rank)) }
            let page = try await posts.list(page: 1, size: 2, sort: [SortKey("rank")])
            #expect(page.items.map(\.rank) == [4, 5] && page.total == 5 && page.hasMore)
            let last = try await posts.list(page: 2, size: 2, sort: [SortKey("rank")])
            #expect(last.items.map(\.rank) == [9] && !last.hasMore)

            try await posts.delete(patched)
            await #expect(throws: DepotError.self) { try await posts.fetch(id: id) }
            do {
                _ = try await posts.fetch(id: id)
            } catch let error as DepotError {
                #expect(error.code == .notFound)
                #expect(error.remoteFailure?.status == 404 && error.remoteFailure?.isRetryable == false)
            }
        }
    }

    @Test("paging: _start/_limit, _page/_per_page and a custom scheme select the same pages")
    func pagingSchemes() async throws {
        try await withSyncServer { _, _, url in
            var posts = resource(url)
            for rank in 1...7 { _ = try await posts.create(post(rank, rank: rank)) }
            var pages: [[Int]] = []
            for paging in [RemotePaging.range, .page, .custom { index, size in [("_start", String(index * size)), ("_end", String(index * size + size))] }] {
                posts.paging = paging
                var ranks: [Int] = []
                var index = 0
                while true {
                    let page = try await posts.list(page: index, size: 3)
                    ranks += page.items.map(\.rank)
                    if !page.hasMore { break }
                    index += 1
                }
                pages.append(ranks)
            }
            #expect(pages == Array(repeating: Array(1...7), count: 3))
        }
    }

    @Test("a path computed from the model at request time, and a nested resource following a relation")
    func computedAndNestedPaths() async throws {
        try await withSyncServer { _, driver, url in
            var posts = resource(url)
            posts.modelPath = { "/users/\($0.userId)/posts" }
            let created = try await posts.create(post(nil, rank: 1, userId: 7))
            #expect(created.userId == 7)
            let stored = try #require(try await LocalWrites.all(driver, name("posts")).first)
            #expect(stored.fields["userId"] == 7)
            let mine = try await posts.at("/users/7/posts").list()
            #expect(mine.items.map(\.id) == [created.id])
            #expect(try await posts.at("/users/8/posts").list().items.isEmpty)

            let comments = try posts.nested(RemotePost.comments, of: created)
            #expect(comments.path == "/users/7/posts/\(try #require(created.id))/comments")
            let plain = try resource(url).nested(RemotePost.comments, of: created)
            #expect(plain.path == "/posts/\(try #require(created.id))/comments")
            let comment = try await plain.create(RemoteComment(id: nil, postId: nil, body: "first"))
            #expect(comment.postId == created.id && comment.body == "first")
            #expect(try await plain.list().items == [comment])

            var bad = resource(url)
            bad.modelPath = { "/users/\($0.title)/posts" }
            await #expect(throws: DepotError.self) { _ = try await bad.create(post(nil, rank: 2, title: "../admin")) }
            await #expect(throws: DepotError.self) { _ = try await bad.create(post(nil, rank: 2, title: "a?b")) }
            #expect(try await LocalWrites.all(driver, name("posts")).count == 1, "an invalid path sends nothing")
        }
    }

    @Test("envelopes for single objects and lists, a pre-processing closure, a custom id key")
    func envelopesAndPreprocessing() async throws {
        let transport = ScriptedTransport { request in
            switch (request.method, request.url.path) {
            case ("GET", "/v1/posts"):
                let body = #"{"status":"ok","payload":{"items":[{"_id":1,"userId":1,"title":"a","rank":1,"createdAt":5}],"count":11}}"#
                return HTTPAnswer(status: 200, body: Data(body.utf8))
            case ("GET", "/v1/posts/1"):
                return HTTPAnswer(status: 200, body: Data(#"{"status":"ok","payload":{"properties":{"_id":1,"userId":1,"title":"a","rank":1,"createdAt":5}}}"#.utf8))
            default:
                return HTTPAnswer(status: 500)
            }
        }
        var posts = RemoteResource<RemotePost>(baseURL: try #require(URL(string: "https://api.example.com/v1")), path: "/posts", transport: transport, sleeper: RecordingSleeper())
        posts.idKey = "_id"
        posts.envelope = RemoteEnvelope(single: "properties", list: "items", total: "count")
        // The server puts everything under "payload": strip that first.
        posts.preprocess = { body, _ in
            guard let payload = body.objectValue?["payload"] else { throw DepotError(.decoding, "no payload") }
            return payload
        }
        let page = try await posts.list(page: 0, size: 1)
        #expect(page.items.map(\.title) == ["a"] && page.total == 11 && page.hasMore)
        let one = try await posts.fetch(id: 1)
        #expect(one.id == 1 && one.createdAt == wholeMilliseconds(5))
        posts.envelope.single = "missing"
        do {
            _ = try await posts.fetch(id: 1)
            Issue.record("an answer without the envelope must fail")
        } catch let error as DepotError {
            #expect(error.remoteFailure?.kind == .invalidAnswer)
        }
    }

    @Test("request hooks add headers and parameters; secrets never reach the error, the server's message is bounded")
    func hooksAndSecrets() async throws {
        let seen = Locked<[HTTPRequestSpec]>([])
        let transport = ScriptedTransport { request in
            seen.withLock { $0.append(request) }
            // A careless server echoing the credentials, at length.
            let echo = "bad token \(request.headers["Authorization"] ?? "") for key \(request.url.query ?? "") " + String(repeating: "x", count: 500)
            return HTTPAnswer(status: 401, body: Data(JSONText.serialize(["error": .string(echo)]).utf8))
        }
        var posts = RemoteResource<RemotePost>(baseURL: try #require(URL(string: "https://api.example.com")), path: "/posts", transport: transport, sleeper: RecordingSleeper())
        posts.requestHook = { request in
            request.headers["Authorization"] = "Bearer s3cr3t-t0ken"
            request.setQueryItem("api_key", "k3y-v4lue")
            request.headers["X-App-Version"] = "2.1"
        }
        do {
            _ = try await posts.fetch(id: 1)
            Issue.record("a 401 must throw")
        } catch let error as DepotError {
            let failure = try #require(error.remoteFailure)
            #expect(failure.status == 401 && !failure.isRetryable && failure.attempts == 1)
            let text = [error.description, String(reflecting: error), failure.description, failure.serverMessage ?? ""].joined()
            #expect(!text.contains("s3cr3t-t0ken") && !text.contains("k3y-v4lue"))
            #expect(failure.serverMessage?.hasPrefix("bad token [redacted] for key api_key=[redacted] xxx") == true)
            #expect((failure.serverMessage?.count ?? 0) <= RemoteFailure.maximumMessageLength)
        }
        let request = try #require(seen.withLock { $0.first })
        #expect(request.headers["Authorization"] == "Bearer s3cr3t-t0ken" && request.sensitiveHeaders.contains("Authorization"))
        #expect(request.url.query?.contains("api_key=k3y-v4lue") == true)
        #expect(request.headers["X-App-Version"] == "2.1")
    }

    @Test("retryable failures are retried with backoff and jitter for GET, and for POST only with an idempotency key")
    func retries() async throws {
        let calls = Locked<[String]>([])
        let transport = ScriptedTransport { request in
            let n = calls.withLock { list -> Int in
                list.append(request.method + " " + (request.headers["Idempotency-Key"] ?? "-"))
                return list.count
            }
            if n % 3 != 0 { return HTTPAnswer(status: 503, body: Data(#"{"message":"busy"}"#.utf8)) }
            let body = request.body ?? Data(#"{"id":1,"userId":1,"title":"a","rank":1,"createdAt":5}"#.utf8)
            return HTTPAnswer(status: request.method == "POST" ? 201 : 200, body: body)
        }
        let sleeper = RecordingSleeper()
        let policy = RetryPolicy(baseDelay: .milliseconds(100), maxDelay: .seconds(1), maxAttempts: 5)
        let posts = RemoteResource<RemotePost>(baseURL: try #require(URL(string: "https://api.example.com")), path: "/posts", transport: transport, retryPolicy: policy, sleeper: sleeper)
        #expect(try await posts.fetch(id: 1).title == "a")
        let waits = sleeper.waits.withLock { $0 }
        #expect(waits.count == 2)
        #expect(waits[0] <= .milliseconds(100) && waits[1] <= .milliseconds(200))

        // Attempt 4 is a 503 again: a POST without a key is not repeated.
        do {
            _ = try await posts.create(post(2, rank: 2))
            Issue.record("a 503 to a POST without a key must throw")
        } catch let error as DepotError {
            #expect(error.remoteFailure?.attempts == 1 && error.remoteFailure?.isRetryable == true)
            #expect(error.remoteFailure?.serverMessage == "busy")
        }
        // Attempts 5 (503) and 6 (201), with the same key.
        let created = try await posts.create(post(2, rank: 2), idempotencyKey: "K-1")
        #expect(created.id == 2)
        #expect(calls.withLock { Array($0.suffix(2)) } == ["POST K-1", "POST K-1"])

        // Every attempt failing: the last failure, retryable, with the attempts counted.
        let down = RemoteResource<RemotePost>(baseURL: try #require(URL(string: "https://api.example.com")), path: "/posts",
            transport: ScriptedTransport { _ in HTTPAnswer(status: 500) }, retryPolicy: policy, sleeper: RecordingSleeper())
        do {
            _ = try await down.fetch(id: 1)
            Issue.record("a server answering 500 must fail")
        } catch let error as DepotError {
            #expect(error.code == .remote)
            #expect(error.remoteFailure == RemoteFailure(kind: .status, request: "GET /posts/1", status: 500, isRetryable: true, attempts: 5))
        }
    }

    @Test("cancelling the task stops a request waiting for its answer")
    func cancellation() async throws {
        let started = Locked(false)
        let transport = ScriptedTransport { _ in
            started.withLock { $0 = true }
            try await Task.sleep(for: .seconds(30))
            return HTTPAnswer(status: 200)
        }
        let posts = RemoteResource<RemotePost>(baseURL: try #require(URL(string: "https://api.example.com")), path: "/posts", transport: transport, sleeper: RecordingSleeper())
        let task = Task { try await posts.fetch(id: 1) }
        while !started.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(5)) }
        let clock = ContinuousClock()
        let start = clock.now
        task.cancel()
        do {
            _ = try await task.value
            Issue.record("a cancelled fetch must throw")
        } catch let error as DepotError {
            #expect(error.code == .cancelled)
        }
        #expect(clock.now - start < .seconds(10))
    }
}
