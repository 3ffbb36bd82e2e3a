import DepotCore
@testable import DepotSQLite
import Foundation
import Testing

/// Where SQLite transactions run (Docs/SQLiteDriver.md, "Where transactions run"): inline
/// on the caller's thread when the connection and its locks can be taken without waiting,
/// on the connection's thread otherwise; an inline transaction that outgrows its step
/// budget runs again there; checkpoints never run inline.
@Suite struct SQLiteInlineTests {
    let items: CollectionName
    init() throws { items = try CollectionName("items") }

    /// Where the code calling it runs: `"driver"` on a thread of the driver's, `"caller"` on
    /// the caller's own (here, Swift's cooperative pool).
    static func threadName() -> String { BlockingExecutor.isWorkerThread ? "driver" : "caller" }

    func fill(_ driver: SQLiteDriver, count: Int) async throws {
        try await driver.write { tx in
            for n in 0..<count { try tx.insert(Record(id: .int(Int64(n)), fields: ["n": .int(Int64(n))]), into: self.items) }
        }
    }

    @Test func smallTransactionsRunInlineAtDurabilityNormalAndFullWritesKeepTheirThread() async throws {
        let dir = try ScratchDirectory()
        for (durability, inline) in [(Durability.normal, true), (.full, true), (.normal, false)] {
            let path = dir.path + "/\(durability)-\(inline).sqlite"
            let driver = try await SQLiteDriver(path: path, durability: durability, inlineTransactions: inline)
            try await fill(driver, count: 10)
            // The first read starts a reader connection; later ones find it idle.
            _ = try await driver.read { tx in try tx.get(1, from: self.items) }
            let (readThread, three) = try await driver.read { tx in (Self.threadName(), try tx.get(3, from: self.items)) }
            #expect(three?.fields["n"] == 3)
            let writeThread = try await driver.write { tx in
                try tx.insert(Record(id: 100, fields: ["n": 100]), into: self.items)
                return Self.threadName()
            }
            #expect(readThread.hasPrefix("driver") == !inline, "read at \(durability), inline \(inline): ran on '\(readThread)'")
            let writeInline = inline && durability == .normal
            #expect(writeThread.hasPrefix("driver") == !writeInline, "write at \(durability), inline \(inline): ran on '\(writeThread)'")
            #expect(try await driver.read { tx in try tx.count(.all, in: self.items) } == 11)
            try await driver.close()
        }
    }

    /// `readWithoutWaiting` (what `Collection.get` tries first) runs on the calling thread when
    /// a connection is free, and declines without running with inline transactions off.
    @Test func readsWithoutWaitingRunOnTheCallersThreadOnlyWithInlineTransactions() async throws {
        let dir = try ScratchDirectory()
        for inline in [true, false] {
            let driver = try await SQLiteDriver(path: dir.path + "/rww-\(inline).sqlite", durability: .normal, inlineTransactions: inline)
            try await fill(driver, count: 10)
            var calls = 0
            var seen: (String, FieldValue?)?
            let ran = try driver.readWithoutWaiting { tx in
                calls += 1
                seen = (Self.threadName(), try tx.get(3, from: self.items)?.fields["n"])
            }
            #expect(ran == inline && calls == (inline ? 1 : 0), "inline \(inline)")
            if inline {
                #expect(seen?.0 == "caller" && seen?.1 == 3)
            }
            let store = try await Store(driver: driver)
            #expect(try await store.collection(items).get(3)?.fields["n"] == 3, "inline \(inline)")
            #expect(try await store.collection(items).get(99) == nil, "inline \(inline)")
            try await driver.close()
        }
    }

    @Test func inlineTransactionsOverTheStepBudgetRunAgainOnTheirThreadWithTheSameResult() async throws {
        let dir = try ScratchDirectory()
        let driver = try await SQLiteDriver(path: dir.store, durability: .normal)
        let total = SQLiteDriver.inlineStepBudget * 3
        try await fill(driver, count: total)
        _ = try await driver.read { tx in try tx.get(1, from: self.items) }

        // A scan longer than the budget: abandoned inline, run again on the reader's thread.
        let calls = Locked<[String]>([])
        let sum = try await driver.read { tx in
            calls.withLock { $0.append(Self.threadName()) }
            var sum: Int64 = 0
            try tx.forEach(Query(), in: self.items) { record in
                if case .int(let n)? = record.fields["n"] { sum += n }
                return true
            }
            return sum
        }
        #expect(sum == Int64(total * (total - 1) / 2))
        let readCalls = calls.withLock { $0 }
        #expect(readCalls.count == 2 && readCalls.last?.hasPrefix("driver") == true, "\(readCalls)")

        // A body that swallows the budget's error still runs again: its answer is not trusted.
        let swallowed = try await driver.read { tx -> Int in
            var seen = 0
            do {
                try tx.forEach(Query(), in: self.items) { _ in seen += 1; return true }
            } catch {}
            return seen
        }
        #expect(swallowed == total)

        // A long write: rolled back inline, run again on the writer's thread, committed once.
        let writes = Locked<[String]>([])
        try await driver.write { tx in
            writes.withLock { $0.append(Self.threadName()) }
            for n in total..<(total * 2) { try tx.insert(Record(id: .int(Int64(n)), fields: ["n": .int(Int64(n))]), into: self.items) }
        }
        let writeCalls = writes.withLock { $0 }
        #expect(writeCalls.count == 2 && writeCalls.last?.hasPrefix("driver") == true, "\(writeCalls)")
        #expect(try await driver.read { tx in try tx.count(.all, in: self.items) } == total * 2)
        try await driver.close()
    }

