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
    func enable() { enabled.withLock { $0 = true } }
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

/// The server side of the seeded fault tests: while `on`, `ServerFaults.seeded(seed:rate:)`
/// decides each request's fault, and besides that every eighth `POST /_batch` is cut in half
/// (its first half applied, the answer lost), so each run cuts batches whatever the seeded
/// draws (which depend on how requests interleave). Counts the faults and the batches.
final class SeededServerFaults: Sendable {
    let on = Locked(true)
    /// Faults injected.
    let count = Locked(0)
    /// Batches seen by the server (also while off), and batches it cut in half.
    let batches = Locked((sent: 0, cut: 0))
    let plan: ServerFaults

    init(seed: UInt64, rate: Double) { plan = ServerFaults.seeded(seed: seed, rate: rate) }

    func setOn(_ value: Bool) { on.withLock { $0 = value } }

    /// The faults to give `DepotServer.Configuration`.
    var faults: ServerFaults {
        ServerFaults { [self] method, path in
            let isBatch = method == "POST" && path == "/_batch"
            let ordinal = isBatch ? batches.withLock { b -> Int in
                b.sent += 1
                return b.sent
            } : 0
            guard on.withLock({ $0 }) else { return nil }
            let fault = ordinal % 8 == 4 ? .loseResponseMidBatch : plan.decide(method, path)
            guard let fault else { return nil }
            count.withLock { $0 += 1 }
            if isBatch, fault == .loseResponseMidBatch { batches.withLock { $0.cut += 1 } }
            return fault
        }
    }
}

/// The end state of a fault test against the truth: notes by id (client-assigned ids) and
/// tasks by their `tag` field (server-assigned ids, so a task the server holds twice shows as
/// a duplicated tag).
struct SyncTally {
    /// Expected notes that are missing or different on the server, and notes it holds that
    /// were not expected.
    var lostNotes = 0, extraNotes = 0
    /// The same for tasks, and tags the server holds more than once.
    var lostTasks = 0, extraTasks = 0, duplicatedTasks = 0
    /// The server's tasks by tag (the last one of a duplicated tag), and how many per tag.
    var actualTags: [String: [String: FieldValue]] = [:]
    var tagCounts: [String: Int] = [:]

    init(serverNotes: [Record], serverTasks: [Record], expectedNotes: [RecordID: [String: FieldValue]], expectedTags: [String: [String: FieldValue]]) {
        var actualNotes: [RecordID: [String: FieldValue]] = [:]
        for record in serverNotes { actualNotes[record.id] = record.fields }
        lostNotes = expectedNotes.filter { actualNotes[$0.key] != $0.value }.count
        extraNotes = actualNotes.filter { expectedNotes[$0.key] == nil }.count
        for record in serverTasks {
            let tag = record["tag"].stringValue ?? "?"
            tagCounts[tag, default: 0] += 1
            actualTags[tag] = record.fields
        }
        duplicatedTasks = tagCounts.values.filter { $0 > 1 }.count
        lostTasks = expectedTags.filter { actualTags[$0.key] != $0.value }.count
        extraTasks = actualTags.filter { expectedTags[$0.key] == nil }.count
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
