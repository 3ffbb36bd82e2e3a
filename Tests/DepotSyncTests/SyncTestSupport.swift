import DepotCore
import DepotMemory
import DepotServer
import DepotSync
import DepotWire
import Foundation

/// Local writes as an app makes them: through the store, whose outbox recorder adds the
/// entry for an attached collection in the same transaction.
enum LocalWrites {
    static func save(_ store: Store, _ collection: CollectionName, _ record: Record) async throws {
        try await store.write { tx in try tx.save(record, into: collection) }
    }

    static func insert(_ store: Store, _ collection: CollectionName, _ fields: [String: FieldValue]) async throws -> RecordID {
        try await store.write { tx in try tx.insert(fields: fields, into: collection) }
    }

    static func delete(_ store: Store, _ collection: CollectionName, _ id: RecordID) async throws {
        try await store.write { tx in _ = try tx.delete(id, from: collection) }
    }

    static func all(_ store: Store, _ collection: CollectionName) async throws -> [Record] {
        try await store.read { tx in try tx.query(Query(), in: collection) }
    }

    /// A server's records, read from its driver.
    static func all(_ driver: any StorageDriver, _ collection: CollectionName) async throws -> [Record] {
        try await driver.read { tx in try tx.query(Query(), in: collection) }
    }

    static func outboxCount(_ store: Store) async throws -> Int {
        try await store.read { tx in try tx.count(.all, in: WireCollections.outbox) }
    }
}

/// A client's store over a fresh memory driver.
func clientStore() async throws -> Store { try await Store(driver: MemoryDriver()) }

/// A sleeper that records the waits and returns at once.
final class RecordingSleeper: SyncSleeper {
    let waits = Locked<[Duration]>([])
    func sleep(for duration: Duration) async throws {
        try Task.checkCancellation()
        waits.withLock { $0.append(duration) }
        await Task.yield()
    }
}

/// A seeded client-side fault layer over the real transport: offline periods (no request
/// leaves), dropped requests (never sent), lost answers (sent and applied, answer thrown
/// away), and duplicated requests (sent twice, the second answer returned).
final class FaultyTransport: HTTPTransport {
    let inner: any HTTPTransport
    let random: SeededRandomSource
    let rate: Double
    let offline = Locked(false)
    let enabled = Locked(true)
    let counts = Locked([String: Int]())

    init(inner: any HTTPTransport = URLSessionTransport(timeout: 10), seed: UInt64, rate: Double) {
        self.inner = inner
        self.random = SeededRandomSource(seed: seed)
        self.rate = rate
    }

    func setOffline(_ value: Bool) { offline.withLock { $0 = value } }
    func disable() { enabled.withLock { $0 = false } }
    func bump(_ key: String) { counts.withLock { $0[key, default: 0] += 1 } }

    func send(_ request: HTTPRequestSpec) async throws -> HTTPAnswer {
        if offline.withLock({ $0 }) {
            bump("offline")
            throw DepotError(.remote, "offline")
        }
        let roll = enabled.withLock { $0 } ? random.nextUnit() : 1
        if roll < rate * 0.25 {
            bump("dropped")
            throw DepotError(.remote, "dropped before sending")
        }
        if roll < rate * 0.5 {
            _ = try await inner.send(request)
            bump("lost")
            throw DepotError(.remote, "answer lost after sending")
        }
        if roll < rate * 0.75 {
            _ = try? await inner.send(request)
            bump("duplicated")
            return try await inner.send(request)
        }
        return try await inner.send(request)
    }
}

/// A transport that answers from a closure, for tests of plain json-server behaviour.
struct ScriptedTransport: HTTPTransport {
    let answer: @Sendable (HTTPRequestSpec) async throws -> HTTPAnswer
    func send(_ request: HTTPRequestSpec) async throws -> HTTPAnswer { try await answer(request) }
}

/// Runs `body` with a DepotServer on loopback (optionally with injected faults) and stops it.
/// `body` also gets the server store's driver, for writes made behind the server's back.
func withSyncServer(faults: ServerFaults? = nil, _ body: (DepotServer, MemoryDriver, URL) async throws -> Void) async throws {
    let driver = MemoryDriver()
    let server = DepotServer(store: try await Store(driver: driver), configuration: .init(faults: faults))
    let port = try await server.start()
    guard let url = URL(string: "http://127.0.0.1:\(port)") else { throw DepotError(.internal, "url") }
    do {
        try await body(server, driver, url)
    } catch {
        await server.stop()
        throw error
    }
    await server.stop()
}

func name(_ text: String) -> CollectionName {
    // Test literals are valid names.
    (try? CollectionName(text)) ?? (try? CollectionName("invalid"))!
}
