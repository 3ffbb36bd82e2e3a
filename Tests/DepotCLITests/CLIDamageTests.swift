import Depot
import DepotConformance
import Foundation
import Testing

/// A sample of the damaged-store cases (Docs/Fuzzing.md, "Damaged stores") through the real
/// executable: `depot check` and `depot dump` on a damaged copy of a valid store of each
/// persistent driver end with status 0 or 1, never a signal, a hang (the per-case limit,
/// `DEPOT_DAMAGE_CASE_SECONDS`) or another status.
@Suite struct CLIDamageTests {
    /// Each driver's store string inside a root directory, and where extra files may appear.
    static let drivers: [(scheme: String, store: String, extraPaths: [String])] = [
        ("sqlite", "store.sqlite", ["store.sqlite-wal", "store.sqlite-journal", "notes.txt"]),
        ("gdbm", "store", ["store/data/ghost.records.gdbm", "store/journal.new", "store/notes.txt"]),
        ("json", "db.json", [".db.json.tmp", "notes.txt"]),
    ]

    @Test func checkAndDumpOfDamagedStoresExitWithZeroOrOne() async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let settings = DamageSettings.fromEnvironment(defaultCases: 6)
        for driver in Self.drivers {
            func build(_ name: String, variant: Int) async throws -> StoreImage {
                let root = scratch.path + "/" + driver.scheme + "-" + name
                try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
                let store = try await Store.open(driver.scheme + ":" + root + "/" + driver.store, registry: .standard)
                try await DamageFixture.fill(store.driver, variant: variant, records: 60)
                try await store.close()
                var image = try StoreImage.read(root)
                image.files["db.json.lock"] = nil
                return image
            }
            let generator = DamageGenerator(
                driver: driver.scheme, bases: [("clean", try await build("clean", variant: 0))], foreign: try await build("foreign", variant: 1),
                extraPaths: driver.extraPaths, seed: settings.seed)
            for index in settings.first..<settings.first + settings.cases {
                let damage = generator.makeCase(index)
                let root = scratch.path + "/" + driver.scheme + "-work"
                try damage.apply(to: generator.bases[0].image).write(to: root)
                for command in ["check", "dump"] {
                    var environment = ProcessInfo.processInfo.environment
                    environment.removeValue(forKey: "DEPOT_STORE")
                    let child = try ChildProcess(path: try CLI.executable(), arguments: [command, driver.scheme + ":" + root + "/" + driver.store], environment: environment)
                    // A hang: still running after the per-case limit; killed, and a failure.
                    let deadline = Date().addingTimeInterval(settings.caseSeconds)
                    while child.isRunning, Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
                    let hung = child.isRunning
                    if hung { child.kill() }
                    let result = await child.exit()
                    #expect(!hung, "depot \(command) hung, \(damage)")
                    #expect(result.status == .exited(0) || result.status == .exited(1), "depot \(command), \(damage): \(result.status)\n\(result.outputText.prefix(500))\n\(result.errorText.prefix(500))")
                    if result.status == .exited(1) {
                        #expect(!(result.outputText + result.errorText).isEmpty, "depot \(command) failed silently, \(damage)")
                    }
                }
            }
        }
    }
}
