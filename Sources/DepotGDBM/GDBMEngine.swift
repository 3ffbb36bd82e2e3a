import DepotCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Settings of an open store.
struct EngineOptions: Sendable, Hashable {
    var durability: Durability = .full
    var lockTimeoutMilliseconds = 2000
    /// The journal is folded into the backup files when it grows past this many bytes.
    var checkpointBytes = 8 << 20
    /// A sync point (gdbm_sync of the primary files, an `applied` mark) every this many commits…
    var syncEveryCommits = 256
    /// …but at most once per this many milliseconds (a large journal still checkpoints).
    var syncIntervalMilliseconds = 1000
    var readOnly = false
}

/// One open store: its directory, lock, journal, primary and backup files, catalog and
/// thread. Shared by every ``GDBMDriver`` of the process that opened the same directory.
///
/// Layout of the store directory:
/// - `LOCK`: the process lock (``StoreLock``);
/// - `journal`: the redo journal (``Journal``);
/// - `data/`: the primary GDBM files that reads use: `_depotsys_catalog.gdbm`, and per collection
///   `NAME.records.gdbm` and `NAME.index.gdbm`;
/// - `backup/`: the same files as of the journal's base sequence (the last checkpoint).
///
/// Threads: opening, closing, sync points, checkpoints, and every transaction that cannot
/// run inline run on ``thread`` (the writer thread) and ``readers`` (a pool). Writer state is
/// guarded by ``writerLock``: the writer thread takes it for each job, and a small write
/// transaction with durability `normal` takes it directly on the caller's thread when it is
/// free (``writeInline(_:)``). A small read transaction runs on the caller's thread when the
/// files lock is free (``readInline(_:)``). "Small" is a budget of gdbm calls
/// (``GDBMTransaction/inlineBudget``); a transaction that exceeds it, or asks for a scan, is
/// abandoned before it changes anything and runs again on the store's threads. So the
/// caller's thread only ever waits for short gdbm calls of other threads (the per-directory
/// gdbm lock is held for one call at a time), never for a transaction, an fsync or a scan.
///
/// Snapshots: a commit is journaled and then published as a ``CommittedLayer`` (its changes
/// in memory); it is applied to the GDBM files only when no read transaction is open (the
/// writer takes ``filesLock`` for writing; every read transaction holds it for reading). A
/// read transaction sees the files plus the layers published when it began, so it keeps one
/// snapshot however many writers commit meanwhile, and the files never change under it.
final class GDBMEngine: @unchecked Sendable {
    // @unchecked: the properties under "writer" are touched only while `writerLock` is held
    // (every job on `thread` takes it; inline writes take it on the caller's thread); those
    // under "shared" only while `state` is locked; `filesLock`, `writerLock`, `primary`
    // (internally locked) and the immutable lets are safe from any thread.
    let directory: String
    let options: EngineOptions
    let thread: BlockingExecutor
    let readers: BlockingExecutor
    let primary: FileSet
    /// The field layouts records were last decoded with (see ``FieldLayoutCache``).
    let fieldLayouts = FieldLayoutCache()
    /// Read mode: a read transaction is open on the files. Write mode: the files change.
    let filesLock = ReadWriteLock()
    /// Held by whoever runs the writer's work: a job on ``thread`` or an inline write.
    let writerLock = NSLock()

    // Writer (under `writerLock`).
    private var lock: StoreLock?
    private var journal: Journal?
    private let backup: FileSet
    private var lastSeq: UInt64 = 0
    /// `lastSeq` when recovery ended: a close with no commit after it leaves the journal and
    /// the backup files as they are (no checkpoint), so that a session that only read a damaged
    /// store never copies damaged primary files over the backup and drops the journal that
    /// could rebuild them (Docs/GDBMDriver.md, "Crash safety").
    private var seqAfterRecovery: UInt64 = 0
    private var commitsSinceMark = 0
    /// A transaction record written after the journal's last `applied` mark (or after its
    /// header, for a fresh journal) has been fsynced. Until then the next commit fsyncs its
    /// journal record before it touches the primary files, whatever the durability: with
    /// `normal`, the kernel may write the primary files' pages back before the journal's, and
    /// a power loss that kept an `applied(n)` mark but lost the transactions after it would
    /// otherwise leave recovery trusting primary files that hold parts of commits the journal
    /// lacks. With a transaction record durable after the mark, the surviving journal always
    /// ends in a transaction (or a later mark), so recovery rebuilds instead.
    private var journalSyncedSinceMark = false
    /// When the last sync point ended (CLOCK_MONOTONIC, nanoseconds).
    private var lastSyncPoint: UInt64 = 0
    /// The files the journal's transactions change (what a checkpoint must bring to the backup).
    private var touchedSinceCheckpoint = Set<FileID>()
    /// How many times the open path rebuilt the primary files (tests read it after opening).
    private(set) var rebuilds = 0

