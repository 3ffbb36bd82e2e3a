import DepotCore
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Uploads, downloads, lists and deletes files on a server with DepotServer's `/_files`
/// routes (Docs/Remote.md, "Files"), streaming from and to disk so memory stays bounded
/// whatever the file's size.
///
/// ```swift
/// let client = FileClient(baseURL: URL(string: "http://127.0.0.1:8080")!)
/// let up = try await client.upload(from: URL(fileURLWithPath: "photo.jpg"), name: "photo.jpg").result()
/// let down = client.download(name: "photo.jpg", to: URL(fileURLWithPath: "copy.jpg"))
/// for await step in down { print(step.bytesDone, "of", step.totalBytes ?? 0) }
/// let result = try await down.result()    // result.sha256 == up.sha256
/// ```
///
/// - Downloads go to `DEST.part`, with the server's ETag in `DEST.part.etag`; an interrupted
///   download (a dropped connection, a killed process, a cancellation) resumes from the
///   `.part` with `Range` and `If-Range`, and starts over when the file changed on the
///   server. `DEST` appears only by a rename, once the whole file is on disk and its SHA-256
///   matches the server's `Depot-SHA256`: a partial file is never at `DEST`.
/// - Uploads send the file's SHA-256 (`Depot-SHA256`) so the server stores nothing that
///   arrived damaged, and may carry `If-Match`.
/// - Failures are retried by ``RetryPolicy`` (backoff with jitter) when retrying can help;
///   redirects are not followed. The request hook adds credentials as sync's does; headers
///   never reach messages or logs.
public struct FileClient: Sendable {
    /// The server's base URL, for example `http://127.0.0.1:8080`.
    public var baseURL: URL
    /// Allows plain `http://` to a host other than loopback (off by default).
    public var allowInsecureHTTP: Bool
    /// Retries of one transfer.
    public var retryPolicy: RetryPolicy
    /// Seconds without any byte before a request fails.
    public var timeout: TimeInterval
    /// Called on every request before it is sent: add auth headers (list them in
    /// `sensitiveHeaders`).
    public var requestHook: (@Sendable (inout HTTPRequestSpec) -> Void)?
    let sleeper: any SyncSleeper
    let random: any SyncRandomSource

    /// Makes a client. `sleeper` and `random` drive the waits between retries (inject fakes
    /// in tests).
    public init(
        baseURL: URL, allowInsecureHTTP: Bool = false, retryPolicy: RetryPolicy = RetryPolicy(), timeout: TimeInterval = 60,
        requestHook: (@Sendable (inout HTTPRequestSpec) -> Void)? = nil,
        sleeper: any SyncSleeper = TaskSleeper(), random: any SyncRandomSource = SystemRandomSource()
    ) {
        self.baseURL = baseURL
        self.allowInsecureHTTP = allowInsecureHTTP
        self.retryPolicy = retryPolicy
        self.timeout = timeout
        self.requestHook = requestHook
        self.sleeper = sleeper
        self.random = random
    }

    /// One file on the server, as ``list()`` returns it.
    public struct Entry: Sendable, Hashable {
        /// The file's name.
        public var name: String
        /// Its size in bytes.
        public var size: Int64
        /// Its ETag.
        public var etag: String
    }