    @Test func aWriteLockHeldElsewhereSendsTheWriteToItsThreadWhereItWaits() async throws {
        let dir = try ScratchDirectory()
        let driver = try await SQLiteDriver(path: dir.store, durability: .normal, busyTimeoutMilliseconds: 10_000)
        try await fill(driver, count: 1)
        let other = try SQLiteConnection(path: dir.store, create: false, busyTimeoutMilliseconds: 1000)
        try other.execute("BEGIN IMMEDIATE")
        let started = ContinuousClock.now
        let writer = Task {
            try await driver.write { tx in
                try tx.insert(Record(id: 2, fields: ["n": 2]), into: self.items)
                return Self.threadName()
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        try other.execute("COMMIT")
        other.close()
        let thread = try await writer.value
        #expect(thread.hasPrefix("driver"), "\(thread)")
        #expect(ContinuousClock.now - started >= .milliseconds(300))
        #expect(try await driver.read { tx in try tx.get(2, from: self.items) } == Record(id: 2, fields: ["n": 2]))
        try await driver.close()
    }

    /// An inline read takes the writer connection when it is free (its page cache survives
    /// its own commits) and an idle reader while a write holds the writer; both see the
    /// committed records. The connection is told by the statement log's `connection` label.
    @Test func inlineReadsTakeTheFreeWriterAndAReaderWhileAWriteRuns() async throws {
        let dir = try ScratchDirectory()
        let log = LogCapture()
        let driver = try await SQLiteDriver(path: dir.store, durability: .normal, logger: log.logger)
        try await fill(driver, count: 3)
        let snapshotOn = { (from: Int, connection: String) in
            log.entries[from...].contains { $0.message.hasPrefix("PRAGMA data_version") && $0.connection == connection }
        }
        var seen = log.entries.count
        #expect(try await driver.read { tx in try tx.get(1, from: self.items) } == Record(id: 1, fields: ["n": 1]))
        #expect(snapshotOn(seen, "writer"), "\(log.entries[seen...])")
        #expect(!log.entries[seen...].contains { $0.connection == "reader" })
        // A write holding the writer connection, from a thread of its own (not the pool's),
        // until the read below is done. Its wait is long, and released as soon as the read
        // ends or the test fails: in a full test run other tests can hold the cooperative pool
        // for tens of seconds between the write's start and the read.
        let writing = Locked(false), failure = Locked<String?>(nil), release = DispatchSemaphore(value: 0)
        defer { release.signal() }
        let holder = Thread {
            do {
                try driver.writeBlocking { tx in
                    try tx.insert(Record(id: 10, fields: ["n": 10]), into: self.items)
                    writing.withLock { $0 = true }
                    _ = release.wait(timeout: .now() + .seconds(300))
                }
            } catch {
                failure.withLock { $0 = "\(error)" }
            }
        }
        holder.start()
        for _ in 0..<5000 where !writing.withLock({ $0 }) && failure.withLock({ $0 }) == nil {
            try await Task.sleep(for: .milliseconds(1))
        }
        try #require(writing.withLock { $0 }, "the holding write did not start: \(failure.withLock { $0 } ?? "timeout")")
        seen = log.entries.count
        let two = try await driver.read { tx in try tx.get(2, from: self.items) }
        release.signal()
        #expect(two == Record(id: 2, fields: ["n": 2]))
        #expect(snapshotOn(seen, "reader"), "\(log.entries[seen...])")
        // Once the write has committed, a read sees it.
        var ten: Record?
        for _ in 0..<1000 where ten == nil {
            ten = try await driver.read { tx in try tx.get(10, from: self.items) }
            if ten == nil { try await Task.sleep(for: .milliseconds(5)) }
        }
        #expect(ten == Record(id: 10, fields: ["n": 10]))
        try await driver.close()
    }

    @Test func inlineCommitsLeaveCheckpointsToTheWriterSoTheLogStaysBounded() async throws {
        let dir = try ScratchDirectory()
        let driver = try await SQLiteDriver(path: dir.store, durability: .normal)
        // Each commit adds about three 8 KiB pages to the log: 1,500 commits would leave
        // some 4,500 pages (over 36 MB) without checkpoints.
        let blob = FieldValue.bytes(Data(repeating: 7, count: 20_000))
        for n in 0..<1500 {
            try await driver.write { tx in _ = try tx.save(Record(id: .int(Int64(n % 50)), fields: ["b": blob]), into: self.items) }
        }
        // Let a queued checkpoint finish, then commit once more so the log restarts.
        _ = try await driver.read { tx in try tx.count(.all, in: self.items) }
        try await driver.write { tx in _ = try tx.save(Record(id: 0, fields: ["b": blob]), into: self.items) }
        let wal = try FileManager.default.attributesOfItem(atPath: dir.store + "-wal")[.size] as? Int ?? 0
        #expect(wal > 0 && wal < 16_000_000, "WAL size \(wal)")
        #expect(try await driver.read { tx in try tx.count(.all, in: self.items) } == 50)
        try await driver.close()
    }

    @Test func theInlineOptionOfTheStoreString() async throws {
        let dir = try ScratchDirectory()
        let off = try await SQLiteDriver(StoreLocation("sqlite:\(dir.path)/off.sqlite?inline=false"))
        let on = try await SQLiteDriver(StoreLocation("sqlite:\(dir.path)/on.sqlite"))
        #expect(!off.inlineTransactions && on.inlineTransactions)
        try await off.close()
        try await on.close()
        let error = await #expect(throws: DepotError.self) { _ = try await SQLiteDriver(StoreLocation("sqlite:\(dir.path)/x.sqlite?inline=maybe")) }
        #expect(error?.code == .invalidStore && error?.message.contains("inline") == true)
    }
}

