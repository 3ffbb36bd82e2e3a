import DepotCore
import DepotMemory
import DepotModel
import DepotSync
import Foundation
import Testing

/// Typed remote resources against a third-party peer: `simple-json-server` from PyPI, a
/// json-server clone in Python, run on loopback over a `db.json` in a temporary folder.
/// scripts/install-deps installs it; without it these tests fail and say what to install.
@Suite(.serialized) struct RemoteJSONServerTests {
    static let seed: FieldValue = [
        "posts": .array((1...5).map { rank -> FieldValue in
            ["id": .int(Int64(rank)), "user_id": 1, "headline": .string("seeded \(rank)"), "rank": .int(Int64(rank)), "createdAt": .int(1_700_000_000_000 + Int64(rank))]
        }),
    ]

    func resource(_ server: JSONServerProcess) -> RemoteResource<RemotePost> {
        var posts = RemoteResource<RemotePost>(baseURL: server.url, path: "/posts", transport: URLSessionTransport(timeout: remoteTestTimeout), sleeper: RecordingSleeper())
        posts.keyMapping = ["userId": "user_id", "title": "headline"]
        return posts
    }

    @Test("CRUD with key mapping; the server's db.json holds integer milliseconds and only sealed text")
    func crud() async throws {
        try await JSONServerProcess.with(Self.seed) { server in
            let posts = resource(server)
            let first = try await posts.fetch(id: 1)
            #expect(first == RemotePost(id: 1, userId: 1, title: "seeded 1", rank: 1, createdAt: wholeMilliseconds(1_700_000_000_001), secret: nil))

            let created = try await posts.create(post(6, rank: 6, secret: "between us"))
            #expect(created.secret == "between us" && created.id == 6)
            let onDisk = try #require(try server.database().objectValue?["posts"]?.arrayValue?.last?.objectValue)
            #expect(onDisk["headline"] == "post 6" && onDisk["user_id"] == 1 && onDisk["title"] == nil)
            #expect(onDisk["createdAt"] == .int(1_700_000_006_000))
            let sealed = try #require(onDisk["secret"]?.bytesValue, "the sealed field is stored as Depot's tagged bytes")
            #expect(!String(decoding: sealed, as: UTF8.self).contains("between"))
            let fileText = try String(contentsOf: server.dbFile, encoding: .utf8)
            #expect(!fileText.contains("between us") && fileText.contains("$bytes"))

            var changed = created
            changed.title = "replaced"
            #expect(try await posts.replace(changed) == changed)
            changed.rank = 60
            let patched = try await posts.patch(changed, fields: ["rank"])
            #expect(patched.rank == 60 && patched.title == "replaced" && patched.secret == "between us")

            try await posts.delete(patched)
            do {
                _ = try await posts.fetch(id: 6)
                Issue.record("a deleted post must not be found")
            } catch let error as DepotError {
                #expect(error.code == .notFound)
                #expect(error.remoteFailure?.serverMessage == "Item with ID '6' not found.")
            }
        }
    }

    @Test("_start/_limit and _page/_per_page pages, sorted, with X-Total-Count")
    func paging() async throws {
        try await JSONServerProcess.with(Self.seed) { server in
            var posts = resource(server)
            for paging in [RemotePaging.range, .page] {
                posts.paging = paging
                let second = try await posts.list(page: 1, size: 2, sort: [SortKey("rank", descending: true)])
                #expect(second.items.map(\.rank) == [3, 2] && second.total == 5 && second.hasMore)
                let last = try await posts.list(page: 2, size: 2, sort: [SortKey("rank", descending: true)])
                #expect(last.items.map(\.rank) == [1] && !last.hasMore)
            }
            let filtered = try await posts.list(size: 10, parameters: [("rank_gte", "4")])
            #expect(filtered.items.map(\.rank) == [4, 5])
        }
    }

    @Test("offline-first: the first page from the server once, then from the store; refresh drops what the server deleted")
    func offlineFirst() async throws {
        try await JSONServerProcess.with(Self.seed) { server in
            let store = try await Store(driver: MemoryDriver())
            let feed = try RemoteCollection(store: store, resource: resource(server), pageSize: 2, sort: [SortKey("rank")])
            let first = try await feed.firstPage(.localElseRemote)
            #expect(first.source == .remote && first.models.map(\.rank) == [1, 2])
            #expect(try await feed.page(1).map(\.rank) == [3, 4])
            // The server changes behind the client's back.
            try await resource(server).delete(id: 3)
            var renamed = try await resource(server).fetch(id: 4)
            renamed.title = "renamed"
            _ = try await resource(server).replace(renamed)
            let again = try await feed.firstPage(.localElseRemote)
            #expect(again.source == .local && again.models.map(\.rank) == [1, 2])
            let report = try await feed.refresh()
            #expect(report.removed == [.int(3)])
            let local = try await store.read { tx in try tx.query(Query(sort: [SortKey("rank")]), in: name("posts")) }
            #expect(local.map(\.id) == [1, 2, 4])
            #expect(local.last?.fields["title"] == "renamed")
        }
    }
}
