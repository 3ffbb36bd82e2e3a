import DepotConformance
import CGDBM
import DepotCore
import Foundation
import DepotMemory
import Testing

@testable import DepotGDBM

/// Damage, crashes and other processes: checksums, foreign files, journal replay, locks,
/// and the gdbm tools reading Depot's files.
@Suite struct GDBMRecoveryTests {
    let users: CollectionName

    init() throws { users = try CollectionName("users") }

    func open(_ dir: TemporaryDirectory, _ options: String = "") async throws -> GDBMDriver {
        try await GDBMDriver(location: StoreLocation("gdbm:" + dir.path + "/store" + options))
    }

    func fill(_ driver: GDBMDriver, count: Int = 20) async throws {
        let users = self.users
        try await driver.write { tx in
            for i in 1...count { try tx.insert(Record(id: .int(Int64(i)), fields: ["name": .string("user \(i)"), "n": .int(Int64(i))]), into: users) }
        }
    }

    /// Rewrites one stored value in a GDBM file through the C API.
    func patch(_ path: String, key: [UInt8], _ change: (inout [UInt8]) -> Void) throws {
        let dbf = try #require(gdbm_open(path, 0, GDBM_WRITER, 0o644, nil))
        defer { gdbm_close(dbf) }
        let fetched = key.withUnsafeBytes { raw in
            gdbm_fetch(dbf, datum(dptr: UnsafeMutablePointer(mutating: raw.baseAddress?.assumingMemoryBound(to: CChar.self)), dsize: Int32(raw.count)))
        }
        let ptr = try #require(fetched.dptr)
        var value = Array(UnsafeRawBufferPointer(start: ptr, count: Int(fetched.dsize)))
        free(ptr)
        change(&value)
        let rc = key.withUnsafeBytes { k in
            value.withUnsafeBytes { v in
                gdbm_store(
                    dbf, datum(dptr: UnsafeMutablePointer(mutating: k.baseAddress?.assumingMemoryBound(to: CChar.self)), dsize: Int32(k.count)),
                    datum(dptr: UnsafeMutablePointer(mutating: v.baseAddress?.assumingMemoryBound(to: CChar.self)), dsize: Int32(v.count)), GDBM_REPLACE)
            }
        }
        #expect(rc == 0)
    }

