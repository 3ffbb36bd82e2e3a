import DepotConformance
import DepotCore
import Testing
@testable import DepotJSONFile

#if canImport(Glibc)
import Glibc
#endif

/// A real full disk (a 1 MB tmpfs) under the JSON-file driver, at both durabilities
/// (Docs/Semantics.md, "I/O failures and a full disk").
@Suite struct JSONDiskFullTests {
    // Skipped where this process may not mount a tmpfs (CI without root or CAP_SYS_ADMIN).
    @Test(.enabled(if: SmallTmpfs.isAvailable, "needs permission to mount a tmpfs (root or CAP_SYS_ADMIN)"), arguments: [Durability.full, .normal])
    func fillingTheDiskLosesNoAcknowledgedCommit(durability: Durability) async throws {
        let factory = DriverFactory(name: "json") { dir in
            try await JSONFileDriver(path: dir + "/db.json", configuration: .init(durability: durability))
        }
        let report = try await DiskFullTrial.run(factory: factory) { error in
            DiskFullTrial.causes(of: error).contains { ($0 as? FileSystemError)?.errno == ENOSPC }
        }
        print("JSON disk full (\(durability)): \(report)")
    }
}
