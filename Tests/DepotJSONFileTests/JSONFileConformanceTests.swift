import DepotConformance
import DepotCore
import DepotJSONFile
import Testing

/// The whole conformance library against the JSON-file driver: one test result per check.
/// Each check gets a fresh directory; the store is `DIR/db.json`, so reopening the same
/// directory reopens the same file.
@Suite struct JSONFileConformanceTests {
    static let factory = DriverFactory(name: "json") { directory in
        var registry = DriverRegistry()
        JSONFileDriver.register(in: &registry)
        return try await registry.makeDriver("json:" + directory + "/db.json")
    }

    @Test(arguments: Conformance.checkNames)
    func conformance(_ name: String) async throws {
        let outcome = try await Conformance.run(name, factory: Self.factory)
        if case .notSupported(let missing) = outcome {
            withKnownIssue("json does not declare \(missing)") { throw ConformanceNotRun() }
        }
    }

    @Test func declaresEverything() async throws {
        let dir = TestDirectory()
        let driver = try await JSONFileDriver(path: dir.store)
        #expect(driver.capabilities == DriverCapabilities.complete)
        try await driver.close()
    }
}
