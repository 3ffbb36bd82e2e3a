import DepotConformance
import DepotCore
import DepotPostgres
import Testing

/// The whole conformance library against the PostgreSQL driver, with no capability opt-outs,
/// each check in a schema of its own in this run's throwaway database.
@Suite struct PostgresConformanceTests {
    @Test func serverIsConfigured() throws {
        // Without DEPOT_TEST_POSTGRES every PostgreSQL test fails, and this one says how to fix it.
        _ = try PostgresTestServer.database()
    }

    @Test(arguments: Conformance.checkNames)
    func conformance(_ name: String) async throws {
        let outcome = try await Conformance.run(name, factory: PostgresTestServer.factory)
        #expect(outcome == .passed, "postgres must declare every capability the check needs")
    }
}
