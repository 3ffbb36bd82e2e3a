/// One function that reads bytes from outside, with its contract written as code.
///
/// ``check`` gets one input. It returns normally when the function kept its contract: `true`
/// when it returned a value (and, where there is one, the round trip was stable), `false`
/// when it threw one of the errors it documents. It throws a ``FuzzViolation`` otherwise. A trap cannot be
/// caught: ``FuzzGuard`` saves the input that caused it before the process dies.
///
/// ```swift
/// let target = FuzzTarget(name: "store-location", seeds: [Array("sqlite:a.db".utf8)]) { bytes in
///     try FuzzContract.expecting(DepotError.self) { try StoreLocation(String(decoding: bytes, as: UTF8.self)) } != nil
/// }
/// ```
///
/// See Docs/Fuzzing.md for the targets and the contract.
public struct FuzzTarget: Sendable {
    /// The name used on the command line, for the corpus folder and in failure files.
    public let name: String
    /// What the target reads, for `depot-fuzz --list` and the docs.
    public let summary: String
    /// Inputs the target starts from when its corpus folder is missing or empty.
    public let seeds: [[UInt8]]
    /// Tokens the mutator inserts (keywords, delimiters, tags, extreme numbers).
    public let dictionary: [[UInt8]]
    /// The opening and closing tokens of one nesting level (`[` and `]` for JSON), for the
    /// deep-nesting mutation; `nil` when the format does not nest in text.
    public let nesting: (open: [UInt8], close: [UInt8])?
    /// Runs one input and checks the contract: `true` when the function returned a value,
    /// `false` when it threw a documented error.
    public let check: @Sendable ([UInt8]) throws(FuzzViolation) -> Bool

    /// A target.
    public init(
        name: String, summary: String = "", seeds: [[UInt8]] = [], dictionary: [[UInt8]] = [],
        nesting: (open: [UInt8], close: [UInt8])? = nil,
        check: @escaping @Sendable ([UInt8]) throws(FuzzViolation) -> Bool
    ) {
        self.name = name
        self.summary = summary
        self.seeds = seeds
        self.dictionary = dictionary
        self.nesting = nesting
        self.check = check
    }

    /// The same target with more seeds and dictionary tokens (from its corpus folder and
    /// dictionary file).
    public func adding(seeds more: [[UInt8]], dictionary tokens: [[UInt8]]) -> FuzzTarget {
        FuzzTarget(name: name, summary: summary, seeds: seeds + more, dictionary: dictionary + tokens, nesting: nesting, check: check)
    }
}

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

    public var description: String { "\(kind.rawValue): \(message)" }
}

/// Helpers that targets use to state their contract.
public enum FuzzContract {
    /// Runs `body`; returns its value, or `nil` when it threw an error `isTyped` accepts.
    /// - Throws: ``FuzzViolation`` `.untypedError` for any other error, and passes on a
    ///   ``FuzzViolation`` thrown by `body` itself.
    public static func expecting<T>(_ isTyped: (any Error) -> Bool, _ body: () throws -> T) throws(FuzzViolation) -> T? {
        do {
            return try body()
        } catch let violation as FuzzViolation {
            throw violation
        } catch {
            guard isTyped(error) else {
                throw FuzzViolation(.untypedError, "\(type(of: error)): \(String(describing: error).prefix(300))")
            }
            return nil
        }
    }

    /// ``expecting(_:_:)`` where the one documented error is `E` (DepotError, usually).
    public static func expecting<E: Error, T>(_ type: E.Type, _ body: () throws -> T) throws(FuzzViolation) -> T? {
        try expecting({ $0 is E }, body)
    }

    /// Throws a `.contract` violation with `message` unless `condition` holds.
    public static func require(_ condition: Bool, _ message: @autoclosure () -> String) throws(FuzzViolation) {
        guard condition else { throw FuzzViolation(.contract, message()) }
    }
}
