import DepotCore
import Foundation

/// The mutable heart of a ``JSONFileDriver``: the loaded state, what is known about the
/// file on disk, the lock, and the commit procedure. Used only on the driver's thread,
/// except ``published`` and ``unchangedSnapshot()``, which any thread may use.
final class JSONFileStore: @unchecked Sendable {
    // @unchecked: every method and property except `published` (a Locked),
    // `unchangedSnapshot()` and `checkedSnapshot()` (which read only `published`, the
    // immutable `path`, the Sendable `watch` and the Sendable, thread-safe `fs`) is used
    // only from jobs run on the owning driver's
    // `BlockingExecutor` (one worker), which runs one job at a time; so no two accesses
    // ever overlap.

    /// What the driver knows about the file on disk.
    enum Known: Sendable {
        /// Nothing trustworthy: reload before the next use.
        case unknown
        /// There is no file: the store is empty.
        case missing
        /// The file with this identity was loaded into `committed`.
        case loaded(FileIdentity)
        /// The file with this identity could not be read; it is never written over.
        case unreadable(FileIdentity, DepotError)
    }

    let path: String
    let directory: String
    let temporaryPath: String
    let lockPath: String
    let configuration: JSONFileDriver.Configuration
    let fs: any JSONFileSystem
    /// The change notification over the store's folder, made before the first load so no
    /// edit after it goes unreported; `nil`: every read `stat`s.
    let watch: FileChangeWatch?

    // Invariant for readers: `committed` is always assigned before `known`. A reader trusts
    // the published state only when the file still has the published identity; publishing a
    // new state under the old identity merely sends readers to the driver's thread, while
    // a new identity beside the old state would be a stale read.
    private(set) var committed = JSONStoreState() { didSet { publish() } }
    private(set) var known: Known = .unknown { didSet { publish() } }

    /// What read transactions take without going to the driver's thread: the committed
    /// state, the identity of the file it is the content of, and whether the store is
    /// closed; replaced (as one object) whenever any of them changes on the driver's thread.
    /// An object, so that a read takes it under the lock with one retain, not a copy of each
    /// of its parts.
    final class Published: Sendable {
        let state: JSONStoreState
        let known: Known
        let isClosed: Bool
        init(state: JSONStoreState, known: Known, isClosed: Bool) {
            self.state = state
            self.known = known
            self.isClosed = isClosed
        }
    }
    let published = Locked(Published(state: JSONStoreState(), known: .unknown, isClosed: false))

    private func publish() {
        let now = Published(state: committed, known: known, isClosed: isClosed)
        // The previous value is released after the lock is let go: freeing a state no one
        // else holds (a whole collection's storage) must not keep readers waiting.
        let previous = published.withLock { current in
            let previous = current
            current = now
            return previous
        }
        _ = consume previous
    }

    /// The published committed state when the file on disk is still the one it holds;
    /// `nil` when the driver's thread must look (the file changed, or its state is not known
    /// or not readable). Safe from any thread, no I/O but one system call: with a change
    /// watch that reports nothing new, an `ioctl`; otherwise a `stat` (after draining the
    /// watch's events, so that the reads after it can skip the `stat` again).
    /// - Throws: `.closed` once the store is closed, `.io` when the file cannot be checked.
    func unchangedSnapshot() throws -> JSONStoreState? {
        if let watch, watch.isQuiet() {
            // Only the state is copied out of the lock (the published object is not retained).
            let (closed, state) = published.withLock { current -> (Bool, JSONStoreState?) in
                switch current.known {
                case .loaded, .missing: return (current.isClosed, current.state)
                case .unknown, .unreadable: return (current.isClosed, nil)
                }
            }
            if closed { throw DepotError(.closed, "The JSON store \(path) is closed.") }
            return state
        }
        if let watch, let verified = try watch.drainThenVerify({ try checkedSnapshot() }) { return verified }
        return try checkedSnapshot()
    }

    /// The published committed state when one `stat` finds the file still has the published
    /// identity (or still missing); `nil` otherwise.
    private func checkedSnapshot() throws -> JSONStoreState? {
        let current = published.withLock { $0 }
        if current.isClosed { throw DepotError(.closed, "The JSON store \(path) is closed.") }
        let expected: FileIdentity?
        switch current.known {
        case .loaded(let identity): expected = identity
        case .missing: expected = nil
        case .unknown, .unreadable: return nil
        }
        let now: FileIdentity?
        do { now = try fs.identity(ofPath: path) } catch { throw JSONFileDriver.mapError(error, while: "check the store file \(path)") }
        return now == expected ? current.state : nil
    }

