import DepotCore
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Settings of an open store.
struct EngineOptions: Sendable, Hashable {
    var durability: Durability = .full
    var lockTimeoutMilliseconds = 2000
    /// The active journal segment is closed, and folded into a backup in the background,
    /// when it grows past this many bytes.
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
/// - `journal`: the active segment of the redo journal (``Journal``), and `journal.<base>`,
///   the closed segments a backup still needs;
/// - `data/`: the primary GDBM files that reads use: `_depotsys_catalog.gdbm`, and per collection
///   `NAME.records.gdbm` and `NAME.index.gdbm`;
/// - `backup/` and `backup.b/`: the same files as of an earlier commit, and `backup.state`
///   (``BackupState``), which says which of the two is current and at which commit.
///
/// Threads: opening, closing, rotating the journal, and every transaction that cannot run
/// inline run on ``thread`` (the writer thread) and ``readers`` (a pool); folds of closed
/// segments into a backup and the fsyncs of sync points run on ``background``, holding
/// neither the writer lock nor the files lock. Writer state is
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
    /// Folds and sync-point fsyncs: one worker, so they run one at a time.
    let background: BlockingExecutor
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
    /// `backup/` and `backup.b/`, by ``BackupState/current`` index. Only folds (on
    /// ``background``) and recovery (on the writer thread, with no fold running) touch them.
    private let backups: [FileSet]
    private var lastSeq: UInt64 = 0
    /// `lastSeq` when recovery ended: a close with no commit after it does not rotate the
    /// journal (a session that only read leaves the journal as it found it).
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
    /// When the last sync point started (CLOCK_MONOTONIC, nanoseconds).
    private var lastSyncPoint: UInt64 = 0
    /// A sync point's (or a flush's) fsyncs run in the background.
    private var syncInFlight = false
    /// File ops applied to the primary files since the last sync point or flush.
    private var opsSinceFlush = 0
    /// After this many file ops applied since the last fsync of the primary files, the writer
    /// looks at how much the files grew since (``flushAfterGrowth``).
    static let flushAfterOps = 8192
    /// When the primary files grew by at least this many bytes since their last fsync (a
    /// load), a **flush** starts: a sync point's background fsyncs without its mark, so the
    /// load's pages reach the disk while it runs, not during the writes that follow it.
    /// Records rewritten in place (updates) do not count: their pages wait for the next sync
    /// point (Docs/GDBMDriver.md, "Transactions", step 5).
    static let flushAfterGrowth = 4 << 20
    /// How many times the open path rebuilt the primary files (tests read it after opening).
    private(set) var rebuilds = 0
    /// Flushes whose fsyncs finished (tests).
    private let flushCount = Locked(0)
    var flushes: Int { flushCount.withLock { $0 } }

    // Shared, guarded by `state`.
    private struct Shared {
        var catalog: [CollectionName: CollectionMeta] = [:]
        /// Commits published but not yet applied to the files, oldest first.
        var pending: [CommittedLayer] = [] {
            didSet { pendingCount.value.store(pending.count, ordering: .sequentiallyConsistent) }
        }
        /// `pending.count`, also readable without the lock (``GDBMEngine/pendingCount``).
        let pendingCount: PendingCount
        var generation: UInt64 = 0
        var isOpen = false
        /// Set when applying a journaled commit failed: the files may be partial until the
        /// store is reopened (which rebuilds them).
        var failure: DepotError?
        var applyScheduled = false
        /// The file ops of `pending`, summed (inline commits apply only a few).
        var pendingOps = 0
    }

    private let state: Locked<Shared>

    /// How many commits wait to be applied, kept by ``Shared/pending``: a read transaction
    /// that ends reads it instead of taking the state lock when nothing waits, which is
    /// nearly always (a lock word written by two reading threads bounces between their
    /// cores; Docs/GDBMDriver.md, "Concurrent reads").
    final class PendingCount: Sendable {
        let value = Atomic<Int>(0)
    }
    private let pendingCount: PendingCount

    /// The backups and the closed segments (guarded by its own lock: folds change it in the
    /// background, the writer adds segments).
    private struct Folds {
        var backup = BackupState(current: 0, currentSeq: 0, previousSeq: nil)
        /// Closed journal segments, oldest first: every one a backup still needs.
        var closed: [JournalSegment] = []
        mutating func markSynced(_ path: String) {
            if let i = closed.firstIndex(where: { $0.path == path }) { closed[i].synced = true }
        }

