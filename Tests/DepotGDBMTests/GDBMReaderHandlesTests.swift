import DepotCore
import Foundation
import Testing

@testable import DepotGDBM

/// Read transactions that would wait for the writer's gdbm handle fetch through reader
/// handles of their own (``ReaderHandles``); these tests show that they do, and that what
/// they read is never older than the last commit: the handles are reopened after the writer
/// changes the files.
@Suite struct GDBMReaderHandlesTests {
    let users: CollectionName

    init() throws { users = try CollectionName("users") }

    static func open(_ dir: TemporaryDirectory) async throws -> GDBMDriver {
        try await GDBMDriver(location: StoreLocation("gdbm:" + dir.path + "/store?durability=normal"))
    }

    /// Rounds of: many reads through the reader handles (``FileSet/readerHandlesFirst``),
    /// then a commit that rewrites records, adds records that split gdbm's buckets and
    /// deletes some. Every read after a commit gives that commit's values: a handle opened
    /// before it is never used (with the change count not bumped, deleted records are still
    /// found).
    @Test func readsAfterACommitSeeIt() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let users = self.users
        let driver = try await Self.open(dir)
        var expected: [Int64: String] = [:]
        try driver.writeBlocking { tx in
            for i in 1...500 as ClosedRange<Int64> {
                try tx.insert(Record(id: .int(i), fields: ["v": .string("r0-\(i)"), "w": .int(i)]), into: users)
                expected[i] = "r0-\(i)"
            }
        }
        guard let readers = driver.engine.primary.readers else {
            Issue.record("the primary files have no reader handles")
            return
        }
        driver.engine.primary.readerHandlesFirst = true
        var next: Int64 = 501
        for round in 1...12 {
            for pass in 0..<2 {
                for (id, value) in expected where id % 3 == Int64(pass) {
                    let got = try driver.readBlocking { tx in try tx.get(.int(id), from: users) }
                    #expect(got?.fields["v"] == .string(value), "round \(round): record \(id)")
                }
            }
            // The third of the records left, read as a model read does (`withFields`).
            for (id, value) in expected where id % 3 == 2 {
                let got = try driver.readBlocking { tx in try tx.withFields(of: .int(id), from: users) { try $0.value(forField: "v") } }
                #expect(got == .some(.string(value)), "round \(round): record \(id) through withFields")
            }
            // A commit: every tenth record rewritten (another length), 300 added (gdbm
            // splits buckets and grows its directory), every seventh one deleted.
            let added = next..<(next + 300)
            let deleted = expected.keys.filter { $0 % 7 == Int64(round % 7) }
            try driver.writeBlocking { tx in
                for id in expected.keys where id % 10 == Int64(round % 10) {
                    try tx.update(Record(id: .int(id), fields: ["v": .string("r\(round)-\(id)-" + String(repeating: "x", count: round)), "w": .int(id)]), in: users)
                }
                for id in added { try tx.insert(Record(id: .int(id), fields: ["v": .string("r\(round)-\(id)"), "w": .int(id)]), into: users) }
                for id in deleted { _ = try tx.delete(.int(id), from: users) }
            }
            for id in expected.keys where id % 10 == Int64(round % 10) { expected[id] = "r\(round)-\(id)-" + String(repeating: "x", count: round) }
            for id in added { expected[id] = "r\(round)-\(id)" }
            for id in deleted {
                expected[id] = nil
                let got = try driver.readBlocking { tx in try tx.get(.int(id), from: users) }
                #expect(got == nil, "round \(round): deleted record \(id)")
                let fields = try driver.readBlocking { tx in try tx.withFields(of: .int(id), from: users) { try $0.value(forField: "v") } }
                #expect(fields == nil, "round \(round): deleted record \(id) through withFields")
            }
            next += 300
        }
        // Every round reopened the handles after its commit (a slot opens one per file it
        // reads): the reads went through them.
        #expect(readers.opens >= 12)
        try await driver.close()
    }

    /// Two threads read without pause while a third commits, pausing now and then: each
    /// record's two fields are always written equal, so a read through a handle whose view
    /// of the file is stale or torn shows up as unequal fields, a missing record or an error.
    /// The two readers meet at the writer's handle, so they open reader handles of their own
    /// once the files have been quiet for a moment.
    @Test func readersBesideAWriterSeeWholeRecords() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let users = self.users
        let driver = try await Self.open(dir)
        let count: Int64 = 2_000
        try driver.writeBlocking { tx in
            for i in 1...count { try tx.insert(Record(id: .int(i), fields: ["a": .int(0), "b": .int(0)]), into: users) }
        }
        let stop = Locked(false)
        let problems = Locked<[String]>([])
        let readsDone = Locked(0)
        let threads = (0..<2).map { t in
            Thread {
                var random = SystemRandomNumberGenerator()
                var reads = 0
                while !stop.withLock({ $0 }) {
                    let id = Int64.random(in: 1...count, using: &random)
                    do {
                        let record = try driver.readBlocking { tx in try tx.get(.int(id), from: users) }
                        if record == nil || record?.fields["a"] != record?.fields["b"] {
                            problems.withLock { $0.append("thread \(t): record \(id) read as \(String(describing: record))") }
                        }
                    } catch {
                        problems.withLock { $0.append("thread \(t): record \(id): \(error)") }
                    }
                    reads += 1
                }
                readsDone.withLock { $0 += reads }
            }
        }
        for thread in threads { thread.start() }
        // Commits with pauses in between, so the readers' slots reopen their handles
        // between some of them; values grow, so records change length.
        for round in 1...60 {
            try driver.writeBlocking { tx in
                for id in stride(from: Int64(round % 50) + 1, through: count, by: 50) {
                    let value = FieldValue.string(String(repeating: "v", count: round))
                    try tx.update(Record(id: .int(id), fields: ["a": value, "b": value]), in: users)
                }
            }
            if round % 3 == 0 { try await Task.sleep(for: .milliseconds(5)) }
        }
        // The files are quiet now: reads that meet each other open reader handles.
        let deadline = Date().addingTimeInterval(10)
        while (driver.engine.primary.readers?.opens ?? 0) == 0, Date() < deadline { try await Task.sleep(for: .milliseconds(5)) }
        stop.withLock { $0 = true }
        while readsDone.withLock({ $0 }) == 0 || threads.contains(where: { !$0.isFinished }) { try await Task.sleep(for: .milliseconds(1)) }
        #expect(problems.withLock { $0 }.isEmpty, "\(problems.withLock { $0.prefix(5) })")
        #expect(driver.engine.primary.readers?.opens ?? 0 > 0, "the readers used their own handles")
        try await driver.close()
    }

    /// While a stream reads a collection with gdbm's mapping off, reads use the writer's
    /// handle (a reader handle would map the file's pages in), even when told to prefer the
    /// reader handles; after it, the reader handles again.
    @Test func aStreamKeepsReadsOffTheReaderHandles() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let users = self.users
        let driver = try await Self.open(dir)
        try driver.writeBlocking { tx in
            for i in 1...300 as ClosedRange<Int64> { try tx.insert(Record(id: .int(i), fields: ["v": .int(i)]), into: users) }
        }
        guard let readers = driver.engine.primary.readers else {
            Issue.record("the primary files have no reader handles")
            return
        }
        driver.engine.primary.readerHandlesFirst = true
        let hold = try driver.engine.read { tx in try tx.beginUnmappedReads(of: users) }
        #expect(readers.unmappedStreams.load(ordering: .relaxed) == 1)
        for i in 1...300 as ClosedRange<Int64> {
            #expect(try driver.readBlocking { tx in try tx.get(.int(i), from: users) }?.fields["v"] == .int(i))
        }
        #expect(readers.opens == 0)
        hold?.end()
        #expect(readers.unmappedStreams.load(ordering: .relaxed) == 0)
        for i in 1...300 as ClosedRange<Int64> {
            #expect(try driver.readBlocking { tx in try tx.get(.int(i), from: users) }?.fields["v"] == .int(i))
        }
        #expect(readers.opens > 0)
        try await driver.close()
    }
}
