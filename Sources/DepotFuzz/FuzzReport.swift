/// One input that broke a target's contract.
public struct FuzzFailure: Sendable, CustomStringConvertible {
    /// The target's name.
    public var target: String
    /// What broke.
    public var violation: FuzzViolation
    /// The input, to save and replay.
    public var input: [UInt8]
    /// The execution (from 0) that found it.
    public var execution: Int

    /// One line for a report.
    public var description: String { "\(target): execution \(execution): \(violation) (input of \(input.count) bytes)" }
}

/// What a run did.
public struct FuzzReport: Sendable {
    /// The target's name.
    public var target: String
    /// Inputs run.
    public var executions: Int
    /// Inputs the target returned a value for (the rest threw a documented error).
    public var accepted: Int
    /// Wall time of the run, in seconds.
    public var seconds: Double
    /// The slowest input, in seconds of processor time.
    public var slowest: Double
    /// Broken contracts, at most the run's `maximumFailures`.
    public var failures: [FuzzFailure]

    /// Executions per second.
    public var rate: Double { seconds > 0 ? Double(executions) / seconds : 0 }
}
