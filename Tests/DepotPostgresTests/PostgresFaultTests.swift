import DepotConformance
import DepotCore
import DepotPostgres
import Foundation
import Synchronization
import Testing

/// Faults (Docs/PostgresDriver.md, "Faults"): a client killed with SIGKILL in the middle of
/// multi-collection transactions, the server stopped with `pg_ctl stop -m immediate`, a
/// connection dropped mid-transaction. Trial counts: `DEPOT_PG_FAULT_TRIALS`, else the long
/// mode's `DEPOT_CRASH_TRIALS` (shared by the two kinds of trial), else 100 each.
@Suite(.serialized) struct PostgresFaultTests {
    static var trials: Int {
        ProcessInfo.processInfo.environment["DEPOT_PG_FAULT_TRIALS"].flatMap(Int.init) ?? CrashTrials.trialCount(default: 100, configurations: 2)
    }

    /// `depot-crash-helper` commits transactions over three collections and is killed at
    /// random moments; after each kill the store holds every acknowledged commit and no
    /// partial transaction.
    @Test func killedClientsLeaveNoPartialTransaction() async throws {
        let directory = "kill-\(UUID().uuidString)"
        let store = try PostgresTestServer.storeString(for: directory)
        let started = Date()
        let report = try await CrashTrials.run(
            store: store, factory: PostgresTestServer.factory, directory: directory, trials: Self.trials, seed: 21, maxDelayMilliseconds: 400)
        print("postgres client kill trials: \(report) in \(Int(Date().timeIntervalSince(started))) s")
        #expect(report.trials == Self.trials)
        #expect(report.trialsWithCommits >= Self.trials / 10, "kills land while the helper commits: \(report)")
    }

    /// The server is stopped with `pg_ctl stop -m immediate` while a writer commits, then
    /// started again: every commit the driver acknowledged (durability full) is there, no
    /// transaction is partial, and the same driver works again once the server is back.
    @Test func serverCrashesLoseNoAcknowledgedCommit() async throws {
        let cluster = try PrivateCluster.start()
        defer { cluster.stop() }
        let driver = try await PostgresDriver(settings: cluster.settings)
        let accounts = try CollectionName("accounts"), ledger = try CollectionName("ledger"), meta = try CollectionName("meta")
        var random = SplitMix64(seed: 31)
        var last: Int64 = 0
        var acknowledged = 0
        var errorsSeen = 0
        let started = Date()
        for trial in 0..<Self.trials {
            let acked = Atomic<Int64>(last)
            let stop = Atomic<Bool>(false)
            let writer = Task.detached { () -> Int in
                var n = acked.load(ordering: .acquiring)
                var failures = 0
                while !stop.load(ordering: .acquiring) {
                    let next = n + 1
                    do {
                        try await driver.write { tx in
                            try tx.save(Record(id: .int(next), fields: ["n": .int(next), "pad": .string(String(repeating: "x", count: Int(next % 300)))]), into: accounts)
                            try tx.save(Record(id: .int(next), fields: ["n": .int(next)]), into: ledger)
                            if next % 7 == 0 && next > 5 {
                                try tx.delete(.int(next - 5), from: accounts)
                                try tx.delete(.int(next - 5), from: ledger)
                            }
                            try tx.save(Record(id: "last", fields: ["n": .int(next)]), into: meta)
                        }
                        n = next
                        acked.store(n, ordering: .releasing)
                    } catch {
                        failures += 1
                        return failures
                    }
                }
                return failures
            }
            try await Task.sleep(for: .milliseconds(Int(random.next() % 150)))
            try cluster.run("crash")
            stop.store(true, ordering: .releasing)
            errorsSeen += await writer.value
            try cluster.run("start")
            let highest = acked.load(ordering: .acquiring)
            let found = try await CrashTrials.verify(driver, trial: trial)
            #expect(found >= highest, "trial \(trial): transaction \(highest) was acknowledged but the store ends at \(found)")
            #expect(found <= highest + 1, "trial \(trial): the store holds transaction \(found) but only \(highest) could have started")
            acknowledged += Int(highest - last)
            last = found
        }
        try await driver.close()
        print("postgres server crash trials: \(Self.trials) immediate stops, \(acknowledged) commits acknowledged, all found; \(errorsSeen) writes failed with the server down; last transaction \(last); \(Int(Date().timeIntervalSince(started))) s")
        #expect(acknowledged > 0)
    }

    /// A connection dropped in the middle of a write transaction fails it with `.remote`,
    /// nothing of it is kept, and the pool opens new connections for the next transactions.
    @Test func droppedConnectionIsATypedErrorAndThePoolRecovers() async throws {
        let settings = try PostgresTestServer.settings(for: "drop-\(UUID().uuidString)")
        let driver = try await PostgresDriver(settings: settings)
        let items = try CollectionName("items")
        try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["n": 1]), into: items) }
        let server = try PostgresTestServer.server()
        do {
            try await driver.write { tx in
                try tx.insert(Record(id: 2, fields: ["n": 2]), into: items)
                try PostgresAdmin.terminateSessions(of: settings.database, on: server)
                try tx.insert(Record(id: 3, fields: ["n": 3]), into: items)
            }
            Issue.record("the write went through although its connection was ended")
        } catch let error as DepotError {
            #expect(error.code == .remote, "a lost connection is .remote: \(error)")
            #expect(!error.message.contains(settings.password ?? "\u{0}"), "no password in the message")
        }
        // Every pooled connection was ended too: the next transactions must get new ones.
        for i in 4...20 {
            try await driver.write { tx in try tx.insert(Record(id: .int(Int64(i)), fields: ["n": .int(Int64(i))]), into: items) }
        }
        let ids = try await driver.read { tx in try tx.query(Query(), in: items).map(\.id) }
        #expect(ids == [1] + (4...20).map { RecordID.int(Int64($0)) })
        try await driver.close()
    }
}

/// A cluster of its own for a test that stops the server (scripts/postgres-cluster).
struct PrivateCluster {
    let url: String
    let directory: String
    let settings: PostgresSettings
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/postgres-cluster").path

    static func start() throws -> PrivateCluster {
        let result = try runScript([])
        let line = result.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let hash = line.lastIndex(of: "#") else { throw DepotError(.internal, "scripts/postgres-cluster printed no URL") }
        let url = String(line[..<hash])
        let settings = try PostgresSettings(StoreLocation(url))
        return PrivateCluster(url: url, directory: String(line[line.index(after: hash)...]), settings: settings)
    }

    func run(_ command: String) throws { _ = try Self.runScript([command, directory]) }

    func stop() {
        do { try run("stop") } catch { Issue.record("the private cluster in \(directory) did not stop: \(error)") }
    }

    private static func runScript(_ arguments: [String]) throws -> String {
        let child = try ChildProcess(path: script, arguments: arguments)
        let result = child.waitForExit()
        guard case .exited(0) = result.status else {
            throw DepotError(.internal, "scripts/postgres-cluster \(arguments.first ?? "") failed: \(result.errorText.prefix(2000))")
        }
        return result.outputText
    }
}
