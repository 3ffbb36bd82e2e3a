/// The one error type every Depot API throws.
///
/// - ``code`` says what kind of failure it is; match on it (`error.code == .uniqueViolation`).
///   Codes are an extensible set of static values, so new ones can be added without
///   breaking `switch` statements elsewhere.
/// - ``message`` is safe to show to a user: it never contains secrets (tokens, passwords,
///   auth headers) or raw record contents beyond names and ids.
/// - ``cause`` is the underlying error, if any (an errno, a SQLite result, a decoding error).
/// - ``detail`` is extra text for debugging (SQL, a file offset); it is shown by
///   `debugDescription`, not by `description`.
///
/// ```swift
/// do { try await users.insert(user) }
/// catch let error as DepotError where error.code == .uniqueViolation {
///     print(error.constraint ?? "?")
/// }
/// ```
public struct DepotError: Error, Sendable {
    /// What kind of failure an error is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's stable name, e.g. `"uniqueViolation"`.
        public let name: String
        /// Makes a code. Third-party drivers may define their own codes with new names.
        public init(_ name: String) { self.name = name }
        /// The code's name.
        public var description: String { name }

        /// No record with that id, or no such collection where one was required.
        public static let notFound = Code("notFound")
        /// An insert met an id that exists.
        public static let alreadyExists = Code("alreadyExists")
        /// A write would give two records the same values for a unique constraint.
        public static let uniqueViolation = Code("uniqueViolation")
        /// A concurrent change or a precondition (ETag, version) did not hold.
        public static let conflict = Code("conflict")
        /// Another process or connection holds the store; retry later.
        public static let locked = Code("locked")
        /// A file or record failed its checks: the stored bytes are damaged or not Depot's.
        public static let corrupted = Code("corrupted")
        /// The store was written by a newer schema version, or a migration does not fit.
        public static let schemaMismatch = Code("schemaMismatch")
        /// A collection, field or constraint name is not allowed.
        public static let invalidName = Code("invalidName")
        /// A value cannot be stored (NaN, too deep, wrong id kind, integer overflow).
        public static let invalidValue = Code("invalidValue")
        /// A query is malformed (negative limit, ordering on an array field...).
        public static let invalidQuery = Code("invalidQuery")
        /// A store string or option is malformed or names an unknown driver.
        public static let invalidStore = Code("invalidStore")
        /// The driver does not offer this operation.
        public static let unsupported = Code("unsupported")
        /// The operating system reported an input/output failure (disk full, EIO, permission).
        public static let io = Code("io")
        /// Stored or received data could not be turned into the requested type.
        public static let decoding = Code("decoding")
        /// A Swift value could not be turned into field values.
        public static let encoding = Code("encoding")
        /// A remote server answered with an error or could not be reached.
        public static let remote = Code("remote")
        /// The store or driver was closed.
        public static let closed = Code("closed")
        /// The operation was cancelled.
        public static let cancelled = Code("cancelled")
        /// An internal invariant failed; please report it.
        public static let `internal` = Code("internal")
    }

    /// What kind of failure this is; compare it with the static codes (`error.code == .notFound`).
    public var code: Code
    /// A message safe to show to a user.
    public var message: String
    /// The collection involved, when there is one.
    public var collection: String?
    /// The record id involved, when there is one.
    public var id: RecordID?
    /// The unique constraint involved in a `.uniqueViolation`.
    public var constraint: String?
    /// The underlying error.
    public var cause: (any Error & Sendable)?
    /// Extra detail for debugging; never shown by `description`.
    public var detail: String?

    /// Makes an error. Drivers fill in `collection`, `id` and `constraint` where they apply, keep
    /// the native error as `cause`, and put anything unsafe to show (SQL, offsets) in `detail`.
    public init(
        _ code: Code, _ message: String, collection: String? = nil, id: RecordID? = nil,
        constraint: String? = nil, cause: (any Error & Sendable)? = nil, detail: String? = nil
    ) {
        self.code = code
        self.message = message
        self.collection = collection
        self.id = id
        self.constraint = constraint
        self.cause = cause
        self.detail = detail
    }
}

extension DepotError: CustomStringConvertible, CustomDebugStringConvertible {
    /// The code and the user-safe message; never the detail or the cause.
    public var description: String { "\(code): \(message)" }

    /// Everything: code, message, collection, id, constraint, detail and cause, for logs and
    /// debugging.
    public var debugDescription: String {
        var text = "DepotError(\(code)): \(message)"
        if let collection { text += " [collection: \(collection)]" }
        if let id { text += " [id: \(id)]" }
        if let constraint { text += " [constraint: \(constraint)]" }
        if let detail { text += " [detail: \(detail)]" }
        if let cause { text += " [cause: \(String(reflecting: cause))]" }
        return text
    }
}

extension DepotError {
    /// Wraps any error as a ``DepotError``: a DepotError passes through unchanged,
    /// a cancellation becomes `.cancelled`, anything else becomes `code` with `message`.
    public static func wrap(_ error: any Error, as code: Code = .internal, _ message: String = "Unexpected error.") -> DepotError {
        if let error = error as? DepotError { return error }
        if error is CancellationError { return DepotError(.cancelled, "The operation was cancelled.", cause: error) }
        return DepotError(code, message, cause: error)
    }
}
