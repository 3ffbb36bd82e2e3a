import DepotConformance
import DepotCore
import Foundation
import Testing

@testable import DepotGDBM

#if canImport(Glibc)
import Glibc
#endif

/// Fails every operation of the driver's file layer in turn, once and for good, with `EIO`
/// and `ENOSPC`, through ``GDBMFaultPlan`` (Docs/GDBMDriver.md, "I/O fault injection"):
/// during a commit, during a commit that makes a sync point and a checkpoint, and while
/// opening a store whose journal must be replayed. After each failure the error is a typed
/// `.io`; the driver shows the old or the new state of the failed transaction, and once the
/// disk works again (after repairing its files, when the failure came after the commit was
/// journaled) takes the next commit; and a fresh driver on the real files, and one on the
/// image kill -9 would leave, find the same state, never a mix, with every acknowledged
/// commit, and pass their integrity check.
@Suite struct GDBMFaultInjectionTests: FaultTrialCommits {
    /// What is being failed.
    enum Step: String, Sendable, CaseIterable, CustomStringConvertible {
        /// One write transaction (two collections, several records).
        case commit
        /// The same commit in a store whose journal limit is tiny, so that the commit makes a
        /// sync point and folds the journal into the backup files (a checkpoint).
        case commitAndCheckpoint
        /// Opening a store whose journal ends in a transaction the files lack (its apply
        /// failed): recovery rebuilds the primary files from the backup and the journal.
        case recovery
        /// Opening a store whose journal ends in `checkpointBegin` (the checkpoint failed
        /// while writing the backup files): recovery copies the primary files over the backup
        /// and starts a fresh journal.
        case recoveryFromCheckpoint

        /// A step that opens a store prepared by a commit that failed part way.
        var isRecovery: Bool { self == .recovery || self == .recoveryFromCheckpoint }

        var description: String { rawValue }
    }


    static func options(_ durability: Durability, _ step: Step) -> EngineOptions {
        var options = EngineOptions()
        options.durability = durability
        // Smaller than any transaction record, larger than a fresh journal's header.
        if step == .commitAndCheckpoint || step == .recoveryFromCheckpoint { options.checkpointBytes = 64 }
        return options
    }

    /// A store directory with a fault plan installed; removed (plan and files) by `finish()`.
    final class FaultyStore {
        let root: TemporaryDirectory
        let path: String
        let plan: GDBMFaultPlan

        init() throws {
            root = try TemporaryDirectory()
            path = try GDBMDriver.absolute(root.path + "/store")
            plan = GDBMFaultPlan(directory: path)
            GDBMFaults.install(plan)
        }

        func finish() {
            GDBMFaults.remove(plan)
            root.remove()
        }
    }

    /// A store in the old state, with its driver open; for `.recovery` a closed store whose
    /// journal holds the new state too, but whose files lack it: the tested commit was
    /// acknowledged, then failed to apply at operation `applyFailure` (its first gdbm store).
    static func prepare(_ store: FaultyStore, _ durability: Durability, _ step: Step, applyFailure: Int) async throws -> GDBMDriver? {
        let driver = try await GDBMDriver(directory: store.path, options: options(durability, step))
        try await driver.write { tx in try Self.setUp(tx) }
        guard step.isRecovery else { return driver }
        store.plan.arm(failingAt: applyFailure, mode: .once, errno: EIO)
        try await driver.write { tx in try Self.change(tx) }
        #expect(store.plan.failureCount == 1)
        store.plan.disarm()
        try await driver.close()
        // The journal ends as the step needs it.
        let (journal, records) = try Journal.open(path: store.path + "/journal")
        journal.close()
        switch (step, records.last) {
        case (.recovery, .transaction?), (.recoveryFromCheckpoint, .checkpointBegin?): break
        default: Issue.record("\(step): the journal ends in \(String(describing: records.last))")
        }
        return nil
    }

    /// Runs the step: the commit, or for `.recovery` the open; returns the open driver.
    static func run(_ step: Step, _ store: FaultyStore, _ durability: Durability, _ driver: GDBMDriver?) async throws -> GDBMDriver {
        if let driver {
            try await driver.write { tx in try Self.change(tx) }
            return driver
        }
        return try await GDBMDriver(directory: store.path, options: options(durability, step))
    }