    // Shared, guarded by `state`.
    private struct Shared {
        var catalog: [CollectionName: CollectionMeta] = [:]
        /// Commits published but not yet applied to the files, oldest first.
        var pending: [CommittedLayer] = []
        var generation: UInt64 = 0
        var isOpen = false
        /// Set when applying a journaled commit failed: the files may be partial until the
        /// store is reopened (which rebuilds them).
        var failure: DepotError?
        var applyScheduled = false
        /// The file ops of `pending`, summed (inline commits apply only a few).
        var pendingOps = 0
    }

    private let state = Locked(Shared())

    private init(directory: String, options: EngineOptions) {
        self.directory = directory
        self.options = options
        self.thread = BlockingExecutor(name: "depot.gdbm.writer", stackSize: 4 << 20, closedMessage: "The GDBM store is closed.")
        self.readers = BlockingExecutor(name: "depot.gdbm.reader", workers: 4, stackSize: 4 << 20, closedMessage: "The GDBM store is closed.")
        self.primary = FileSet(directory: directory + "/data", readOnly: options.readOnly)
        self.backup = FileSet(directory: directory + "/backup")
    }

    /// The committed catalog.
    var catalog: [CollectionName: CollectionMeta] { state.withLock { $0.catalog } }
    /// Increases with every commit (streams use it to notice changes between pages).
    var generation: UInt64 { state.withLock { $0.generation } }

    // MARK: Process-wide registry

    private struct Entry {
        let engine: GDBMEngine
        var count: Int
        /// The last driver closed it and its shutdown (sync, checkpoint, unlock) is running.
        var closing = false
    }

    private static let registry = Locked<[String: Entry]>([:])

    /// The engine of `directory`, opened if this is the first driver of the process on it.
    /// Options of later drivers on an already open directory are ignored (the first wins).
    /// While an earlier engine of the directory is shutting down, waits for it to finish.
    static func acquire(directory: String, options: EngineOptions) async throws -> GDBMEngine {
        while true {
            let found = registry.withLock { table -> GDBMEngine? in
                if var entry = table[directory] {
                    if entry.closing { return nil }
                    entry.count += 1
                    table[directory] = entry
                    return entry.engine
                }
                let engine = GDBMEngine(directory: directory, options: options)
                table[directory] = Entry(engine: engine, count: 1)
                return engine
            }
            guard let engine = found else {
                try await Task.sleep(nanoseconds: 2_000_000)
                continue
            }
            do {
                try await engine.thread.run { try engine.writerLock.withLock { try engine.openIfNeeded() } }
            } catch {
                try? await release(engine)
                throw error
            }
            return engine
        }
    }

    /// Drops one reference; the last one syncs, checkpoints and closes the store.
    static func release(_ engine: GDBMEngine) async throws {
        let last = registry.withLock { table -> Bool in
            guard var entry = table[engine.directory], entry.engine === engine, !entry.closing else { return false }
            entry.count -= 1
            entry.closing = entry.count == 0
            table[engine.directory] = entry
            return entry.closing
        }
        guard last else { return }
        defer {
            engine.thread.stop()
            engine.readers.stop()
            registry.withLock { table in
                if table[engine.directory]?.engine === engine { table[engine.directory] = nil }
            }
        }
        try await engine.thread.run { try engine.writerLock.withLock { try engine.shutdown() } }
    }

    // MARK: Opening and recovery

    private var journalPath: String { directory + "/journal" }

