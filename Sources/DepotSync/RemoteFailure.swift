import DepotCore
import Foundation

/// What went wrong with one request of a ``RemoteResource``, kept as the ``DepotError/cause``
/// of the ``DepotError`` it throws (Docs/Remote.md, "Errors and retries").
///
/// ```swift
/// do { _ = try await posts.fetch(id: 7) }
/// catch let error as DepotError {
///     if let failure = error.remoteFailure, failure.isRetryable { /* try again later */ }
///     print(error.code, failure?.status, failure?.serverMessage)   // notFound 404 "no post 7"
/// }
/// ```
///
/// Nothing in it is a secret: the request is named by method and path only (no query, no
/// headers), and the server's message is cut to ``RemoteFailure/maximumMessageLength``
/// characters with every credential the request carried (sensitive headers, parameters a
/// request hook added) replaced by `[redacted]`.
public struct RemoteFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure.
    public enum Kind: Sendable, Hashable {
        /// The server answered with a status that is not 2xx: see ``RemoteFailure/status``.
        case status
        /// No answer arrived: refused, timed out, or the connection closed before the whole
        /// answer (a body shorter than its `Content-Length`).
        case noAnswer
        /// A 2xx answer whose body is not what the resource expects: not JSON (a truncated
        /// body), no list or object where the envelope says, an item without a usable id.
        case invalidAnswer
        /// The answer is well-formed but does not decode as the model type.
        case decoding
        /// The request could not be made: a path with characters a path may not hold, a
        /// model without an id where one is needed, plain HTTP to a remote host.
        case invalidRequest
    }

    /// The longest server message kept, in characters.
    public static let maximumMessageLength = 200

    /// The kind of failure.
    public var kind: Kind
    /// The request, as `METHOD /path` (no query, no headers).
    public var request: String
    /// The HTTP status of the last answer, when one came.
    public var status: Int?
    /// The server's own message (`message`, `error`, `detail`... of a JSON body, or the
    /// start of a text body), bounded in length, with credentials redacted.
    public var serverMessage: String?
    /// `true` when the same request may succeed later: no answer, 408, 425, 429 or 5xx.
    public var isRetryable: Bool
    /// How many times the request was sent.
    public var attempts: Int

    /// Makes a failure.
    public init(kind: Kind, request: String, status: Int? = nil, serverMessage: String? = nil, isRetryable: Bool, attempts: Int = 1) {
        self.kind = kind
        self.request = request
        self.status = status
        self.serverMessage = serverMessage
        self.isRetryable = isRetryable
        self.attempts = attempts
    }

    /// One line for a person: the request, the status, the server's message, retryable or not.
    public var description: String {
        var text = request
        switch kind {
        case .status: text += " answered \(status.map(String.init) ?? "?")"
        case .noAnswer: text += " got no complete answer"
        case .invalidAnswer: text += " answered \(status.map(String.init) ?? "?") with an unexpected body"
        case .decoding: text += " answered a record that does not decode"
        case .invalidRequest: text += " could not be sent"
        }
        if attempts > 1 { text += " after \(attempts) attempts" }
        if let serverMessage, !serverMessage.isEmpty { text += ": \(serverMessage)" }
        text += isRetryable ? " (retryable)" : " (not retryable)"
        return text
    }

    /// The ``DepotError`` code for this failure: `.notFound` for 404 and 410, `.conflict`
    /// for 409 and 412, `.decoding` for a record that does not decode, `.invalidValue` for a
    /// request that could not be made, `.remote` for everything else.
    var code: DepotError.Code {
        switch kind {
        case .status:
            switch status {
            case 404, 410: return .notFound
            case 409, 412: return .conflict
            default: return .remote
            }
        case .decoding: return .decoding
        case .invalidRequest: return .invalidValue
        case .noAnswer, .invalidAnswer: return .remote
        }
    }

    /// This failure as the error a resource throws.
    func error(collection: String? = nil, id: RecordID? = nil) -> DepotError {
        DepotError(code, description, collection: collection, id: id, cause: self)
    }

    /// The server's message of an error answer: a string under `message`, `error`
    /// (or `error.message`), `detail`, `reason` or `title` of a JSON object, else the start
    /// of the body as text. Control characters become spaces; `secrets` are redacted; the
    /// result is at most ``maximumMessageLength`` characters.
    static func serverMessage(_ answer: HTTPAnswer, redacting secrets: [String]) -> String? {
        guard !answer.body.isEmpty else { return nil }
        var text: String?
        if let object = try? JSONText.parse([UInt8](answer.body.prefix(64 * 1024))).objectValue {
            // `try?`: a body that is not JSON is read as text below.
            for key in ["message", "error", "detail", "reason", "title"] {
                if let value = object[key]?.stringValue { text = value; break }
                if let value = object[key]?.objectValue?["message"]?.stringValue { text = value; break }
            }
        }
        if text == nil { text = String(decoding: answer.body.prefix(4 * maximumMessageLength), as: UTF8.self) }
        guard var message = text else { return nil }
        message = String(message.unicodeScalars.map { CharacterSet.controlCharacters.contains($0) ? " " : Character($0) })
        for secret in secrets where secret.count >= 3 {
            message = message.replacingOccurrences(of: secret, with: "[redacted]")
        }
        message = message.trimmingCharacters(in: .whitespaces)
        if message.count > maximumMessageLength { message = String(message.prefix(maximumMessageLength - 1)) + "…" }
        // A secret cut in half at the end would survive the replacement above.
        for secret in secrets where secret.count >= 3 {
            var cut = secret
            while cut.count >= 3 {
                if message.hasSuffix(cut + "…") {
                    message = String(message.dropLast(cut.count + 1)) + "[redacted]…"
                    break
                }
                cut.removeLast()
            }
        }
        return message
    }
}

extension DepotError {
    /// The details of a failed ``RemoteResource`` request (status, the server's message,
    /// whether a retry may help), or `nil` for an error of another origin.
    public var remoteFailure: RemoteFailure? { cause as? RemoteFailure }
}
