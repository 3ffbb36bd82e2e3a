import DepotCore
import Foundation

/// One dedicated thread that runs a driver's blocking work (file I/O, fsync, waiting for
/// the lock) in submission order, so none of it runs on Swift's cooperative thread pool.
final class DriverThread: @unchecked Sendable {
    // @unchecked: `jobs` and `stopping` are read and written only while `condition` is
    // locked; the thread itself only runs jobs it took out under the lock.
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var stopping = false

    init(name: String) {
        let thread = Thread { [self] in self.loop() }
        thread.name = name
        thread.start()
    }

    private func loop() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopping { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let batch = jobs
            jobs.removeAll(keepingCapacity: true)
            condition.unlock()
            for job in batch { job() }
        }
    }

    /// Queues `job`; `false` once the thread is stopping.
    private func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !stopping else { return false }
        jobs.append(job)
        condition.signal()
        return true
    }

    /// Runs `body` on the thread and returns its result.
    /// - Throws: what `body` throws, or `.closed` once the thread has been stopped.
    func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let accepted = submit { continuation.resume(with: Result { try body() }) }
            if !accepted { continuation.resume(throwing: DepotError(.closed, "The JSON store is closed.")) }
        }
    }

    /// Lets queued jobs finish, then ends the thread. Later ``run(_:)`` calls throw `.closed`.
    func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }
}
