import DepotCore
import DepotMemory
import DepotServer
@testable import DepotSync
import DepotWire
import Foundation
import Testing

@Suite("Queued uploads in the outbox")
struct FileOutboxTests {
    @Test("an upload queued offline waits in the outbox, is retried, then sent before the record change that refers to it")
    func queuedBeforeRecords() async throws {
        let faults = FaultSwitch()
        try await withFilePeer(faults: faults.faults) { peer in
            let store = try await Store(driver: MemoryDriver())
            let coordinator = SyncCoordinator(
                store: store, retryPolicy: RetryPolicy(baseDelay: .milliseconds(1), maxDelay: .milliseconds(2), maxAttempts: 2))
            let posts = try CollectionName("posts")
            try await coordinator.attach(posts, to: SyncEndpoint(baseURL: peer.base, path: "/posts"))
            await coordinator.attachFiles(peer.client())
            let content = fileBytes(200_000, seed: 31)
            let photo = try peer.write(content, local: "photo.jpg")
            try await store.write { tx in
                try SyncCoordinator.enqueueUpload(from: photo, name: "photo.jpg", in: tx)
                _ = try tx.insert(fields: ["title": "beach", "photo": try FileReference.value(for: "photo.jpg")], into: posts)
            }
            #expect(try await coordinator.queuedUploads().map(\.recordID) == [.string("photo.jpg")])
            // The server cannot take files for now: both attempts fail, nothing is pushed.
            faults.queue(.status(503), .status(503))
            let offline = try await coordinator.sync(posts, pull: false)
            #expect(!offline.succeeded)
            #expect(offline.pendingLeft == 2)
            #expect(try await peer.server.store.read { tx in try tx.count(.all, in: posts) } == 0)
            let queued = try #require(try await coordinator.queuedUploads().first)
            #expect(queued.attempts == 1)
            #expect(queued.state == .pending)
            // Back online: the upload goes first, then the record.
            let online = try await coordinator.sync(posts, pull: false)
            #expect(online.succeeded, "\(online.failures)")
            #expect(online.pushed == 2)
            let order = faults.requests.filter { $0.hasPrefix("PUT /_files") || $0.hasPrefix("POST /posts") }
            #expect(order == ["PUT /_files/photo.jpg", "PUT /_files/photo.jpg", "PUT /_files/photo.jpg", "POST /posts"])
            let served = try (FileHandle(forReadingFrom: URL(fileURLWithPath: peer.serverFolder + "/photo.jpg")).readToEnd() ?? Data())
            #expect(served == content)
            let record = try #require(try await peer.server.store.read { tx in try tx.query(Query(), in: posts) }.first)
            #expect(FileReference.name(in: record.fields["photo"] ?? .null) == "photo.jpg")
            #expect(try await coordinator.queuedUploads().isEmpty)
        }
    }

    @Test("an upload the server refuses for good (413) is dead-lettered; record changes still go")
    func deadLettered() async throws {
        try await withFilePeer(maxFileSize: 100) { peer in
            let store = try await Store(driver: MemoryDriver())
            let coordinator = SyncCoordinator(store: store, retryPolicy: RetryPolicy(baseDelay: .milliseconds(1), maxDelay: .milliseconds(2), maxAttempts: 2))
            let notes = try CollectionName("notes")
            try await coordinator.attach(notes, to: SyncEndpoint(baseURL: peer.base, path: "/notes"))
            await coordinator.attachFiles(peer.client())
            let big = try peer.write(fileBytes(1000, seed: 32), local: "big.bin")
            try await store.write { tx in
                try SyncCoordinator.enqueueUpload(from: big, name: "big.bin", in: tx)
                _ = try tx.insert(fields: ["text": "hello"], into: notes)
            }
            let report = try await coordinator.sync(notes, pull: false)
            #expect(report.deadLettered == 1)
            #expect(report.deadLeft == 1)
            #expect(report.pushed == 1)
            let dead = try #require(try await coordinator.queuedUploads().first)
            #expect(dead.state == .dead)
            #expect(dead.lastError?.contains("413") == true)
            #expect(try await peer.server.store.read { tx in try tx.count(.all, in: notes) } == 1)
        }
    }

    @Test("a queued upload rolls back with its transaction, and bad names are refused before queueing")
    func transactional() async throws {
        let store = try await Store(driver: MemoryDriver())
        let coordinator = SyncCoordinator(store: store)
        struct Abort: Error {}
        do {
            try await store.write { tx in
                try SyncCoordinator.enqueueUpload(from: URL(fileURLWithPath: "/tmp/x"), name: "x", in: tx)
                throw Abort()
            }
        } catch is Abort {}
        #expect(try await coordinator.queuedUploads().isEmpty)
        await #expect(throws: DepotError.self) {
            try await store.write { tx in try SyncCoordinator.enqueueUpload(from: URL(fileURLWithPath: "/tmp/x"), name: "../x", in: tx) }
        }
        #expect(FileReference.name(in: .string("/_files/a.jpg")) == "a.jpg")
        #expect(FileReference.name(in: .string("/_files/.hidden")) == nil)
        #expect(FileReference.name(in: .string("a.jpg")) == nil)
    }
}
