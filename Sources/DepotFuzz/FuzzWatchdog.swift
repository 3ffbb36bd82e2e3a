import DepotCore
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Watches the input being run from another thread (a ``HangWatchdog``); one that runs past
/// `limit` seconds is saved and reported, and the process exits with status 70 (it cannot be
/// interrupted).
final class FuzzWatchdog: Sendable {
    /// The input being run, for the report; its own object so that the hang handler can hold it.
    private final class Current: Sendable {
        let input = Locked<[UInt8]>([])
    }

    private let current: Current
    private let watchdog: HangWatchdog

    init(target: String, limit: Double, directory: String?) {
        let current = Current()
        self.current = current
        watchdog = HangWatchdog(limit: limit, pollInterval: 0.05) { limit in
            let input = current.input.withLock { $0 }
            let path = FuzzFiles.save(input, kind: "timeout", target: target, directory: directory)
            FileHandle.standardError.write(Data("depot-fuzz: \(target): an input has run for over \(limit) s (a hang); saved to \(path)\n".utf8))
            _exit(70)
        }
    }

    /// Processor time of the calling thread, in nanoseconds: what the time budget counts, so
    /// a loaded machine does not turn a fast input into a timeout.
    static func threadCPUTime() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// Monotonic nanoseconds.
    static func now() -> UInt64 { HangWatchdog.now() }

    func begin(_ input: [UInt8], at time: UInt64) {
        current.input.withLock { $0 = input }
        watchdog.begin(at: time)
    }

    func end() { watchdog.end() }

    func stop() { watchdog.stop() }
}
