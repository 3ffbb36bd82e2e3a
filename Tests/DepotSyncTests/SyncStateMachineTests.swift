import DepotCore
import DepotSync
import Foundation
import Testing

@Suite("Sync state machines (no I/O)")
struct SyncStateMachineTests {
    @Test("full jitter stays within the exponential cap; Retry-After raises the wait")
    func backoff() {
        let policy = RetryPolicy(baseDelay: .milliseconds(100), maxDelay: .seconds(2), maxAttempts: 5)
        #expect(policy.delay(beforeRetry: 0, unit: 0.999_999) <= .milliseconds(100))
        #expect(policy.delay(beforeRetry: 3, unit: 0.5) == .milliseconds(400))
        #expect(policy.delay(beforeRetry: 10, unit: 0.999_999) <= .seconds(2))
        #expect(policy.delay(beforeRetry: 2, unit: 0) == .zero)
        #expect(policy.delay(beforeRetry: 0, unit: 0, retryAfter: .seconds(1)) == .seconds(1))
        #expect(policy.delay(beforeRetry: 0, unit: 0, retryAfter: .seconds(60)) == .seconds(2))
        let random = SeededRandomSource(seed: 7)
        for retry in 0..<20 {
            let cap = min(0.1 * pow(2, Double(retry)), 2.0)
            let wait = policy.delay(beforeRetry: retry, unit: random.nextUnit())
            #expect(wait >= .zero && wait <= .milliseconds(Int64(cap * 1000) + 1))
        }
    }

    @Test("the retry state gives up after maxAttempts attempts")
    func retryState() {
        var state = RetryState(policy: RetryPolicy(maxAttempts: 3))
        #expect(state.failed(unit: 0.5) != nil)
        #expect(state.failed(unit: 0.5) != nil)
        #expect(state.failed(unit: 0.5) == nil)
        #expect(state.attempts == 3)
    }

    @Test("statuses are classified: retry 408/429/5xx, conflict 409/412, permanent other 4xx")
    func verdicts() {
        #expect(RequestVerdict.classify(status: 201) == .success)
        #expect(RequestVerdict.classify(status: 412) == .conflict)
        #expect(RequestVerdict.classify(status: 409) == .conflict)
        #expect(RequestVerdict.classify(status: 404) == .notFound)
        #expect(RequestVerdict.classify(status: 503) == .retry(after: nil))
        #expect(RequestVerdict.classify(status: 429, retryAfter: "2") == .retry(after: .seconds(2)))
        #expect(RequestVerdict.classify(status: 408) == .retry(after: nil))
        #expect(RequestVerdict.classify(status: 400) == .permanent)
        #expect(RequestVerdict.classify(status: 422) == .permanent)
    }

    func entry(_ seq: Int64, _ id: RecordID, state: OutboxEntry.State = .pending) -> OutboxEntry {
        OutboxEntry(seq: seq, collection: "c", recordID: id, operation: .upsert, fields: [:], idempotencyKey: "k\(seq)", state: state)
    }

    @Test("the drain goes in commit order and holds back a record after its dead entry")
    func drainOrder() {
        var drain = OutboxDrain(entries: [entry(3, 1), entry(1, 1), entry(2, 2), entry(4, 2), entry(5, 3, state: .dead), entry(6, 3)])
        var sent: [Int64] = []
        while let next = drain.next() {
            sent.append(next.seq)
            drain.finish(next, next.seq == 2 ? .deadLettered : .pushed)
        }
        #expect(sent == [1, 2, 3])  // 4 waits behind dead 2; 6 waits behind dead 5
        #expect(drain.pushed == 2)
        #expect(drain.deadLettered == 1)
    }

