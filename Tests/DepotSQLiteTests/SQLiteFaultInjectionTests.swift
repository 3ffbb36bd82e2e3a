import CSQLite
import DepotConformance
import DepotCore
import Foundation
import Testing
@testable import DepotSQLite

/// Fails every counted file operation of a commit, of a commit followed by the writer's
/// checkpoint, and of opening a crashed store (WAL recovery), committing and closing, in
/// turn, once and for good, with `EIO` and `ENOSPC`, through ``SQLiteFaultVFS``
/// (Docs/SQLiteDriver.md, "I/O fault injection"). After each failure: the error is a typed
/// `.io`; reads through the same driver show the old or the new state of the failed
/// transaction, never a mix; once the disk works again the next commit is accepted; and a
/// fresh driver on the real files finds exactly what the failed driver last showed plus
/// that commit, with every acknowledged commit, and a sound file.
@Suite struct SQLiteFaultInjectionTests: FaultTrialCommits {
    /// What is being failed.
    enum Step: String, Sendable, CaseIterable, CustomStringConvertible {
        /// One write transaction (two collections, several records).
        case commit
        /// The same commit, with the writer checkpointing after every commit (so the
        /// checkpoint's reads, writes and syncs are counted too) and no inline transactions.
        case commitAndCheckpoint
        /// Opening a crash image (database and WAL, no shared memory: recovery reads the WAL),
        /// the same commit, and closing (the last connection's checkpoint and WAL removal).
        case openCommitClose

        var description: String { rawValue }
    }


    static func open(_ path: String, _ vfs: SQLiteFaultVFS, _ durability: Durability, _ step: Step) async throws -> SQLiteDriver {
        var settings = SQLiteTestSettings(vfs: vfs.name)
        if step == .commitAndCheckpoint { settings.checkpointPages = 1 }
        return try await SQLiteDriver(path: path, durability: durability, inlineTransactions: step != .commitAndCheckpoint, testSettings: settings)
    }

    /// A store in the old state: for `.openCommitClose` a crash image (database and WAL
    /// copied while the writer is open), otherwise open through `vfs`.
    static func prepare(_ dir: ScratchDirectory, _ vfs: SQLiteFaultVFS, _ durability: Durability, _ step: Step) async throws -> SQLiteDriver? {
        guard step == .openCommitClose else {
            let driver = try await open(dir.store, vfs, durability, step)
            try await driver.write { tx in try Self.setUp(tx) }
            return driver
        }
        let origin = dir.path + "/origin.sqlite"
        let driver = try await SQLiteDriver(path: origin, durability: durability)
        try await driver.write { tx in try Self.setUp(tx) }
        for suffix in ["", "-wal"] { try FileManager.default.copyItem(atPath: origin + suffix, toPath: dir.store + suffix) }
        try await driver.close()
        return nil
    }

    /// The step's operations, counted on a store like the tested ones.
    static func operations(_ durability: Durability, _ step: Step) async throws -> [String] {
        let dir = try ScratchDirectory()
        let vfs = try SQLiteFaultVFS()
        var driver = try await prepare(dir, vfs, durability, step)
        vfs.disarm()
        if driver == nil { driver = try await open(dir.store, vfs, durability, step) }
        try await driver?.write { tx in try Self.change(tx) }
        if step == .openCommitClose { try await driver?.close() }
        let log = vfs.operationLog
        try await driver?.close()
        return log
    }

