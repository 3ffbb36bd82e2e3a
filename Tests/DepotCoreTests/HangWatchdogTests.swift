import Foundation
import Testing

@testable import DepotCore

/// ``HangWatchdog``: `onHang` comes once for a piece that runs past the limit, never for one
/// that ends in time.
@Suite struct HangWatchdogTests {
    private final class Calls: Sendable {
        let limits = Locked<[Double]>([])
    }

    @Test func callsOnceForAHangAndNeverForAPieceThatEnds() async throws {
        let calls = Calls()
        let watchdog = HangWatchdog(limit: 0.5, pollInterval: 0.01) { limit in calls.limits.withLock { $0.append(limit) } }
        defer { watchdog.stop() }

        watchdog.begin(at: HangWatchdog.now())
        watchdog.end()
        try await Task.sleep(for: .seconds(1))
        #expect(calls.limits.withLock { $0 }.isEmpty, "a piece that ended in time")

        watchdog.begin(at: HangWatchdog.now())
        let deadline = ContinuousClock.now + .seconds(30)
        while calls.limits.withLock({ $0 }).isEmpty, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        try await Task.sleep(for: .seconds(1))
        #expect(calls.limits.withLock { $0 } == [0.5], "one call, with the limit, for the piece still running")
        watchdog.end()
    }
}
