import DepotCore
import DepotMemory
import DepotModel
import DepotSync
import Foundation
import Testing

/// Offline-first typed reads (RemoteCollection) against DepotServer on loopback, and the
/// faulty peers every remote request must survive with a typed error and nothing lost.
@Suite struct RemoteCollectionTests {
    static let posts = name("posts")

    /// A server holding posts with ids and ranks `ranks`.
    func seed(_ url: URL, _ ranks: ClosedRange<Int>) async throws {
        let posts = RemoteResource<RemotePost>(baseURL: url, path: "/posts", transport: URLSessionTransport(timeout: remoteTestTimeout))
        for rank in ranks { _ = try await posts.create(post(rank, rank: rank)) }
    }

    func localIDs(_ store: Store) async throws -> [RecordID] {
        try await store.read { tx in try tx.query(Query(sort: [SortKey("rank")]), in: Self.posts) }.map(\.id)
    }

    @Test("each read policy asks the network only when it says so; load more reads the store first")
    func readPolicies() async throws {
        try await withSyncServer { _, _, url in
            try await seed(url, 1...10)
            let counting = CountingTransport()
            let store = try await clientStore()
            let feed = try RemoteCollection(store: store, resource: RemoteResource<RemotePost>(baseURL: url, path: "/posts", transport: counting), pageSize: 3, sort: [SortKey("rank")])

            let offline = try await feed.firstPage(.localOnly)
            #expect(offline.models.isEmpty && offline.source == .local && counting.count == 0)

            let first = try await feed.firstPage(.localElseRemote)
            #expect(first.source == .remote && first.models.map(\.rank) == [1, 2, 3] && counting.count == 1)
            let cached = try await feed.firstPage(.localElseRemote)
            #expect(cached.source == .local && cached.models == first.models && counting.count == 1)

            #expect(try await feed.page(1).map(\.rank) == [4, 5, 6] && counting.count == 2)
            #expect(try await feed.page(1).map(\.rank) == [4, 5, 6] && counting.count == 2, "a full page in the store: no request")
            #expect(try await feed.page(0).map(\.rank) == [1, 2, 3] && counting.count == 2)

            // Remote only: a refresh (one list, one check per record beyond the first page).
            let remote = try await feed.firstPage(.remoteOnly)
            #expect(remote.source == .remote && remote.models.map(\.rank) == [1, 2, 3] && counting.count == 2 + 1 + 3)

            // Local now, refreshed later.
            var renamed = post(1, rank: 1, title: "fresh")
            renamed = try await RemoteResource<RemotePost>(baseURL: url, path: "/posts").replace(renamed)
            let stale = try await feed.firstPage(.localThenRefresh)
            #expect(stale.source == .local && stale.models.first?.title == "post 1")
            let refreshed = try #require(stale.refreshed)
            #expect(try await refreshed.value.first == renamed)
            #expect(try await feed.localPage(0).first?.title == "fresh")
        }
    }

    @Test("remote else local: the store answers when the server cannot; a refusal is thrown")
    func remoteElseLocal() async throws {
        let store = try await clientStore()
        try await withSyncServer { _, _, url in
            try await seed(url, 1...4)
            _ = try await RemoteCollection(store: store, resource: RemoteResource<RemotePost>(baseURL: url, path: "/posts"), pageSize: 3, sort: [SortKey("rank")]).firstPage(.remoteOnly)
        }
        let gone = try #require(URL(string: "http://127.0.0.1:\(try freeLoopbackPort())"))
        let down = RemoteResource<RemotePost>(baseURL: gone, path: "/posts", retryPolicy: RetryPolicy(maxAttempts: 2), sleeper: RecordingSleeper())
        let feed = try RemoteCollection(store: store, resource: down, pageSize: 3, sort: [SortKey("rank")])
        let answer = try await feed.firstPage(.remoteElseLocal)
        #expect(answer.source == .local && answer.models.map(\.rank) == [1, 2, 3])
        await #expect(throws: DepotError.self) { _ = try await feed.firstPage(.remoteOnly) }

        let refusing = RemoteResource<RemotePost>(baseURL: gone, path: "/posts", transport: ScriptedTransport { _ in HTTPAnswer(status: 401) }, sleeper: RecordingSleeper())
        do {
            _ = try await RemoteCollection(store: store, resource: refusing, pageSize: 3).firstPage(.remoteElseLocal)
            Issue.record("a 401 is not an outage: it must be thrown")
        } catch let error as DepotError {
            #expect(error.remoteFailure?.status == 401)
        }
        #expect(try await localIDs(store) == [1, 2, 3])
    }