    /// The step's operations, counted on a store like the tested ones, and the operation at
    /// which a `.recovery` store's commit fails to apply.
    static func operations(_ durability: Durability, _ step: Step) async throws -> (log: [String], applyFailure: Int) {
        var applyFailure = 0
        if step == .recovery {
            let (commit, _) = try await operations(durability, .commit)
            applyFailure = try #require(commit.firstIndex(of: "gdbm store")) + 1
        } else if step == .recoveryFromCheckpoint {
            // The first operation of the checkpoint proper: after the sync point's gdbm syncs come
            // the writes of its `applied` mark, of `checkpointBegin` (then its fsync), and of
            // the fresh journal.
            let (commit, _) = try await operations(durability, .commitAndCheckpoint)
            let firstSync = try #require(commit.firstIndex(of: "gdbm sync"))
            let writes = commit.indices.filter { $0 > firstSync && commit[$0] == "write" }
            try #require(writes.count == 3, "\(commit)")
            #expect(commit[writes[1] + 1] == "fsync", "\(commit)")
            applyFailure = writes[1] + 3
        }
        let store = try FaultyStore()
        defer { store.finish() }
        let driver = try await prepare(store, durability, step, applyFailure: applyFailure)
        store.plan.disarm()
        let opened = try await run(step, store, durability, driver)
        let log = store.plan.operationLog
        try await opened.close()
        return (log, applyFailure)
    }

    @Test(arguments: Step.allCases, [Durability.full, .normal])
    func operationsAreCounted(step: Step, durability: Durability) async throws {
        let (log, _) = try await Self.operations(durability, step)
        switch step {
        case .commit:
            // The journal record (synced with durability full), then the gdbm files.
            #expect(log.first == "write", "\(log)")
            #expect(log.contains("fsync") == (durability == .full), "\(log)")
            #expect(log.contains("gdbm store") && log.contains("gdbm delete"), "\(log)")
        case .commitAndCheckpoint:
            #expect(log.contains("gdbm sync") && log.contains("rename") && log.contains("fsync directory"), "\(log)")
        case .recovery:
            #expect(log.contains("open lock file") && log.contains("read") && log.contains("gdbm store"), "\(log)")
        case .recoveryFromCheckpoint:
            #expect(log.contains("open lock file") && log.contains("read") && log.contains("rename"), "\(log)")
        }
        // The same step counts the same operations again (the order of the gdbm calls on
        // different files follows Swift's per-instance hashing, so it may differ).
        #expect(try await Self.operations(durability, step).log.sorted() == log.sorted())
    }

    @Test(arguments: Step.allCases, [Durability.full, .normal])
    func everyOperationFails(step: Step, durability: Durability) async throws {
        let (operations, applyFailure) = try await Self.operations(durability, step)
        var failuresSeen = 0
        for err in [EIO, ENOSPC] {
            for mode in [GDBMFaultPlan.Mode.once, .always] {
                for n in 1...operations.count {
                    failuresSeen += try await Self.fail(
                        at: n, operations: operations, applyFailure: applyFailure, step: step, durability: durability, mode: mode, errno: err)
                }
            }
        }
        #expect(failuresSeen > 0)
        print("GDBM fault injection, \(step), \(durability): \(operations.count) operations × EIO/ENOSPC × once/always = \(operations.count * 4) trials, \(failuresSeen) reported an error")
    }

    /// A commit whose apply to the GDBM files fails is acknowledged (it is in the journal);
    /// the store refuses work while its files are partial, a repair on a disk that still
    /// fails is a typed `.io` and changes nothing, and once the disk works the next read
    /// repairs the files (one rebuild) without reopening the store.
    @Test func aFailedApplyIsRepairedWithoutReopening() async throws {
        let (log, _) = try await Self.operations(.full, .commit)
        let firstStore = try #require(log.firstIndex(of: "gdbm store")) + 1
        let store = try FaultyStore()
        defer { store.finish() }
        let driver = try await GDBMDriver(directory: store.path, options: Self.options(.full, .commit))
        try await driver.write { tx in try Self.setUp(tx) }
        store.plan.arm(failingAt: firstStore, mode: .once, errno: ENOSPC)
        try await driver.write { tx in try Self.change(tx) }
        #expect(store.plan.failureCount == 1)
        #expect(driver.engine.needsRepair)
        let rebuilds = driver.engine.rebuilds
        // The disk still fails: the repair fails, typed, and is tried again later.
        store.plan.arm(failingAt: 1, mode: .always, errno: EIO)
        await expectCode(.io) { _ = try await Self.state(driver) }
        await expectCode(.io) { try await driver.write { tx in try Self.next(tx) } }
        #expect(driver.engine.needsRepair)
        store.plan.disarm()
        #expect(try await Self.state(driver) == Self.new)
        #expect(!driver.engine.needsRepair)
        #expect(driver.engine.rebuilds > rebuilds)
        try await driver.write { tx in try Self.next(tx) }
        var expected = Self.new
        expected.a[3] = "three"
        #expect(try await Self.state(driver) == expected)
        try await driver.close()
        let reopened = try await GDBMDriver(path: store.path)
        #expect(try await Self.state(reopened) == expected)
        #expect(try await reopened.integrityCheck() == [])
        try await reopened.close()
    }