    @Test(arguments: Step.allCases, [Durability.full, .normal])
    func operationsAreCounted(step: Step, durability: Durability) async throws {
        let log = try await Self.operations(durability, step)
        // Every commit writes the WAL; with durability full it syncs it too.
        #expect(log.contains("write"), "\(log)")
        #expect(log.contains("sync") == (durability == .full || step != .commit), "\(log)")
        if step == .openCommitClose { #expect(log.contains("open") && log.contains("delete"), "\(log)") }
        // The counting is deterministic: the same step counts the same operations again.
        #expect(try await Self.operations(durability, step) == log)
    }

    @Test(arguments: Step.allCases, [Durability.full, .normal])
    func everyOperationFails(step: Step, durability: Durability) async throws {
        let operations = try await Self.operations(durability, step)
        var failuresSeen = 0
        for kind in [SQLiteFaultVFS.Kind.eio, .enospc] {
            for mode in [SQLiteFaultVFS.Mode.once, .always] {
                for n in 1...operations.count {
                    failuresSeen += try await Self.fail(at: n, operations: operations, step: step, durability: durability, mode: mode, kind: kind)
                }
            }
        }
        // Injected failures reach the caller (some hit optional work: a checkpoint, a close).
        #expect(failuresSeen > 0)
        print("SQLite fault injection, \(step), \(durability): \(operations.count) operations × EIO/ENOSPC × once/always = \(operations.count * 4) trials, \(failuresSeen) reported an error")
    }

    /// Found by `everyOperationFails(.openCommitClose)`: a read failing during the open's
    /// `quick_check` came back as a line of its result ("unable to get the page. error
    /// code=266"), which the driver reported as `.corrupted`; it is `.io`.
    @Test func aPageTheCheckCannotReadIsAnIOFailure() throws {
        let failure = try #require(SQLiteErrorMapping.readFailure(inCheckLines: ["*** in database main ***\nPage 6: unable to get the page. error code=266"]))
        #expect(failure.code == .io)
        #expect((failure.cause as? SQLiteResult)?.extendedCode == 266)
        #expect(SQLiteErrorMapping.readFailure(inCheckLines: ["*** in database main ***\nPage 5: unable to get the page. error code=11"]) == nil)
        #expect(SQLiteErrorMapping.readFailure(inCheckLines: ["Page 2 is never used", "row 3 missing from index i"]) == nil)
    }

    /// One trial: returns 1 when the step reported an error.
    static func fail(
        at n: Int, operations: [String], step: Step, durability: Durability, mode: SQLiteFaultVFS.Mode, kind: SQLiteFaultVFS.Kind
    ) async throws -> Int {
        let dir = try ScratchDirectory()
        let vfs = try SQLiteFaultVFS()
        var driver = try await prepare(dir, vfs, durability, step)
        let context = "\(step), \(durability), \(mode) \(kind), operation \(n) of \(operations.count) (\(operations[n - 1]))"
        vfs.arm(failingAt: n, mode: mode, kind: kind)
        var failure: DepotError?
        var committed = false
        do {
            if driver == nil { driver = try await open(dir.store, vfs, durability, step) }
            try await driver?.write { tx in try Self.change(tx) }
            committed = true
            if step == .openCommitClose { try await driver?.close() }
        } catch let error as DepotError {
            failure = error
        }
        #expect(vfs.operationLog.prefix(n - 1) == operations.prefix(n - 1), "\(context): the same operations up to the failure")
        if let failure {
            #expect(failure.code == .io, "\(context): \(String(reflecting: failure))")
            let primary = (failure.cause as? SQLiteResult)?.primaryCode
            #expect(primary == SQLITE_IOERR || primary == SQLITE_FULL || primary == SQLITE_CANTOPEN, "\(context): \(String(reflecting: failure))")
            if kind == .enospc && operations[n - 1] == "write" && primary == SQLITE_FULL {
                #expect(failure.message.contains("full"), "\(context): a full disk says so")
            }
        }
        if mode == .always, let driver, committed == false || step != .openCommitClose {
            // While the disk is dead, reads either fail with a typed error or show a whole state.
            do {
                let seen = try await state(driver)
                #expect(seen == old || seen == new, "\(context): while failing, \(seen)")
            } catch let error as DepotError {
                #expect(error.code == .io || error.code == .locked, "\(context): \(String(reflecting: error))")
            }
        }
        vfs.disarm()
        var expected: State
        if let live = driver, !(step == .openCommitClose && committed) {
            // The failed driver recovers once the disk works: it shows the old or new state,
            // and takes the next commit.
            let seen = try await state(live)
            #expect(seen == old || seen == new, "\(context): after the failure, \(seen)")
            if failure == nil { #expect(seen == new, "\(context): an acknowledged commit is visible") }
            try await live.write { tx in try Self.next(tx) }
            expected = seen
            expected.a[3] = "three"
            #expect(try await state(live) == expected, "\(context)")
            try await live.close()
        } else {
            expected = committed ? new : old
        }
        // A fresh driver on the real files (default VFS) finds the same.
        let fresh = try await SQLiteDriver(path: dir.store, durability: durability)
        let found = try await state(fresh)
        if driver == nil {
            #expect(found == old, "\(context): the store did not open; reopened, \(found)")
        } else if step == .openCommitClose && committed {
            #expect(found == new, "\(context): an acknowledged commit survives; reopened, \(found)")
        } else {
            #expect(found == expected, "\(context): reopened, \(found)")
        }
        #expect(try await fresh.integrityCheck() == [], "\(context)")
        try await fresh.close()
        return failure == nil ? 0 : 1
    }
}