    @Test("pull-to-refresh replaces the first page, keeps what was loaded beyond it while the server has it", arguments: [RemoteCollection<RemotePost>.ExistenceCheck.byID, .idFilter(parameter: "id")])
    func pullToRefresh(_ check: RemoteCollection<RemotePost>.ExistenceCheck) async throws {
        try await withSyncServer { _, _, url in
            try await seed(url, 1...10)
            let store = try await clientStore()
            let server = RemoteResource<RemotePost>(baseURL: url, path: "/posts")
            let feed = try RemoteCollection(store: store, resource: server, pageSize: 3, sort: [SortKey("rank")], existenceCheck: check)
            for index in 0..<3 { _ = try await feed.page(index) }
            #expect(try await localIDs(store) == (1...9).map { RecordID.int(Int64($0)) })

            // On the server: 2 (first page) and 7 (loaded beyond it) deleted, 8 renamed,
            // a new post at the top.
            try await server.delete(id: 2)
            try await server.delete(id: 7)
            _ = try await server.replace(post(8, rank: 8, title: "renamed"))
            _ = try await server.create(post(11, rank: 0))

            let report = try await feed.refresh()
            #expect(report.firstPage.map(\.id) == [11, 1, 3])
            #expect(Set(report.removed) == [2, 7])
            #expect(report.updated == 3 + 5)
            #expect(try await localIDs(store) == [11, 1, 3, 4, 5, 6, 8, 9], "10 was never loaded; 2 and 7 are gone")
            #expect(try await feed.localPage(2).map(\.title) == ["renamed", "post 9"])
        }
    }

    @Test("a server answering 500, dropping the connection mid-body or sending a wrong length: a typed error, the store unchanged",
          arguments: [
              ("500", "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: 18\r\nConnection: close\r\n\r\n{\"message\":\"boom\"}"),
              ("cut", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 400\r\nConnection: close\r\n\r\n[{\"id\":1,\"userId\":1,\"title\":\"x\""),
              ("short", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\nConnection: close\r\n\r\n[{\"id\":1,\"userId\":1,\"title\":\"x\",\"rank\":1,\"createdAt\":5}]"),
          ])
    func faultyPeers(_ fault: String, _ response: String) async throws {
        let peer = try RawHTTPPeer(responses: [response])
        defer { peer.stop() }
        let store = try await clientStore()
        let before = [Record(id: 1, fields: ["userId": 1, "title": "cached", "rank": 1, "createdAt": 5]), Record(id: 2, fields: ["userId": 1, "title": "two", "rank": 2, "createdAt": 6])]
        try await store.write { tx in for record in before { _ = try tx.save(record, into: Self.posts) } }
        let resource = RemoteResource<RemotePost>(baseURL: peer.url, path: "/posts", transport: URLSessionTransport(timeout: 10), retryPolicy: RetryPolicy(maxAttempts: 3), sleeper: RecordingSleeper())
        let feed = try RemoteCollection(store: store, resource: resource, pageSize: 5, sort: [SortKey("rank")])

        var failure: RemoteFailure?
        do {
            _ = try await feed.refresh()
            Issue.record("\(fault): the refresh must fail")
        } catch let error as DepotError {
            failure = error.remoteFailure
        }
        let got = try #require(failure, "\(fault): a DepotError with a RemoteFailure")
        switch fault {
        case "500":
            #expect(got == RemoteFailure(kind: .status, request: "GET /posts", status: 500, serverMessage: "boom", isRetryable: true, attempts: 3))
            #expect(peer.count == 3)
        case "cut":
            #expect(got.kind == .noAnswer && got.isRetryable && got.attempts == 3)
            #expect(peer.count == 3)
        default:
            #expect(got.kind == .invalidAnswer && !got.isRetryable && got.status == 200)
            #expect(peer.count == 1)
        }
        #expect(try await store.read { tx in try tx.query(Query(), in: Self.posts) } == before)
        // The store still answers offline.
        #expect(try await feed.firstPage(.localOnly).models.map(\.title) == ["cached", "two"])
        await #expect(throws: DepotError.self) { _ = try await feed.page(0) }
        #expect(try await store.read { tx in try tx.query(Query(), in: Self.posts) } == before)
    }
}
