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
/// during a commit, during a commit that closes the journal segment and the fold of that
/// segment into a backup that follows it, and while opening a store whose journal must be
/// replayed (after a failed apply, and after a failed fold). After each failure the error is a typed
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
        /// The same commit in a store whose journal limit is tiny, so that the commit closes
        /// the journal segment, and the fold of that segment into a backup, which runs in
        /// the background after the commit returns (the step waits for it).
        case commitAndFold
        /// Opening a store whose journal ends in a transaction the files lack (its apply
        /// failed): recovery rebuilds the primary files from the backup and the journal.
        case recovery
        /// Opening a store whose last fold failed while writing a backup (`backup.state` calls
        /// that backup unsound): recovery rebuilds the primary files from the current backup
        /// and the journal segments, and the fold runs again (the step waits for it).
        case recoveryAfterFailedFold

        /// A step that opens a store prepared by a commit that failed part way.
        var isRecovery: Bool { self == .recovery || self == .recoveryAfterFailedFold }

        var description: String { rawValue }
    }


    static func options(_ durability: Durability, _ step: Step) -> EngineOptions {
        var options = EngineOptions()
        options.durability = durability
        // Smaller than any transaction record, larger than a fresh journal's header.
        if step == .commitAndFold || step == .recoveryAfterFailedFold { options.checkpointBytes = 64 }
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

    /// A store in the old state, with its driver open; for the recovery steps a closed store
    /// whose journal holds the new state too, but whose files lack it: the tested commit was
    /// acknowledged, then failed at operation `applyFailure` (for `.recovery` its first gdbm
    /// store; for `.recoveryAfterFailedFold` the first gdbm store of the fold after it).
    static func prepare(_ store: FaultyStore, _ durability: Durability, _ step: Step, applyFailure: Int) async throws -> GDBMDriver? {
        let driver = try await GDBMDriver(directory: store.path, options: options(durability, step))
        try await driver.write { tx in try Self.setUp(tx) }
        // With a tiny journal limit the set-up's own segment is folded in the background:
        // done before the tested operations are counted.
        await driver.engine.waitForFolds()
        guard step.isRecovery else { return driver }
        store.plan.arm(failingAt: applyFailure, mode: .once, errno: EIO)
        try await driver.write { tx in try Self.change(tx) }
        await driver.engine.waitForFolds()
        #expect(store.plan.failureCount == 1)
        store.plan.disarm()
        try await driver.close()
        // The journal ends as the step needs it.
        let (journal, records) = try Journal.open(path: store.path + "/journal")
        journal.close()
        switch step {
        case .recovery:
            if case .transaction? = records.last {} else { Issue.record("\(step): the journal ends in \(String(describing: records.last))") }
        default:
            #expect(try BackupState.read(directory: store.path)?.previousSeq == nil, "\(step): the fold's backup is marked unsound")
            #expect(try !Journal.closedSegments(in: store.path).isEmpty, "\(step): the closed segment waits for the fold")
        }
        return nil
    }

    /// Runs the step: the commit, or for `.recovery` the open; returns the open driver.
    static func run(_ step: Step, _ store: FaultyStore, _ durability: Durability, _ driver: GDBMDriver?) async throws -> GDBMDriver {
        if let driver {
            try await driver.write { tx in try Self.change(tx) }
            await driver.engine.waitForFolds()
            return driver
        }
        let opened = try await GDBMDriver(directory: store.path, options: options(durability, step))
        await opened.engine.waitForFolds()
        return opened
    }

    /// The step's operations, counted on a store like the tested ones, and the operation at
    /// which a `.recovery` store's commit fails to apply.
    static func operations(_ durability: Durability, _ step: Step) async throws -> (log: [String], applyFailure: Int) {
        var applyFailure = 0
        if step == .recovery {
            let (commit, _) = try await operations(durability, .commit)
            applyFailure = try #require(commit.firstIndex(of: "gdbm store")) + 1
        } else if step == .recoveryAfterFailedFold {
            // The fold's first gdbm store: after the commit's, and after the rotation's two
            // renames (`journal` to `journal.<base>`, `journal.new` to `journal`).
            let (commit, _) = try await operations(durability, .commitAndFold)
            let renames = commit.indices.filter { commit[$0] == "rename" }
            try #require(renames.count >= 2, "\(commit)")
            applyFailure = try #require(commit.indices.first { $0 > renames[1] && commit[$0] == "gdbm store" }, "\(commit)") + 1
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
            // The journal record (synced with durability full), then the gdbm files. With
            // durability normal the record is copied into the journal's mapping of the zeros
            // the set-up's commit wrote ahead of it (Docs/GDBMDriver.md, "Formats"): the
            // mapping is made, the copy counts as the write.
            #expect(durability == .full ? log.first == "write" : Array(log.prefix(2)) == ["map", "write"], "\(log)")
            #expect(log.contains("fsync") == (durability == .full), "\(log)")
            #expect(log.contains("gdbm store") && log.contains("gdbm delete"), "\(log)")
        case .commitAndFold:
            // The rotation's renames, then the fold: backup.state written (create, fsync,
            // rename, fsync of the directory), the segment read and replayed.
            #expect(log.filter { $0 == "rename" }.count >= 3 && log.contains("fsync directory"), "\(log)")
            let renames = log.indices.filter { log[$0] == "rename" }
            #expect(log[renames[1]...].contains("gdbm store"), "\(log)")
        case .recovery:
            #expect(log.contains("open lock file") && log.contains("read") && log.contains("gdbm store"), "\(log)")
        case .recoveryAfterFailedFold:
            #expect(log.contains("open lock file") && log.contains("read") && log.contains("gdbm store") && log.contains("rename"), "\(log)")
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

    /// A commit large enough to be applied with gdbm's memory mapping off (Docs/GDBMDriver.md,
    /// "Large applies") whose mapping change fails (gdbm fsyncs the file then) is
    /// acknowledged: turning the mapping off (`which` 0) fails before the file is written,
    /// turning it back on (`which` 1) after. Either way the store refuses work until the disk
    /// works, the next read repairs the files, and a fresh driver finds every record.
    @Test(arguments: [0, 1]) func aFailedMappingChangeIsRepaired(_ which: Int) async throws {
        let items = try CollectionName("items")
        let records = (0..<(FileSet.unmappedBatchOps + 100)).map { Record(id: .int(Int64($0) + 1), fields: ["n": .int(Int64($0))]) }
        func open(_ store: FaultyStore) async throws -> GDBMDriver {
            var options = EngineOptions()
            options.durability = .normal
            let driver = try await GDBMDriver(directory: store.path, options: options)
            try await driver.write { tx in try tx.prepare(CollectionSchema(name: items, idKind: .int)) }
            return driver
        }
        func insertAll(_ driver: GDBMDriver) async throws {
            try await driver.write { tx in for record in records { try tx.insert(record, into: items) } }
        }
        // A run with nothing failed numbers the large commit's operations.
        let dry = try FaultyStore()
        let dryDriver = try await open(dry)
        dry.plan.disarm()
        try await insertAll(dryDriver)
        let log = dry.plan.operationLog
        try await dryDriver.close()
        dry.finish()
        let mappings = log.indices.filter { log[$0] == "gdbm mapping" }
        try #require(mappings.count >= 2, "\(log.count) operations, \(mappings.count) mapping changes")

        let store = try FaultyStore()
        defer { store.finish() }
        let driver = try await open(store)
        let failing = which == 0 ? mappings[0] : mappings[mappings.count - 1]
        store.plan.arm(failingAt: failing + 1, mode: .once, errno: EIO)
        try await insertAll(driver)
        #expect(store.plan.failureCount == 1)
        #expect(store.plan.operationLog.last == "gdbm mapping")
        #expect(driver.engine.needsRepair)
        store.plan.disarm()
        #expect(try await driver.read { tx in try tx.count(.all, in: items) } == records.count)
        #expect(!driver.engine.needsRepair)
        #expect(try await driver.read { tx in try tx.get(.int(Int64(records.count)), from: items) } == records.last)
        try await driver.close()
        let reopened = try await GDBMDriver(directory: store.path, options: EngineOptions())
        #expect(try await reopened.read { tx in try tx.count(.all, in: items) } == records.count)
        #expect(try await reopened.integrityCheck() == [])
        try await reopened.close()
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
            // files, so only a crash image shows what the journal itself holds. (Taken once
            // the fold the commit started has ended: a copy is no instant image while it
            // renames files.)
            await live.engine.waitForFolds()
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
