import DepotCore
import Foundation

/// How far one upload or download has come.
public struct FileTransferProgress: Sendable, Hashable {
    /// Bytes of the file transferred so far (for a resumed download, the bytes already on
    /// disk count as done).
    public var bytesDone: Int64
    /// The file's size, when known.
    public var totalBytes: Int64?

    /// Makes a progress value.
    public init(bytesDone: Int64, totalBytes: Int64?) {
        self.bytesDone = bytesDone
        self.totalBytes = totalBytes
    }
}

/// What a finished upload or download gives back.
public struct FileTransferResult: Sendable, Hashable {
    /// The file's name on the server.
    public var name: String
    /// Its size in bytes.
    public var size: Int64
    /// Its SHA-256, 64 lowercase hex digits, checked against the server's.
    public var sha256: String
    /// The server's ETag for it (for a later `If-Match` or `If-Range`).
    public var etag: String?

    /// Makes a result.
    public init(name: String, size: Int64, sha256: String, etag: String?) {
        self.name = name
        self.size = size
        self.sha256 = sha256
        self.etag = etag
    }
}

/// Why a file transfer failed, kept as the `cause` of the ``DepotCore/DepotError`` it throws.
///
/// ```swift
/// catch let error as DepotError {
///     let failure = error.cause as? FileTransferFailure
///     if failure?.retryable == true { /* try again later: a download resumes */ }
/// }
/// ```
public struct FileTransferFailure: Error, Sendable, Hashable {
    /// The HTTP status the server answered with; `nil` when no complete answer came
    /// (refused or dropped connection, a body shorter than announced).
    public var status: Int?
    /// The server's error code (`notFound`, `tooLarge`, `preconditionFailed`...), when it sent one.
    public var serverCode: String?
    /// `true` when trying again may succeed (no answer, 408, 429, 5xx, a cut body).
    public var retryable: Bool

    /// Makes a failure.
    public init(status: Int?, serverCode: String?, retryable: Bool) {
        self.status = status
        self.serverCode = serverCode
        self.retryable = retryable
    }
}

/// One running upload or download: an `AsyncSequence` of ``FileTransferProgress`` that ends
/// when the transfer ends, plus the awaited ``result()``.
///
/// ```swift
/// let transfer = client.download(name: "report.pdf", to: URL(fileURLWithPath: "report.pdf"))
/// for await step in transfer { print(step.bytesDone, step.totalBytes ?? -1) }
/// let done = try await transfer.result()
/// ```
///
/// The sequence keeps only the newest value when the consumer falls behind, so a slow
/// reader never holds a backlog. Nobody has to read it: ``result()`` alone is enough.
/// ``cancel()`` (or cancelling the task that awaits ``result()``) stops the transfer; a
/// download keeps its `.part` file to resume from.
public final class FileTransfer: AsyncSequence, Sendable {
    /// Each element is one progress report.
    public typealias Element = FileTransferProgress
    /// The iterator over progress reports.
    public typealias AsyncIterator = AsyncStream<FileTransferProgress>.Iterator

    private let stream: AsyncStream<FileTransferProgress>
    private let task: Task<FileTransferResult, any Error>

    init(_ work: @escaping @Sendable (_ report: @escaping @Sendable (FileTransferProgress) -> Void) async throws -> FileTransferResult) {
        let (stream, continuation) = AsyncStream<FileTransferProgress>.makeStream(bufferingPolicy: .bufferingNewest(1))
        self.stream = stream
        task = Task {
            defer { continuation.finish() }
            return try await work { continuation.yield($0) }
        }
    }

    /// The progress reports, until the transfer ends. Iterate it once.
    public func makeAsyncIterator() -> AsyncStream<FileTransferProgress>.Iterator { stream.makeAsyncIterator() }

    /// Waits for the transfer to end.
    /// - Throws: ``DepotCore/DepotError``: `.remote` (cause ``FileTransferFailure``) when the
    ///   server refused or could not be reached after every retry, `.notFound`, `.conflict`
    ///   (412), `.corrupted` when the bytes do not match the server's SHA-256, `.io` for the
    ///   local file, `.cancelled`.
    public func result() async throws -> FileTransferResult {
        try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }

    /// Stops the transfer; ``result()`` then throws `.cancelled`.
    public func cancel() { task.cancel() }
}
