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
