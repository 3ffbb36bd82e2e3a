import DepotConformance
import DepotCore
import DepotPostgres
import Foundation
import Testing

/// The server the PostgreSQL tests use: DEPOT_TEST_POSTGRES names it (scripts/test starts a
/// private cluster and sets it). Each test process makes one throwaway database on it, and
/// each conformance check a schema of its own in that database.
enum PostgresTestServer {
    static let variable = "DEPOT_TEST_POSTGRES"
    static let howTo = """
        The PostgreSQL tests need a server: set DEPOT_TEST_POSTGRES to a URL such as \
        postgres://user:password@127.0.0.1:5432/postgres (a role that may create databases), \
        or run scripts/test, which starts a private cluster for the run.
        """

    /// The server's settings, or a failure saying how to provide one.
    static func server() throws -> PostgresSettings {
        guard let url = ProcessInfo.processInfo.environment[variable], !url.isEmpty else {
            throw DepotError(.invalidStore, howTo)
        }
        return try PostgresSettings(StoreLocation(url))
    }

    private static let made = Locked<Result<PostgresSettings, DepotError>?>(nil)

    /// This process's throwaway database (created on first use; databases of earlier runs
    /// older than six hours are dropped then).
    static func database() throws -> PostgresSettings {
        try made.withLock { state in
            if let state { return try state.get() }
            let result: Result<PostgresSettings, DepotError>
            do {
                var settings = try server()
                let now = Int(Date().timeIntervalSince1970)
                for old in try PostgresAdmin.databases(prefixed: "depot_test_", on: settings) {
                    let parts = old.split(separator: "_")
                    if parts.count >= 3, let stamp = Int(parts[2]), now - stamp > 6 * 3600 {
                        try PostgresAdmin.dropDatabase(old, on: settings)
                    }
                }
                let name = "depot_test_\(now)_\(UInt32.random(in: 0...UInt32.max))"
                try PostgresAdmin.createDatabase(name, on: settings)
                settings.database = name
                result = .success(settings)
            } catch {
                result = .failure(DepotError.wrap(error))
            }
            state = result
            return try result.get()
        }
    }

    /// Settings for the store kept "in" `directory`: a schema named after it.
    static func settings(for directory: String) throws -> PostgresSettings {
        var settings = try database()
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in directory.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        settings.schema = "s_" + String(hash, radix: 16)
        // Checks run in parallel: keep each driver's share of the server's connections small.
        settings.poolSize = 4
        // synchronous_commit off: what the checks prove does not depend on when the WAL
        // reaches the disk, and a WAL flush per commit made 800 single-record commits take
        // over a minute beside the rest of the suite. Durability full is what the fault
        // tests use (client kills through storeString(for:), server crashes on a cluster of
        // their own), where it matters.
        settings.durability = .normal
        return settings
    }

    /// The store string for `directory`'s schema (with the password: for child processes only).
    static func storeString(for directory: String) throws -> String {
        let s = try settings(for: directory)
        let auth = s.password.map { s.user + ":" + ($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? $0) } ?? s.user
        return "postgres://\(auth)@\(s.host):\(s.port)/\(s.database)?schema=\(s.schema)"
    }

    static let factory = DriverFactory(name: "postgres") { directory in
        try await PostgresDriver(settings: try settings(for: directory))
    }
}