    private func openIfNeeded() throws {
        if state.withLock({ $0.isOpen }) { return }
        try FileSystem.makeDirectory(directory)
        try FileSystem.makeDirectory(primary.directory)
        try FileSystem.makeDirectory(backup.directory)
        let lockPath = directory + "/LOCK"
        var lock: StoreLock
        var shared = false
        if options.readOnly, let exclusive = try? StoreLock.acquire(path: lockPath, exclusive: true, timeoutMilliseconds: 0) {
            lock = exclusive
        } else if options.readOnly {
            lock = try StoreLock.acquire(path: lockPath, exclusive: false, timeoutMilliseconds: options.lockTimeoutMilliseconds)
            shared = true
        } else {
            lock = try StoreLock.acquire(path: lockPath, exclusive: true, timeoutMilliseconds: options.lockTimeoutMilliseconds)
        }
        do {
            if shared {
                try checkCleanForSharedReading()
            } else {
                // A read-only open that got the lock alone repairs the store first.
                primary.readOnly = false
                try recover()
            }
            if options.readOnly {
                journal?.close()
                journal = nil
                try lock.downgrade()
                primary.readOnly = true
                try loadCatalog()
            }
        } catch {
            primary.closeAll()
            backup.closeAll()
            journal?.close()
            journal = nil
            lock.release()
            throw error
        }
        self.lock = lock
        state.withLock { $0.isOpen = true }
    }

    /// Brings the files to the last committed transaction (see Docs/GDBMDriver.md):
    /// - a journal whose last record is `applied` (or that has no records): clean;
    /// - last record a transaction: the primary files may be partial; rebuild them from the
    ///   backup files plus every journaled transaction;
    /// - last record `checkpointBegin`: the backup files may be partial; copy the (synced)
    ///   primary files over them and start a fresh journal;
    /// - a primary file that gdbm cannot open or read as sound: rebuild as above.
    private func recover() throws {
        journalSyncedSinceMark = false
        try FileSystem.remove(journalPath + ".new")
        var records: [JournalRecord]
        if FileSystem.exists(journalPath) {
            let opened = try Journal.open(path: journalPath)
            journal = opened.journal
            records = opened.records
        } else {
            if !(try FileSystem.gdbmFiles(in: primary.directory)).isEmpty {
                throw GDBMErrors.corrupted("The GDBM store at '\(directory)' has data files but no journal.")
            }
            journal = try Journal.create(path: journalPath, baseSeq: 0)
            records = []
        }
        guard let journal else { throw DepotError(.internal, "The journal did not open.") }
        lastSeq = max(journal.baseSeq, records.last?.seq ?? 0)
        seqAfterRecovery = lastSeq
        for case .transaction(_, let ops) in records {
            for op in ops { touchedSinceCheckpoint.insert(op.file) }
        }
        var rebuilt = false
        switch records.last {
        case nil, .applied?:
            break
        case .checkpointBegin(let seq)?:
            try backup.removeAllFiles()
            for id in try FileSystem.gdbmFiles(in: primary.directory) {
                try FileSystem.copy(primary.path(id), to: backup.path(id))
            }
            try FileSystem.syncDirectory(backup.directory)
            self.journal?.close()
            self.journal = try Journal.create(path: journalPath, baseSeq: seq)
            records = []
            touchedSinceCheckpoint = []
        case .transaction?:
            try rebuildPrimary(from: records)
            rebuilt = true
        }
        do {
            try loadCatalog()
        } catch let error as DepotError where error.code == .corrupted && !rebuilt {
            try rebuildPrimary(from: records)
            try loadCatalog()
        }
    }

    /// A read-only open that shares the lock with other readers cannot repair anything:
    /// it reads the store only when no recovery is pending (another reader would have done it).
    private func checkCleanForSharedReading() throws {
        if FileSystem.exists(journalPath) {
            let fd = Glibc.open(journalPath, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw GDBMErrors.system(errno, "open", path: journalPath) }
            defer { Glibc.close(fd) }
            let (_, records, _) = try Journal.parse(try Journal.readAll(fd, path: journalPath))
            switch records.last {
            case nil, .applied?: break
            case .transaction?, .checkpointBegin?:
                throw DepotError(.locked, "The GDBM store at '\(directory)' needs recovery, which a read-only open shared with other readers cannot do; open it once for writing.")
            }
        }
        try loadCatalog()
    }

    /// Replaces the primary files with the backup files plus every journaled transaction.
    private func rebuildPrimary(from records: [JournalRecord]) throws {
        rebuilds += 1
        try primary.removeAllFiles()
        for id in try FileSystem.gdbmFiles(in: backup.directory) {
            try FileSystem.copy(backup.path(id), to: primary.path(id))
        }
        for case .transaction(_, let ops) in records {
            for op in ops { try primary.apply(op) }
        }
        try primary.syncAll()
        primary.closeAll()
        try FileSystem.syncDirectory(primary.directory)
        if case .transaction(let seq, _)? = records.last(where: { if case .transaction = $0 { true } else { false } }) {
            try journal?.append(.applied(seq: seq), sync: true)
        }
    }

