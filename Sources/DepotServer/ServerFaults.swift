import DepotCore

/// Faults a ``DepotServer`` injects on purpose, so tests can prove a client survives them.
///
/// A test double, so package-level (as the `faults` member of ``DepotServer/Configuration``):
/// the server's tests and the sync tests use it; users of the server never see it.
///
/// Each request asks ``decide`` what to do; the answer is one ``ServerFault`` or `nil`
/// (serve normally). Use ``seeded(seed:rate:)`` for a reproducible random mix.
package struct ServerFaults: Sendable {
    /// Decides the fault for a request, given its method and path.
    package var decide: @Sendable (_ method: String, _ path: String) -> ServerFault?

    /// Makes a fault plan from a closure.
    package init(decide: @escaping @Sendable (_ method: String, _ path: String) -> ServerFault?) {
        self.decide = decide
    }

    /// A reproducible random mix: with probability `rate` a request gets one of the faults
    /// (drop before handling, 500, 503, 429, a short delay, a lost answer after the commit, or
    /// a batch cut in half: its first half committed, no answer).
    package static func seeded(seed: UInt64, rate: Double) -> ServerFaults {
        let generator = Locked(SplitMix64(seed: seed))
        return ServerFaults { _, _ in
            generator.withLock { g -> ServerFault? in
                guard g.nextUnit() < rate else { return nil }
                switch g.next() % 7 {
                case 0: return .dropConnection
                case 1: return .status(500)
                case 2: return .status(503)
                case 3: return .status(429)
                case 4: return .delay(milliseconds: Int(g.next() % 30))
                case 5: return .loseResponseMidBatch
                default: return .loseResponseAfterCommit
                }
            }
        }
    }
}

/// One injected fault.
package enum ServerFault: Sendable, Hashable {
    /// Close the connection without answering and without handling the request.
    case dropConnection
    /// Answer with this status (500, 503, 429...) without handling the request.
    case status(Int)
    /// Wait, then handle normally.
    case delay(milliseconds: Int)
    /// Handle the request (commit any write), then close the connection without an answer.
    case loseResponseAfterCommit
    /// On `POST /_batch`: apply and commit the first half of the entries (rounded up), skip
    /// the rest, then close the connection without an answer. On any other request the same
    /// as ``loseResponseAfterCommit``.
    case loseResponseMidBatch
    /// A file download (`GET /_files/NAME`) whose head promises the whole body but whose
    /// connection closes after about this many bytes (a chunk boundary at or past it).
    case truncateBody(afterBytes: Int)
    /// A file download that announces and sends this many bytes fewer than the file holds:
    /// a complete HTTP answer with the wrong length.
    case understateLength(by: Int)
    /// A file download that waits this long before each chunk, so a test can act mid-body.
    case pace(milliseconds: Int)
}

extension DepotServer.Configuration {
    /// The default configuration with `faults` injected (tests of clients).
    package init(faults: ServerFaults?) {
        self.init()
        self.faults = faults
    }
}
