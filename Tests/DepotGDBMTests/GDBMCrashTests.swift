import DepotConformance
import DepotCore
import Foundation
import Testing

@testable import DepotGDBM

/// Crash safety by killing: `depot-crash-helper` commits multi-collection transactions to a
/// GDBM store and is SIGKILLed at random moments; after each kill the store must open,
/// pass its integrity check, hold every acknowledged commit and no partial transaction.
@Suite(.serialized) struct GDBMCrashTests {
    /// Small journal segments and frequent sync points, so kills land in every phase: journal
    /// append, apply to the GDBM files, sync point, rotation of the journal, and a fold of a
    /// closed segment into a backup in the background.
    @Test func survivesKillNineWithDurabilityFull() async throws {
        let count = CrashTrials.trialCount(default: 200, configurations: 3)
        let report = try await trials(options: "?durability=full&checkpoint_kb=48&sync_every=4&sync_interval_ms=0", trials: count, seed: 20_261_122, maxDelay: 180)
        print("gdbm crash trials (durability=full, checkpoint_kb=48, sync_every=4, sync_interval_ms=0): \(report)")
        #expect(report.trials == count)
        // Kills land uniformly from launch on, so some hit open/recovery and some hit commits;
        // how many of each depends on how fast the machine starts the helper.
        #expect(report.trialsWithCommits >= count / 10, "kills land while the helper commits: \(report)")
        #expect(report.killStates[Self.duringFold, default: 0] >= 1, "kills land during folds: \(report)")
    }

    static let duringFold = "older backup marked unsound (a fold running)"

    /// What a kill left on disk: a fold under way (`backup.state` calls the older backup
    /// unsound while closed segments wait), a rotation stopped between its renames, closed
    /// segments waiting for a fold, or none of these.
    static func classify(_ directory: String) -> String {
        let store = directory + "/store"
        if FileSystem.exists(store + "/journal.new") && !FileSystem.exists(store + "/journal") { return "rotation between its renames" }
        let closed = (try? Journal.closedSegments(in: store)) ?? []
        guard !closed.isEmpty else { return "no closed segment" }
        if let state = try? BackupState.read(directory: store), state.previousSeq == nil { return duringFold }
        return "closed segments waiting"
    }

    @Test func survivesKillNineWithDurabilityNormal() async throws {
        let count = CrashTrials.trialCount(default: 20, configurations: 3)
        let report = try await trials(options: "?durability=normal&checkpoint_kb=96&sync_every=16&sync_interval_ms=0", trials: count, seed: 7, maxDelay: 250)
        print("gdbm crash trials (durability=normal, checkpoint_kb=96, sync_every=16, sync_interval_ms=0): \(report)")
        #expect(report.trials == count)
    }

    /// Every fifth transaction also saves 1,100 records, a commit large enough to be applied
    /// with the GDBM files unmapped (Docs/GDBMDriver.md, "Large applies"): kills land in its
    /// journal append, its `pwrite`s and the fsyncs of its mapping changes; after each, the
    /// large transactions are all there or all absent, and every acknowledged one is there.
    @Test func survivesKillNineDuringLargeApplies() async throws {
        let count = CrashTrials.trialCount(default: 20, configurations: 3)
        let report = try await trials(options: "?durability=normal&checkpoint_kb=2048&sync_every=16&sync_interval_ms=0", trials: count, seed: 11, maxDelay: 400, bulkEvery: 5)
        print("gdbm crash trials with large transactions (durability=normal, checkpoint_kb=2048, every fifth transaction 1,100 records): \(report)")
        #expect(report.trials == count)
        #expect(report.finalTransaction >= 5, "the helper got as far as a large transaction: \(report)")
    }

    func trials(options: String, trials: Int, seed: UInt64, maxDelay: Int, bulkEvery: Int = 0) async throws -> CrashTrialReport {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let store = "gdbm:" + dir.path + "/store" + options
        let factory = DriverFactory(name: "gdbm") { _ in
            var registry = DriverRegistry()
            GDBMDriver.register(in: &registry)
            return try await registry.makeDriver(store)
        }
        return try await CrashTrials.run(store: store, factory: factory, directory: dir.path, trials: trials, seed: seed, maxDelayMilliseconds: maxDelay, classify: Self.classify, bulkEvery: bulkEvery)
    }
}

extension GDBMCrashTests {
    /// A real second process (the crash helper) cannot open a store this process holds:
    /// it retries for `lock_timeout_ms`, then fails with `.locked`; it never touches the files.
    @Test func secondWriterProcessGetsLocked() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let driver = try await GDBMDriver(location: StoreLocation("gdbm:" + dir.path + "/store"))
        let meta = try CollectionName("meta")
        _ = try await driver.write { tx in try tx.save(Record(id: "last", fields: ["n": 0]), into: meta) }
        let started = Date()
        let result = try await ChildProcess.run(try CrashTrials.helperPath(), ["gdbm:" + dir.path + "/store?lock_timeout_ms=400", "1"])
        let text = result.errorText
        let waited = Date().timeIntervalSince(started)
        #expect(result.status == .exited(1))
        #expect(text.contains("locked"), "\(text)")
        #expect(waited >= 0.4)
        #expect(try await driver.read { tx in try tx.get("last", from: meta)?.fields["n"] } == 0)
        try await driver.close()
    }
}
