import DepotConformance
import DepotCore
import DepotGDBM
import Testing

/// The whole conformance library against the GDBM driver: one test result per check.
/// Each check gets a fresh directory; the store lives in `DIR/store`, so reopening the
/// same directory reopens the same store.
@Suite struct GDBMConformanceTests {
    static let factory = DriverFactory(name: "gdbm") { dir in
        var registry = DriverRegistry()
        GDBMDriver.register(in: &registry)
        return try await registry.makeDriver("gdbm:" + dir + "/store")
    }

    @Test func declaresCompleteCapabilities() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let driver = try await Self.factory.open(dir.path)
        #expect(driver.capabilities == .complete)
        try await driver.close()
    }

    @Test(arguments: Conformance.checkNames)
    func conformance(_ name: String) async throws {
        let outcome = try await Conformance.run(name, factory: Self.factory)
        #expect(outcome == .passed, "gdbm must pass every check, got \(outcome)")
    }
}
