import Depot
import DepotCLIParsers
import DepotConformance
import DepotCore
import DepotServer
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `depot bench-sync --clients N`: many clients against one server (Docs/Sync.md, "Many
/// clients").
///
/// Per round: a `depot serve` process of its own (so its peak RSS is the server's alone) over
/// a SQLite store holding `shared` records; N clients (tasks of this process, each with its
/// own SQLite store, coordinator and transport) pull them, edit offline (each inserts
/// `entries` records of its own and updates `entries / 10` shared ones, which conflict with
/// other clients' updates), push all at once, then pull all at once. Then the checks: the
/// server holds exactly the shared records and every client's inserts (0 lost, 0
/// duplicated), and every client's collection equals the server's, record for record, with
/// empty outboxes (converged). Any failed check fails the command.
struct ManyClientsScenario {
    var clients: Int
    var shared: Int
    var entries: Int
    var batchSize: Int
    var pageSize: Int
    var durability: String
    var directory: String
    var executable: String
    /// The clients' transport: `nio` or `urlsession` (``BenchSyncCommand/transport(_:timeout:)``).
    var transport = "nio"
    /// Fields of a client's inserts: `n`, `text` and `by`, then extra ones up to this count
    /// (``BenchSyncCommand/extraField(_:of:)``).
    var pushFields = 3

    /// What one round measured.
    struct Round {
        var initialPullSeconds: Double
        var pushSeconds: Double
        var pullSeconds: Double
        var pushed: Int
        var conflicts: Int
        var pulled: Int
        var serverRecords: Int
        var serverPeakRSS: Int?
    }

    static let collection = "notes"

    /// Runs one round in `directory/round-N`.
    /// - Throws: ``CLIFailure`` when a check fails or the server does not start; sync and
    ///   store errors.
    func run(round: Int) async throws -> Round {
        let dir = directory + "/clients-\(round)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let notes = try CollectionName(ManyClientsScenario.collection)
        let serverString = "sqlite:\(dir)/server.sqlite?durability=\(durability)"
        let serverStore = try await Store.open(serverString)
        let shared = self.shared
        try await StoreArguments.using(serverStore) { store in
            try await store.write { tx in
                for i in 0..<shared {
                    try tx.insert(Record(id: .string("s-\(i)"), fields: ["n": .int(Int64(i)), "text": .string("shared \(i)"), "by": .int(-1)]), into: notes)
                }
            }
        }

        let server = try await ServerProcess.start(executable: executable, store: serverString)
        var result: Round
        do {
            result = try await exercise(port: server.port, dir: dir, notes: notes)
            result.serverPeakRSS = server.peakResidentBytes()
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()

        // The server's records, read from its file once it has stopped.
        let serverRecords = try await readAll(serverString, notes)
        result.serverRecords = serverRecords.count
        let expected = shared + clients * entries
        guard serverRecords.count == expected else {
            throw CLIFailure.failed("the server holds \(serverRecords.count) records, expected \(expected) (\(shared) shared + \(clients) × \(entries))", "this is a bug; report it")
        }
        for k in 0..<clients {
            for i in 0..<entries where serverRecords[.string("c\(k)-\(i)")] == nil {
                throw CLIFailure.failed("client \(k)'s record c\(k)-\(i) is not on the server", "this is a bug; report it")
            }
        }
        for k in 0..<clients {
            let local = try await readAll(clientString(dir, k), notes)
            guard local == serverRecords else {
                let differing = Set(local.keys).symmetricDifference(serverRecords.keys).count + serverRecords.filter { local[$0.key] != nil && local[$0.key] != $0.value }.count
                throw CLIFailure.failed("client \(k) did not converge: \(differing) records differ from the server's", "this is a bug; report it")
            }
        }
        try? FileManager.default.removeItem(atPath: dir)
        return result
    }

    private func clientString(_ dir: String, _ k: Int) -> String { "sqlite:\(dir)/client-\(k).sqlite?durability=\(durability)" }

    /// The records of `collection` in the store at `storeString`, by id.
    private func readAll(_ storeString: String, _ collection: CollectionName) async throws -> [RecordID: [String: FieldValue]] {
        let store = try await Store.open(storeString)
        return try await StoreArguments.using(store) { store in
            var out: [RecordID: [String: FieldValue]] = [:]
            for record in try await store.collection(collection).query(Query()) { out[record.id] = record.fields }
            return out
        }
    }

    /// The timed part: the clients' first pull, offline edits, the concurrent push, the
    /// concurrent pull; every client's outbox must be empty at the end.
    private func exercise(port: Int, dir: String, notes: CollectionName) async throws -> Round {
        guard let base = URL(string: "http://127.0.0.1:\(port)") else { throw CLIFailure.failed("no URL for port \(port)", "retry") }
        var stores: [Store] = []
        var coordinators: [SyncCoordinator] = []
        do {
            for k in 0..<clients {
                let store = try await Store.open(clientString(dir, k))
                stores.append(store)
                let sync = SyncCoordinator(store: store, transport: BenchSyncCommand.transport(transport, timeout: 60), pushBatchSize: batchSize)
                var endpoint = SyncEndpoint(baseURL: base, path: "/" + notes.rawValue)
                endpoint.pageSize = pageSize
                try await sync.attach(notes, to: endpoint)
                coordinators.append(sync)
            }
            let everyone = coordinators
            let t0 = ContinuousClock.now
            let first = try await Self.all(everyone) { try await $0.sync(notes, pull: true, push: false) }
            let initialPull = BenchSyncCommand.seconds(ContinuousClock.now - t0)
            guard first.allSatisfy(\.succeeded) else { throw CLIFailure.failed("a first pull failed: \(first.flatMap(\.failures).first ?? "")", "retry") }

            // Offline edits: inserts of the client's own, updates of shared records.
            let entries = self.entries, shared = self.shared, fieldCount = pushFields
            for (k, store) in stores.enumerated() {
                try await store.write { tx in
                    for i in 0..<entries {
                        var fields: [String: FieldValue] = ["n": .int(Int64(i)), "text": .string("client \(k) note \(i)"), "by": .int(Int64(k))]
                        for extra in 3..<max(3, fieldCount) { fields["f\(extra)"] = BenchSyncCommand.extraField(extra, of: i) }
                        try tx.save(Record(id: .string("c\(k)-\(i)"), fields: fields), into: notes)
                    }
                    for j in 0..<(entries / 10) where shared > 0 {
                        // Clients k and k + 5 update the same records: conflicts for the policy to settle.
                        let id = RecordID.string("s-\((j * 13 + k % 5) % shared)")
                        guard var record = try tx.get(id, from: notes) else { throw CLIFailure.failed("shared record \(id) missing after the first pull", "this is a bug; report it") }
                        record.fields["by"] = .int(Int64(k))
                        record.fields["text"] = .string("edited by client \(k)")
                        try tx.update(record, in: notes)
                    }
                }
            }

            let t1 = ContinuousClock.now
            let pushes = try await Self.all(everyone) { try await $0.sync(notes, pull: false, push: true) }
            let pushSeconds = BenchSyncCommand.seconds(ContinuousClock.now - t1)
            guard pushes.allSatisfy(\.succeeded) else { throw CLIFailure.failed("a push failed: \(pushes.flatMap(\.failures).first ?? "")", "retry") }

            let t2 = ContinuousClock.now
            let pulls = try await Self.all(everyone) { try await $0.sync(notes, pull: true, push: true) }
            let pullSeconds = BenchSyncCommand.seconds(ContinuousClock.now - t2)
            guard pulls.allSatisfy(\.succeeded) else { throw CLIFailure.failed("a pull failed: \(pulls.flatMap(\.failures).first ?? "")", "retry") }
            for (k, sync) in coordinators.enumerated() {
                let left = try await sync.outbox(for: notes)
                guard left.isEmpty else { throw CLIFailure.failed("client \(k) has \(left.count) outbox entries left", "this is a bug; report it") }
            }
            for store in stores { try await store.close() }
            return Round(initialPullSeconds: initialPull, pushSeconds: pushSeconds, pullSeconds: pullSeconds,
                         pushed: pushes.map(\.pushed).reduce(0, +), conflicts: (pushes + pulls).map(\.conflicts).reduce(0, +),
                         pulled: pulls.map(\.pulled).reduce(0, +), serverRecords: 0, serverPeakRSS: nil)
        } catch {
            for store in stores { try? await store.close() }
            throw error
        }
    }

    /// Runs `body` on every coordinator at once; their reports in order.
    private static func all(_ coordinators: [SyncCoordinator], _ body: @escaping @Sendable (SyncCoordinator) async throws -> SyncReport) async throws -> [SyncReport] {
        try await withThrowingTaskGroup(of: (Int, SyncReport).self) { group in
            for (k, sync) in coordinators.enumerated() { group.addTask { (k, try await body(sync)) } }
            var out = [SyncReport?](repeating: nil, count: coordinators.count)
            for try await (k, report) in group { out[k] = report }
            return out.compactMap { $0 }
        }
    }
}

/// A `depot serve` child process on a free loopback port (`--port 0`), the port read from
/// the line it prints on standard error. Started with ``ChildProcess`` (posix_spawn), not
/// Foundation's `Process`, for the reason given there.
final class ServerProcess {
    let child: ChildProcess
    let port: Int

    private init(child: ChildProcess, port: Int) {
        self.child = child
        self.port = port
    }

    /// Starts `executable serve STORE --port 0` and waits (up to 20 s) for the line saying
    /// where it listens.
    /// - Throws: ``CLIFailure`` when it exits or says nothing in time (its output in the message).
    static func start(executable: String, store: String) async throws -> ServerProcess {
        let child = try ChildProcess(path: executable, arguments: ["serve", store, "--port", "0"])
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            let text = String(decoding: child.standardErrorSoFar, as: UTF8.self)
            if let range = text.range(of: "on http://127.0.0.1:") {
                let digits = text[range.upperBound...].prefix { $0.isNumber }
                if let port = Int(digits), port > 0 { return ServerProcess(child: child, port: port) }
            }
            guard child.isRunning else { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        child.kill()
        let result = await child.exit()
        throw CLIFailure.failed("depot serve did not start (\(result.status)): \(result.errorText.suffix(400))", "retry")
    }

    /// The server's peak resident set (`VmHWM` of /proc/PID/status), `nil` where there is none.
    func peakResidentBytes() -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(child.pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            let kilobytes = line.dropFirst(6).filter(\.isNumber)
            return Int(kilobytes).map { $0 * 1024 }
        }
        return nil
    }

    /// Stops the server (SIGTERM) and waits for it to exit, off the cooperative pool.
    func stop() async {
        child.kill(SIGTERM)
        _ = await child.exit()
    }
}
