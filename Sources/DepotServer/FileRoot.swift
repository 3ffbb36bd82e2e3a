import DepotCore
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The folder a ``DepotServer`` serves files from (`/_files/NAME`, Docs/Remote.md, "Files").
///
/// Layout: a file named `NAME` is the regular file `ROOT/NAME`. Everything else the server
/// keeps in the folder starts with a dot, and no valid name does, so none of it can ever be
/// served, listed, overwritten or deleted over HTTP:
/// - `.NAME.sha256`: the file's SHA-256 and the ETag it was computed for;
/// - `.upload-RANDOM.tmp`: an upload in progress, renamed over `ROOT/NAME` only when whole;
/// - `.depot-files.lock`: taken (flock) around every check-then-rename and delete, so an
///   `If-Match` holds across every server process that shares the folder.
///
/// The ETag is derived from the file's `stat`: device, inode, size and modification time in
/// nanoseconds. Every upload is a new file renamed into place, so its inode and time change
/// with its content, atomically with the rename; two processes over the same folder read
/// the same `stat` and so agree on every ETag without sharing anything else. (A hash-based
/// ETag would need the hash stored beside the file and could disagree with it for an
/// instant between two renames; the `stat` cannot.)
struct FileRoot: Sendable {
    /// The folder, as an absolute path.
    let path: String
    /// The largest file accepted, in bytes.
    let maxFileSize: Int64

    /// The longest name in UTF-8 bytes: the sidecar `.NAME.sha256` must stay under the
    /// file-system limit of 255.
    static let maxNameLength = 200
    static let chunkSize = 256 * 1024

    /// What `stat` says about one served file.
    struct Info: Sendable {
        var size: Int64
        var etag: String
        var modified: Double
    }

