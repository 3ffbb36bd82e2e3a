import DepotCore
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Watches the input being run from another thread; one that runs past `limit` seconds is
/// saved and reported, and the process exits with status 70 (it cannot be interrupted).
final class FuzzWatchdog: Sendable {
    private let target: String
    private let limitNanos: UInt64
    private let directory: String?
    /// When the current input started (monotonic nanoseconds), 0 between inputs.
    private let started = Atomic<UInt64>(0)
    private let stopped = Atomic<Bool>(false)
    private let current = Locked<[UInt8]>([])

    init(target: String, limit: Double, directory: String?) {
        self.target = target
        self.limitNanos = UInt64(max(limit, 0.001) * 1e9)
        self.directory = directory
        Thread.detachNewThread { [self] in watch() }
    }

    /// Processor time of the calling thread, in nanoseconds: what the time budget counts, so
    /// a loaded machine does not turn a fast input into a timeout.
    static func threadCPUTime() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// Monotonic nanoseconds.
    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    func begin(_ input: [UInt8], at time: UInt64) {
        current.withLock { $0 = input }
        started.store(time, ordering: .releasing)
    }

    func end() { started.store(0, ordering: .releasing) }

    func stop() { stopped.store(true, ordering: .releasing) }

    private func watch() {
        while !stopped.load(ordering: .acquiring) {
            usleep(50_000)
            let began = started.load(ordering: .acquiring)
            guard began != 0, FuzzWatchdog.now() &- began > limitNanos else { continue }
            let input = current.withLock { $0 }
            let path = FuzzFiles.save(input, kind: "timeout", target: target, directory: directory)
            FileHandle.standardError.write(Data("depot-fuzz: \(target): an input has run for over \(Double(limitNanos) / 1e9) s (a hang); saved to \(path)\n".utf8))
            _exit(70)
        }
    }
}
