import DepotCore
import Foundation
import Testing

@testable import DepotSync

/// A pull fetches the next page while it applies one (Docs/Sync.md, "Pull"): a page that
/// fails after it was fetched ahead must leave what an ordinary pull leaves, the pages
/// before it applied and the checkpoint on it, and nothing is fetched past it.
@Suite("Pull: the next page fetched while one is applied")
struct SyncPullAheadTests {
    let items = name("items")

    /// The ids of the records stored locally, sorted.
    func storedIDs(_ store: Store) async throws -> [String] {
        let items = items
        return try await store.read { tx in try tx.query(Query(), in: items) }.map { record -> String in
            switch record.id {
            case .string(let text): text
            case .int(let i): String(i)
            }
        }.sorted()
    }

    /// The value of query item `name` in `request`'s URL.
    static func query(_ request: HTTPRequestSpec, _ name: String) -> String? {
        URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == name }?.value
    }

    @Test("listing: a failed page after pages fetched ahead; the next pull resumes on it")
    func listing() async throws {
        let failing = Locked(true)
        let asked = Locked<[Int]>([])
        let ids = (0..<10).map { "r\($0)" }
        let transport = ScriptedTransport { request in
            guard request.method == "GET", request.url.path == "/items", let page = Self.query(request, "_page").flatMap(Int.init) else {
                return HTTPAnswer(status: 404)
            }
            asked.withLock { $0.append(page) }
            if page == 3, failing.withLock({ $0 }) { return HTTPAnswer(status: 400, body: Data("no".utf8)) }
            let slice = ids.dropFirst((page - 1) * 2).prefix(2)
            return HTTPAnswer(status: 200, body: Data(("[" + slice.map { #"{"id":"\#($0)","n":1}"# }.joined(separator: ",") + "]").utf8))
        }
        let store = try await clientStore()
        let sync = SyncCoordinator(store: store, transport: transport, sleeper: RecordingSleeper())
        var endpoint = SyncEndpoint(baseURL: try #require(URL(string: "https://example.com")), path: "/items")
        endpoint.pageSize = 2
        endpoint.changeFeed = .none
        try await sync.attach(items, to: endpoint)

        let first = try await sync.sync(items, push: false)
        #expect(first.failures.count == 1)
        #expect(first.pulled == 4)
        #expect(try await storedIDs(store) == ["r0", "r1", "r2", "r3"])
        #expect(asked.withLock { $0 } == [1, 2, 3])  // nothing asked past the failed page

        failing.withLock { $0 = false }
        let second = try await sync.sync(items, push: false)
        #expect(second.failures.isEmpty)
        #expect(second.pulled == 6)
        #expect(try await storedIDs(store) == ids.sorted())
        #expect(asked.withLock { $0 } == [1, 2, 3, 3, 4, 5, 6])  // resumed on page 3; page 6 is empty
    }

    @Test("change feed: a failed page after a page fetched ahead; the next pull resumes at its cursor")
    func feed() async throws {
        let failing = Locked(true)
        let asked = Locked<[String]>([])
        let transport = ScriptedTransport { request in
            guard request.method == "GET" else { return HTTPAnswer(status: 404) }
            if request.url.path == "/items" { return HTTPAnswer(status: 200, body: Data("[]".utf8)) }
            guard request.url.path == "/_changes", let since = Self.query(request, "since") else { return HTTPAnswer(status: 404) }
            asked.withLock { $0.append(since) }
            let page: (ids: [String], next: String, more: Bool)
            switch since {
            case "0": page = (["a", "b"], "2", true)
            case "2":
                if failing.withLock({ $0 }) { return HTTPAnswer(status: 500, body: Data("down".utf8)) }
                page = (["c", "d"], "4", true)
            default: page = (["e"], "5", false)
            }
            let changes = page.ids.map { #"{"id":"\#($0)","op":"upsert","record":{"id":"\#($0)","v":1}}"# }.joined(separator: ",")
            return HTTPAnswer(status: 200, body: Data(#"{"changes":[\#(changes)],"next":"\#(page.next)","hasMore":\#(page.more)}"#.utf8))
        }
        let store = try await clientStore()
        let sync = SyncCoordinator(store: store, transport: transport, sleeper: RecordingSleeper())
        var endpoint = SyncEndpoint(baseURL: try #require(URL(string: "https://example.com")), path: "/items")
        endpoint.pageSize = 2
        try await sync.attach(items, to: endpoint)

        let first = try await sync.sync(items, push: false)
        #expect(first.failures.count == 1)
        #expect(try await storedIDs(store) == ["a", "b"])
        let retries = asked.withLock { $0.count } - 2
        #expect(asked.withLock { $0 } == ["0"] + Array(repeating: "2", count: retries + 1))  // retried, never past "2"

        failing.withLock { $0 = false }
        let second = try await sync.sync(items, push: false)
        #expect(second.failures.isEmpty)
        #expect(try await storedIDs(store) == ["a", "b", "c", "d", "e"])
        #expect(asked.withLock { $0 }.suffix(2) == ["2", "4"])  // resumed at the cursor the failed page had
    }
}
