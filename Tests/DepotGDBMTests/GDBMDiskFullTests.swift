import DepotConformance
import DepotCore
import Testing
@testable import DepotGDBM

#if canImport(Glibc)
import Glibc
#endif

/// A real full disk (a 1 MB tmpfs) under the GDBM driver, at both durabilities
/// (Docs/Semantics.md, "I/O failures and a full disk").
@Suite struct GDBMDiskFullTests {
    // Skipped where this process may not mount a tmpfs (CI without root or CAP_SYS_ADMIN).
    @Test(.enabled(if: SmallTmpfs.isAvailable, "needs permission to mount a tmpfs (root or CAP_SYS_ADMIN)"), arguments: [Durability.full, .normal])
    func fillingTheDiskLosesNoAcknowledgedCommit(durability: Durability) async throws {
        let factory = DriverFactory(name: "gdbm") { dir in try await GDBMDriver(path: dir + "/store", durability: durability) }
        let report = try await DiskFullTrial.run(factory: factory) { error in
            DiskFullTrial.causes(of: error).contains { ($0 as? GDBMNativeError)?.syserr == ENOSPC }
        }
        print("GDBM disk full (\(durability)): \(report)")
    }
}
