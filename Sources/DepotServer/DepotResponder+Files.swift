import DepotCore
import DepotWire
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The `/_files` routes (Docs/Remote.md, "Files"): bodies stream between the socket and the
/// disk in chunks of ``FileRoot/chunkSize``, so a file never sits in memory.
///
/// - `GET /_files`: the list, `[{"name","size","etag","sha256"?}]` sorted by name.
/// - `HEAD`/`GET /_files/NAME`: `ETag`, `Depot-SHA256`, `Accept-Ranges: bytes`; one
///   `Range` (206, or 416 with `Content-Range: bytes */SIZE`), honoured only when
///   `If-Range` (if sent) is the current ETag.
/// - `PUT /_files/NAME`: the body goes to a temporary file, hashed on the way; `If-Match`,
///   `If-None-Match` (412); a body over the size limit is refused (413) and a
///   `Depot-SHA256` that does not match it is refused (400); the file is renamed into place
///   only when whole. 201 for a new file, 200 for a replaced one, with the new ETag.
/// - `DELETE /_files/NAME`: `If-Match` (412), 204.
extension DepotResponder {
    /// `true` for the paths this extension serves.
    static func isFilesPath(_ path: String) -> Bool {
        path == "/_files" || path == "/_files/" || path.hasPrefix("/_files/")
    }

    func respondFiles(to request: Request, fault: ServerFault?) async -> Response {
        guard let root = files else {
            return Self.response(WireResponse.failure(404, "notFound", "This server serves no files (start it with a files folder)."))
        }
        do {
            let rest = request.uri.path.dropFirst("/_files".count)
            let method = request.method
            if rest.isEmpty || rest == "/" {
                guard method == .get else { throw HTTPFailure(status: 405, code: "methodNotAllowed", message: "This method is not allowed on this path.") }
                return try listFiles(root)
            }
            let encoded = String(rest.dropFirst())
            guard let decoded = encoded.removingPercentEncoding else {
                throw HTTPFailure.badRequest("The file name is not valid percent-encoded text.")
            }
            let name = try FileRoot.validate(decoded)
            switch method {
            case .get, .head: return try getFile(root, name: name, request: request, head: method == .head, fault: fault)
            case .put: return try await putFile(root, name: name, request: request)
            case .delete: return try deleteFile(root, name: name, request: request)
            default: throw HTTPFailure(status: 405, code: "methodNotAllowed", message: "This method is not allowed on this path.")
            }
        } catch let failure as HTTPFailure {
            return Self.response(failure.response)
        } catch {
            return Self.response(WireResponse.internalFailure)
        }
    }

    private func listFiles(_ root: FileRoot) throws -> Response {
        let entries = try root.list()
        let items: [FieldValue] = entries.map { entry in
            .object(["name": .string(entry.name), "size": .int(entry.info.size), "etag": .string(entry.info.etag)])
        }
        return Self.response(WireResponse.json(200, JSONText.serialize(.array(items))))
    }

