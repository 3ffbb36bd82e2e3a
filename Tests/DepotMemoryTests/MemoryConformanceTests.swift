import DepotConformance
import DepotCore
import DepotMemory
import Testing

/// The whole conformance library against the reference driver: one test result per check.
@Suite struct MemoryConformanceTests {
    static let factory = DriverFactory(name: "memory") { _ in MemoryDriver() }

    @Test(arguments: Conformance.checkNames)
    func conformance(_ name: String) async throws {
        let outcome = try await Conformance.run(name, factory: Self.factory)
        if case .notSupported(let missing) = outcome {
            withKnownIssue("memory does not declare \(missing)") { throw ConformanceNotRun() }
        }
    }
}
