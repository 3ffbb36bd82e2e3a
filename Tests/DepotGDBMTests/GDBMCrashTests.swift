import DepotConformance
import DepotCore
import DepotGDBM
import Foundation
import Testing

/// Crash safety by killing: `depot-crash-helper` commits multi-collection transactions to a
/// GDBM store and is SIGKILLed at random moments; after each kill the store must open,
/// pass its integrity check, hold every acknowledged commit and no partial transaction.
@Suite(.serialized) struct GDBMCrashTests {
    /// Small checkpoints and frequent sync points, so kills land in every phase: journal
    /// append, apply to the GDBM files, sync point, checkpoint into the backup files.
    @Test func survivesKillNineWithDurabilityFull() async throws {
        let report = try await trials(options: "?durability=full&checkpoint_kb=48&sync_every=4", trials: 200, seed: 20_261_122, maxDelay: 180)
        print("gdbm crash trials (durability=full, checkpoint_kb=48, sync_every=4): \(report)")
        #expect(report.trials == 200)
        #expect(report.trialsWithCommits >= 100)
    }

    @Test func survivesKillNineWithDurabilityNormal() async throws {
        let report = try await trials(options: "?durability=normal&checkpoint_kb=96&sync_every=16", trials: 20, seed: 7, maxDelay: 250)
        print("gdbm crash trials (durability=normal, checkpoint_kb=96, sync_every=16): \(report)")
        #expect(report.trials == 20)
    }

    func trials(options: String, trials: Int, seed: UInt64, maxDelay: Int) async throws -> CrashTrialReport {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let store = "gdbm:" + dir.path + "/store" + options
        let factory = DriverFactory(name: "gdbm") { _ in
            var registry = DriverRegistry()
            GDBMDriver.register(in: &registry)
            return try await registry.makeDriver(store)
        }
        return try await CrashTrials.run(store: store, factory: factory, directory: dir.path, trials: trials, seed: seed, maxDelayMilliseconds: maxDelay)
    }
}
