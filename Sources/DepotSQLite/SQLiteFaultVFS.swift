import CSQLiteShim
import DepotCore
import Foundation

/// A fault-injecting SQLite VFS for tests (Docs/SQLiteDriver.md, "I/O fault injection"):
/// the C shim's `depot_fault_vfs`, registered under its own name over the default VFS.
///
/// It numbers every operation that can fail (opens, deletes, access checks, reads, writes,
/// truncates, syncs, file sizes, file locks, shared-memory maps and shared-memory lock
/// acquisitions) from 1 after ``arm(failingAt:mode:kind:)`` and fails the chosen one, or it
/// and every later one, with the result the unix VFS gives for `EIO` or `ENOSPC`. Only a
/// driver opened with ``SQLiteTestSettings/vfs`` set to its ``name`` uses it; no store
/// string reaches it.
///
/// ```swift
/// let vfs = try SQLiteFaultVFS()
/// let driver = try await SQLiteDriver(path: path, testSettings: .init(vfs: vfs.name))
/// vfs.arm(failingAt: 3, mode: .once, kind: .eio)   // the third operation from now fails
/// ```
final class SQLiteFaultVFS: @unchecked Sendable {
    // @unchecked: the C object is immutable after registration but for its state, which
    // its own mutex guards.

    /// How long a failure lasts.
    enum Mode: Sendable, Hashable, CustomStringConvertible {
        /// Only operation N fails.
        case once
        /// Operation N and every later one fail (a dead disk).
        case always

        var description: String { self == .once ? "once" : "always" }
    }

    /// What a failure imitates.
    enum Kind: Sendable, Hashable, CustomStringConvertible {
        /// `EIO`: the operation's `SQLITE_IOERR_*` code (`SQLITE_CANTOPEN` for an open).
        case eio
        /// `ENOSPC`: a write writes half its bytes and fails with `SQLITE_FULL`; other
        /// operations fail as with `eio`.
        case enospc

        var description: String { self == .eio ? "EIO" : "ENOSPC" }
    }

    private let handle: OpaquePointer
    /// The name the VFS is registered under (pass it as ``SQLiteTestSettings/vfs``).
    let name: String

    private static let serial = Locked(0)

    /// Registers a new VFS with a fresh name, disarmed. It stays registered for the life of
    /// the process (a connection may still be using it when this object goes away).
    /// - Throws: `.internal` when SQLite refuses to register it.
    init() throws {
        let number = SQLiteFaultVFS.serial.withLock { n -> Int in
            n += 1
            return n
        }
        let name = "depot-fault-\(getpid())-\(number)"
        guard let handle = depot_fault_vfs_register(name) else {
            throw DepotError(.internal, "Could not register the fault-injecting SQLite VFS '\(name)'.")
        }
        self.handle = handle
        self.name = name
    }

    /// Restarts counting at zero and makes operation `n` (1-based) fail, once or from then on.
    func arm(failingAt n: Int, mode: Mode, kind: Kind) {
        depot_fault_vfs_arm(handle, Int64(n), mode == .always ? 1 : 0, kind == .eio ? Int32(DEPOT_FAULT_EIO) : Int32(DEPOT_FAULT_ENOSPC))
    }

    /// Restarts counting at zero with no failure planned (to count an operation's steps).
    func disarm() { depot_fault_vfs_disarm(handle) }

    /// Operations counted since the last ``arm(failingAt:mode:kind:)`` or ``disarm()``.
    var operationCount: Int { Int(depot_fault_vfs_count(handle)) }

    /// Operations made to fail since the last ``arm(failingAt:mode:kind:)`` or ``disarm()``.
    var failureCount: Int { Int(depot_fault_vfs_failures(handle)) }

    /// The names of the operations counted, in order (the first 4,096).
    var operationLog: [String] {
        (0..<min(operationCount, 4096)).map { index in
            switch Int(depot_fault_vfs_operation(handle, Int64(index + 1))) {
            case Int(DEPOT_FAULT_OP_OPEN): "open"
            case Int(DEPOT_FAULT_OP_DELETE): "delete"
            case Int(DEPOT_FAULT_OP_ACCESS): "access"
            case Int(DEPOT_FAULT_OP_READ): "read"
            case Int(DEPOT_FAULT_OP_WRITE): "write"
            case Int(DEPOT_FAULT_OP_TRUNCATE): "truncate"
            case Int(DEPOT_FAULT_OP_SYNC): "sync"
            case Int(DEPOT_FAULT_OP_FILESIZE): "fileSize"
            case Int(DEPOT_FAULT_OP_LOCK): "lock"
            case Int(DEPOT_FAULT_OP_SHMMAP): "shmMap"
            case Int(DEPOT_FAULT_OP_SHMLOCK): "shmLock"
            default: "?"
            }
        }
    }
}

/// Settings only the driver's own tests use (Docs/SQLiteDriver.md, "I/O fault injection"):
/// internal to the module, so no store string or public initializer reaches them.
struct SQLiteTestSettings: Sendable {
    /// The SQLite VFS every connection of the store opens with (a ``SQLiteFaultVFS``'s
    /// name); `nil` for the default.
    var vfs: String?
    /// The write-ahead log's size, in pages, that triggers a checkpoint after a commit
    /// (``SQLiteDriver/checkpointPages`` by default; `1` checkpoints after every commit).
    var checkpointPages: Int32 = SQLiteDriver.checkpointPages
}
