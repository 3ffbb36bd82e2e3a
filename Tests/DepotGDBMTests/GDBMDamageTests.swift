import DepotConformance
import DepotCore
import Foundation
import Testing

@testable import DepotGDBM

/// Damaged GDBM stores at scale (Docs/Fuzzing.md, "Damaged stores"): every case opens,
/// checks, dumps and queries a damaged copy of a valid store and must end with success or a
/// `DepotError`, never a crash or a hang, changing no file but as the driver's documented
/// recovery does (Docs/GDBMDriver.md, "Crash safety").
@Suite struct GDBMDamageTests {
    /// What may change: `data/` (rebuilt from the backup and the journal), the journal (its
    /// unreadable tail cut, marks appended, a fresh one after a checkpoint), `journal.new`
    /// (removed on open), `LOCK` (made again); `backup/` only by a checkpoint in a session
    /// that reported no damage (never damage copied over the good copy). Nothing else.
    static let policy = DamagePolicy(summary: "gdbm: data/ and the journal by recovery; backup/ only when no damage was reported") { change, context in
        let path = change.path
        if path == "store/LOCK" || path.hasPrefix("store/data/") || path == "store/journal" { return true }
        if path == "store/journal.new" { return change.what == "removed" }
        if path.hasPrefix("store/backup/") { return !context.reportedDamage }
        return false
    }

    /// `true` for a journal whose last record is an `applied` mark.
    private static func endsInMark(_ last: JournalRecord?) -> Bool {
        if case .applied? = last { return true }
        return false
    }

    /// The valid images: a closed store (journal checkpointed), and two copied while open
    /// (the image kill -9 leaves) with commits that only the journal holds: one whose journal
    /// ends in an `applied` mark, one ending in a transaction (opening rebuilds `data/`).
    static func images(in scratch: String) async throws -> (bases: [(name: String, image: StoreImage)], foreign: StoreImage) {
        func build(_ name: String, variant: Int, options: String, live: Bool, endInMark: Bool = false) async throws -> StoreImage {
            let root = scratch + "/" + name
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            let driver = try await GDBMDriver(location: StoreLocation("gdbm:" + root + "/store" + options))
            try await DamageFixture.fill(driver, variant: variant)
            if live {
                // A no-op write waits for the writer thread's queued jobs. A sync point's
                // `applied` mark is written only once its fsyncs, on a thread of their own,
                // are done: for an image whose journal ends in the mark, look until it does.
                try await driver.write { _ in }
                if endInMark {
                    let journal = root + "/store/journal"
                    let deadline = ContinuousClock.now + .seconds(30 * testTimeoutScale)
                    while !Self.endsInMark(try Journal.scanSegment(path: journal).last) {
                        guard ContinuousClock.now < deadline else {
                            throw DepotError(.internal, "The journal of '\(name)' did not end in an applied mark within \(30 * testTimeoutScale) s.")
                        }
                        try await Task.sleep(for: .milliseconds(5))
                        try await driver.write { _ in }
                    }
                }
                let image = try StoreImage.read(root)
                try await driver.close()
                return image
            }
            try await driver.close()
            return try StoreImage.read(root)
        }
        let clean = try await build("clean", variant: 0, options: "", live: false)
        let applied = try await build("applied", variant: 0, options: "?checkpoint_kb=100000&sync_every=1&sync_interval_ms=0", live: true, endInMark: true)
        let pending = try await build("pending", variant: 0, options: "?checkpoint_kb=100000&sync_every=100000&sync_interval_ms=100000", live: true)
        let foreign = try await build("foreign", variant: 1, options: "?checkpoint_kb=100000", live: true)
        return ([("clean", clean), ("journal ending in applied", applied), ("journal ending in a transaction", pending)], foreign)
    }

    @Test func damagedStoresEndInSuccessOrATypedError() async throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("depot-gdbm-damage-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let (bases, foreign) = try await Self.images(in: scratch)
        let settings = DamageSettings.fromEnvironment(defaultCases: 150)
        let generator = DamageGenerator(
            driver: "gdbm", bases: bases, foreign: foreign,
            extraPaths: ["store/data/ghost.records.gdbm", "store/data/ghost.index.gdbm", "store/backup/ghost.records.gdbm", "store/journal.new", "store/notes.txt"],
            seed: settings.seed)
        let report = await DamageRunner.run(generator, settings: settings, workDirectory: scratch + "/work", policy: Self.policy) { root in
            try await GDBMDriver(location: StoreLocation("gdbm:" + root + "/store?lock_timeout_ms=0"))
        }
        print(report.summary)
        #expect(report.cases == settings.cases)
        #expect(report.failures.isEmpty, "\(report.failures.prefix(10).joined(separator: "\n"))")
        // Every `.corrupted` error names the damaged store's file (or its directory).
        #expect(report.unnamedCorruption == 0, "\(report.examples.filter { $0.key.hasPrefix("corrupted") })")
        // `.internal` means "a bug, please report it": damage must never look like one.
        #expect(!report.codes.keys.contains { $0.hasSuffix(": internal") }, "\(report.examples.filter { $0.key.hasSuffix(": internal") })")
    }

    /// Found by the damage runs: closing a store whose journal held commits checkpointed
    /// even when the session only read, copying a damaged primary file over the backup and
    /// starting a fresh journal, so the only sound copy of the data was gone. A session that
    /// commits nothing now leaves the journal and the backup files as they are.
    @Test func readingADamagedStoreNeverCopiesItOverTheBackup() async throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("depot-gdbm-damage-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let (bases, _) = try await Self.images(in: scratch)
        var image = bases[1].image
        let file = "store/data/books.records.gdbm"
        var bytes = try #require(image.files[file])
        let title = Array("Book 7 lorem".utf8)
        let at = try #require((0..<bytes.count - title.count).first { bytes[$0..<$0 + title.count].elementsEqual(title) })
        bytes[at + 5] ^= 0x01
        image.files[file] = bytes
        let root = scratch + "/work"
        try image.write(to: root)
        let driver = try await GDBMDriver(location: StoreLocation("gdbm:" + root + "/store"))
        let problems = try await driver.integrityCheck()
        #expect(!problems.isEmpty, "\(problems)")
        try await driver.close()
        let after = try StoreImage.read(root)
        for (path, before) in image.files where path.hasPrefix("store/backup/") || path == "store/journal" {
            let unchanged = after.files[path] == before
            #expect(unchanged, "\(path) changed")
        }
        #expect(after.files.keys.filter { $0.hasPrefix("store/backup/") }.sorted() == image.files.keys.filter { $0.hasPrefix("store/backup/") }.sorted())
        // The journal still rebuilds the damaged file: with it made unreadable to gdbm, the
        // store is rebuilt from the backup and the journal, and is whole.
        try Data(repeating: 0x5A, count: 4096).write(to: URL(fileURLWithPath: root + "/" + file))
        let healed = try await GDBMDriver(location: StoreLocation("gdbm:" + root + "/store"))
        #expect(try await healed.integrityCheck().isEmpty)
        let books = try CollectionName("books")
        #expect(try await healed.read { tx in try tx.count(.all, in: books) } == 120)
        try await healed.close()
    }
}
