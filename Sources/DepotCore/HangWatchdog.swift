import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A thread that watches one piece of work at a time and calls `onHang` when one runs past
/// its limit in wall time. A hang cannot be interrupted from inside the process, so `onHang`
/// normally reports what was running and ends the process (`_exit`). The fuzz harness
/// (Docs/Fuzzing.md) and the damaged-store runs (Docs/Testing.md) use it.
///
/// `begin(at:)` and `end()` each cost one atomic store; the thread looks every `pollInterval`,
/// so a hang is noticed between `limit` and `limit + pollInterval` after it began.
package final class HangWatchdog: Sendable {
    private let limitNanos: UInt64
    private let pollMicroseconds: UInt32
    private let onHang: @Sendable (_ limitSeconds: Double) -> Void
    /// When the current piece began (monotonic nanoseconds), 0 between pieces.
    private let started = Atomic<UInt64>(0)
    private let stopped = Atomic<Bool>(false)

    /// Starts the watching thread.
    /// - Parameters:
    ///   - limit: seconds of wall time a piece may run (at least a millisecond).
    ///   - pollInterval: seconds between looks (at least a millisecond).
    ///   - onHang: called on the watching thread with `limit` when a piece runs past it; called
    ///     once per piece.
    package init(limit: Double, pollInterval: Double, onHang: @escaping @Sendable (_ limitSeconds: Double) -> Void) {
        limitNanos = UInt64(max(limit, 0.001) * 1e9)
        pollMicroseconds = UInt32(min(max(pollInterval, 0.001), 60) * 1e6)
        self.onHang = onHang
        Thread.detachNewThread { [self] in watch() }
    }

    /// Monotonic nanoseconds.
    package static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// A piece began at `time` (from ``now()``).
    package func begin(at time: UInt64) { started.store(time, ordering: .releasing) }
    /// The piece ended in time.
    package func end() { started.store(0, ordering: .releasing) }
    /// Ends the watching thread (within one poll interval).
    package func stop() { stopped.store(true, ordering: .releasing) }

    private func watch() {
        while !stopped.load(ordering: .acquiring) {
            usleep(pollMicroseconds)
            let began = started.load(ordering: .acquiring)
            guard began != 0, HangWatchdog.now() &- began > limitNanos else { continue }
            // Once per piece: a later begin(at:) arms it again.
            guard started.compareExchange(expected: began, desired: 0, ordering: .acquiringAndReleasing).exchanged else { continue }
            onHang(Double(limitNanos) / 1e9)
        }
    }
}