    /// One trial: returns 1 when the step reported an error.
    static func fail(
        at n: Int, operations: [String], applyFailure: Int, step: Step, durability: Durability, mode: GDBMFaultPlan.Mode, errno err: Int32
    ) async throws -> Int {
        let store = try FaultyStore()
        defer { store.finish() }
        var driver = try await prepare(store, durability, step, applyFailure: applyFailure)
        store.plan.arm(failingAt: n, mode: mode, errno: err)
        var failure: DepotError?
        do {
            driver = try await run(step, store, durability, driver)
        } catch let error as DepotError {
            failure = error
        }
        let log = store.plan.operationLog
        let context = "\(step), \(durability), \(mode) errno \(err), operation \(n) of \(operations.count) (\(log.count >= n ? log[n - 1] : "not reached")): \(log)"
        #expect(store.plan.failureCount >= 1, "\(context): the failure was injected")
        if let failure {
            #expect(failure.code == .io, "\(context): \(String(reflecting: failure))")
            #expect((failure.cause as? GDBMNativeError)?.syserr == err, "\(context): \(String(reflecting: failure))")
        }
        // What the step must have left: a commit acknowledged is new; the recovery store's
        // journal already holds the new state (its commit was acknowledged before).
        let acknowledged = failure == nil || step.isRecovery
        if mode == .always, let live = driver {
            // While the disk is dead, reads show a whole state or fail with a typed error.
            do {
                let seen = try await state(live)
                #expect(seen == old || seen == new, "\(context): while failing, \(seen)")
                if acknowledged { #expect(seen == new, "\(context): while failing, \(seen)") }
            } catch let error as DepotError {
                #expect(error.code == .io, "\(context): \(String(reflecting: error))")
            }
        }
        store.plan.disarm()
        var expected: State?
        var nextAcknowledged = false
        if let live = driver {
            // Once the disk works, the driver (after repairing its files, when the failure came
            // after the commit was journaled) shows the old or new state and takes the next commit.
            let seen = try await state(live)
            #expect(seen == old || seen == new, "\(context): after the failure, \(seen)")
            if acknowledged { #expect(seen == new, "\(context): an acknowledged commit is visible") }
            expected = seen
            try await live.write { tx in try Self.next(tx) }
            nextAcknowledged = true
            var shown = seen
            shown.a[3] = "three"
            #expect(try await state(live) == shown, "\(context)")
            // The image kill -9 would leave now: a clean close folds the journal into the
            // files, so only a crash image shows what the journal itself holds.
            try FileManager.default.copyItem(atPath: store.path, toPath: store.root.path + "/crash")
            try await live.close()
        }
        // A fresh driver on the real files, and one on the crash image, find the old or new
        // state, every acknowledged commit, and sound files.
        for (path, what) in [(store.path, "reopened"), (store.root.path + "/crash", "crash image")] where FileManager.default.fileExists(atPath: path) {
            let fresh = try await GDBMDriver(path: path, durability: durability)
            var found = try await state(fresh)
            #expect(found.a[3] == (nextAcknowledged ? "three" : nil), "\(context): \(what), \(found)")
            found.a[3] = nil
            #expect(found == old || found == new, "\(context): \(what), \(found)")
            if acknowledged { #expect(found == new, "\(context): an acknowledged commit survives; \(what), \(found)") }
            if let expected { #expect(found == expected, "\(context): \(what), \(found), as the driver showed \(expected)") }
            #expect(try await fresh.integrityCheck() == [], "\(context): \(what)")
            try await fresh.close()
        }
        return failure == nil ? 0 : 1
    }
}