    /// Checks a file name: 1 to 200 UTF-8 bytes, no `/`, `\`, NUL or other control
    /// character, not starting with `.` (so never `..`, never a sidecar or a temporary file).
    static func validate(_ name: String) throws -> String {
        let bytes = name.utf8
        guard !bytes.isEmpty, bytes.count <= maxNameLength else {
            throw HTTPFailure(status: 400, code: "invalidName", message: "A file name must be 1 to \(maxNameLength) bytes long.")
        }
        guard bytes.first != UInt8(ascii: "."), !bytes.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "\\") }) else {
            throw HTTPFailure(status: 400, code: "invalidName", message: "A file name must not start with '.' nor hold '/', '\\' or control characters.")
        }
        return name
    }

    func filePath(_ validName: String) -> String { path + "/" + validName }
    func sidecarPath(_ validName: String) -> String { path + "/." + validName + ".sha256" }

    /// The ETag of a `stat`: strong, quoted.
    static func etag(_ st: stat) -> String {
        let nanos = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
        return "\"" + String(UInt64(st.st_dev), radix: 16) + "-" + String(UInt64(st.st_ino), radix: 16) + "-"
            + String(Int64(st.st_size), radix: 16) + "-" + String(nanos, radix: 16) + "\""
    }

    static func info(_ st: stat) -> Info {
        Info(size: Int64(st.st_size), etag: etag(st), modified: Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9)
    }

    /// The file's info, or `nil` when there is no such regular file.
    func info(_ validName: String) -> Info? {
        var st = stat()
        guard stat(filePath(validName), &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Self.info(st)
    }

    /// Every served file, sorted by name (dot files and anything not a regular file left out).
    func list() throws -> [(name: String, info: Info)] {
        guard let dir = opendir(path) else { throw Self.ioFailure("The files folder cannot be read.") }
        defer { closedir(dir) }
        var out: [(String, Info)] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { pointer in
                pointer.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            guard (try? Self.validate(name)) != nil, let info = info(name) else { continue }
            out.append((name, info))
        }
        return out.sorted { $0.0 < $1.0 }
    }

    /// The SHA-256 of the open file `fd` whose ETag is `etag`: read from the sidecar when it
    /// was written for this ETag, otherwise computed from the file (and the sidecar rewritten).
    func sha256(_ validName: String, fd: Int32, etag: String) -> String? {
        if let text = try? String(contentsOfFile: sidecarPath(validName), encoding: .utf8) {
            let parts = text.split(separator: " ")
            if parts.count == 2, parts[0] == etag, SHA256Hasher.isDigest(String(parts[1])) { return String(parts[1]) }
        }
        var hasher = SHA256Hasher()
        var buffer = [UInt8](repeating: 0, count: Self.chunkSize)
        var offset: Int64 = 0
        while true {
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(offset)) }
            if n < 0 { return nil }
            if n == 0 { break }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            offset += Int64(n)
        }
        let digest = hasher.finalize()
        writeSidecar(validName, etag: etag, sha256: digest)
        return digest
    }

    /// Writes `.NAME.sha256` through a temporary file and a rename; a failure only means the
    /// hash is computed again next time.
    func writeSidecar(_ validName: String, etag: String, sha256: String) {
        let temporary = path + "/.sidecar-" + Self.randomSuffix() + ".tmp"
        let text = etag + " " + sha256
        guard FileManager.default.createFile(atPath: temporary, contents: Data(text.utf8)) else { return }
        if rename(temporary, sidecarPath(validName)) != 0 { unlink(temporary) }
    }

    /// Runs `body` while holding the folder's lock file (shared by every server process).
    func locked<T>(_ body: () throws -> T) throws -> T {
        let fd = open(path + "/.depot-files.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw Self.ioFailure("The files folder cannot be locked.") }
        defer { close(fd) }
        guard flock(fd, LOCK_EX) == 0 else { throw Self.ioFailure("The files folder cannot be locked.") }
        defer { flock(fd, LOCK_UN) }
        return try body()
    }

    /// Checks `If-Match` / `If-None-Match` against the current file (412 when they fail).
    static func checkPreconditions(ifMatch: String?, ifNoneMatch: String?, current: Info?) throws {
        if let ifMatch {
            let tags = ifMatch.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            let holds: Bool
            if let current { holds = tags.contains("*") || tags.contains(current.etag) } else { holds = false }
            guard holds else {
                throw HTTPFailure(status: 412, code: "preconditionFailed", message: "The file does not match If-Match.", headers: current.map { [("ETag", $0.etag)] } ?? [])
            }
        }
        if let ifNoneMatch, current != nil {
            let tags = ifNoneMatch.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            if tags.contains("*") || tags.contains(current?.etag ?? "") {
                throw HTTPFailure(status: 412, code: "preconditionFailed", message: "The file exists (If-None-Match).", headers: current.map { [("ETag", $0.etag)] } ?? [])
            }
        }
    }

    static func randomSuffix() -> String {
        String(UInt64.random(in: 0...UInt64.max), radix: 16) + String(UInt64.random(in: 0...UInt64.max), radix: 16)
    }

    static func ioFailure(_ message: String) -> HTTPFailure {
        HTTPFailure(status: 500, code: "io", message: message)
    }

    /// Makes sure the folder exists and is a directory.
    static func prepare(_ directory: String) throws -> String {
        let absolute = URL(fileURLWithPath: directory).standardizedFileURL.path
        var isDirectory: ObjCBool = false
        if !FileManager.default.fileExists(atPath: absolute, isDirectory: &isDirectory) {
            do {
                try FileManager.default.createDirectory(atPath: absolute, withIntermediateDirectories: true)
            } catch {
                throw DepotError(.io, "The files folder cannot be created.", cause: DepotError.wrap(error), detail: absolute)
            }
        } else if !isDirectory.boolValue {
            throw DepotError(.invalidStore, "The files folder is not a directory.", detail: absolute)
        }
        return absolute
    }
}

/// One `Range: bytes=...` header, reduced to the single range it asks for.
enum ByteRange: Equatable {
    /// `bytes=a-b`, `bytes=a-`, `bytes=-n` resolved against a size: the inclusive span.
    case span(Int64, Int64)
    /// No range can be served (416).
    case unsatisfiable
    /// Not a single byte range this server understands: serve the whole file.
    case ignored

    /// Resolves `header` against a file of `size` bytes.
    static func parse(_ header: String, size: Int64) -> ByteRange {
        let text = header.trimmingCharacters(in: .whitespaces)
        guard text.lowercased().hasPrefix("bytes=") else { return .ignored }
        let spec = text.dropFirst(6).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .ignored }
        let first = spec[spec.startIndex..<dash].trimmingCharacters(in: .whitespaces)
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        if first.isEmpty {
            guard let suffix = Int64(last), suffix >= 0 else { return .ignored }
            if suffix == 0 || size == 0 { return .unsatisfiable }
            return .span(max(0, size - suffix), size - 1)
        }
        guard let start = Int64(first), start >= 0 else { return .ignored }
        var end = size - 1
        if !last.isEmpty {
            guard let e = Int64(last), e >= start else { return .ignored }
            end = min(e, size - 1)
        }
        guard start < size else { return .unsatisfiable }
        return .span(start, end)
    }
}