    /// An open descriptor of the file `known` describes. Holding it keeps the inode alive,
    /// so a replacement file can never reuse its inode number and look unchanged.
    private var pinned: Int32?
    private var lockDescriptor: Int32?
    private(set) var isClosed = false { didSet { publish() } }
    /// The size of the last file written, to size the next buffer.
    private var lastSize = 1 << 16
    /// The serialized records of `committed`, reused by the next commit for every record
    /// it does not touch. Emptied whenever `committed` is loaded from the file.
    private var recordBytes: JSONDocument.RecordBytes = [:]

    init(path: String, configuration: JSONFileDriver.Configuration, fileSystem: any JSONFileSystem) {
        self.path = path
        let url = URL(fileURLWithPath: path)
        directory = url.deletingLastPathComponent().path
        temporaryPath = url.deletingLastPathComponent().appendingPathComponent("." + url.lastPathComponent + ".tmp").path
        lockPath = path + ".lock"
        self.configuration = configuration
        self.fs = fileSystem
        watch = configuration.changeNotification ? fileSystem.changeWatch(directory: directory) : nil
    }

    // MARK: Loading

    /// Makes `committed` match the file on disk, reloading if the file changed since it was
    /// last read or written (device, inode, size, modification or change time differ).
    /// - Throws: `.io` when the file cannot be read, `.corrupted`/`.decoding`/`.schemaMismatch`
    ///   when it cannot be understood (and then every later call too, until the file changes).
    func refresh() throws {
        try checkOpen()
        let current: FileIdentity?
        do { current = try fs.identity(ofPath: path) } catch { throw JSONFileDriver.mapError(error, while: "check the store file \(path)") }
        switch (known, current) {
        case (.missing, nil): return
        case (.loaded(let identity), let now?) where identity == now: return
        case (.unreadable(let identity, let error), let now?) where identity == now: throw error
        default: break
        }
        try reload()
    }

    private func reload() throws {
        let fd: Int32?
        do { fd = try fs.openForReading(path) } catch {
            known = .unknown
            throw JSONFileDriver.mapError(error, while: "open the store file \(path)")
        }
        guard let fd else {
            unpin()
            committed = JSONStoreState()
            recordBytes = [:]
            known = .missing
            return
        }
        let identity: FileIdentity
        let bytes: [UInt8]
        do {
            identity = try fs.identity(of: fd)
            bytes = try fs.readAll(fd, limit: configuration.maximumFileSize)
        } catch {
            fs.closeQuietly(fd)
            if JSONFileDriver.isTooLarge(error) {
                let tooLarge = DepotError(.decoding, "The store file \(path) is larger than \(configuration.maximumFileSize) bytes, the most this driver reads; it was left untouched.")
                if let identity = try? fs.identity(ofPath: path) { known = .unreadable(identity, tooLarge) } else { known = .unknown }
                throw tooLarge
            }
            known = .unknown
            throw JSONFileDriver.mapError(error, while: "read the store file \(path)")
        }
        pin(fd)
        do {
            recordBytes = [:]
            var decoded = try JSONDocument.decode(bytes)
            decoded.completeOrder()
            committed = decoded
            known = .loaded(identity)
            lastSize = bytes.count
        } catch {
            let depotError = JSONFileDriver.mapError(error, while: "read the store file \(path)")
            var shown = depotError
            shown.message = "The store file \(path) cannot be read, so it will not be written: " + depotError.message
            known = .unreadable(identity, shown)
            committed = JSONStoreState()
            recordBytes = [:]
            throw shown
        }
    }

    private func pin(_ fd: Int32) {
        unpin()
        pinned = fd
    }

    private func unpin() {
        if let pinned { fs.closeQuietly(pinned) }
        pinned = nil
    }

    // MARK: Transactions

    /// The committed state after checking the file for changes: a read transaction's
    /// snapshot (a value; later commits do not change it).
    func snapshot() throws -> JSONStoreState {
        try refresh()
        return committed
    }

    func write<T>(_ body: (any WriteTransaction) throws -> T) throws -> T {
        try checkOpen()
        try lock()
        defer { unlock() }
        try refresh()
        let transaction = JSONFileTransaction(state: committed, writable: true)
        let result: T
        do {
            defer { transaction.isValid = false }
            result = try body(transaction)
        }
        if transaction.changed { try commit(transaction.state, touched: transaction.touched, replaced: transaction.replaced) }
        return result
    }

    /// Problems with the store: the file's parse error, or broken invariants.
    func integrityCheck() throws -> [String] {
        do {
            try refresh()
        } catch let error as DepotError where error.code == .corrupted || error.code == .decoding || error.code == .schemaMismatch {
            return [error.message]
        }
        return committed.problems()
    }

    // MARK: Committing

