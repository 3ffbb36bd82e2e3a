import DepotConformance
import DepotCore
import Foundation
import Testing
@testable import DepotJSONFile

#if canImport(Glibc)
import Glibc
#endif

/// Two processes writing one file: `depot-crash-helper` commits continuously while this
/// process commits too. The lock keeps the commits apart and each writer reloads the other's
/// changes first, so nothing either acknowledged is lost.
@Suite struct JSONMultiProcessTests {
    @Test func anotherProcessWritingAtTheSameTimeLosesNothing() async throws {
        let dir = TestDirectory()
        let store = "json:" + dir.store + "?durability=normal"
        let helper = try ChildProcess(path: try CrashTrials.helperPath(), arguments: [store, "42"])
        defer {
            helper.kill()
            _ = helper.waitForExit()
        }
        let driver = try await JSONFileDriver(path: dir.store, configuration: .init(durability: .normal, lockTimeout: .seconds(10)))
        let meta = try CollectionName("meta"), notes = try CollectionName("notes")
        func helperLast() async throws -> Int64 {
            try await driver.read { tx in try tx.get("last", from: meta)?.fields["n"]?.intValue ?? 0 }
        }
        // Wait until the helper is committing.
        let deadline = ContinuousClock.now + .seconds(20)
        while try await helperLast() == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        let before = try await helperLast()
        #expect(before > 0, "the helper commits")
        // At least 40 commits, and on until the helper has committed in between (on a loaded
        // machine 40 commits can all come before the helper's next one).
        var written = 0
        let writeDeadline = ContinuousClock.now + .seconds(30)
        while true {
            for _ in 0..<10 {
                written += 1
                let i = written
                try await driver.write { tx in try tx.insert(Record(id: .int(Int64(i)), fields: ["i": .int(Int64(i))]), into: notes) }
            }
            let helperNow = try await helperLast()
            if written >= 40 && helperNow > before { break }
            if ContinuousClock.now >= writeDeadline { break }
        }
        let during = try await helperLast()
        helper.kill()
        _ = helper.waitForExit()
        try await driver.close()

        let reopened = try await JSONFileDriver(path: dir.store)
        let last = try await CrashTrials.verify(reopened)
        let noteCount = try await reopened.read { tx in try tx.count(.all, in: notes) }
        #expect(noteCount == written, "every commit of this process survived the other's commits")
        #expect(last >= during && during > before, "the helper committed while this process did (\(before) → \(during) → \(last))")
        try await reopened.close()
    }
}
