import DepotConformance
import DepotCore
import DepotSQLite
import Foundation
import Testing

/// Crash safety by killing: `depot-crash-helper` commits multi-collection transactions to a
/// SQLite store and is killed with SIGKILL at random moments; after each kill the store must
/// pass its integrity check, hold every acknowledged commit, and show no partial transaction.
///
/// 200 trials by default; set `DEPOT_CRASH_TRIALS` for a longer run.
@Suite struct SQLiteCrashTests {
    static var trials: Int { ProcessInfo.processInfo.environment["DEPOT_CRASH_TRIALS"].flatMap(Int.init) ?? 200 }

    @Test(arguments: [Durability.full, .normal])
    func killedWritersLoseNothingAcknowledged(durability: Durability) async throws {
        let dir = try ScratchDirectory()
        let store = "sqlite:\(dir.store)?durability=\(durability.rawValue)"
        let factory = DriverFactory(name: "sqlite") { _ in try await SQLiteDriver(StoreLocation(store)) }
        let trials = Self.trials / 2
        let report = try await CrashTrials.run(store: store, factory: factory, directory: dir.path, trials: trials, seed: durability == .full ? 11 : 12,
            maxDelayMilliseconds: 300)
        print("sqlite crash trials (durability=\(durability.rawValue)): \(report)")
        #expect(report.trials == trials)
        #expect(report.trialsWithCommits > trials / 3, "many kills land while the helper commits")
    }
}