    /// Writes `state` as the new file: a temporary file in the same directory, fsync,
    /// rename over the store, fsync of the directory (the fsyncs only with durability
    /// `full`). `committed` changes only when that succeeded.
    /// - Throws: `.io`; the previous file is then left as it was (see `restore`).
    private func commit(_ state: JSONStoreState, touched: [CollectionName: Set<RecordID>], replaced: Set<CollectionName>) throws {
        let (bytes, newRecordBytes) = JSONDocument.encode(
            state, pretty: configuration.pretty, capacity: lastSize + lastSize / 8 + 4096,
            reusing: recordBytes, touched: touched, replaced: replaced)
        let fd: Int32
        do {
            fd = try writeTemporary(bytes)
            do {
                try fs.rename(temporaryPath, path)
            } catch {
                fs.closeQuietly(fd)
                fs.removeQuietly(temporaryPath)
                throw error
            }
        } catch {
            throw JSONFileDriver.mapError(error, while: "commit to \(path); the store file was not changed")
        }
        if configuration.durability == .full {
            do {
                try fs.fsyncDirectory(directory)
            } catch {
                // The new file is in place but its name may not survive power loss, and the
                // commit was not acknowledged: put the previous content back.
                fs.closeQuietly(fd)
                let restored = restore()
                let outcome = restored
                    ? "the store file was not changed"
                    : "restoring the previous content failed too, so the file may hold this unacknowledged commit"
                throw JSONFileDriver.mapError(error, while: "make a commit to \(path) durable; \(outcome)")
            }
        }
        var state = state
        state.order = newRecordBytes.mapValues(\.records)
        committed = state
        recordBytes = newRecordBytes
        lastSize = bytes.count
        pin(fd)
        if let identity = try? fs.identity(of: fd) { known = .loaded(identity) } else { known = .unknown }
    }

    /// Creates the temporary file with `bytes`, synced when durability is full; returns it open.
    private func writeTemporary(_ bytes: [UInt8]) throws -> Int32 {
        let fd = try fs.openForWriting(temporaryPath, permissions: currentPermissions)
        do {
            try fs.write(fd, bytes)
            if configuration.durability == .full { try fs.fsync(fd) }
        } catch {
            // A failed fsync is never retried: this file is abandoned, and the next commit
            // writes and syncs a new one.
            fs.closeQuietly(fd)
            fs.removeQuietly(temporaryPath)
            throw error
        }
        return fd
    }

    /// After a failed directory sync, writes the last committed state back in the same
    /// atomic way. Returns `false` when that failed too; the file's content is then
    /// unknown and the next use reloads whatever is there.
    private func restore() -> Bool {
        let bytes = JSONDocument.encode(
            committed, pretty: configuration.pretty, capacity: lastSize + 4096, reusing: recordBytes, touched: [:], replaced: []).bytes
        do {
            let fd = try writeTemporary(bytes)
            do { try fs.rename(temporaryPath, path) } catch {
                fs.closeQuietly(fd)
                fs.removeQuietly(temporaryPath)
                throw error
            }
            pin(fd)
            known = .unknown
            if configuration.durability == .full { try fs.fsyncDirectory(directory) }
            if let identity = try? fs.identity(of: fd) { known = .loaded(identity) }
            return true
        } catch {
            known = .unknown
            return false
        }
    }

    /// The permission bits of the file last loaded or written, kept by every commit.
    private var currentPermissions: UInt32? {
        switch known {
        case .loaded(let identity), .unreadable(let identity, _): identity.permissions
        case .unknown, .missing: nil
        }
    }

    // MARK: Locking

    /// Takes the exclusive advisory lock on the lock file beside the store, waiting up to
    /// the lock timeout.
    /// - Throws: `.locked` after the timeout, `.io` when the lock file cannot be used.
    private func lock() throws {
        let fd: Int32
        if let lockDescriptor {
            fd = lockDescriptor
        } else {
            do { fd = try fs.openLockFile(lockPath) } catch { throw JSONFileDriver.mapError(error, while: "open the lock file \(lockPath)") }
            lockDescriptor = fd
        }
        let deadline = ContinuousClock.now.advanced(by: configuration.lockTimeout)
        var pause = Duration.milliseconds(1)
        while true {
            let taken: Bool
            do { taken = try fs.tryLock(fd) } catch { throw JSONFileDriver.mapError(error, while: "lock \(lockPath)") }
            if taken { return }
            let now = ContinuousClock.now
            guard now < deadline else {
                throw DepotError(.locked, "Another process is writing to \(path); gave up after \(configuration.lockTimeout).")
            }
            let wait = min(pause, deadline - now)
            Thread.sleep(forTimeInterval: Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18)
            pause = min(pause * 2, .milliseconds(25))
        }
    }

    private func unlock() {
        if let lockDescriptor { fs.unlock(lockDescriptor) }
    }

    // MARK: Lifecycle

    func checkOpen() throws {
        if isClosed { throw DepotError(.closed, "The JSON store \(path) is closed.") }
    }

    deinit {
        // A driver dropped without `close()`: release the descriptors (nothing else can
        // reach this object any more).
        close()
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        unpin()
        if let lockDescriptor { fs.closeQuietly(lockDescriptor) }
        lockDescriptor = nil
    }
}
