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