    private func getFile(_ root: FileRoot, name: String, request: Request, head: Bool, fault: ServerFault?) throws -> Response {
        let fd = open(root.filePath(name), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw HTTPFailure.notFound("No file named \(RequestHandler.quoted(name)).") }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw HTTPFailure.notFound("No file named \(RequestHandler.quoted(name)).")
        }
        let info = FileRoot.info(st)
        var fields = HTTPFields()
        fields[.eTag] = info.etag
        fields[.acceptRanges] = "bytes"
        fields[.contentType] = "application/octet-stream"
        if let digest = root.sha256(name, fd: fd, etag: info.etag) { fields[Self.sha256Field] = digest }
        var start: Int64 = 0
        var end = info.size - 1
        var status = HTTPResponse.Status.ok
        if let range = request.headers[.range] {
            let ifRange = request.headers[.ifRange]
            if ifRange == nil || ifRange == info.etag {
                switch ByteRange.parse(range, size: info.size) {
                case .span(let a, let b):
                    start = a
                    end = b
                    status = .partialContent
                    fields[.contentRange] = "bytes \(a)-\(b)/\(info.size)"
                case .unsatisfiable:
                    close(fd)
                    var failure = WireResponse.failure(416, "rangeNotSatisfiable", "The range is outside the file.")
                    failure.headers.append(("Content-Range", "bytes */\(info.size)"))
                    failure.headers.append(("ETag", info.etag))
                    return Self.response(failure)
                case .ignored: break
                }
            }
        }
        var length = max(0, end - start + 1)
        fields[.contentLength] = String(length)
        if head {
            close(fd)
            return Response(status: status, headers: fields, body: ResponseBody())
        }
        // Faults for client tests: stop after some bytes (the head promised them all), or
        // promise and send fewer bytes than the file holds.
        var stopAfter: Int64? = nil
        var pace: Int? = nil
        switch fault {
        case .pace(let ms)?: pace = ms
        case .truncateBody(let after)?: stopAfter = Int64(after)
        case .understateLength(let by)?:
            length = max(0, length - Int64(by))
            fields[.contentLength] = String(length)
        default: break
        }
        let handle = FileDescriptorBox(fd)
        let from = start
        let total = length
        let cutAfter = stopAfter
        let waitEach = pace
        return Response(status: status, headers: fields, body: ResponseBody(contentLength: Int(total)) { writer in
            defer { handle.close() }
            var offset = from
            var left = total
            var sent: Int64 = 0
            var buffer = ByteBufferAllocator().buffer(capacity: FileRoot.chunkSize)
            while left > 0 {
                if let cutAfter, sent >= cutAfter { throw DroppedConnection() }
                if let waitEach { try await Task.sleep(for: .milliseconds(waitEach)) }
                buffer.clear()
                let want = Int(min(left, Int64(FileRoot.chunkSize)))
                let n = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: want) { pointer in
                    max(0, pread(handle.fd, pointer.baseAddress, want, off_t(offset)))
                }
                guard n > 0 else { throw DroppedConnection() }  // the file shrank: cut the answer short
                offset += Int64(n)
                left -= Int64(n)
                sent += Int64(n)
                try await writer.write(buffer)
            }
            try await writer.finish(nil)
        })
    }

    private func putFile(_ root: FileRoot, name: String, request: Request) async throws -> Response {
        if let declared = request.headers[.contentLength].flatMap({ Int64($0) }), declared > root.maxFileSize {
            throw Self.tooLarge(root)
        }
        let expected = request.headers[Self.sha256Field]?.lowercased()
        if let expected, !SHA256Hasher.isDigest(expected) {
            throw HTTPFailure.badRequest("Depot-SHA256 must be 64 lowercase hex digits.")
        }
        let temporary = root.path + "/.upload-" + FileRoot.randomSuffix() + ".tmp"
        let fd = open(temporary, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw FileRoot.ioFailure("The upload cannot be stored.") }
        var keep = false
        defer {
            close(fd)
            if !keep { unlink(temporary) }
        }
        var hasher = SHA256Hasher()
        var size: Int64 = 0
        do {
            for try await buffer in request.body {
                size += Int64(buffer.readableBytes)
                if size > root.maxFileSize { throw Self.tooLarge(root) }
                try buffer.withUnsafeReadableBytes { bytes in
                    hasher.update(bytes)
                    var done = 0
                    while done < bytes.count {
                        let n = write(fd, bytes.baseAddress.unsafelyUnwrapped + done, bytes.count - done)
                        if n < 0 {
                            if errno == EINTR { continue }
                            throw FileRoot.ioFailure("The upload cannot be stored (disk full or not writable).")
                        }
                        done += n
                    }
                }
            }
        } catch let failure as HTTPFailure {
            throw failure
        } catch {
            throw HTTPFailure.badRequest("The upload's body was cut short; nothing was stored.")
        }
        let digest = hasher.finalize()
        if let expected, expected != digest {
            throw HTTPFailure(status: 400, code: "digestMismatch", message: "The body does not match its Depot-SHA256; nothing was stored.")
        }
        guard fsync(fd) == 0 else { throw FileRoot.ioFailure("The upload cannot be stored.") }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw FileRoot.ioFailure("The upload cannot be stored.") }
        let info = FileRoot.info(st)
        let ifMatch = request.headers[.ifMatch]
        let ifNoneMatch = request.headers[.ifNoneMatch]
        let existed = try root.locked { () throws -> Bool in
            let current = root.info(name)
            try FileRoot.checkPreconditions(ifMatch: ifMatch, ifNoneMatch: ifNoneMatch, current: current)
            root.writeSidecar(name, etag: info.etag, sha256: digest)
            guard rename(temporary, root.filePath(name)) == 0 else { throw FileRoot.ioFailure("The upload cannot be stored.") }
            return current != nil
        }
        keep = true
        let dir = open(root.path, O_RDONLY | O_CLOEXEC)
        if dir >= 0 {
            _ = fsync(dir)
            close(dir)
        }
        let body = JSONText.serialize(.object(["name": .string(name), "size": .int(size), "etag": .string(info.etag), "sha256": .string(digest)]))
        return Self.response(WireResponse.json(existed ? 200 : 201, body, [("ETag", info.etag), ("Depot-SHA256", digest)]))
    }

    private func deleteFile(_ root: FileRoot, name: String, request: Request) throws -> Response {
        let ifMatch = request.headers[.ifMatch]
        try root.locked {
            let current = root.info(name)
            guard current != nil else { throw HTTPFailure.notFound("No file named \(RequestHandler.quoted(name)).") }
            try FileRoot.checkPreconditions(ifMatch: ifMatch, ifNoneMatch: nil, current: current)
            guard unlink(root.filePath(name)) == 0 else { throw FileRoot.ioFailure("The file cannot be deleted.") }
            unlink(root.sidecarPath(name))
        }
        return Response(status: .noContent, headers: HTTPFields(), body: ResponseBody())
    }

    static let sha256Field = HTTPField.Name("Depot-SHA256").unsafelyUnwrapped

    static func tooLarge(_ root: FileRoot) -> HTTPFailure {
        HTTPFailure(status: 413, code: "tooLarge", message: "The file is larger than \(root.maxFileSize) bytes.")
    }
}

/// An open file descriptor handed to a response body writer, closed exactly once.
final class FileDescriptorBox: Sendable {
    let fd: Int32
    private let closed = Atomic<Bool>(false)
    init(_ fd: Int32) { self.fd = fd }
    func close() {
        if !closed.exchange(true, ordering: .acquiringAndReleasing) { _ = posixClose(fd) }
    }
    deinit { close() }
}

private func posixClose(_ fd: Int32) -> Int32 { close(fd) }