    /// Opens the catalog and every collection file, reading the catalog into memory.
    private func loadCatalog() throws {
        primary.closeAll()
        var loaded: [CollectionName: CollectionMeta] = [:]
        if !FileSystem.exists(primary.path(.catalog)), !(try FileSystem.gdbmFiles(in: primary.directory)).isEmpty {
            throw GDBMErrors.corrupted("The GDBM store's catalog file '_depotsys_catalog.gdbm' is missing.")
        }
        if let file = try primary.file(.catalog, create: !options.readOnly) {
            try file.forEachKey { key in
                let meta = try file.fetch(Array(key)) { value in try CollectionMeta.decode(key: key, value: value) }
                if let meta { loaded[meta.schema.name] = meta }
                return true
            }
        }
        for name in loaded.keys {
            _ = try primary.file(.records(name), create: false)
            _ = try primary.file(.index(name), create: false)
        }
        state.withLock { $0.catalog = loaded }
    }

    private func shutdown() throws {
        let wasOpen = state.withLock { shared -> Bool in
            defer { shared.isOpen = false }
            return shared.isOpen
        }
        guard wasOpen else { return }
        filesLock.writeLock()
        defer {
            filesLock.unlock()
            primary.closeAll()
            backup.closeAll()
            journal?.close()
            journal = nil
            lock?.release()
            lock = nil
        }
        guard state.withLock({ $0.failure }) == nil, !options.readOnly else { return }
        try applyPending()
        try syncPoint(forceCheckpoint: lastSeq > seqAfterRecovery)
    }

    /// Whether applying a journaled commit (or a sync point, or a checkpoint) failed and the
    /// files wait for ``repairIfFailed()``.
    var needsRepair: Bool { state.withLock { $0.isOpen && $0.failure != nil } }

    /// After a failed apply, sync point or checkpoint: brings the files back to the last
    /// journaled commit the way opening does (``recover()``: rebuild from the backup and the
    /// journal, or redo the checkpoint), so the store works again without being reopened
    /// once the disk does (Docs/GDBMDriver.md, "Durability and crash safety"). Under
    /// `writerLock`; waits for open read transactions to end. Does nothing when nothing failed.
    /// - Throws: what recovery throws (the store then keeps refusing work with `.io`).
    func repairIfFailed() throws {
        guard needsRepair else { return }
        filesLock.writeLock()
        defer { filesLock.unlock() }
        primary.closeAll()
        backup.closeAll()
        journal?.close()
        journal = nil
        touchedSinceCheckpoint = []
        commitsSinceMark = 0
        do {
            try recover()
        } catch {
            state.withLock { $0.failure = DepotError.wrap(error, as: .io, "Repairing the GDBM files failed.") }
            throw DepotError(.io, "An earlier commit could not be applied to the GDBM files, and repairing them failed: \(DepotError.wrap(error).message)", cause: error)
        }
        lastSyncPoint = GDBMEngine.monotonicNanoseconds()
        state.withLock { shared in
            shared.pending = []
            shared.pendingOps = 0
            shared.failure = nil
            shared.generation &+= 1
        }
    }

    // MARK: Transactions

    private func checkUsable() throws {
        let (open, failure) = state.withLock { ($0.isOpen, $0.failure) }
        try GDBMEngine.checkUsable(open: open, failure: failure)
    }

    /// `.closed` for a closed store, `.io` for one whose pending commit could not be applied.
    private static func checkUsable(open: Bool, failure: DepotError?) throws {
        guard open else { throw DepotError(.closed, "The GDBM store is closed.") }
        if let failure {
            throw DepotError(.io, "An earlier commit could not be applied to the GDBM files: \(failure.message) The next read or write repairs the files once the disk works; reopening the store does too.", cause: failure)
        }
    }

    /// ``checkUsable()`` and ``begin(writable:)`` under one take of the state lock (an inline
    /// read's path).
    private func beginUsable(writable: Bool) throws -> GDBMTransaction {
        let (open, failure, catalog, layers, generation) = state.withLock { ($0.isOpen, $0.failure, $0.catalog, $0.pending, $0.generation) }
        try GDBMEngine.checkUsable(open: open, failure: failure)
        return GDBMTransaction(engine: self, writable: writable, catalog: catalog, layers: layers, generation: generation)
    }

