import DepotConformance
import DepotCore
import DepotMemory
import Foundation
import Testing

/// The crash harness itself: its verifier must catch a partial transaction and accept a whole one.
@Suite struct CrashTrialsHarnessTests {
    @Test func verifierAcceptsWholeTransactionsAndRejectsPartialOnes() async throws {
        let driver = MemoryDriver()
        let accounts = try CollectionName("accounts"), ledger = try CollectionName("ledger"), meta = try CollectionName("meta")
        try await driver.write { tx in
            for n: Int64 in 1...3 {
                try tx.save(Record(id: .int(n), fields: ["n": .int(n)]), into: accounts)
                try tx.save(Record(id: .int(n), fields: ["n": .int(n)]), into: ledger)
            }
            try tx.save(Record(id: "last", fields: ["n": 3]), into: meta)
        }
        #expect(try await CrashTrials.verify(driver) == 3)
        try await driver.write { tx in try tx.save(Record(id: 4, fields: ["n": 4]), into: accounts) }
        await #expect(throws: ConformanceFailure.self) { try await CrashTrials.verify(driver) }
    }

    @Test func helperIsBuiltBesideTheTests() throws {
        let path = try CrashTrials.helperPath()
        #expect(FileManager.default.isExecutableFile(atPath: path))
    }
}

@Suite struct ChildProcessTests {
    @Test func runsCollectsOutputAndExitStatus() throws {
        let result = try ChildProcess.run("/bin/sh", ["-c", "cat; echo err >&2; exit 3"], standardInput: Data("hello".utf8))
        #expect(result.status == .exited(3))
        #expect(result.outputText == "hello")
        #expect(result.errorText == "err\n")
    }

    @Test func killsAndReportsTheSignal() throws {
        let child = try ChildProcess(path: "/bin/sleep", arguments: ["30"])
        #expect(child.isRunning)
        child.kill()
        #expect(child.waitForExit().status == .signalled(9))
    }

    @Test func theChildInheritsNoOtherDescriptors() throws {
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/self/status"))
        defer { try? handle.close() }
        let result = try ChildProcess.run("/bin/sh", ["-c", "ls /proc/$$/fd"])
        let fds = result.outputText.split(separator: "\n").compactMap { Int($0) }.filter { $0 > 2 }
        // Only the descriptor `ls` itself opens for its listing may appear.
        #expect(fds.count <= 1, "inherited: \(fds)")
    }
}