    @Test("batches: commit order, one entry per record (later ones wait, in order), one collection, blocked records skipped")
    func drainBatches() {
        var other = entry(5, 9)
        other.collection = "tasks"
        var drain = OutboxDrain(entries: [entry(1, 1), entry(2, 2), entry(3, 1), entry(4, 3), other, entry(6, 1), entry(7, 4), entry(8, 2)])
        let first = drain.nextBatch(maxCount: 10)
        #expect(first.map(\.seq) == [1, 2, 4, 7])  // 3, 6 and 8 wait behind their records; 5 is another collection
        for item in first { drain.finish(item, item.seq == 2 ? .deadLettered : .pushed) }
        #expect(drain.nextBatch(maxCount: 10).map(\.seq) == [3])  // 8 is behind dead 2; 5 is another collection
        #expect(drain.nextBatch(maxCount: 10).map(\.seq) == [5])
        #expect(drain.nextBatch(maxCount: 10).map(\.seq) == [6])
        #expect(drain.nextBatch(maxCount: 10).isEmpty)
        var small = OutboxDrain(entries: (1...5).map { entry(Int64($0), .int(Int64($0))) })
        #expect(small.nextBatch(maxCount: 2).map(\.seq) == [1, 2])
        #expect(small.nextBatch(maxCount: 2).map(\.seq) == [3, 4])
        #expect(small.next()?.seq == 5)
    }

    @Test("the drain halts when the server is unreachable")
    func drainHalts() {
        var drain = OutboxDrain(entries: [entry(1, 1), entry(2, 2), entry(3, 3)])
        let first = drain.next()
        #expect(first?.seq == 1)
        if let first { drain.finish(first, .unreachable) }
        #expect(drain.next() == nil)
        #expect(drain.halted)
    }

    @Test("a redirect to another host drops credentials; same host keeps them")
    func redirects() throws {
        let url = try #require(URL(string: "https://api.example.com/posts"))
        let request = HTTPRequestSpec(
            method: "POST", url: url, headers: ["Authorization": "Bearer s3cret", "X-Api-Key": "k", "Accept": "application/json"],
            body: Data("{}".utf8), sensitiveHeaders: ["X-Api-Key"]
        )
        let other = try #require(RedirectRule.follow(request, status: 307, location: "https://evil.example.net/x", allowInsecureHTTP: false))
        #expect(other.headers["Authorization"] == nil)
        #expect(other.headers["X-Api-Key"] == nil)
        #expect(other.headers["Accept"] == "application/json")
        #expect(other.method == "POST")
        let same = try #require(RedirectRule.follow(request, status: 308, location: "/v2/posts", allowInsecureHTTP: false))
        #expect(same.headers["Authorization"] == "Bearer s3cret")
        #expect(same.url.absoluteString == "https://api.example.com/v2/posts")
        let seeOther = try #require(RedirectRule.follow(request, status: 303, location: "https://api.example.com/done", allowInsecureHTTP: false))
        #expect(seeOther.method == "GET")
        #expect(seeOther.body == nil)
        #expect(RedirectRule.follow(request, status: 302, location: "http://plain.example.com/", allowInsecureHTTP: false) == nil)
        #expect(RedirectRule.follow(request, status: 302, location: "file:///etc/passwd", allowInsecureHTTP: false) == nil)
        #expect(RedirectRule.follow(request, status: 200, location: "https://x.example.com/", allowInsecureHTTP: false) == nil)
        #expect(request.safeDescription == "POST /posts")
    }

    @Test("plain http needs an opt-in except on loopback")
    func insecureHTTP() throws {
        var endpoint = SyncEndpoint(baseURL: try #require(URL(string: "http://api.example.com")), path: "/posts")
        #expect(throws: DepotError.self) { try endpoint.validate() }
        endpoint.allowInsecureHTTP = true
        try endpoint.validate()
        try SyncEndpoint(baseURL: try #require(URL(string: "http://127.0.0.1:8080")), path: "/posts").validate()
        try SyncEndpoint(baseURL: try #require(URL(string: "http://localhost:8080")), path: "/posts").validate()
        try SyncEndpoint(baseURL: try #require(URL(string: "https://api.example.com")), path: "/a/1/b").validate()
        #expect(throws: DepotError.self) { try SyncEndpoint(baseURL: try #require(URL(string: "https://x.com")), path: "posts").validate() }
        #expect(throws: DepotError.self) { try SyncEndpoint(baseURL: try #require(URL(string: "ftp://x.com")), path: "/posts").validate() }
    }
}