    /// A transaction over the current committed state (catalog, files, pending layers).
    private func begin(writable: Bool) -> GDBMTransaction {
        let (catalog, layers, generation) = state.withLock { ($0.catalog, $0.pending, $0.generation) }
        return GDBMTransaction(engine: self, writable: writable, catalog: catalog, layers: layers, generation: generation)
    }

    /// Runs a read transaction on the calling thread (a reader-pool thread, or the writer
    /// thread for a task that prefers it), holding the files lock in read mode.
    func read<T>(_ body: (GDBMTransaction) throws -> T) throws -> T {
        filesLock.readLock()
        defer {
            filesLock.unlock()
            scheduleApply()
        }
        // Checked under the lock: a store closing meanwhile has closed its files.
        try checkUsable()
        let tx = begin(writable: false)
        defer { tx.isValid = false }
        return try body(tx)
    }

    /// What an inline attempt did.
    enum Inline<T> {
        case done(T)
        /// Not run (a lock was busy) or abandoned (over budget): run it on the store's threads.
        case declined
    }

    /// Gdbm calls an inline transaction may make before it is abandoned.
    static let inlineBudget = 64

    /// Runs a small read transaction on the calling thread if the files lock is free right
    /// now; `.declined` when it is not, or when `body` outgrew the inline budget (its result
    /// and errors are then discarded: nothing was changed).
    func readInline<T>(_ body: (GDBMTransaction) throws -> T) throws -> Inline<T> {
        guard filesLock.tryReadLock() else { return .declined }
        defer {
            filesLock.unlock()
            scheduleApply()
        }
        let tx = try beginUsable(writable: false)
        tx.inlineBudget = GDBMEngine.inlineBudget
        defer { tx.isValid = false }
        do {
            let value = try body(tx)
            return tx.escalated ? .declined : .done(value)
        } catch {
            if tx.escalated { return .declined }
            throw error
        }
    }

    /// After the last reader of a snapshot leaves, the writer thread applies pending commits.
    private func scheduleApply(force: Bool = false) {
        let needed = state.withLock { shared -> Bool in
            guard force || !shared.pending.isEmpty, !shared.applyScheduled, shared.isOpen else { return false }
            shared.applyScheduled = true
            return true
        }
        if needed {
            thread.submit { [self] in
                writerLock.withLock {
                    state.withLock { $0.applyScheduled = false }
                    tryApply(syncAllowed: true)
                }
            }
        }
    }

    /// Runs a write transaction and commits it (on the writer thread, or on a thread whose
    /// task prefers it).
    func write<T>(_ body: (any WriteTransaction) throws -> T) throws -> T {
        writerLock.lock()
        defer { writerLock.unlock() }
        try repairIfFailed()
        try checkUsable()
        guard !options.readOnly else { throw DepotError(.unsupported, "The GDBM store was opened read-only (readonly=true).") }
        let tx = begin(writable: true)
        defer { tx.isValid = false }
        let result = try body(tx)
        tx.isValid = false
        try commit(tx, inline: false)
        return result
    }

    /// Runs a small write transaction on the calling thread when that costs no waiting and
    /// no fsync: durability `normal`, the writer free right now, few commits waiting for
    /// readers. `.declined` otherwise, or when `body` outgrew the inline budget (nothing was
    /// changed then: the transaction's changes lived only in memory).
    func writeInline<T>(_ body: (any WriteTransaction) throws -> T) throws -> Inline<T> {
        guard options.durability == .normal, !options.readOnly else { return .declined }
        guard writerLock.try() else { return .declined }
        defer { writerLock.unlock() }
        let (open, waiting, failed) = state.withLock { ($0.isOpen, $0.pendingOps, $0.failure != nil) }
        // A store to repair (``repairIfFailed()``) is the writer thread's.
        guard open, !failed, waiting <= GDBMEngine.inlineApplyLimit else { return .declined }
        // A sync point is due: this write queues behind it on the writer thread, so inline
        // writes never starve the writer's sync points and checkpoints (the journal stays
        // bounded by `checkpoint_kb`).
        guard !syncPointDue else {
            scheduleApply(force: true)
            return .declined
        }
        // The first commit after a sync point fsyncs its journal record (see
        // `journalSyncedSinceMark`): never on a caller's thread.
        guard journalSyncedSinceMark else { return .declined }
        try checkUsable()
        let tx = begin(writable: true)
        tx.inlineBudget = GDBMEngine.inlineBudget
        defer { tx.isValid = false }
        let result: T
        do {
            result = try body(tx)
        } catch {
            if tx.escalated { return .declined }
            throw error
        }
        if tx.escalated { return .declined }
        tx.isValid = false
        try commit(tx, inline: true)
        return .done(result)
    }