    @Test func recordFailingItsChecksumIsCorruptedNamingCollectionAndID() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let driver = try await open(dir)
        try await fill(driver)
        try await driver.close()
        try patch(dir.path + "/store/data/users.records.gdbm", key: BinaryCodec.key(for: 7)) { $0[$0.count - 1] ^= 0x40 }
        let reopened = try await open(dir)
        let users = self.users
        do {
            _ = try await reopened.read { tx in try tx.get(7, from: users) }
            Issue.record("a damaged record must not read")
        } catch let error as DepotError {
            #expect(error.code == .corrupted)
            #expect(error.collection == "users")
            #expect(error.id == 7)
        }
        await expectCode(.corrupted) { _ = try await reopened.read { tx in try tx.query(Query(), in: users) } }
        #expect(try await reopened.read { tx in try tx.get(6, from: users) } != nil)
        let problems = try await reopened.integrityCheck()
        #expect(problems.count == 1 && problems[0].contains("7"))
        try await reopened.close()
    }

    @Test func foreignFileIsRebuiltFromBackupOrReportedCorrupted() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let driver = try await open(dir)
        try await fill(driver)
        try await driver.close()
        let garbage = Data((0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
        // Only the primary file damaged: the store rebuilds it from the backup and journal.
        try garbage.write(to: URL(fileURLWithPath: dir.path + "/store/data/users.records.gdbm"))
        let healed = try await open(dir)
        #expect(healed.engine.rebuilds == 1)
        let users = self.users
        #expect(try await healed.read { tx in try tx.count(.all, in: users) } == 20)
        #expect(try await healed.integrityCheck().isEmpty)
        try await healed.close()
        // Primary and current backup both foreign (or empty): `.corrupted`, never a crash.
        let backup = dir.path + "/store/" + (try BackupState.currentDirectoryName(store: dir.path + "/store")) + "/users.records.gdbm"
        try garbage.write(to: URL(fileURLWithPath: dir.path + "/store/data/users.records.gdbm"))
        try garbage.write(to: URL(fileURLWithPath: backup))
        await expectCode(.corrupted) { _ = try await open(dir) }
        try Data().write(to: URL(fileURLWithPath: dir.path + "/store/data/users.records.gdbm"))
        try Data().write(to: URL(fileURLWithPath: backup))
        await expectCode(.corrupted) { _ = try await open(dir) }
        try Data("not a journal at all, not at all".utf8).write(to: URL(fileURLWithPath: dir.path + "/store/journal"))
        await expectCode(.corrupted) { _ = try await open(dir) }
    }

    /// A process killed while it made a store's first journal leaves `journal.new` without
    /// its header and no `journal` (a kill trial found this: "not a Depot journal" on
    /// reopening): opening makes the journal again and the store works. The same empty
    /// `journal.new` beside data files and no journal is `.corrupted`, never a fresh start;
    /// a `journal.new` with its header (a rotation stopped between its renames) is taken.
    @Test func aFirstJournalCutBeforeItsHeaderIsMadeAgain() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let users = self.users
        try FileManager.default.createDirectory(atPath: dir.path + "/store", withIntermediateDirectories: true)
        for partial in [Data(), Data(Journal.magic.prefix(5))] {
            try partial.write(to: URL(fileURLWithPath: dir.path + "/store/journal.new"))
            let driver = try await open(dir)
            try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["n": 1]), into: users) }
            #expect(try await driver.read { tx in try tx.get(1, from: users) } == Record(id: 1, fields: ["n": 1]))
            try await driver.close()
            #expect(!FileSystem.exists(dir.path + "/store/journal.new"))
            try FileManager.default.removeItem(atPath: dir.path + "/store")
            try FileManager.default.createDirectory(atPath: dir.path + "/store", withIntermediateDirectories: true)
        }
        // A store with data: its journal replaced by an empty `journal.new`.
        let driver = try await open(dir)
        try await fill(driver)
        try await driver.close()
        let journal = dir.path + "/store/journal"
        let header = Array((try FileHandle(forReadingFrom: URL(fileURLWithPath: journal)).readToEnd() ?? Data()).prefix(Journal.headerSize))
        try FileManager.default.removeItem(atPath: journal)
        try Data().write(to: URL(fileURLWithPath: journal + ".new"))
        await expectCode(.corrupted) { _ = try await open(dir) }
        // With a whole header it is a rotation's new segment, renamed into place.
        try Data(header).write(to: URL(fileURLWithPath: journal + ".new"))
        let reopened = try await open(dir)
        #expect(try await reopened.read { tx in try tx.count(.all, in: users) } == 20)
        try await reopened.close()
    }

    /// Copies a live store directory: the image a crash at that instant would leave
    /// (the page cache survives kill -9, so what the files hold is what the copy holds).
    func crashImage(of dir: TemporaryDirectory, into target: TemporaryDirectory) throws {
        try FileManager.default.removeItem(atPath: target.path)
        try FileManager.default.copyItem(atPath: dir.path, toPath: target.path)
    }

    @Test func journalIsReplayedAndTornTailDiscarded() async throws {
        let dir = try TemporaryDirectory(), image = try TemporaryDirectory()
        defer { dir.remove(); image.remove() }
        let users = self.users
        // No sync point: the journal alone holds these commits.
        let driver = try await open(dir, "?durability=normal&sync_every=1000000")
        for i in 1...30 {
            try await driver.write { tx in
                try tx.save(Record(id: .int(Int64(i)), fields: ["n": .int(Int64(i))]), into: users)
                try tx.save(Record(id: 1, fields: ["last": .int(Int64(i))]), into: users)
            }
        }
        try crashImage(of: dir, into: image)
        try await driver.close()
        // A torn record at the end: a commit that was never acknowledged.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: image.path + "/store/journal"))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data([200, 0, 0, 0, 1, 2, 3, 4, 1, 9, 9]))
        try handle.close()
        let recovered = try await open(image)
        #expect(recovered.engine.rebuilds == 1)
        let state = try await recovered.read { tx in (try tx.count(.all, in: users), try tx.get(1, from: users)) }
        #expect(state.0 == 30)
        #expect(state.1?.fields["last"] == 30)
        #expect(try await recovered.integrityCheck().isEmpty)
        try await recovered.close()
        // A clean close leaves nothing to replay.
        let again = try await open(image)
        #expect(again.engine.rebuilds == 0)
        #expect(try await again.read { tx in try tx.count(.all, in: users) } == 30)
        try await again.close()
    }

    /// At durability `full` a commit's journal record goes into zeros written ahead of it (its
    /// fsync then has no new file length to record). The zeros read as the end of the
    /// journal and a store that only reads leaves them; a torn record written into them is
    /// cut when the store opens, zeros and all, so a later commit over the spot never has
    /// part of the torn one after it.
    @Test func durableCommitsWriteIntoZerosAheadAndATornRecordThereIsCut() async throws {
        let dir = try TemporaryDirectory(), image = try TemporaryDirectory()
        defer { dir.remove(); image.remove() }
        let users = self.users
        func journal(_ root: TemporaryDirectory) throws -> [UInt8] {
            try [UInt8](FileHandle(forReadingFrom: URL(fileURLWithPath: root.path + "/store/journal")).readToEnd() ?? Data())
        }
        // No sync point: the journal alone holds these commits.
        let driver = try await open(dir, "?durability=full&sync_every=1000000")
        for i in 1...10 {
            try await driver.write { tx in try tx.save(Record(id: .int(Int64(i)), fields: ["n": .int(Int64(i))]), into: users) }
        }
        let lengths = driver.engine.journalLengths()
        #expect(lengths.synced == lengths.written)
        let written = try journal(dir)
        #expect(written.count >= lengths.written + Journal.preallocationChunk, "\(written.count) bytes for \(lengths.written) of records")
        #expect(written[lengths.written...].allSatisfy { $0 == 0 })
        try crashImage(of: dir, into: image)
        try await driver.close()

        // Reopened as it was: the ten commits, the zeros kept.
        let reopened = try await open(image, "?durability=full")
        #expect(try await reopened.read { tx in try tx.count(.all, in: users) } == 10)
        #expect(try journal(image).count == written.count)
        try await reopened.close()

        // A torn record in the zeros, right after the records (recovery may have added an
        // `applied` mark): a frame that promises 200 bytes and holds 3.
        let (_, _, end) = try Journal.parse(try journal(image))
        #expect(end >= lengths.written)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: image.path + "/store/journal"))
        try handle.seek(toOffset: UInt64(end))
        try handle.write(contentsOf: Data([200, 0, 0, 0, 1, 2, 3, 4, 1, 9, 9]))
        try handle.close()
        let recovered = try await open(image, "?durability=full")
        #expect(try journal(image).count == end, "the torn tail is cut with the zeros behind it")
        #expect(try await recovered.read { tx in try tx.count(.all, in: users) } == 10)
        try await recovered.write { tx in try tx.save(Record(id: 11, fields: ["n": 11]), into: users) }
        try await recovered.close()
        let again = try await open(image)
        #expect(try await again.read { tx in (try tx.count(.all, in: users), try tx.get(11, from: users)?.fields["n"]) } == (11, .int(11)))
        #expect(try await again.integrityCheck().isEmpty)
        try await again.close()
    }

    /// Power loss at durability `normal`: writes that were not fsynced may be lost, in any
    /// order, while the primary files' pages may already be on disk. The image keeps the GDBM
    /// files as they are (every page written back: the worst case) and the journal cut at each
    /// record boundary between its last fsync and its end (a lost record ends the readable
    /// journal). Whatever survives, the store must open sound, show whole commits only, and
    /// show no commit the surviving journal lacks. (Before the first commit after a sync point
    /// fsynced its record, a surviving `applied` mark with the next commit lost left recovery
    /// trusting primary files that held that commit.)
    @Test func powerLossNeverExposesACommitTheSurvivingJournalLacks() async throws {
        let dir = try TemporaryDirectory(), image = try TemporaryDirectory()
        defer { dir.remove(); image.remove() }
        let users = self.users, orders = try CollectionName("orders")
        // A sync point after every second commit, no time floor, no checkpoint.
        let driver = try await open(dir, "?durability=normal&sync_every=2&sync_interval_ms=0&checkpoint_kb=100000")
        func commit(_ n: Int) async throws {
            try await driver.write { tx in
                for i in 0..<5 {
                    let id = RecordID.int(Int64(n * 10 + i))
                    try tx.insert(Record(id: id, fields: ["commit": .int(Int64(n))]), into: users)
                    try tx.insert(Record(id: id, fields: ["commit": .int(Int64(n))]), into: orders)
                }
                try tx.save(Record(id: 1, fields: ["last": .int(Int64(n))]), into: users)
            }
        }
        for n in 1...2 { try await commit(n) }  // the second is followed by a sync point: applied(2)
        try await commit(3)  // journaled and applied to the primary files, no sync point
        let lengths = driver.engine.journalLengths()
        try crashImage(of: dir, into: image)
        try await driver.close()

        let journal = try [UInt8]((FileHandle(forReadingFrom: URL(fileURLWithPath: image.path + "/store/journal")).readToEnd() ?? Data()))
        // The records, then the zeros written ahead of appends (Docs/GDBMDriver.md, "Formats").
        try #require(journal.count >= lengths.written)
        #expect(journal[lengths.written...].allSatisfy { $0 == 0 })
        // Record boundaries from the last fsync to the end of the records.
        var boundaries: [Int] = []
        var offset = Journal.headerSize
        while offset + 8 <= lengths.written {
            let length = Int(journal[offset]) | Int(journal[offset + 1]) << 8 | Int(journal[offset + 2]) << 16 | Int(journal[offset + 3]) << 24
            offset += 8 + length
            if offset >= lengths.synced && offset <= lengths.written { boundaries.append(offset) }
        }
        #expect(offset == lengths.written)
        #expect(!boundaries.isEmpty)
        for cut in boundaries {
            let trial = try TemporaryDirectory()
            defer { trial.remove() }
            try crashImage(of: image, into: trial)
            try Data(journal[0..<cut]).write(to: URL(fileURLWithPath: trial.path + "/store/journal"))
            let (_, records, _) = try Journal.parse(Array(journal[0..<cut]))
            let journaled = records.reduce(0) { n, record in if case .transaction = record { n + 1 } else { n } }
            let recovered = try await open(trial)
            let (userCount, orderCount, last) = try await recovered.read { tx in
                (try tx.count(.all, in: users), try tx.count(.all, in: orders), try tx.get(1, from: users)?.fields["last"])
            }
            // Whole commits only (5 records per collection each, `last` naming the newest),
            // and exactly the commits the surviving journal holds.
            #expect(orderCount == 5 * journaled, "journal cut at \(cut)")
            #expect(userCount == 5 * journaled + 1, "journal cut at \(cut)")
            #expect(last == .int(Int64(journaled)), "journal cut at \(cut)")
            #expect(try await recovered.integrityCheck().isEmpty)
            try await recovered.close()
        }
    }

    @Test func closedSegmentsAreFoldedIntoTheBackupsInTheBackground() async throws {
        let dir = try TemporaryDirectory(), image = try TemporaryDirectory()
        defer { dir.remove(); image.remove() }
        let users = self.users
        let driver = try await open(dir, "?checkpoint_kb=4&sync_every=3&durability=normal&sync_interval_ms=0")
        for i in 1...200 {
            try await driver.write { tx in try tx.insert(Record(id: .int(Int64(i)), fields: ["pad": .string(String(repeating: "x", count: 100))]), into: users) }
        }
        // Small writes commit inline and leave rotations to the writer thread; a write made
        // while one is due queues behind it there. Folds run in the background;
        // `waitForFolds` (the public call a benchmark makes) returns once they are done.
        try await driver.write { _ in }
        await driver.waitForFolds()
        // The active segment's records (its file also holds the zeros written ahead of them).
        #expect(driver.engine.journalLengths().written < 8 << 10)
        let (state, closed) = driver.engine.backupState
        // Folded up to a recent commit (a 4 KiB segment holds about 27 of these commits),
        // and the file says so.
        #expect(state.currentSeq >= 150, "\(state)")
        #expect(state.previousSeq != nil, "\(state)")
        #expect(try BackupState.read(directory: dir.path + "/store") == state)
        #expect(try Journal.closedSegments(in: dir.path + "/store").map(\.path) == closed.map(\.path))
        #expect(FileSystem.exists(dir.path + "/store/" + BackupState.directoryNames[state.current] + "/users.records.gdbm"))
        // What stays after a fold: the segments the older backup needs, those the last fold
        // covered. Folds that lag on a busy machine cover many at once (seven stayed once,
        // with the other tests beside this one, within the bound of Docs/GDBMDriver.md,
        // "Bounds"), so the count is checked after about one more segment of commits,
        // folded on their own: folds that removed nothing would leave about nine.
        for i in 201...240 {
            try await driver.write { tx in try tx.insert(Record(id: .int(Int64(i)), fields: ["pad": .string(String(repeating: "x", count: 100))]), into: users) }
        }
        try await driver.write { _ in }
        await driver.waitForFolds()
        let (later, kept) = driver.engine.backupState
        #expect(later.currentSeq > state.currentSeq, "\(later)")
        #expect(kept.count <= GDBMEngine.closedSegmentsBeforeWaiting + 1, "\(kept.map(\.end))")
        #expect(try Journal.closedSegments(in: dir.path + "/store").map(\.path) == kept.map(\.path))
        try crashImage(of: dir, into: image)
        try await driver.close()
        let recovered = try await open(image)
        #expect(try await recovered.read { tx in try tx.count(.all, in: users) } == 240)
        #expect(try await recovered.integrityCheck().isEmpty)
        try await recovered.close()
    }

    /// More than `flushAfterOps` file ops that rewrite records at their size (a steady update
    /// load) start no flush: gdbm writes them in place, the files do not grow, and their
    /// pages wait for the next sync point instead of an fsync every `flushAfterOps` ops
    /// (Docs/GDBMDriver.md, "Transactions", step 5).
    @Test func updatesInPlaceStartNoFlush() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let users = self.users
        let driver = try await open(dir, "?durability=normal")
        let records = 100
        let text = String(repeating: "a", count: 1000)
        try await driver.write { tx in
            for i in 1...records { try tx.insert(Record(id: .int(Int64(i)), fields: ["text": .string(text)]), into: users) }
        }
        let commits = GDBMEngine.flushAfterOps / records + 2
        for c in 0..<commits {
            // The same length every time, other bytes.
            let changed = String(repeating: c % 2 == 0 ? "b" : "c", count: 1000)
            try await driver.write { tx in
                for i in 1...records { try tx.update(Record(id: .int(Int64(i)), fields: ["text": .string(changed)]), in: users) }
            }
        }
        #expect(commits * records > GDBMEngine.flushAfterOps)
        await driver.engine.waitForFolds()
        await driver.engine.waitForSyncPoints()
        #expect(driver.engine.flushes == 0)
        #expect(try await driver.read { tx in try tx.get(.int(7), from: users) }?.fields["text"] == .string(String(repeating: commits % 2 == 1 ? "b" : "c", count: 1000)))
        try await driver.close()
    }

    /// A commit of more than `flushAfterOps` file ops that grows the primary files by more
    /// than `flushAfterGrowth` starts a flush: the primary files are fsynced in the
    /// background with no `applied` mark (the next commit is not made to fsync its journal
    /// record), so a bulk load's pages reach the disk while it runs.
    @Test func aBulkCommitStartsAFlushWithoutAMark() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let users = self.users
        // A segment that holds the whole commit, so the journal it ends is the active one.
        let driver = try await open(dir, "?durability=normal&checkpoint_kb=65536")
        // Twice the growth a flush needs, spread over the ops.
        let text = String(repeating: "x", count: 2 * GDBMEngine.flushAfterGrowth / GDBMEngine.flushAfterOps)
        try await driver.write { tx in
            for i in 1...(GDBMEngine.flushAfterOps + 100) { try tx.insert(Record(id: .int(Int64(i)), fields: ["n": .int(Int64(i)), "text": .string(text)]), into: users) }
        }
        await driver.engine.waitForFolds()
        // The flush's fsyncs run in the background; waitForFolds does not wait for them.
        await driver.engine.waitForSyncPoints()
        #expect(driver.engine.flushes == 1)
        let (journal, records) = try Journal.open(path: dir.path + "/store/journal")
        journal.close()
        if case .transaction? = records.last {} else { Issue.record("the journal ends in \(String(describing: records.last)), not in the bulk commit") }
        // A small commit does not flush.
        try await driver.write { tx in try tx.insert(Record(id: .int(0), fields: ["n": .int(0)]), into: users) }
        await driver.engine.waitForFolds()
        await driver.engine.waitForSyncPoints()
        #expect(driver.engine.flushes == 1)
        #expect(try await driver.read { tx in try tx.count(.all, in: users) } == GDBMEngine.flushAfterOps + 101)
        try await driver.close()
    }

    /// Appends that are not synced go through the journal's mapping of zeros written ahead
    /// (Docs/GDBMDriver.md, "Formats"): across many chunks of zeros, past the end of the
    /// mapping (a new one is made), with a record larger than a whole mapping, between synced
    /// appends that write into the same zeros, and after reopening (which keeps the zeros):
    /// every record reads back in order, and the file past the records is zeros only.
    @Test func unsyncedAppendsGoThroughTheMappingOfZerosAhead() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.path + "/journal"
        let users = self.users
        func record(_ seq: UInt64) -> JournalRecord {
            // About 40 MiB in all: more than two mappings; seq 30 alone is larger than one.
            let size = seq == 30 ? Journal.mappingSpan + 12_345 : 300_000 + Int(seq) * 1_001
            return .transaction(seq: seq, ops: [.put(.records(users), key: Array("k\(seq)".utf8), value: [UInt8](repeating: UInt8(truncatingIfNeeded: seq), count: size))])
        }
        var expected: [JournalRecord] = []
        var journal = try Journal.create(path: path, baseSeq: 0)
        for seq in UInt64(1)...80 {
            if seq == 60 {
                // Reopened part way: the zeros ahead stay, the appends go on after the records.
                journal.close()
                let reopened = try Journal.open(path: path)
                #expect(reopened.records.count == expected.count)
                journal = reopened.journal
            }
            let synced = seq % 7 == 0
            try journal.append(record(seq), sync: synced, preallocate: 1 << 20)
            expected.append(record(seq))
            #expect(journal.allocated >= journal.size)
        }
        let written = journal.size
        journal.close()
        let bytes = try [UInt8](FileHandle(forReadingFrom: URL(fileURLWithPath: path)).readToEnd() ?? Data())
        #expect(bytes.count > written, "zeros were written ahead of the last record")
        #expect(bytes[written...].allSatisfy { $0 == 0 })
        let (base, records, valid) = try Journal.parse(bytes)
        #expect(base == 0)
        #expect(valid == written)
        #expect(records.count == expected.count)
        let differing = zip(records, expected).filter { Journal.encode($0) != Journal.encode($1) }.map(\.0.seq)
        #expect(differing.isEmpty, "records that read back otherwise: \(differing)")
    }

    /// Opening scans closed segments without decoding their ops: the scan must find the
    /// same base, last commit and last record as a full read, for whole segments, torn
    /// tails, damaged records, and records larger than the scan's 64 KiB buffer.
    @Test func segmentScanAgreesWithAFullRead() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.path + "/journal"
        let journal = try Journal.create(path: path, baseSeq: 41)
        let users = self.users
        for seq in UInt64(42)...60 {
            let size = seq == 50 ? 200_000 : Int(seq) * 7
            try journal.append(.transaction(seq: seq, ops: [.put(.records(users), key: Array("k\(seq)".utf8), value: [UInt8](repeating: UInt8(seq), count: size))]), sync: false)
            if seq % 5 == 0 { try journal.append(.applied(seq: seq), sync: false) }
        }
        journal.close()
        let full = try [UInt8](FileHandle(forReadingFrom: URL(fileURLWithPath: path)).readToEnd() ?? Data())
        func agree(_ what: String) throws {
            let (base, records, _) = try Journal.parse(try [UInt8](FileHandle(forReadingFrom: URL(fileURLWithPath: path)).readToEnd() ?? Data()))
            let scan = try Journal.scanSegment(path: path)
            #expect(scan.baseSeq == base, "\(what)")
            #expect(scan.end == records.reduce(base) { max($0, $1.seq) }, "\(what)")
            #expect(scan.last?.seq == records.last?.seq, "\(what)")
            switch (scan.last, records.last) {
            case (.transaction?, .transaction?), (.applied?, .applied?), (nil, nil): break
            default: Issue.record("\(what): scan ends in \(String(describing: scan.last)), a full read in \(String(describing: records.last))")
            }
        }
        try agree("whole")
        var rng = SplitMix64(seed: 5)
        for trial in 0..<40 {
            var bytes = full
            if trial % 2 == 0 {
                bytes = Array(bytes[0..<(Journal.headerSize + Int(rng.next() % UInt64(full.count - Journal.headerSize)))])
            } else {
                let at = Journal.headerSize + Int(rng.next() % UInt64(full.count - Journal.headerSize))
                bytes[at] ^= 0x5A
            }
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            try agree("trial \(trial)")
        }
    }

    @Test func secondWriterProcessGetsLockedAfterBoundedRetry() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let driver = try await open(dir)
        try await driver.close()
        // Another open file description holding the store lock stands in for another process.
        let fd = Glibc.open(dir.path + "/store/LOCK", O_RDWR)
        #expect(fd >= 0)
        #expect(flock(fd, LOCK_EX | LOCK_NB) == 0)
        let started = Date()
        await expectCode(.locked) { _ = try await open(dir, "?lock_timeout_ms=300") }
        let waited = Date().timeIntervalSince(started)
        // Bounded: it gives up (a generous upper bound: the machine may be loaded).
        #expect(waited >= 0.29 && waited < 60)
        flock(fd, LOCK_UN)
        Glibc.close(fd)
        let after = try await open(dir, "?lock_timeout_ms=300")
        try await after.close()
    }

    @Test func secondProcessIsLockedOutWhileTheStoreIsOpen() async throws {
        let flockTool = try #require(["/usr/bin/flock", "/bin/flock"].first(where: FileManager.default.isExecutableFile(atPath:)), "flock (util-linux) is missing")
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let driver = try await open(dir)
        let result = try await ChildProcess.run(flockTool, ["--nonblock", dir.path + "/store/LOCK", "true"])
        #expect(result.status != .exited(0), "another process must not get the store lock")
        try await driver.close()
    }

    @Test func filesAreGenuineGDBMDatabasesForGdbmtool() async throws {
        // scripts/install-deps installs gdbmtool; without it this test fails rather than skips.
        let tool = try #require(["/usr/bin/gdbmtool", "/usr/local/bin/gdbmtool"].first(where: FileManager.default.isExecutableFile(atPath:)), "gdbmtool is not installed (scripts/install-deps installs it)")
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let users = self.users
        let driver = try await open(dir)
        try await driver.write { tx in
            try tx.prepare(CollectionSchema(name: users, idKind: .int, uniqueConstraints: [UniqueConstraint(["name"])]))
            for i in 1...12 { try tx.insert(Record(id: .int(Int64(i)), fields: ["name": .string("u\(i)")]), into: users) }
        }
        try await driver.close()
        func run(_ file: String, _ command: String) throws -> String {
            let result = try ChildProcess.run(tool, ["-N", "-q", "-r", dir.path + "/store/" + file, command])
            let out = result.outputText + result.errorText
            #expect(result.status == .exited(0), "gdbmtool \(file) \(command): \(out)")
            return out
        }
        // The primary files, and the current backup (a clean close folds the journal into it).
        for dirName in ["data", try BackupState.currentDirectoryName(store: dir.path + "/store")] {
            #expect(try run(dirName + "/users.records.gdbm", "count").contains("12"))
            #expect(try run(dirName + "/users.index.gdbm", "count").contains("12"))
            #expect(try run(dirName + "/_depotsys_catalog.gdbm", "count").contains("1"))
            #expect(try run(dirName + "/_depotsys_catalog.gdbm", "list").contains("c:users"))
        }
    }

    @Test func sameResultsAsTheMemoryDriverUnderRandomWork() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let items = try CollectionName("items")
        let gdbm = try await open(dir, "?durability=normal")
        let memory = MemoryDriver()
        let schema = CollectionSchema(name: items, idKind: .int, uniqueConstraints: [UniqueConstraint(["code"])], indexes: [IndexDefinition(["tag"]), IndexDefinition(["tag", "n"])])
        for driver in [gdbm, memory] as [any StorageDriver] { try await driver.write { tx in try tx.prepare(schema) } }
        var rng = SplitMix64(seed: 42)
        let values: [FieldValue] = [1, 2, 2.0, 3.5, -0.0, "a", "b", true, .null, [1, 2]]
        for round in 0..<60 {
            var ops: [(Int, Record)] = []
            for _ in 0..<Int(rng.next() % 8 + 1) {
                let id = RecordID.int(Int64(rng.next() % 40))
                var fields: [String: FieldValue] = ["n": values[Int(rng.next() % UInt64(values.count))], "tag": values[Int(rng.next() % 4)]]
                if rng.next() % 3 == 0 { fields["code"] = .int(Int64(rng.next() % 30)) }
                ops.append((Int(rng.next() % 5), Record(id: id, fields: fields)))
            }
            let batch = ops
            var logs: [[String]] = []
            for driver in [gdbm, memory] as [any StorageDriver] {
                logs.append(try await driver.write { tx -> [String] in
                    var log: [String] = []
                    for (kind, record) in batch {
                        do {
                            switch kind {
                            case 0: try tx.insert(record, into: items)
                            case 1: try tx.update(record, in: items)
                            case 2: log.append(try tx.save(record, into: items).rawValue)
                            case 3: log.append(String(describing: try tx.insert(fields: record.fields, into: items)))
                            default: log.append(String(try tx.delete(record.id, from: items)))
                            }
                            log.append("ok")
                        } catch let error as DepotError { log.append(error.code.name) }
                    }
                    return log
                })
            }
            #expect(logs[0] == logs[1], "round \(round)")
        }
        let queries: [Query] = [
            Query(), Query(filter: Field("tag") == 2), Query(filter: Field("tag").in([1, 2.0, "a"])),
            Query(filter: Field("tag") == 2 && Field("n") == "a"), Query(filter: Field("code") == 7.0),
            Query(filter: Field("n") > 1, sort: [Field("n").descending], offset: 2, limit: 5), Query(filter: Field("tag") == FieldValue.null),
            Query(filter: Field("code").in([1, 2, 3, 4, 5, 6, 7, 8])), Query(filter: Field.id.in([3, 5, 7.0])),
            Query(filter: .not(Field("tag") == 1), sort: [Field("tag").ascending, Field("n").descending]),
            // Filters on the id only: answered from the record keys (no record decoded).
            Query(filter: Field.id >= 10, limit: 5), Query(filter: Field.id > 5 && Field.id < 30, sort: [Field.id.descending], offset: 2, limit: 4),
            Query(filter: .not(Field.id == 3)), Query(filter: Field.id < 20 || Field.id >= 35, offset: 3),
        ]
        for query in queries {
            let got = try await gdbm.read { tx in (try tx.query(query, in: items), try tx.count(query.filter, in: items)) }
            let want = try await memory.read { tx in try tx.query(query, in: items) }
            #expect(got.0 == want, "\(query)")
            if query.offset == 0 && query.limit == nil { #expect(got.1 == want.count) }
        }
        // The same id-only queries inside a write transaction, over its own pending changes.
        var inside: [[[Record]]] = []
        for driver in [gdbm, memory] as [any StorageDriver] {
            inside.append(try await driver.write { tx in
                try tx.save(Record(id: 12, fields: ["n": "changed"]), into: items)
                _ = try tx.delete(11, from: items)
                try tx.insert(Record(id: 1000, fields: ["n": 1]), into: items)
                return try queries.suffix(4).map { try tx.query($0, in: items) }
            })
        }
        #expect(inside[0] == inside[1])
        #expect(try await gdbm.integrityCheck().isEmpty)
        try await gdbm.close()
    }
}
