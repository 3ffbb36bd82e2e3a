import DepotCore
import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What one request of a file transfer ended with.
struct StreamOutcome: Sendable {
    /// The status, when an answer head came.
    var status: Int?
    /// Header values by lowercased name.
    var headers: [String: String] = [:]
    /// The answer body, for answers not streamed to a file (capped at 1 MiB).
    var body = Data()
    /// Set when the request failed (no answer, or the body was cut short).
    var error: (any Error & Sendable)?

    func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// URLSession with delegate callbacks, one session per request: the delegate writes each
/// chunk of a download to disk as it arrives, and uploads are read from their file by
/// URLSession, so no body is held in memory whole.
enum StreamingSession {
    static func download(_ spec: HTTPRequestSpec, sink: DownloadSink, timeout: TimeInterval) async -> StreamOutcome {
        await run(spec, timeout: timeout, sink: sink) { session, request in session.dataTask(with: request) }
    }

    /// Sends the file at `file` as the body of `spec`, read as a stream and sent with chunked
    /// transfer encoding (the request must carry no `Content-Length`).
    ///
    /// Not `uploadTask(with:fromFile:)`: FoundationNetworking opens, stats and closes the file
    /// again for every piece of about 48 KiB it sends, which made a 200 MB upload on loopback
    /// 3.5 times slower (Docs/measurements/2026-11-26-file-upload-stream.md). And not a stream
    /// with a `Content-Length`: FoundationNetworking then sends both that and
    /// `Transfer-Encoding: chunked`, which servers refuse.
    static func upload(_ spec: HTTPRequestSpec, fromFile file: URL, timeout: TimeInterval, progress: @escaping @Sendable (Int64) -> Void) async -> StreamOutcome {
        guard let stream = InputStream(url: file) else {
            return StreamOutcome(error: URLError(.fileDoesNotExist))
        }
        return await run(spec, timeout: timeout, sink: nil, sent: progress, bodyFile: file) { session, request in
            var request = request
            request.setValue(nil, forHTTPHeaderField: "Content-Length")
            request.httpBodyStream = stream
            return session.uploadTask(withStreamedRequest: request)
        }
    }

    static func small(_ spec: HTTPRequestSpec, timeout: TimeInterval) async -> StreamOutcome {
        await run(spec, timeout: timeout, sink: nil) { session, request in session.dataTask(with: request) }
    }

    private static func run(
        _ spec: HTTPRequestSpec, timeout: TimeInterval, sink: DownloadSink?, sent: (@Sendable (Int64) -> Void)? = nil, bodyFile: URL? = nil,
        makeTask: (URLSession, URLRequest) -> URLSessionTask
    ) async -> StreamOutcome {
        if Task.isCancelled { return StreamOutcome(error: CancellationError()) }
        var request = URLRequest(url: spec.url)
        request.httpMethod = spec.method
        request.timeoutInterval = timeout
        for (name, value) in spec.headers { request.setValue(value, forHTTPHeaderField: name) }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        configuration.httpShouldSetCookies = false
        configuration.urlCache = nil
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        let delegate = StreamDelegate(sink: sink, sent: sent, bodyFile: bodyFile)
        let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: queue)
        let task = makeTask(session, request)
        let outcome = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<StreamOutcome, Never>) in
                delegate.start(continuation)
                task.resume()
            }
        } onCancel: {
            task.cancel()
        }
        session.finishTasksAndInvalidate()
        return outcome
    }
}

/// The delegate of one request.
private final class StreamDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked Sendable: `outcome` and `continuation` are guarded by `lock`; the
    // callbacks come one at a time on the session's serial delegate queue.
    private let lock = NSLock()
    private var outcome = StreamOutcome()
    private var continuation: CheckedContinuation<StreamOutcome, Never>?
    private let sink: DownloadSink?
    private let sent: (@Sendable (Int64) -> Void)?
    /// The file a streamed upload reads, opened again when the session asks for a new body
    /// stream.
    private let bodyFile: URL?
    private var streaming = false

    init(sink: DownloadSink?, sent: (@Sendable (Int64) -> Void)?, bodyFile: URL?) {
        self.sink = sink
        self.sent = sent
        self.bodyFile = bodyFile
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void) {
        completionHandler(bodyFile.flatMap { InputStream(url: $0) })
    }

    func start(_ continuation: CheckedContinuation<StreamOutcome, Never>) {
        lock.lock()
        self.continuation = continuation
        lock.unlock()
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        guard let http = response as? HTTPURLResponse else {
            completionHandler(.cancel)
            return
        }
        var headers: [String: String] = [:]
        for (key, value) in http.allHeaderFields {
            if let key = key as? String, let value = value as? String { headers[key.lowercased()] = value }
        }
        lock.lock()
        outcome.status = http.statusCode
        outcome.headers = headers
        lock.unlock()
        if let sink, http.statusCode == 200 || http.statusCode == 206 {
            if sink.begin(status: http.statusCode, headers: headers) {
                streaming = true
            } else {
                completionHandler(.cancel)
                return
            }
        }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        if streaming, let sink {
            if !sink.write(data) { dataTask.cancel() }
            return
        }
        lock.lock()
        if outcome.body.count < 1 << 20 { outcome.body.append(data.prefix((1 << 20) - outcome.body.count)) }
        lock.unlock()
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        sent?(totalBytesSent)
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        sink?.close()
        lock.lock()
        if let error {
            let code = (error as? URLError)?.code ?? .unknown
            outcome.error = URLError(code)
        }
        let result = outcome
        let waiting = continuation
        continuation = nil
        lock.unlock()
        waiting?.resume(returning: result)
    }
}

