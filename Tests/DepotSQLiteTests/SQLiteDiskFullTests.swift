import CSQLite
import DepotConformance
import DepotCore
import Testing
@testable import DepotSQLite

/// A real full disk (a 1 MB tmpfs) under the SQLite driver, at both durabilities
/// (Docs/Semantics.md, "I/O failures and a full disk").
@Suite struct SQLiteDiskFullTests {
    // Skipped where this process may not mount a tmpfs (CI without root or CAP_SYS_ADMIN).
    @Test(.enabled(if: SmallTmpfs.isAvailable, "needs permission to mount a tmpfs (root or CAP_SYS_ADMIN)"), arguments: [Durability.full, .normal])
    func fillingTheDiskLosesNoAcknowledgedCommit(durability: Durability) async throws {
        let factory = DriverFactory(name: "sqlite") { dir in try await SQLiteDriver(path: dir + "/store.sqlite", durability: durability) }
        let report = try await DiskFullTrial.run(factory: factory) { error in
            DiskFullTrial.causes(of: error).contains { ($0 as? SQLiteResult)?.primaryCode == SQLITE_FULL }
        }
        print("SQLite disk full (\(durability)): \(report)")
    }
}
