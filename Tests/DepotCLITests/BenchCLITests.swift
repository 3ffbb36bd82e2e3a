import Foundation
import Testing

/// `depot bench --clients`: bad counts are usage errors that say what to write.
@Suite struct BenchCLITests {
    @Test("bench --clients rejects counts outside 1…64 and text, with status 2")
    func badClientCounts() async throws {
        for bad in ["0", "2,x", "65", "1,,2", " "] {
            let run = try await CLI.run(["bench", "--quick", "--clients", bad])
            #expect(run.status == 2, "--clients \(bad): \(run)")
            #expect(run.stderr.contains("--clients takes counts from 1 to 64"), "--clients \(bad): \(run)")
        }
    }
}
