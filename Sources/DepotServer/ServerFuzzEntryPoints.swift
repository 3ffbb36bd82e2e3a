import DepotCore

/// Not public API: DepotServer's readers of request bytes, reachable by the fuzz harness
/// (`DepotFuzz`, Docs/Fuzzing.md). An answer the server would send for bad input comes out
/// as ``Rejected`` with its HTTP status; any other error passes through unchanged.
package enum _ServerFuzzEntryPoints {
    /// The server refused the input with `status` (a 4xx for bad input).
    package struct Rejected: Error {
        /// The HTTP status of the answer.
        package let status: Int
        /// The answer's message.
        package let message: String
    }

    private static func mapping<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let failure as HTTPFailure { throw Rejected(status: failure.status, message: failure.message) }
    }

    /// A request's query string (after `?`) read as a list request does.
    /// - Throws: ``Rejected``.
    package static func query(_ text: String, maxPageSize: Int) throws -> Query {
        try mapping { try QueryParameters(text).query(maxPageSize: maxPageSize) }
    }

    /// A write request's body read as `POST`/`PUT`/`PATCH` do: its id and its fields.
    /// - Throws: ``Rejected``.
    package static func body(_ bytes: [UInt8], keepNulls: Bool) throws -> (id: FieldValue?, fields: [String: FieldValue]) {
        try mapping { try RequestHandler.parseBody(bytes, keepNulls: keepNulls) }
    }

    /// A `Range` header resolved against a file of `size` bytes: the inclusive span, or
    /// `nil` with `satisfiable` saying whether the whole file (`true`) or a 416 (`false`)
    /// is the answer.
    package static func byteRange(_ header: String, size: Int64) -> (span: (Int64, Int64)?, satisfiable: Bool) {
        switch ByteRange.parse(header, size: size) {
        case .span(let start, let end): ((start, end), true)
        case .unsatisfiable: (nil, false)
        case .ignored: (nil, true)
        }
    }

    /// A file name from a `/_files/NAME` path, checked as the files routes do.
    /// - Throws: ``Rejected``.
    package static func fileName(_ name: String) throws -> String {
        try mapping { try FileRoot.validate(name) }
    }
}