/// Where a download's bytes go: appended to (or written anew into) `DEST.part`, with the ETag
/// they belong to kept in `DEST.part.etag`.
///
/// The delegate callback only writes: URLSession (FoundationNetworking) queues every received
/// chunk for the delegate without waiting for it and offers no working way to pause a
/// transfer (suspending a task makes it deliver bytes twice), so a callback slower than the
/// network would let chunks pile up in memory. The SHA-256 is computed by a
/// ``BackgroundHasher`` that reads the part back from the page cache behind the writes.
final class DownloadSink: @unchecked Sendable {
    // @unchecked Sendable: `begin`, `write` and `close` are called one at a time on the
    // session's serial delegate queue; the other members are read only after the request
    // completed (its continuation resumed after the last callback).
    let partPath: String
    let tagPath: String
    let existing: Int64
    let report: @Sendable (FileTransferProgress) -> Void
    private var hasher: BackgroundHasher?
    private var fd: Int32 = -1
    private(set) var total: Int64 = 0
    private(set) var expectedTotal: Int64?
    private(set) var localError: DepotError?
    private var lastReport: Int64 = 0

    /// A sink that resumes after the `existing` bytes of the part (0: none).
    init(partPath: String, tagPath: String, existing: Int64, report: @escaping @Sendable (FileTransferProgress) -> Void) {
        self.partPath = partPath
        self.tagPath = tagPath
        self.existing = existing
        self.report = report
    }

    /// The answer head arrived: 206 resumes after the existing bytes, 200 starts over.
    /// Returns `false` when the body cannot be taken (the local file fails, or a 206 that
    /// does not continue where the part ends).
    func begin(status: Int, headers: [String: String]) -> Bool {
        let length = headers["content-length"].flatMap { Int64($0) }
        if status == 206 {
            guard let range = headers["content-range"], existing > 0, Self.rangeStart(range) == existing else {
                localError = DepotError(.remote, "The server resumed the download at the wrong offset.", cause: FileTransferFailure(status: 206, serverCode: nil, retryable: false))
                return false
            }
            fd = open(partPath, O_WRONLY | O_APPEND | O_CLOEXEC)
            total = existing
            expectedTotal = Self.rangeTotal(range)
        } else {
            fd = open(partPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            total = 0
            expectedTotal = length
            let tag = headers["etag"] ?? ""
            // Only a strong ETag can resume later; without one the part is not resumable.
            let resumable = !tag.isEmpty && !tag.hasPrefix("W/")
            if fd >= 0 {
                if resumable {
                    if !FileManager.default.createFile(atPath: tagPath, contents: Data(tag.utf8)) { unlink(tagPath) }
                } else {
                    unlink(tagPath)
                }
            }
        }
        guard fd >= 0 else {
            localError = DepotError(.io, "The partial download file cannot be written.", detail: partPath)
            return false
        }
        // The whole part is hashed from its first byte, so a resumed download verifies the
        // bytes of earlier runs too.
        hasher = BackgroundHasher(path: partPath, available: total)
        report(FileTransferProgress(bytesDone: total, totalBytes: expectedTotal))
        return true
    }

    /// Writes one chunk; `false` when the disk refused it.
    func write(_ data: Data) -> Bool {
        guard fd >= 0 else { return false }
        let ok = data.withUnsafeBytes { bytes -> Bool in
            var done = 0
            while done < bytes.count {
                let n = posixWrite(fd, bytes.baseAddress.unsafelyUnwrapped + done, bytes.count - done)
                if n < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                done += n
            }
            return true
        }
        guard ok else {
            localError = DepotError(.io, "The partial download file cannot be written (disk full?).", detail: partPath)
            return false
        }
        total += Int64(data.count)
        hasher?.advance(to: total)
        if total - lastReport >= 256 * 1024 || total == expectedTotal {
            lastReport = total
            report(FileTransferProgress(bytesDone: total, totalBytes: expectedTotal))
        }
        return true
    }

    /// Flushes the part to disk and closes it.
    func close() {
        guard fd >= 0 else { return }
        _ = fsync(fd)
        _ = posixClose(fd)
        fd = -1
        hasher?.close()
    }

    /// The SHA-256 of the whole part, once the hasher has caught up; `nil` when the part
    /// could not be read back.
    func finish() -> String? { hasher?.wait() }

    deinit { hasher?.abandon() }

    /// `bytes 100-199/1000` → 100.
    static func rangeStart(_ header: String) -> Int64? {
        guard let rest = header.split(separator: " ").last, let dash = rest.firstIndex(of: "-") else { return nil }
        return Int64(rest[rest.startIndex..<dash])
    }

    /// `bytes 100-199/1000` → 1000.
    static func rangeTotal(_ header: String) -> Int64? {
        guard let slash = header.lastIndex(of: "/") else { return nil }
        return Int64(header[header.index(after: slash)...])
    }
}

/// Reading a local file in chunks: its size and SHA-256 with bounded memory.
enum FileDigest {
    static let chunk = 1 << 20