        /// The size in bytes of the closed segments waiting for a fold: those after the
        /// current backup's commit (the others are kept only for the older backup). Recovery
        /// replays these and the active segment.
        var waitingBytes: Int { closed.reduce(0) { $0 + ($1.end > backup.currentSeq ? $1.bytes : 0) } }
        /// Jobs queued or running on ``background``.
        var jobs = 0
        /// Commits that waited for folds to catch up (past ``closedJournalLimit``), since open.
        var waits = FoldWaits()
    }

    private let folds = Locked(Folds())

    private init(directory: String, options: EngineOptions) {
        self.directory = directory
        self.options = options
        let pendingCount = PendingCount()
        self.pendingCount = pendingCount
        self.state = Locked(Shared(pendingCount: pendingCount))
        self.thread = BlockingExecutor(name: "depot.gdbm.writer", stackSize: 4 << 20, closedMessage: "The GDBM store is closed.")
        self.readers = BlockingExecutor(name: "depot.gdbm.reader", workers: 4, stackSize: 4 << 20, closedMessage: "The GDBM store is closed.")
        self.background = BlockingExecutor(name: "depot.gdbm.fold", stackSize: 4 << 20, closedMessage: "The GDBM store is closed.")
        self.primary = FileSet(directory: directory + "/data", readOnly: options.readOnly, readerSlots: ReaderHandles.defaultSlots)
        self.backups = BackupState.directoryNames.map { FileSet(directory: directory + "/" + $0, mapped: false) }
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
            engine.background.stop()
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
        for backup in backups { try FileSystem.makeDirectory(backup.directory) }
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
            for backup in backups { backup.closeAll() }
            journal?.close()
            journal = nil
            lock.release()
            throw error
        }
        self.lock = lock
        state.withLock { $0.isOpen = true }
        if !options.readOnly { scheduleFold() }
    }

    /// What the journal segments on disk say, read against the backup state
    /// (Docs/GDBMDriver.md, "What opening does").
    private struct JournalHistory {
        var backup: BackupState
        /// Whether `backup.state` exists (a store made before journal segments has none).
        var stateFileFound: Bool
        /// Closed segments a backup still needs, oldest first.
        var closed: [JournalSegment] = []
        /// Closed segments no backup needs, and segments after a gap in the sequence
        /// (unusable: the commits before them are lost): removed by opening.
        var discarded: [String] = []
        /// The segments holding commits after the current backup's, oldest first: a closed
        /// one by its path (read only when a rebuild replays it), the active one with its
        /// records (``transactions()``).
        var replay: [(path: String?, records: [JournalRecord])] = []
        /// The last record of the newest segment that has one (whatever its commit).
        var lastRecord: JournalRecord?
        /// The last journaled commit.
        var lastSeq: UInt64
        /// A segment did not continue the one before: the history ends before it.
        var gap = false
        /// The gap came before the active segment, whose records are then unusable.
        var activeUnusable = false

        /// The primary files hold exactly the commits up to ``lastSeq``, synced: the last
        /// record is an `applied` mark for the last commit, or there is no record at all.
        var isClean: Bool {
            if gap { return false }
            switch lastRecord {
            case nil: return true
            case .applied(let n)?: return n == lastSeq
            case .transaction?, .checkpointBegin?: return false
            }
        }

        /// Reads the state file and every segment. `active` is the active segment's base and
        /// records.
        init(directory: String, active: (base: UInt64, records: [JournalRecord])) throws {
            let found = try BackupState.read(directory: directory)
            stateFileFound = found != nil
            // Closed segments are scanned (base, end, last record), not held in memory: a
            // clean open never needs their ops.
            var segments: [(base: UInt64, end: UInt64, last: JournalRecord?, records: [JournalRecord], path: String?)] = []
            for file in try Journal.closedSegments(in: directory) {
                let (base, end, last) = try Journal.scanSegment(path: file.path)
                guard base == file.base else {
                    throw GDBMErrors.corrupted("The GDBM store's journal segment '\((file.path as NSString).lastPathComponent)' does not start where its name says.")
                }
                segments.append((base, end, last, [], file.path))
            }
            segments.append((active.base, active.records.reduce(active.base) { max($0, $1.seq) }, active.records.last, active.records, nil))
            backup = found ?? BackupState(current: 0, currentSeq: segments[0].base, previousSeq: nil)
            lastSeq = backup.currentSeq
            // Walk the commits from the older backup's (else the current one's) on: each
            // segment must start at or before the commit where the ones before it ended.
            var expected = backup.previousSeq ?? backup.currentSeq
            for segment in segments {
                let end = segment.end
                if !gap && segment.base > expected {
                    if backup.previousSeq != nil && expected < backup.currentSeq {
                        // The older backup cannot be brought forward (the next fold copies
                        // the current one instead); the current one may still be.
                        backup.previousSeq = nil
                        expected = backup.currentSeq
                    }
                    if segment.base > expected { gap = true }
                }
                if gap {
                    if let path = segment.path { discarded.append(path) } else { activeUnusable = true }
                    continue
                }
                if let last = segment.last { lastRecord = last }
                if end > backup.currentSeq { replay.append((segment.path, segment.records)) }
                expected = max(expected, end)
                lastSeq = max(lastSeq, end)
                if let path = segment.path {
                    if end <= (backup.previousSeq ?? backup.currentSeq) {
                        discarded.append(path)
                    } else {
                        closed.append(JournalSegment(base: segment.base, end: end, path: path, bytes: FileSystem.size(path), synced: false))
                    }
                }
            }
        }

        /// Every journaled transaction after the current backup's commit, in order (closed
        /// segments read now, up to their first torn record).
        func transactions() throws -> [JournalRecord] {
            var out: [JournalRecord] = []
            for segment in replay {
                let records = try segment.path.map { try Journal.readSegment(path: $0).records } ?? segment.records
                for record in records {
                    if case .transaction(let seq, _) = record, seq > backup.currentSeq, seq <= lastSeq { out.append(record) }
                }
            }
            return out
        }
    }

    /// Brings the files to the last committed transaction (Docs/GDBMDriver.md, "What opening
    /// does"):
    /// - a rotation cut short between its renames is finished;
    /// - the segments are read in order from the backups' commits; a segment that does not
    ///   continue the one before (a power loss at `normal` kept a later file but not an
    ///   earlier tail) ends the history, and it and the later ones are removed;
    /// - the last record an `applied` mark for the last commit (or no record): clean;
    /// - otherwise the primary files may be partial: rebuilt from the current backup plus
    ///   every journaled transaction after it;
    /// - a journal of a driver before segments that ends in `checkpointBegin`: its backup may
    ///   be partial; the (synced) primary files are copied over it and a fresh journal starts;
    /// - a primary file that gdbm cannot open or read as sound: rebuilt as above.
    private func recover() throws {
        journalSyncedSinceMark = false
        // A `backup.state` replacement that never got renamed into place.
        try FileSystem.remove(directory + "/" + BackupState.fileName + ".new")
        let pending = journalPath + ".new"
        if FileSystem.exists(pending) {
            if FileSystem.exists(journalPath) {
                try FileSystem.remove(pending)
            } else if try Journal.hasHeader(path: pending) {
                // A rotation stopped between its two renames.
                try FileSystem.rename(pending, to: journalPath)
                try FileSystem.syncDirectory(directory)
            } else {
                // A store's first journal whose creation stopped before its header was
                // written (a rotation writes the new segment's header before either rename):
                // removed; made again below if the store holds nothing else yet.
                try FileSystem.remove(pending)
            }
        }
        var records: [JournalRecord]
        if FileSystem.exists(journalPath) {
            let opened = try Journal.open(path: journalPath)
            journal = opened.journal
            records = opened.records
        } else {
            let dataFiles = try FileSystem.gdbmFiles(in: primary.directory)
            let segments = try Journal.closedSegments(in: directory)
            if !dataFiles.isEmpty || !segments.isEmpty {
                throw GDBMErrors.corrupted("The GDBM store at '\(directory)' has data files but no journal.")
            }
            journal = try Journal.create(path: journalPath, baseSeq: 0)
            records = []
        }
        guard let active = journal else { throw DepotError(.internal, "The journal did not open.") }
        var history = try JournalHistory(directory: directory, active: (active.baseSeq, records))
        if history.activeUnusable {
            // The commits before the active segment are lost (see above): start a fresh one
            // where the history ends, and rebuild from the backup.
            active.close()
            journal = try Journal.create(path: journalPath, baseSeq: history.lastSeq)
        }
        for path in history.discarded { try FileSystem.remove(path) }
        if !history.discarded.isEmpty { try FileSystem.syncDirectory(directory) }
        lastSeq = history.lastSeq
        seqAfterRecovery = lastSeq
        var rebuilt = false
        if case .checkpointBegin(let seq)? = history.lastRecord {
            guard !history.stateFileFound, history.closed.isEmpty else {
                throw GDBMErrors.corrupted("The GDBM store's journal ends in a checkpoint record, which this driver never writes beside journal segments.")
            }
            let backup = backups[0]
            try backup.removeAllFiles()
            for id in try FileSystem.gdbmFiles(in: primary.directory) {
                try FileSystem.copy(primary.path(id), to: backup.path(id))
            }
            try FileSystem.syncDirectory(backup.directory)
            journal?.close()
            journal = try Journal.create(path: journalPath, baseSeq: seq)
            history.replay = []
            history.backup = BackupState(current: 0, currentSeq: seq, previousSeq: nil)
            history.closed = []
        } else if !history.isClean {
            try rebuildPrimary(history)
            rebuilt = true
        }
        folds.withLock { folds in
            folds.backup = history.backup
            folds.closed = history.closed
        }
        do {
            try loadCatalog()
        } catch let error as DepotError where error.code == .corrupted && !rebuilt {
            try rebuildPrimary(history)
            try loadCatalog()
        }
    }

    /// A read-only open that shares the lock with other readers cannot repair anything:
    /// it reads the store only when no recovery is pending (another reader would have done it).
    private func checkCleanForSharedReading() throws {
        let needsRecovery = DepotError(.locked, "The GDBM store at '\(directory)' needs recovery, which a read-only open shared with other readers cannot do; open it once for writing.")
        if FileSystem.exists(journalPath + ".new") && !FileSystem.exists(journalPath) { throw needsRecovery }
        if FileSystem.exists(journalPath) {
            let fd = Glibc.open(journalPath, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw GDBMErrors.system(errno, "open", path: journalPath) }
            defer { Glibc.close(fd) }
            let (base, records, _) = try Journal.parse(try Journal.readAll(fd, path: journalPath))
            let history = try JournalHistory(directory: directory, active: (base, records))
            guard history.isClean else { throw needsRecovery }
        }
        try loadCatalog()
    }

    /// Replaces the primary files with the current backup's files plus every journaled
    /// transaction after its commit.
    private func rebuildPrimary(_ history: JournalHistory) throws {
        rebuilds += 1
        try primary.removeAllFiles()
        let backup = backups[history.backup.current]
        for id in try FileSystem.gdbmFiles(in: backup.directory) {
            try FileSystem.copy(backup.path(id), to: primary.path(id))
        }
        var replay = FileOpCoalescer()
        for case .transaction(_, let ops) in try history.transactions() {
            for op in ops { try replay.add(op, apply: primary.apply) }
            if replay.keptBytes >= options.checkpointBytes { try replay.flush(apply: primary.apply) }
        }
        try replay.flush(apply: primary.apply)
        try primary.syncAll()
        primary.closeAll()
        try FileSystem.syncDirectory(primary.directory)
        try journal?.append(.applied(seq: history.lastSeq), sync: true)
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
        // A fold still running stops at its next transaction (the store is no longer open);
        // none may touch the backups once the lock is released.
        waitForBackground()
        filesLock.writeLock()
        defer {
            filesLock.unlock()
            primary.closeAll()
            for backup in backups { backup.closeAll() }
            journal?.close()
            journal = nil
            lock?.release()
            lock = nil
        }
        guard state.withLock({ $0.failure }) == nil, !options.readOnly else { return }
        try applyPending()
        try syncPointNow()
        // A clean close leaves the current backup at the last commit: the journal of this
        // session is folded now, while nothing else runs.
        if lastSeq > seqAfterRecovery { try rotate(scheduling: false) }
        try fold(whileOpen: false)
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
        waitForBackground()
        filesLock.writeLock()
        defer { filesLock.unlock() }
        primary.closeAll()
        for backup in backups { backup.closeAll() }
        journal?.close()
        journal = nil
        commitsSinceMark = 0
        syncInFlight = false
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
        scheduleFold()
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
    /// `nil` when a failed apply waits for repair (``repairIfFailed()``).
    private func beginUsable(writable: Bool) throws -> GDBMTransaction? {
        let (open, failure, catalog, layers, generation) = state.withLock { ($0.isOpen, $0.failure, $0.catalog, $0.pending, $0.generation) }
        if open && failure != nil { return nil }
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
        /// Not run: a failed apply waits for repair (``needsRepair``).
        case repairFirst
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
        guard let tx = try beginUsable(writable: false) else { return .repairFirst }
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
    ///
    /// A commit stores the count before it tries the files lock for writing and a reader
    /// reads it after releasing the lock for reading (both sequentially consistent), so a
    /// reader that finds no commit waiting left the lock before that commit tried it.
    private func scheduleApply(force: Bool = false) {
        guard force || pendingCount.value.load(ordering: .sequentiallyConsistent) > 0 else { return }
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
        // A rotation or sync point is due: this write queues behind it on the writer thread,
        // so inline writes never starve them (the active segment stays bounded by
        // `checkpoint_kb`).
        guard !maintenanceDue else {
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
        // Zeros ahead of the record (no further than a segment's length): a synced append's
        // fsync then records no new file length, another is copied into pages already
        // cached (Docs/GDBMDriver.md, "Formats").
        try journal.append(.transaction(seq: seq, ops: ops), sync: sync, preallocate: options.checkpointBytes)
        if sync { journalSyncedSinceMark = true }
        lastSeq = seq
        opsSinceFlush += ops.count
        // Nothing waits and no reader holds the files (the usual case): the commit goes
        // straight to the files, with no layer to publish and take back. Readers begin only
        // under the files lock, so none sees the files half written; `pending` changes only
        // under `writerLock`, which this thread holds.
        if state.withLock({ $0.pending.isEmpty }), filesLock.tryWriteLock() {
            var applied = true
            do {
                try primary.apply([ops])
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
            filesLock.unlock()
            if maintenanceDue {
                if inline {
                    scheduleApply(force: true)
                    return
                }
                maintain()
            }
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
            do { try applyPending() } catch {
                state.withLock { $0.failure = DepotError.wrap(error, as: .io, "Applying a commit to the GDBM files failed.") }
            }
            filesLock.unlock()
            if maintenanceDue { maintain() }
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
        do {
            try applyPending()
        } catch {
            state.withLock { $0.failure = DepotError.wrap(error, as: .io, "Applying a commit to the GDBM files failed.") }
        }
        filesLock.unlock()
        if maintenanceDue {
            guard syncAllowed else { return false }
            maintain()
        }
        return true
    }

    /// Work for the writer thread is due: the active journal segment has reached
    /// `checkpoint_kb` (a rotation), a sync point is due (``syncPointDue``), or a flush
    /// (``flushAfterOps``).
    private var maintenanceDue: Bool {
        if (journal?.size ?? 0) >= options.checkpointBytes { return true }
        return syncPointDue || (!syncInFlight && opsSinceFlush >= GDBMEngine.flushAfterOps)
    }

    /// `sync_every` commits were applied since the last sync point, `sync_interval_ms` has
    /// passed since it, and none is running.
    private var syncPointDue: Bool {
        guard !syncInFlight, commitsSinceMark >= options.syncEveryCommits else { return false }
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
        try primary.apply(layers.map(\.ops))
        let applied = layers.reduce(0) { $0 + $1.ops.count }
        state.withLock {
            $0.pending.removeFirst(layers.count)
            $0.pendingOps -= applied
        }
        commitsSinceMark += layers.count
    }

    /// Writer-thread upkeep after a commit (under `writerLock`, files lock not held): rotates
    /// the journal when the active segment has reached `checkpoint_kb`, and starts a sync
    /// point when one is due. Neither waits for a fold or an fsync of the primary files
    /// (Docs/GDBMDriver.md, "Journal segments"); failures make the store refuse work until
    /// repaired, as a failed apply does.
    private func maintain() {
        do {
            if let journal, journal.size >= options.checkpointBytes { try rotate() }
            if syncPointDue {
                try startSyncPoint()
            } else if !syncInFlight && opsSinceFlush >= GDBMEngine.flushAfterOps {
                if try primary.bytesGrownSinceSync() >= GDBMEngine.flushAfterGrowth {
                    try startSyncPoint(mark: false)
                } else {
                    opsSinceFlush = 0
                }
            }
        } catch {
            state.withLock { $0.failure = DepotError.wrap(error, as: .io, "Rotating the GDBM journal or starting a sync point failed.") }
        }
        // Folds that cannot keep up with the writers: past a bound on the closed segments
        // waiting for a fold, the commit waits too (the journal on disk stays bounded).
        var waitStart: ContinuousClock.Instant?
        while folds.withLock({ $0.jobs > 0 && $0.waitingBytes > closedJournalLimit }), state.withLock({ $0.isOpen && $0.failure == nil }) {
            if waitStart == nil { waitStart = .now }
            usleep(1000)
        }
        if let waitStart {
            let waited = ContinuousClock.now - waitStart
            folds.withLock { $0.waits.record(waited) }
        }
    }

    /// Commits that waited for folds since the store was opened (Docs/GDBMDriver.md, "Bounds").
    var foldWaits: FoldWaits { folds.withLock { $0.waits } }

    /// How many bytes of closed segments may wait for folds before a commit waits too: four
    /// segments, or as much as the primary files hold if that is more (so that recovery
    /// replays at most about as much journal as the backup it copies; Docs/GDBMDriver.md,
    /// "Bounds"). The data files' size is read at each rotation.
    private var closedJournalLimit: Int {
        max(GDBMEngine.closedSegmentsBeforeWaiting * options.checkpointBytes, dataBytesAtRotation)
    }

    /// Closed segments that may always wait for a fold before commits wait too.
    static let closedSegmentsBeforeWaiting = 4

    /// The primary files' size in bytes at the last rotation.
    private var dataBytesAtRotation = 0

    /// Closes the active journal segment and starts a new one whose base is the last commit;
    /// the closed segment is folded into a backup in the background (``fold()``).
    private func rotate(scheduling: Bool = true) throws {
        guard let journal, lastSeq > journal.baseSeq else { return }
        let closedPath = Journal.segmentPath(directory: directory, base: journal.baseSeq)
        let fresh = try Journal.rotate(path: journalPath, closedPath: closedPath, baseSeq: lastSeq, sync: options.durability == .full)
        let segment = JournalSegment(base: journal.baseSeq, end: lastSeq, path: closedPath, bytes: journal.size, synced: options.durability == .full)
        journal.close()
        dataBytesAtRotation = try FileSystem.gdbmFiles(in: primary.directory).reduce(0) { $0 + FileSystem.size(primary.path($1)) }
        self.journal = fresh
        folds.withLock { $0.closed.append(segment) }
        if scheduling { scheduleFold() }
    }

    /// A sync point, started by the writer: notes the last commit (every commit applied, no
    /// layer pending) and the primary files written since the last sync point, then fsyncs
    /// them and the journal on ``background`` while commits and reads go on; the writer
    /// thread then appends `applied(n)` if `n` is still the last commit
    /// (``finishSyncPoint(_:journal:)``). A later commit may have touched the files during
    /// the fsyncs; that is why the mark is only written when there was none.
    ///
    /// With `mark` false, a **flush**: the same fsyncs, no mark (``flushAfterOps``).
    private func startSyncPoint(mark: Bool = true) throws {
        guard !syncInFlight, commitsSinceMark > 0 || !mark, let journal, state.withLock({ $0.pending.isEmpty }) else { return }
        let seq = lastSeq
        let (descriptors, directoryChanged) = try primary.takeDirty()
        let journalFD = dup(journal.fd)
        guard journalFD >= 0 else {
            for d in descriptors { Glibc.close(d.fd) }
            throw GDBMErrors.system(errno, "dup", path: journal.path)
        }
        syncInFlight = true
        opsSinceFlush = 0
        if mark {
            commitsSinceMark = 0
            lastSyncPoint = GDBMEngine.monotonicNanoseconds()
        }
        let journalPath = journal.path
        let dataDirectory = primary.directory
        let sent = UncheckedSendable((journal, descriptors))
        let queued = submitBackground { [self] in
            let failure: (any Error)?
            do {
                for d in sent.value.1 { try FileSystem.sync(descriptor: d.fd, path: d.path) }
                if directoryChanged { try FileSystem.syncDirectory(dataDirectory) }
                try FileSystem.sync(descriptor: journalFD, path: journalPath)
                failure = nil
            } catch {
                failure = error
            }
            for d in sent.value.1 { Glibc.close(d.fd) }
            Glibc.close(journalFD)
            let finished = UncheckedSendable(sent.value.0)
            // Refused only once the store is closed; nothing is then left to mark.
            thread.submit { [self] in
                writerLock.withLock {
                    syncInFlight = false
                    if let failure {
                        state.withLock { $0.failure = DepotError.wrap(failure, as: .io, "A sync point of the GDBM files failed.") }
                    } else if mark {
                        finishSyncPoint(seq, journal: finished.value)
                        // Commits made during the fsyncs found this sync point running and
                        // started none; the last of them would get its mark only with the
                        // next commit, or at close. When one is due by now, it starts here.
                        if syncPointDue {
                            do {
                                try startSyncPoint()
                            } catch {
                                state.withLock { $0.failure = DepotError.wrap(error, as: .io, "Starting a sync point of the GDBM files failed.") }
                            }
                        }
                    } else {
                        flushCount.withLock { $0 += 1 }
                    }
                }
            }
        }
        if !queued {
            for d in descriptors { Glibc.close(d.fd) }
            Glibc.close(journalFD)
            syncInFlight = false
        }
    }

    /// Ends a sync point on the writer thread: the primary files and the journal were
    /// fsynced up to commit `seq`; if it is still the last commit, in the same segment,
    /// the journal says so with `applied(seq)` (recovery trusts only a mark for the last
    /// commit, Docs/GDBMDriver.md).
    private func finishSyncPoint(_ seq: UInt64, journal synced: Journal) {
        guard let journal, journal === synced, lastSeq == seq, state.withLock({ $0.isOpen && $0.failure == nil }) else { return }
        do {
            try journal.append(.applied(seq: seq), sync: options.durability == .full)
            journalSyncedSinceMark = false
        } catch {
            state.withLock { $0.failure = DepotError.wrap(error, as: .io, "Marking a sync point in the GDBM journal failed.") }
        }
    }

    /// A sync point that waits for its fsyncs (closing): every commit applied, the primary
    /// files and the journal synced, then `applied(n)`.
    private func syncPointNow() throws {
        guard let journal, state.withLock({ $0.pending.isEmpty }) else { return }
        try primary.syncAll()
        guard commitsSinceMark > 0 || syncInFlight else { return }
        try journal.sync()
        try journal.append(.applied(seq: lastSeq), sync: options.durability == .full)
        journalSyncedSinceMark = false
        commitsSinceMark = 0
        lastSyncPoint = GDBMEngine.monotonicNanoseconds()
    }

    // MARK: Background work

    /// Queues `job` on ``background``, counted until it ends (``waitForBackground()``).
    @discardableResult
    private func submitBackground(_ job: @escaping @Sendable () -> Void) -> Bool {
        folds.withLock { $0.jobs += 1 }
        let queued = background.submit { [self] in
            job()
            folds.withLock { $0.jobs -= 1 }
        }
        if !queued { folds.withLock { $0.jobs -= 1 } }
        return queued
    }

    /// Blocks until no background job is queued or running (closing and repairing: nothing
    /// may touch the backups or the journal segments meanwhile). A fold stops early once the
    /// store is no longer open.
    private func waitForBackground() {
        while folds.withLock({ $0.jobs > 0 }) { usleep(1000) }
    }

    /// Waits until the writer thread has done what was queued for it (a rotation an inline
    /// commit left to it), then until the background work has finished (tests).
    func waitForFolds() async {
        _ = try? await thread.run {}
        while folds.withLock({ $0.jobs > 0 }) { try? await Task.sleep(nanoseconds: 1_000_000) }
    }

    /// Returns once no sync point or flush is running (its fsyncs done and its end handled
    /// on the writer thread, so ``flushes`` counts it): what a test checks after a commit
    /// that starts one. ``waitForFolds()`` does not wait for them.
    func waitForSyncPoints() async {
        while true {
            _ = try? await thread.run {}
            if !writerLock.withLock({ syncInFlight }) { return }
            try? await Task.sleep(nanoseconds: 1_000_000)
        }
    }

    /// The backup state and the closed segments (tests).
    var backupState: (state: BackupState, closedSegments: [JournalSegment]) {
        folds.withLock { ($0.backup, $0.closed) }
    }

    private func scheduleFold() {
        guard folds.withLock({ !$0.closed.isEmpty }) else { return }
        submitBackground { [self] in
            do {
                try fold(whileOpen: true)
            } catch is FoldStopped {
            } catch {
                state.withLock { $0.failure = DepotError.wrap(error, as: .io, "Folding the GDBM journal into a backup failed.") }
            }
        }
    }

    /// The store closed while a fold ran: it stops, leaving the backup it wrote marked
    /// unsound (the next fold starts it again).
    private struct FoldStopped: Error {}

    /// Brings the older backup up to the end of the newest closed segment, then makes it
    /// the current one (Docs/GDBMDriver.md, "Backups and folds"). On ``background``,
    /// holding neither the writer lock nor the files lock: it reads closed segments, which
    /// never change, and writes only the backup that ``BackupState`` does not call current.
    ///
    /// 1. `backup.state` is rewritten to say the other backup is unsound (so a crash from
    ///    here on never trusts it);
    /// 2. if it was unsound already, the current backup's files are copied into it;
    /// 3. every transaction after its commit, up to the newest closed segment's end, is
    ///    replayed into it; its files and directory are fsynced;
    /// 4. `backup.state` names it current at that commit, and the former current one as the
    ///    sound older backup;
    /// 5. closed segments that neither backup needs any more are removed.
    ///
    /// `whileOpen`: a background fold, which stops once the store is closing (closing runs
    /// its own fold afterwards, with `whileOpen` false).
    private func fold(whileOpen: Bool) throws {
        let (backup, closed) = folds.withLock { ($0.backup, $0.closed) }
        guard let newest = closed.last, newest.end > backup.currentSeq else { return }
        if whileOpen { guard state.withLock({ $0.isOpen }) else { return } }
        let target = backups[backup.other]
        let source = backups[backup.current]
        try BackupState(current: backup.current, currentSeq: backup.currentSeq, previousSeq: nil).write(directory: directory)
        folds.withLock { $0.backup.previousSeq = nil }
        // Replaying a journal byte costs gdbm about four times what copying a file byte
        // costs: after a bulk load, copying the current backup and replaying only the newest
        // segments beats replaying the load a second time.
        func journalBytes(after seq: UInt64) -> Int {
            closed.filter { $0.end > seq }.reduce(0) { $0 + $1.bytes }
        }
        var start: UInt64
        if let previous = backup.previousSeq,
            4 * journalBytes(after: previous) <= (try FileSystem.gdbmFiles(in: source.directory)).reduce(0, { $0 + FileSystem.size(source.path($1)) }) + 4 * journalBytes(after: backup.currentSeq)
        {
            start = previous
        } else {
            try target.removeAllFiles()
            for id in try FileSystem.gdbmFiles(in: source.directory) {
                try FileSystem.copy(source.path(id), to: target.path(id))
            }
            start = backup.currentSeq
        }
        defer { target.closeAll() }
        // One coalescer across the segments: a key updated in several of them is stored
        // once, which matters most when folds fell behind and several segments wait.
        var replay = FileOpCoalescer()
        for segment in closed where segment.end > start {
            if whileOpen { guard state.withLock({ $0.isOpen }) else { throw FoldStopped() } }
            // A segment is fsynced before a backup depends on it (at `full` every commit
            // already was).
            let (_, records) = try Journal.readSegment(path: segment.path, sync: !segment.synced)
            if !segment.synced { folds.withLock { $0.markSynced(segment.path) } }
            for case .transaction(let seq, let ops) in records where seq > start && seq <= newest.end {
                for op in ops { try replay.add(op, apply: target.apply) }
            }
            if replay.keptBytes >= options.checkpointBytes { try replay.flush(apply: target.apply) }
        }
        try replay.flush(apply: target.apply)
        // Its files, and its directory when files came or went (a copy starts by removing them).
        try target.syncAll()
        target.closeAll()
        let next = BackupState(current: backup.other, currentSeq: newest.end, previousSeq: backup.currentSeq)
        try next.write(directory: directory)
        let obsolete = folds.withLock { folds -> [JournalSegment] in
            folds.backup = next
            let gone = folds.closed.filter { $0.end <= backup.currentSeq }
            folds.closed.removeAll { $0.end <= backup.currentSeq }
            return gone
        }
        // No fsync of the directory: a removed segment that comes back after a power loss
        // ends before the older backup's commit, and opening removes it again.
        for segment in obsolete { try FileSystem.remove(segment.path) }
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
