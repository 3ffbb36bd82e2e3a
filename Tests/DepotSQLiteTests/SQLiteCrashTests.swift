import DepotConformance
import DepotCore
import DepotSQLite
import Foundation
import Testing

/// Crash safety by killing: `depot-crash-helper` commits multi-collection transactions to a
/// SQLite store and is killed with SIGKILL at random moments; after each kill the store must
/// pass its integrity check, hold every acknowledged commit, and show no partial transaction.
///
/// 200 trials by default (100 per durability); `DEPOT_CRASH_TRIALS=N` runs N in all.
@Suite struct SQLiteCrashTests {

    @Test(arguments: [Durability.full, .normal])
    func killedWritersLoseNothingAcknowledged(durability: Durability) async throws {
        let dir = try ScratchDirectory()
        let store = "sqlite:\(dir.store)?durability=\(durability.rawValue)"
        let factory = DriverFactory(name: "sqlite") { _ in try await SQLiteDriver(StoreLocation(store)) }
        let trials = CrashTrials.trialCount(default: 100, configurations: 2)
        let report = try await CrashTrials.run(store: store, factory: factory, directory: dir.path, trials: trials, seed: durability == .full ? 11 : 12,
            maxDelayMilliseconds: 300)
        print("sqlite crash trials (durability=\(durability.rawValue)): \(report)")
        #expect(report.trials == trials)
        // Kills land uniformly from launch on, so some hit open/recovery and some hit commits;
        // how many of each depends on how fast the machine starts the helper.
        #expect(report.trialsWithCommits >= trials / 10, "kills land while the helper commits: \(report)")
    }

    /// A second process (the crash helper) commits to the same file while this process
    /// writes too: both make progress (waiting on each other's locks), nothing is lost or
    /// corrupted.
    @Test func twoProcessesWriteOneFile() async throws {
        let dir = try ScratchDirectory()
        let store = "sqlite:\(dir.store)?busy_timeout_ms=10000"
        let driver = try await SQLiteDriver(StoreLocation(store))
        let notes = try CollectionName("notes")
        let process = try ChildProcess(path: try CrashTrials.helperPath(), arguments: [store, "5"])
        let meta = try CollectionName("meta")
        func helperLast() async throws -> Int64 {
            try await driver.read { tx in try tx.get("last", from: meta)?.fields["n"]?.intValue ?? 0 }
        }
        var waited = 0
        while try await helperLast() == 0 && waited < 500 {
            try await Task.sleep(for: .milliseconds(20))
            waited += 1
        }
        let before = try await helperLast()
        for i in 1...150 {
            try await driver.write { tx in try tx.insert(Record(id: .int(Int64(i)), fields: ["i": .int(Int64(i))]), into: notes) }
        }
        process.kill(SIGTERM)
        _ = process.waitForExit()
        let helperCommits = try await CrashTrials.verify(driver)
        let mine = try await driver.read { tx in try tx.count(.all, in: notes) }
        #expect(mine == 150)
        #expect(before > 0 && helperCommits > before, "the other process committed meanwhile")
        #expect(try await driver.integrityCheck() == [])
        try await driver.close()
    }
}