    /// The rule for names: 1 to 200 UTF-8 bytes, not starting with `.`, without `/`, `\` or
    /// control characters (the server enforces the same).
    /// - Throws: ``DepotCore/DepotError`` `.invalidName`.
    public static func validate(name: String) throws {
        let bytes = name.utf8
        guard !bytes.isEmpty, bytes.count <= 200, bytes.first != UInt8(ascii: "."),
            !bytes.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "\\") })
        else {
            throw DepotError(.invalidName, "A file name must be 1 to 200 bytes, not start with '.', and hold no '/', '\\' or control characters.")
        }
    }

    // MARK: Listing and deleting

    /// Every file on the server, sorted by name.
    /// - Throws: ``DepotCore/DepotError`` `.remote` (cause ``FileTransferFailure``), `.decoding`.
    public func list() async throws -> [Entry] {
        let answer = try await simple("GET", path: "/_files", headers: [:])
        guard answer.status == 200 else { throw Self.failure(status: answer.status, body: answer.body, what: "list files") }
        guard case .array(let items)? = try? JSONText.parse(String(decoding: answer.body, as: UTF8.self)) else {
            throw DepotError(.decoding, "The server's file list is not a JSON array.")
        }
        return items.compactMap { item in
            guard case .object(let o) = item, let name = o["name"]?.stringValue, let size = o["size"]?.intValue, let etag = o["etag"]?.stringValue else { return nil }
            return Entry(name: name, size: size, etag: etag)
        }
    }

    /// Deletes a file, only if its ETag is still `ifMatch` when given.
    /// - Throws: ``DepotCore/DepotError`` `.notFound`, `.conflict` (412), `.remote`, `.invalidName`.
    public func delete(name: String, ifMatch: String? = nil) async throws {
        try Self.validate(name: name)
        var headers: [String: String] = [:]
        if let ifMatch { headers["If-Match"] = ifMatch }
        let answer = try await simple("DELETE", path: "/_files/" + Self.encode(name), headers: headers)
        guard answer.status == 204 || answer.status == 200 else { throw Self.failure(status: answer.status, body: answer.body, what: "delete the file") }
    }

    // MARK: Upload

    /// Uploads the file at `source` as `name`, streamed from disk.
    ///
    /// The file is read once first to compute its SHA-256 (sent as `Depot-SHA256`, which the
    /// server checks before keeping anything), then sent; a failed attempt is sent again
    /// whole. With `ifMatch`, the server replaces only the version with that ETag.
    public func upload(from source: URL, name: String, ifMatch: String? = nil) -> FileTransfer {
        let client = self
        return FileTransfer { report in
            try Self.validate(name: name)
            let path = source.path
            let (size, digest) = try FileDigest.of(path: path)
            report(FileTransferProgress(bytesDone: 0, totalBytes: size))
            var retry = 0
            while true {
                try Task.checkCancellation()
                // No `Expect: 100-continue`: it would cost a round trip (or a second's wait) per
                // upload. No `Content-Length`: the body goes out chunked (StreamingSession.upload).
                var headers = ["Content-Type": "application/octet-stream", "Depot-SHA256": digest, "Expect": ""]
                if let ifMatch { headers["If-Match"] = ifMatch }
                let request = try client.request("PUT", path: "/_files/" + Self.encode(name), headers: headers)
                let outcome = await StreamingSession.upload(request, fromFile: source, timeout: client.timeout) { sent in
                    report(FileTransferProgress(bytesDone: sent, totalBytes: size))
                }
                if let status = outcome.status, status == 200 || status == 201 {
                    let serverDigest = outcome.header("depot-sha256")
                    guard serverDigest == nil || serverDigest == digest else {
                        throw DepotError(.corrupted, "The server stored a file whose SHA-256 differs from the one sent.")
                    }
                    return FileTransferResult(name: name, size: size, sha256: digest, etag: outcome.header("etag"))
                }
                if outcome.status == 412, retry > 0, let existing = try? await client.head(name: name), existing.sha256 == digest {
                    // An earlier attempt was stored but its answer lost: the file is there.
                    return FileTransferResult(name: name, size: size, sha256: digest, etag: existing.etag)
                }
                let error = outcome.status.map { Self.failure(status: $0, body: outcome.body, what: "upload the file") }
                    ?? Self.noAnswer("upload the file", outcome.error)
                try await client.retryOrThrow(error, retry: &retry, retryAfter: outcome.header("retry-after"))
            }
        }
    }

    // MARK: Download

    /// Downloads `name` to `destination`, resuming a `.part` left by an earlier attempt.
    ///
    /// `destination` is written only by a rename, once the whole file is on disk and its
    /// SHA-256 matches the server's. A transfer that fails or is cancelled keeps
    /// `DEST.part` and `DEST.part.etag`; one whose bytes do not match the server's hash
    /// removes them (they cannot be resumed) and throws `.corrupted`.
    public func download(name: String, to destination: URL) -> FileTransfer {
        let client = self
        return FileTransfer { report in
            try Self.validate(name: name)
            let dest = destination.path
            let part = dest + ".part"
            let tagFile = dest + ".part.etag"
            var retry = 0
            while true {
                try Task.checkCancellation()
                // What is on disk already, and the ETag it was downloaded against.
                var existing: Int64 = 0
                var tag: String? = try? String(contentsOfFile: tagFile, encoding: .utf8)
                if tag?.isEmpty ?? true { tag = nil }
                if tag != nil, let size = FileDigest.size(path: part) { existing = size } else {
                    tag = nil
                    unlink(part)
                    unlink(tagFile)
                }
                var headers: [String: String] = [:]
                if existing > 0, let tag {
                    headers["Range"] = "bytes=\(existing)-"
                    headers["If-Range"] = tag
                }
                let request = try client.request("GET", path: "/_files/" + Self.encode(name), headers: headers)
                let sink = DownloadSink(partPath: part, tagPath: tagFile, existing: existing, report: report)
                let outcome = await StreamingSession.download(request, sink: sink, timeout: client.timeout)
                guard let status = outcome.status, status == 200 || status == 206 else {
                    if outcome.status == 416 {
                        // The part is not a prefix of the server's file any more: start over.
                        unlink(part)
                        unlink(tagFile)
                    }
                    let error = outcome.status.map { Self.failure(status: $0, body: outcome.body, what: "download the file") }
                        ?? Self.noAnswer("download the file", outcome.error)
                    if outcome.status == 416 && retry == 0 {
                        retry += 1
                        continue
                    }
                    try await client.retryOrThrow(error, retry: &retry, retryAfter: outcome.header("retry-after"))
                    continue
                }
                if let localError = sink.localError { throw localError }
                guard outcome.error == nil, sink.expectedTotal.map({ $0 == sink.total }) ?? true else {
                    // Cut short (dropped connection, a body shorter than announced): the part
                    // stays, and the next attempt resumes from it.
                    let error = DepotError(
                        .remote, "The download of \(RequestText.quoted(name)) was cut short at \(sink.total) bytes.",
                        cause: FileTransferFailure(status: nil, serverCode: nil, retryable: true))
                    try await client.retryOrThrow(error, retry: &retry, retryAfter: nil)
                    continue
                }
                guard let digest = sink.finish() else {
                    throw DepotError(.io, "The downloaded file cannot be read back to check it.", detail: part)
                }
                guard let serverDigest = outcome.header("depot-sha256"), serverDigest == digest else {
                    unlink(part)
                    unlink(tagFile)
                    throw DepotError(.corrupted, "The downloaded bytes of \(RequestText.quoted(name)) do not match the server's SHA-256; the partial file was removed.")
                }
                guard rename(part, dest) == 0 else {
                    throw DepotError(.io, "The download cannot be moved into place.", detail: dest)
                }
                unlink(tagFile)
                return FileTransferResult(name: name, size: sink.total, sha256: digest, etag: outcome.header("etag"))
            }
        }
    }

    /// The size, ETag and SHA-256 of `name` on the server (`HEAD`), or `nil` when there is none.
    /// - Throws: ``DepotCore/DepotError`` `.remote`, `.invalidName`.
    public func head(name: String) async throws -> (size: Int64, etag: String?, sha256: String?)? {
        try Self.validate(name: name)
        let answer = try await simple("HEAD", path: "/_files/" + Self.encode(name), headers: [:])
        if answer.status == 404 { return nil }
        guard answer.status == 200 else { throw Self.failure(status: answer.status, body: answer.body, what: "read the file's details") }
        return (Int64(answer.header("content-length") ?? "") ?? 0, answer.header("etag"), answer.header("depot-sha256"))
    }

    // MARK: Plumbing

    func request(_ method: String, path: String, headers: [String: String]) throws -> HTTPRequestSpec {
        guard let scheme = baseURL.scheme?.lowercased(), scheme == "http" || scheme == "https", baseURL.host != nil else {
            throw DepotError(.invalidStore, "The server must be an http:// or https:// URL with a host.")
        }
        guard SyncEndpoint.isAllowed(baseURL, allowInsecureHTTP: allowInsecureHTTP) else {
            throw DepotError(.invalidStore, "Plain http:// to a host other than loopback needs allowInsecureHTTP (--allow-insecure-http).")
        }
        var text = baseURL.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        guard let url = URL(string: text + path) else { throw DepotError(.invalidName, "The file name cannot be put in a URL.") }
        var spec = HTTPRequestSpec(method: method, url: url, headers: headers)
        requestHook?(&spec)
        return spec
    }

    /// A request with a small answer (list, delete, head), retried like transfers.
    func simple(_ method: String, path: String, headers: [String: String]) async throws -> HTTPAnswer {
        var retry = 0
        while true {
            let spec = try request(method, path: path, headers: headers)
            let outcome = await StreamingSession.small(spec, timeout: timeout)
            if let status = outcome.status {
                let answer = HTTPAnswer(status: status, headers: outcome.headers, body: outcome.body)
                guard case .retry = RequestVerdict.classify(status: status, retryAfter: answer.header("retry-after")) else { return answer }
                try await retryOrThrow(Self.failure(status: status, body: outcome.body, what: "reach the files"), retry: &retry, retryAfter: answer.header("retry-after"))
            } else {
                try await retryOrThrow(Self.noAnswer(method + " " + path, outcome.error), retry: &retry, retryAfter: nil)
            }
        }
    }

    /// Waits and returns when `error` may be retried and attempts are left; throws it otherwise.
    func retryOrThrow(_ error: DepotError, retry: inout Int, retryAfter: String?) async throws {
        if error.code == .cancelled || Task.isCancelled { throw DepotError(.cancelled, "The transfer was cancelled.") }
        let retryable = (error.cause as? FileTransferFailure)?.retryable ?? false
        guard retryable, retry + 1 < retryPolicy.maxAttempts else { throw error }
        var after: Duration?
        if case .retry(let wait)? = retryAfter.map({ RequestVerdict.classify(status: 503, retryAfter: $0) }) { after = wait }
        let wait = retryPolicy.delay(beforeRetry: retry, unit: random.nextUnit(), retryAfter: after)
        retry += 1
        do { try await sleeper.sleep(for: wait) } catch { throw DepotError(.cancelled, "The transfer was cancelled.") }
    }

    /// The error for an HTTP failure status, with the server's code and message when its body
    /// is a JSON error.
    static func failure(status: Int, body: Data, what: String) -> DepotError {
        var serverCode: String?
        var serverMessage: String?
        if body.count < 64 * 1024, case .object(let o)? = try? JSONText.parse(String(decoding: body, as: UTF8.self)),
            case .object(let e)? = o["error"]
        {
            serverCode = e["code"]?.stringValue
            serverMessage = e["message"]?.stringValue
        }
        let verdict = RequestVerdict.classify(status: status)
        var retryable = false
        if case .retry = verdict { retryable = true }
        let cause = FileTransferFailure(status: status, serverCode: serverCode, retryable: retryable)
        let detail = serverMessage.map { "The server said: " + RequestText.quoted($0, limit: 200) }
        switch status {
        case 404: return DepotError(.notFound, "The server has no such file (could not \(what)).", cause: cause, detail: detail)
        case 412: return DepotError(.conflict, "The file changed on the server (If-Match failed; could not \(what)).", cause: cause, detail: detail)
        case 400 where serverCode == "invalidName": return DepotError(.invalidName, "The server refused the file name.", cause: cause, detail: detail)
        default: return DepotError(.remote, "The server answered \(status) (could not \(what)).", cause: cause, detail: detail)
        }
    }

    static func noAnswer(_ what: String, _ error: (any Error)?) -> DepotError {
        if error is CancellationError { return DepotError(.cancelled, "The transfer was cancelled.") }
        let code = (error as? URLError)?.code.rawValue ?? -1
        if code == URLError.cancelled.rawValue { return DepotError(.cancelled, "The transfer was cancelled.") }
        return DepotError(.remote, "No complete answer came (could not \(what)).", cause: FileTransferFailure(status: nil, serverCode: nil, retryable: true), detail: "URLError \(code)")
    }

    /// Percent-encodes a name as one path segment.
    static func encode(_ name: String) -> String {
        name.addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")) ?? name
    }
}

/// Text put in messages: printable and short.
enum RequestText {
    static func quoted(_ text: String, limit: Int = 40) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(limit) {
            if scalar.value < 0x20 || scalar.value == 0x7F { out += "?" } else { out.unicodeScalars.append(scalar) }
        }
        return "'" + out + (text.unicodeScalars.count > limit ? "…'" : "'")
    }
}
