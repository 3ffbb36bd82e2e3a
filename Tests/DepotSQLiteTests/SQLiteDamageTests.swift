import DepotConformance
import DepotCore
import Foundation
import Testing

@testable import DepotSQLite

/// Damaged SQLite stores at scale (Docs/Fuzzing.md, "Damaged stores"): every case opens,
/// checks, dumps and queries a damaged copy of a valid store and must end with success or a
/// `DepotError`, never a crash or a hang, changing no file but as SQLite's own WAL recovery does.
@Suite struct SQLiteDamageTests {
    /// What may change: the `-shm` index (SQLite rebuilds it), the `-wal` (frames after the
    /// first bad checksum are ignored; the last connection's close checkpoints the log and
    /// removes it), and the database file only through that checkpoint: when the damaged
    /// image had a non-empty `-wal` and nothing was reported damaged; a `-journal` may be
    /// removed (SQLite takes one beside the database for a hot journal and rolls it back).
    /// Nothing else.
    static let policy = DamagePolicy(summary: "sqlite: -shm freely; -wal by WAL recovery; -journal removed; the database only by the closing checkpoint of a non-empty -wal when no damage was reported") { change, context in
        if change.path.hasSuffix("-shm") { return true }
        if change.path.hasSuffix("-journal") { return change.what == "removed" }
        if change.path.hasSuffix("-wal") { return true }
        if change.path == "store.sqlite", change.what == "changed" {
            return !(context.before.files["store.sqlite-wal"] ?? []).isEmpty && !context.reportedDamage
        }
        return false
    }

    /// The valid images: a closed store (one file) and a live one copied while open (the
    /// commits still in its `-wal`), plus another store's live image for swapped-in files.
    static func images(in scratch: String) async throws -> (bases: [(name: String, image: StoreImage)], foreign: StoreImage) {
        func build(_ name: String, variant: Int, live: Bool) async throws -> StoreImage {
            let root = scratch + "/" + name
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            let driver = try await SQLiteDriver(path: root + "/store.sqlite")
            try await DamageFixture.fill(driver, variant: variant)
            if live {
                let image = try StoreImage.read(root)
                try await driver.close()
                return image
            }
            try await driver.close()
            return try StoreImage.read(root)
        }
        let clean = try await build("clean", variant: 0, live: false)
        let wal = try await build("wal", variant: 0, live: true)
        let foreign = try await build("foreign", variant: 1, live: true)
        return ([("clean", clean), ("wal", wal)], foreign)
    }

    @Test func damagedStoresEndInSuccessOrATypedError() async throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("depot-sqlite-damage-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let (bases, foreign) = try await Self.images(in: scratch)
        #expect(bases[1].image.files["store.sqlite-wal"]?.isEmpty == false, "the live image must hold a write-ahead log")
        let settings = DamageSettings.fromEnvironment(defaultCases: 300)
        let generator = DamageGenerator(
            driver: "sqlite", bases: bases, foreign: foreign,
            extraPaths: ["store.sqlite-wal", "store.sqlite-journal", "store.sqlite-shm", "notes.txt"], seed: settings.seed)
        // As `depot check` and `depot dump`: a path the probe finds no store at is not opened
        // (opening would make a new store there).
        let report = await DamageRunner.run(generator, settings: settings, workDirectory: scratch + "/work", policy: Self.policy) { root in
            guard try SQLiteDriver.holdsStore(atPath: root + "/store.sqlite") else { return nil }
            return try await SQLiteDriver(path: root + "/store.sqlite")
        }
        print(report.summary)
        #expect(report.cases == settings.cases)
        #expect(report.failures.isEmpty, "\(report.failures.prefix(10).joined(separator: "\n"))")
        // Every `.corrupted` error names the damaged store's file (or its directory).
        #expect(report.unnamedCorruption == 0, "\(report.examples.filter { $0.key.hasPrefix("corrupted") })")
        // `.internal` means "a bug, please report it": damage must never look like one.
        #expect(!report.codes.keys.contains { $0.hasSuffix(": internal") }, "\(report.examples.filter { $0.key.hasSuffix(": internal") })")
    }
}
