import DepotConformance
import DepotCore
import Foundation
import Testing
@testable import DepotJSONFile

/// Crash safety by killing: `depot-crash-helper` commits to a JSON store and is killed with
/// SIGKILL at random moments; after each kill the store must parse, pass its integrity
/// check, hold every acknowledged commit and no partial one.
@Suite struct JSONCrashTests {
    static func factory(_ options: String) -> DriverFactory {
        DriverFactory(name: "json") { directory in
            var registry = DriverRegistry()
            JSONFileDriver.register(in: &registry)
            return try await registry.makeDriver("json:" + directory + "/db.json" + options)
        }
    }

    @Test(arguments: [("", 120, UInt64(1)), ("?durability=normal&pretty=false", 100, UInt64(2))])
    func killTrials(options: String, defaultTrials: Int, seed: UInt64) async throws {
        let trials = CrashTrials.trialCount(default: defaultTrials, configurations: 2)
        let dir = TestDirectory()
        let report = try await CrashTrials.run(
            store: "json:" + dir.store + options, factory: Self.factory(options), directory: dir.path, trials: trials, seed: seed,
            maxDelayMilliseconds: 400)
        print("json\(options.isEmpty ? "" : " " + options): \(report)")
        #expect(report.trials == trials)
        // Kills must also land after commits, not only during the helper's start-up (how many
        // do depends on the machine's load; with none the trials would prove nothing).
        #expect(report.trialsWithCommits > 0 && report.inFlightCommitsKept + report.acknowledgedCommits > 0, "\(report)")
    }
}