    /// An inline commit applies the waiting commits itself only while they hold at most
    /// this many file ops; more are left to the writer thread.
    static let inlineApplyLimit = 512

    /// Journals and publishes a finished write transaction, then applies it to the files
    /// if no reader is open. Once the journal write returns, the commit is durable (per the
    /// durability setting) and visible to every later transaction.
    ///
    /// An `inline` commit (on a caller's thread) does no fsync and no blocking wait: it applies
    /// only when that is quick, and leaves sync points and the bound on waiting commits to
    /// the writer thread.
    private func commit(_ tx: GDBMTransaction, inline: Bool) throws {
        let ops = tx.finish()
        guard !ops.isEmpty, let journal else { return }
        let seq = lastSeq + 1
        let sync = options.durability == .full || !journalSyncedSinceMark
        try journal.append(.transaction(seq: seq, ops: ops), sync: sync)
        if sync { journalSyncedSinceMark = true }
        lastSeq = seq
        // Ops come grouped by file: hash each file once, not once per op.
        var lastFile: FileID?
        for op in ops where op.file != lastFile {
            lastFile = op.file
            touchedSinceCheckpoint.insert(op.file)
        }
        // Nothing waits and no reader holds the files (the usual case): the commit goes
        // straight to the files, with no layer to publish and take back. Readers begin only
        // under the files lock, so none sees the files half written; `pending` changes only
        // under `writerLock`, which this thread holds.
        if state.withLock({ $0.pending.isEmpty }), filesLock.tryWriteLock() {
            var applied = true
            do {
                for op in ops { try primary.apply(op) }
            } catch {
                applied = false
                // The files may hold part of this commit: publish it as a layer (reads then
                // see all of it) and refuse further work until the store is reopened.
                let layer = CommittedLayer(seq: seq, changes: tx.overlayChanges, ops: ops)
                state.withLock { shared in
                    shared.pending.append(layer)
                    shared.pendingOps += ops.count
                    shared.failure = DepotError.wrap(error, as: .io, "Applying a commit to the GDBM files failed.")
                }
            }
            state.withLock { shared in
                shared.catalog = tx.catalog
                shared.generation &+= 1
            }
            guard applied else {
                filesLock.unlock()
                return
            }
            commitsSinceMark += 1
            if syncPointDue {
                if inline {
                    filesLock.unlock()
                    scheduleApply(force: true)
                    return
                }
                do { try syncPoint(forceCheckpoint: false) } catch {
                    state.withLock { $0.failure = DepotError.wrap(error, as: .io, "Applying a commit to the GDBM files failed.") }
                }
            }
            filesLock.unlock()
            return
        }
        let layer = CommittedLayer(seq: seq, changes: tx.overlayChanges, ops: ops)
        let waiting = state.withLock { shared -> Int in
            shared.pending.append(layer)
            shared.pendingOps += ops.count
            shared.catalog = tx.catalog
            shared.generation &+= 1
            return shared.pendingOps
        }
        if inline {
            // Apply now only if that is a few gdbm stores; sync points, checkpoints and
            // large backlogs are the writer thread's.
            if waiting > GDBMEngine.inlineApplyLimit || !tryApply(syncAllowed: false) {
                scheduleApply(force: true)
            }
            return
        }
        tryApply(syncAllowed: true)
        // Readers that never let go would make pending commits pile up in memory: past a
        // bound, the commit waits until no reader is open and applies them.
        if state.withLock({ $0.pending.count }) >= GDBMEngine.maximumPendingCommits {
            filesLock.writeLock()
            defer { filesLock.unlock() }
            do { try applyPending() } catch {
                state.withLock { $0.failure = DepotError.wrap(error, as: .io, "Applying a commit to the GDBM files failed.") }
            }
        }
    }

    /// How many commits may wait in memory for readers to finish before a commit waits too.
    static let maximumPendingCommits = 4096

