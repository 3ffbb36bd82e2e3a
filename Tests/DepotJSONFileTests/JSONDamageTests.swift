import DepotConformance
import DepotCore
import DepotMemory
import Foundation
import Testing

@testable import DepotJSONFile

/// Damaged JSON stores at scale (Docs/Fuzzing.md, "Damaged stores"): every case opens,
/// checks, dumps and queries a damaged copy of a valid store and must end with success or a
/// `DepotError`, never a crash or a hang, and no file may change (reading never writes).
@Suite struct JSONDamageTests {
    /// Nothing may change: the driver writes only in a write transaction.
    static let policy = DamagePolicy(summary: "json: no file changes") { _, _ in false }

    /// The valid images: the store written pretty (the default) and compact, and another
    /// store's document for swapped-in files.
    static func images(in scratch: String) async throws -> (bases: [(name: String, image: StoreImage)], foreign: StoreImage) {
        func build(_ name: String, variant: Int, options: String) async throws -> StoreImage {
            let root = scratch + "/" + name
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            let location = try StoreLocation("json:" + root + "/db.json" + options)
            let driver = try await JSONFileDriver(path: location.path, configuration: try JSONFileDriver.configuration(from: location))
            try await DamageFixture.fill(driver, variant: variant)
            try await driver.close()
            var image = try StoreImage.read(root)
            image.files["db.json.lock"] = nil
            return image
        }
        let pretty = try await build("pretty", variant: 0, options: "")
        let compact = try await build("compact", variant: 0, options: "?pretty=false")
        let foreign = try await build("foreign", variant: 1, options: "?pretty=false")
        return ([("pretty", pretty), ("compact", compact)], foreign)
    }

    static func scratch() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("depot-json-damage-\(UUID().uuidString)").path
    }

    @Test func damagedStoresEndInSuccessOrATypedError() async throws {
        let scratch = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let (bases, foreign) = try await Self.images(in: scratch)
        let settings = DamageSettings.fromEnvironment(defaultCases: 300)
        let generator = DamageGenerator(driver: "json", bases: bases, foreign: foreign, extraPaths: ["db.json.lock", ".db.json.tmp", "notes.txt"], seed: settings.seed)
        let report = await DamageRunner.run(generator, settings: settings, workDirectory: scratch + "/work", policy: Self.policy) { root in
            try await JSONFileDriver(path: root + "/db.json", configuration: .init(changeNotification: false))
        }
        print(report.summary)
        #expect(report.cases == settings.cases)
        #expect(report.failures.isEmpty, "\(report.failures.prefix(10).joined(separator: "\n"))")
        // Every `.corrupted` error names the damaged store's file (or its directory).
        #expect(report.unnamedCorruption == 0, "\(report.examples.filter { $0.key.hasPrefix("corrupted") })")
        // `.internal` means "a bug, please report it": damage must never look like one.
        #expect(!report.codes.keys.contains { $0.hasSuffix(": internal") }, "\(report.examples.filter { $0.key.hasSuffix(": internal") })")
    }

    /// The harness itself: a driver that rewrites the file it opened, and one that throws an
    /// error that is not a `DepotError`, are both reported as failures.
    @Test func harnessReportsRewritesAndUntypedErrors() async throws {
        let scratch = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let (bases, foreign) = try await Self.images(in: scratch)
        let generator = DamageGenerator(driver: "json", bases: bases, foreign: foreign, extraPaths: [], seed: 5)
        let settings = DamageSettings(cases: 3, first: 0, seed: 5, caseSeconds: 60)
        let rewriting = await DamageRunner.run(generator, settings: settings, workDirectory: scratch + "/a", policy: Self.policy) { root in
            try Data("{}".utf8).write(to: URL(fileURLWithPath: root + "/db.json"))
            return MemoryDriver()
        }
        let rewrites = rewriting.failures.filter { (failure: String) in failure.contains("db.json") && failure.contains("policy forbids") }
        #expect(rewriting.failures.count == 3 && rewrites.count == 3, "\(rewriting.failures)")
        struct Untyped: Error {}
        let untyped = await DamageRunner.run(generator, settings: settings, workDirectory: scratch + "/b", policy: Self.policy) { _ in throw Untyped() }
        let untypedFailures = untyped.failures.filter { (failure: String) in failure.contains("untyped error") }
        #expect(untyped.failures.count == 3 && untypedFailures.count == 3, "\(untyped.failures)")
        // The same seed and index give the same case.
        #expect(generator.makeCase(7).description == generator.makeCase(7).description)
        #expect(generator.makeCase(7).description != generator.makeCase(8).description)
    }
}