    static func size(path: String) -> Int64? {
        var st = stat()
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(st.st_size)
    }

    /// The size and SHA-256 of the file at `path`.
    /// - Throws: ``DepotCore/DepotError`` `.notFound`, `.io`.
    static func of(path: String) throws -> (Int64, String) {
        guard let size = size(path: path) else { throw DepotError(.notFound, "No file to upload at this path.", detail: path) }
        var hasher = try hasher(path: path, upTo: size)
        return (size, hasher.finalize())
    }

    /// A hasher fed the first `limit` bytes of the file.
    static func hasher(path: String, upTo limit: Int64) throws -> SHA256Hasher {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw DepotError(.io, "The file cannot be read.", detail: path) }
        defer { _ = posixClose(fd) }
        var hasher = SHA256Hasher()
        var buffer = [UInt8](repeating: 0, count: chunk)
        var left = limit
        while left > 0 {
            let want = Int(min(Int64(chunk), left))
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, want) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw DepotError(.io, "The file cannot be read whole.", detail: path) }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            left -= Int64(n)
        }
        return hasher
    }
}

private func posixWrite(_ fd: Int32, _ pointer: UnsafeRawPointer, _ count: Int) -> Int { write(fd, pointer, count) }
private func posixClose(_ fd: Int32) -> Int32 { close(fd) }

/// Hashes a file that another thread is appending to, on a thread of its own: it reads the
/// bytes back (from the page cache) up to the length published with ``advance(to:)``, and
/// gives the digest once ``close()`` was called and everything is hashed.
final class BackgroundHasher: @unchecked Sendable {
    // @unchecked Sendable: `available`, `closed`, `abandoned`, `finished` and `digest` are
    // read and written only while `condition` is locked; `path` is immutable.
    private let condition = NSCondition()
    private let path: String
    private var available: Int64
    private var closed = false
    private var abandoned = false
    private var finished = false
    private var digest: String?

    init(path: String, available: Int64) {
        self.path = path
        self.available = available
        let thread = Thread { [self] in run() }
        thread.start()
    }

    /// The file now holds `length` bytes.
    func advance(to length: Int64) {
        condition.lock()
        available = length
        condition.broadcast()
        condition.unlock()
    }

    /// No more bytes will come.
    func close() {
        condition.lock()
        closed = true
        condition.broadcast()
        condition.unlock()
    }

    /// Stops without a digest (the download failed).
    func abandon() {
        condition.lock()
        abandoned = true
        closed = true
        condition.broadcast()
        condition.unlock()
    }

    /// Waits for the digest of the whole file; `nil` when it could not be read.
    func wait() -> String? {
        condition.lock()
        defer { condition.unlock() }
        while !finished { condition.wait() }
        return digest
    }

    private func run() {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        var hasher = SHA256Hasher()
        var done: Int64 = 0
        var ok = fd >= 0
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while ok {
            condition.lock()
            while done >= available && !closed { condition.wait() }
            let target = available
            let stop = abandoned || (closed && done >= target)
            condition.unlock()
            if stop { break }
            while done < target {
                let want = Int(min(Int64(buffer.count), target - done))
                let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, want, off_t(done)) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else {
                    ok = false
                    break
                }
                buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                done += Int64(n)
            }
        }
        if fd >= 0 { _ = posixClose(fd) }
        condition.lock()
        digest = ok && !abandoned ? hasher.finalize() : nil
        finished = true
        condition.broadcast()
        condition.unlock()
    }
}