    /// Applies pending commits if no read transaction is open (under `writerLock`), then
    /// makes a sync point when one is due and `syncAllowed`. Returns `false` when work is
    /// left for later: readers held the files, or a sync point is due but not allowed.
    @discardableResult
    private func tryApply(syncAllowed: Bool) -> Bool {
        guard filesLock.tryWriteLock() else { return false }
        defer { filesLock.unlock() }
        do {
            try applyPending()
            if syncPointDue {
                guard syncAllowed else { return false }
                try syncPoint(forceCheckpoint: false)
            }
        } catch {
            state.withLock { $0.failure = DepotError.wrap(error, as: .io, "Applying a commit to the GDBM files failed.") }
        }
        return true
    }

    /// A sync point is due: the journal has reached the checkpoint size, or `sync_every`
    /// commits were applied since the last one and `sync_interval_ms` has passed since it.
    private var syncPointDue: Bool {
        if (journal?.size ?? 0) >= options.checkpointBytes { return true }
        guard commitsSinceMark >= options.syncEveryCommits else { return false }
        return GDBMEngine.monotonicNanoseconds() &- lastSyncPoint >= UInt64(options.syncIntervalMilliseconds) * 1_000_000
    }

    static func monotonicNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    /// Applies every pending commit to the primary files. Needs the files lock in write mode.
    private func applyPending() throws {
        let layers = state.withLock { $0.pending }
        guard !layers.isEmpty else { return }
        for layer in layers {
            for op in layer.ops { try primary.apply(op) }
        }
        let applied = layers.reduce(0) { $0 + $1.ops.count }
        state.withLock {
            $0.pending.removeFirst(layers.count)
            $0.pendingOps -= applied
        }
        commitsSinceMark += layers.count
    }

    /// Syncs the primary files and marks the journal `applied`; checkpoints when the journal
    /// is large (or `forceCheckpoint` and it holds any transaction).
    private func syncPoint(forceCheckpoint: Bool) throws {
        // An `applied` mark must cover every journaled transaction.
        guard let journal, state.withLock({ $0.pending.isEmpty }) else { return }
        if commitsSinceMark > 0 {
            try primary.syncAll()
            try journal.sync()
            try journal.append(.applied(seq: lastSeq), sync: options.durability == .full)
            journalSyncedSinceMark = false
            commitsSinceMark = 0
            lastSyncPoint = GDBMEngine.monotonicNanoseconds()
        }
        if journal.size >= options.checkpointBytes || (forceCheckpoint && lastSeq > journal.baseSeq) {
            try checkpoint()
        }
    }

    /// Folds the journal into the backup files and starts a fresh journal.
    private func checkpoint() throws {
        guard let journal else { return }
        try journal.append(.checkpointBegin(seq: lastSeq), sync: true)
        let touched = touchedSinceCheckpoint
        // The primary files are synced here. When the files the journal touched are small
        // next to it (bulk loads), copying them is far cheaper than replaying every op.
        let touchedBytes = touched.reduce(0) { $0 + FileSystem.size(primary.path($1)) }
        if touchedBytes <= 4 * journal.size {
            backup.closeAll()
            for id in touched {
                if FileSystem.exists(primary.path(id)) {
                    try FileSystem.copy(primary.path(id), to: backup.path(id))
                } else {
                    try FileSystem.remove(backup.path(id))
                }
            }
        } else {
            let (_, records, _) = try Journal.parse(try Journal.readAll(journal.fd, path: journal.path, fromStart: true))
            for case .transaction(let seq, let ops) in records where seq > journal.baseSeq {
                for op in ops { try backup.apply(op) }
            }
            try backup.syncAll()
            backup.closeAll()
        }
        try FileSystem.syncDirectory(backup.directory)
        let fresh = try Journal.create(path: journalPath, baseSeq: lastSeq)
        journal.close()
        self.journal = fresh
        journalSyncedSinceMark = false
        touchedSinceCheckpoint = []
    }

    /// The journal's length as of its last fsync and its current length (tests: what a power
    /// loss must keep, and what it may lose).
    func journalLengths() -> (synced: Int, written: Int) {
        writerLock.withLock { (journal?.syncedSize ?? 0, journal?.size ?? 0) }
    }

    // MARK: Integrity

    /// Checks every stored record, catalog entry and index entry (as a read transaction).
    func integrityCheck() throws -> [String] {
        try read { tx in
            var problems: [String] = []
            for (name, meta) in tx.catalog.sorted(by: { $0.key < $1.key }) {
                problems += tx.verify(collection: name, meta: meta)
            }
            return problems
        }
    }
}
