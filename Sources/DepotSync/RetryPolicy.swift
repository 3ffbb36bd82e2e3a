import DepotCore
import Foundation

/// Exponential backoff with full jitter: the wait before retry `n` (from 0) is a uniform
/// random duration in `0 ... min(maxDelay, baseDelay * 2^n)`. A `Retry-After` from the
/// server raises the wait to at least what it asks (capped at `maxDelay`).
///
/// ```swift
/// let policy = RetryPolicy(baseDelay: .milliseconds(100), maxDelay: .seconds(10), maxAttempts: 6)
/// policy.delay(beforeRetry: 2, unit: 0.5)   // 200 ms: half of 400 ms
/// ```
public struct RetryPolicy: Sendable, Hashable {
    /// The cap of the first wait.
    public var baseDelay: Duration
    /// The largest wait.
    public var maxDelay: Duration
    /// Attempts per request before giving up for this sync (the entry stays pending).
    public var maxAttempts: Int

    /// Makes a policy.
    public init(baseDelay: Duration = .milliseconds(200), maxDelay: Duration = .seconds(30), maxAttempts: Int = 6) {
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.maxAttempts = max(1, maxAttempts)
    }

    /// The wait before retry number `retry` (0 for the first retry), given a uniform random
    /// `unit` in `0..<1` and an optional server-requested minimum.
    public func delay(beforeRetry retry: Int, unit: Double, retryAfter: Duration? = nil) -> Duration {
        let cap = Self.seconds(maxDelay)
        let ceiling = min(cap, Self.seconds(baseDelay) * pow(2, Double(min(retry, 60))))
        var wait = ceiling * min(max(unit, 0), 1)
        if let retryAfter { wait = max(wait, min(Self.seconds(retryAfter), cap)) }
        return .nanoseconds(Int64(wait * 1e9))
    }

    static func seconds(_ d: Duration) -> Double {
        let (s, atto) = d.components
        return Double(s) + Double(atto) / 1e18
    }
}

/// What one answer (or failure to get one) means for a push or pull request.
public enum RequestVerdict: Sendable, Hashable {
    /// 2xx: done.
    case success
    /// 409 or 412: the server's record differs from what the client based its write on.
    case conflict
    /// A 404 to a request about one record.
    case notFound
    /// Timeout, connection error, 408, 429 or 5xx: try again later.
    case retry(after: Duration?)
    /// Any other 4xx (and unexpected statuses): the server refuses; retrying cannot help.
    case permanent

    /// Classifies an HTTP status (and a `Retry-After` header in seconds).
    public static func classify(status: Int, retryAfter: String? = nil) -> RequestVerdict {
        switch status {
        case 200..<300: return .success
        case 409, 412: return .conflict
        case 404, 410: return .notFound
        case 408, 425, 429, 500..<600:
            let after = retryAfter.flatMap { Double($0.trimmingCharacters(in: .whitespaces)) }.map { Duration.milliseconds(Int64($0 * 1000)) }
            return .retry(after: after)
        default: return .permanent
        }
    }
}

/// Waits between retries; inject a fake in tests so no real time passes.
public protocol SyncSleeper: Sendable {
    /// Waits `duration`. - Throws: `CancellationError` when the task is cancelled.
    func sleep(for duration: Duration) async throws
}

/// Waits with `Task.sleep`.
public struct TaskSleeper: SyncSleeper {
    /// Makes the default sleeper.
    public init() {}
    /// Waits with `Task.sleep`. - Throws: `CancellationError`.
    public func sleep(for duration: Duration) async throws { try await Task.sleep(for: duration) }
}

/// Uniform random numbers for jitter; inject a seeded one in tests.
public protocol SyncRandomSource: Sendable {
    /// A uniform random number in `0..<1`.
    func nextUnit() -> Double
}

/// The system random generator.
public struct SystemRandomSource: SyncRandomSource {
    /// Makes the default source.
    public init() {}
    /// A uniform random number in `0..<1` from the system generator.
    public func nextUnit() -> Double { Double.random(in: 0..<1) }
}

/// A reproducible source for tests and the crash helper: one ``DepotCore/SplitMix64``
/// behind a lock, so concurrent callers share one seeded sequence.
package final class SeededRandomSource: SyncRandomSource {
    private let generator: Locked<SplitMix64>
    /// Makes a source from a seed.
    package init(seed: UInt64) { generator = Locked(SplitMix64(seed: seed)) }
    /// The next raw 64-bit value.
    package func next() -> UInt64 { generator.withLock { $0.next() } }
    /// A uniform random number in `0..<1` from the seeded sequence.
    package func nextUnit() -> Double { generator.withLock { $0.nextUnit() } }
}
