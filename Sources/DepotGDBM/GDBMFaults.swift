import DepotCore
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Fault injection in the driver's file layer, for tests only (Docs/GDBMDriver.md, "I/O
/// fault injection").
///
/// A test installs a plan for a store directory; every operation of the driver's file layer
/// on a path under that directory (journal and file opens, reads, writes, fsyncs, truncates,
/// renames, removals, directory syncs and listings, the lock, and gdbm's open, store, delete
/// and sync calls) is then numbered from 1, and the chosen one fails (once, or it and every
/// later one) with `EIO` or `ENOSPC` before it reaches the system; a failing write first
/// writes half of its bytes (a short write on a full disk). With no plan installed the cost
/// is one atomic load per operation.
///
/// ```swift
/// let plan = GDBMFaultPlan(directory: try GDBMDriver.absolute(path))
/// GDBMFaults.install(plan)
/// defer { GDBMFaults.remove(plan) }
/// plan.arm(failingAt: 3, mode: .once, errno: EIO)   // the third operation from now fails
/// ```
enum GDBMFaults {
    private static let installed = Atomic<Int>(0)
    private static let plans = Locked<[GDBMFaultPlan]>([])

    /// Makes `plan` count the operations under its directory.
    static func install(_ plan: GDBMFaultPlan) {
        plans.withLock { list in
            list.append(plan)
            installed.store(list.count, ordering: .sequentiallyConsistent)
        }
    }

    /// Stops `plan` counting.
    static func remove(_ plan: GDBMFaultPlan) {
        plans.withLock { list in
            list.removeAll { $0 === plan }
            installed.store(list.count, ordering: .sequentiallyConsistent)
        }
    }

    /// Counts `operation` on `path`; returns the `errno` it must fail with, or `nil`.
    @inline(__always)
    static func failure(_ operation: String, path: String) -> Int32? {
        guard installed.load(ordering: .relaxed) > 0 else { return nil }
        let plan = plans.withLock { list in list.first { path == $0.directory || path.hasPrefix($0.directory + "/") } }
        return plan?.tick(operation)
    }

    /// Counts `operation` on `path` and throws the planned `.io` error when it must fail.
    @inline(__always)
    static func check(_ operation: String, path: String) throws {
        if let err = failure(operation, path: path) { throw GDBMErrors.system(err, operation, path: path) }
    }
}

/// One store directory's fault plan (see ``GDBMFaults``).
final class GDBMFaultPlan: Sendable {
    /// How long a failure lasts.
    enum Mode: Sendable, Hashable, CustomStringConvertible {
        /// Only operation N fails.
        case once
        /// Operation N and every later one fail (a dead disk).
        case always

        var description: String { self == .once ? "once" : "always" }
    }

    private struct State {
        var count = 0
        var failAt: Int?
        var mode = Mode.once
        var errno: Int32 = EIO
        var log: [String] = []
        var failures = 0
    }

    /// The store directory (absolute, as ``GDBMDriver/directory`` gives it).
    let directory: String
    private let state = Locked(State())

    /// A plan for the store in `directory`, disarmed (it only counts).
    init(directory: String) {
        self.directory = directory
    }

    /// Restarts counting at zero and makes operation `n` (1-based) fail with `errno`, once or
    /// from then on.
    func arm(failingAt n: Int, mode: Mode, errno: Int32) {
        state.withLock { $0 = State(failAt: n, mode: mode, errno: errno) }
    }

    /// Restarts counting at zero with no failure planned.
    func disarm() {
        state.withLock { $0 = State() }
    }

    /// Operations counted since the last ``arm(failingAt:mode:errno:)`` or ``disarm()``.
    var operationCount: Int { state.withLock { $0.count } }

    /// The names of the operations counted, in order.
    var operationLog: [String] { state.withLock { $0.log } }

    /// How many operations were made to fail.
    var failureCount: Int { state.withLock { $0.failures } }

    /// Counts one operation; returns the `errno` it must fail with, or `nil`.
    fileprivate func tick(_ operation: String) -> Int32? {
        state.withLock { s in
            s.count += 1
            s.log.append(operation)
            guard let n = s.failAt else { return nil }
            let fail = s.mode == .once ? s.count == n : s.count >= n
            guard fail else { return nil }
            s.failures += 1
            return s.errno
        }
    }
}
