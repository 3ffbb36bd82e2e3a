import DepotConformance
import DepotCore
import DepotSQLite
import Testing

/// The whole conformance library against the SQLite driver, with no capability opt-outs.
@Suite struct SQLiteConformanceTests {
    static let factory = DriverFactory(name: "sqlite") { dir in
        try await SQLiteDriver(StoreLocation("sqlite:" + dir + "/store.sqlite"))
    }

    @Test(arguments: Conformance.checkNames)
    func conformance(_ name: String) async throws {
        let outcome = try await Conformance.run(name, factory: Self.factory)
        #expect(outcome == .passed, "sqlite must declare every capability the check needs")
    }
}
