/// A broken contract: what the target did with one input that it must not do.
public struct FuzzViolation: Error, Sendable, CustomStringConvertible {
    /// What kind of break.
    public enum Kind: String, Sendable {
        /// The function threw an error that is not one it documents.
        case untypedError = "untyped error"
        /// A returned value broke an invariant (a round trip changed it, a value is invalid).
        case contract = "contract"
        /// One input took longer than the time budget.
        case timeout = "timeout"
    }

    /// What kind of break.
    public var kind: Kind
    /// What happened, for the report.
    public var message: String

    /// A violation.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// One line for a report.
    public var description: String { "\(kind.rawValue): \(message)" }
}
