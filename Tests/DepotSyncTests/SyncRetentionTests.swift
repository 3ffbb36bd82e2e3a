import DepotCore
import DepotMemory
import DepotServer
import DepotSync
import DepotWire
import Foundation
import Synchronization
import Testing

/// Bounded server state (Docs/Server.md, "Retention"): idempotency records and tombstones
/// expire after the retention window; a feed cursor older than that is refused with 410
/// `cursorExpired` and the client lists the collection again, deletions included.
@Suite("Retention of idempotency records and tombstones")
struct SyncRetentionTests {
    let notes = name("notes")

    func send(_ url: URL, _ method: String, _ path: String, body: String? = nil, key: String? = nil) async throws -> HTTPAnswer {
        let target = try #require(URL(string: url.absoluteString + path))
        var spec = HTTPRequestSpec(method: method, url: target)
        if let key { spec.headers["Idempotency-Key"] = key }
        if let body {
            spec.body = Data(body.utf8)
            spec.headers["Content-Type"] = "application/json"
        }
        return try await URLSessionTransport(timeout: 10).send(spec)
    }

    @Test("keys and tombstones older than the window go, newer ones stay; an older cursor is 410 cursorExpired")
    func serverExpiry() async throws {
        try await withSyncServer { server, driver, url in
            #expect(try await send(url, "POST", "/notes", body: #"{"id":"a"}"#, key: "k1").status == 201)
            #expect(try await send(url, "DELETE", "/notes/a", key: "k2").status == 200)
            #expect(try await send(url, "POST", "/notes", body: #"{"id":"b"}"#, key: "k3").status == 201)
            // A record from before stamps existed: the first purge stamps it with its own
            // `now` (one day ahead here) instead of removing it.
            try await driver.write { tx in try tx.insert(Record(id: "old", fields: ["fingerprint": "x", "status": 201, "body": "{}"]), into: WireCollections.idempotency) }
            let early = try await server.purgeExpired(now: Date().addingTimeInterval(24 * 3600))
            #expect(early.idempotencyRecords == 0 && early.tombstones == 0 && early.horizon == 0)
            let stamped = try await driver.read { tx in try tx.get("old", from: WireCollections.idempotency)?["at"].intValue }
            #expect(stamped != nil)
            #expect(try await send(url, "GET", "/_changes?since=1").status == 200)
            let late = try await server.purgeExpired(now: Date().addingTimeInterval(8 * 24 * 3600 + 3600))
            #expect(late.idempotencyRecords == 4 && late.tombstones == 1)  // k1, k2, k3, and "old" one window after its stamp
            #expect(try await driver.read { tx in try tx.count(.all, in: WireCollections.idempotency) } == 0)
            let expired = try await send(url, "GET", "/_changes?since=1")
            #expect(expired.status == 410 && String(decoding: expired.body, as: UTF8.self).contains("cursorExpired"))
            let fresh = try await send(url, "GET", "/_changes?since=0")
            #expect(fresh.status == 200)
            let feed = try #require(try JSONText.parse([UInt8](fresh.body)).objectValue?["changes"]?.arrayValue)
            #expect(feed.count == 1 && feed.first?.objectValue?["op"] == "upsert")  // b; a's tombstone is gone
            #expect(try await send(url, "GET", "/_changes?since=\(late.horizon)").status == 200)
            // An expired key is a new key: the same key with another request is applied, not 422.
            #expect(try await send(url, "POST", "/notes", body: #"{"id":"c"}"#, key: "k1").status == 201)
            let later = try await server.purgeExpired(now: Date().addingTimeInterval(17 * 24 * 3600))
            #expect(later.idempotencyRecords == 1)
        }
    }

    @Test("a client whose cursor is older than the window lists again and still sees the deletion")
    func clientRelists() async throws {
        try await withSyncServer { server, _, url in
            func client() async throws -> (SyncCoordinator, Store) {
                let store = try await clientStore()
                let coordinator = SyncCoordinator(store: store, transport: URLSessionTransport(timeout: 10), sleeper: RecordingSleeper(), random: SeededRandomSource(seed: 1))
                try await coordinator.attach(notes, to: SyncEndpoint(baseURL: url, path: "/notes"))
                return (coordinator, store)
            }
            let (a, aStore) = try await client()
            let (b, bStore) = try await client()
            try await LocalWrites.save(aStore, notes, Record(id: "x", fields: ["v": 1]))
            try await LocalWrites.save(aStore, notes, Record(id: "y", fields: ["v": 1]))
            #expect(try await a.sync(notes).succeeded)
            #expect(try await b.sync(notes).succeeded)
            #expect(try await LocalWrites.all(bStore, notes).count == 2)
            // B is away; A deletes x and edits y; the server then forgets x's tombstone.
            try await LocalWrites.delete(aStore, notes, "x")
            try await LocalWrites.save(aStore, notes, Record(id: "y", fields: ["v": 2]))
            #expect(try await a.sync(notes).succeeded)
            #expect(try await server.purgeExpired(now: Date().addingTimeInterval(8 * 24 * 3600)).tombstones == 1)
            let events = await b.events()
            let report = try await b.sync(notes)
            var expired = 0
            for await event in events {
                if case .feedCursorExpired = event { expired += 1 }
                if case .finished = event { break }
            }
            #expect(expired == 1)
            #expect(report.succeeded && report.remoteDeletions == 1)
            #expect(try await LocalWrites.all(bStore, notes) == [Record(id: "y", fields: ["v": 2])])
            // Back on the feed: the next change arrives without another listing.
            try await LocalWrites.save(aStore, notes, Record(id: "z", fields: ["v": 3]))
            #expect(try await a.sync(notes).succeeded)
            let again = await b.events()
            #expect(try await b.sync(notes).pulled == 1)
            var relisted = 0
            for await event in again {
                if case .feedCursorExpired = event { relisted += 1 }
                if case .finished = event { break }
            }
            #expect(relisted == 0)
            #expect(try await LocalWrites.all(bStore, notes).map(\.id) == ["y", "z"])
        }
    }
}
