import DepotCore
import DepotModel
import DepotSync
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `close(2)`, which the socket classes' own `close()` hides.
func closeDescriptor(_ fd: Int32) {
    #if canImport(Glibc)
    _ = Glibc.close(fd)
    #else
    _ = Darwin.close(fd)
    #endif
}

// MARK: Models

/// A post as the typed-resource tests use it: a server-assigned id, a date stored as integer
/// milliseconds and a sealed field, on the wire exactly as in the store.
@Model(collection: "posts")
struct RemotePost: Equatable {
    var id: Int?
    var userId: Int
    var title: String
    var rank: Int
    @Transform(.millisecondsSince1970) var createdAt: Date
    @Transform(.testSealed) var secret: String?

    static let comments = HasMany<RemotePost, RemoteComment>("comments", field: "postId")
}

/// A comment of a post (`/posts/1/comments`).
@Model(collection: "comments")
struct RemoteComment: Equatable {
    var id: Int?
    var postId: Int?
    var body: String
}

/// A `String` sealed with a keyed stream: an 8-byte random nonce, then the text XORed with
/// a SplitMix64 stream seeded by key and nonce. Not a cipher to protect anything (the
/// ChaCha20 transformer of Docs/Models.md is one); it shows that the wire carries what the
/// transformer writes, never the plain text, and that reading undoes it.
struct TestSealed: FieldTransformer {
    let key: UInt64

    func encode(_ value: String) throws -> FieldValue {
        var generator = SystemRandomNumberGenerator()
        let nonce = UInt64.random(in: .min ... .max, using: &generator)
        let nonceBytes = (0..<8).map { UInt8(truncatingIfNeeded: nonce >> (8 * $0)) }
        return .bytes(Data(nonceBytes + Self.apply(Array(value.utf8), key ^ nonce)))
    }

    func decode(_ fieldValue: FieldValue) throws -> String {
        guard case .bytes(let data) = fieldValue, data.count >= 8 else {
            throw DepotError(.decoding, "Expected a nonce and sealed text, found \(fieldValue.kind).")
        }
        let bytes = Array(data)
        let nonce = (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[$1]) << (8 * UInt64($1)) }
        guard let text = String(validating: Self.apply(Array(bytes[8...]), key ^ nonce), as: UTF8.self) else {
            throw DepotError(.decoding, "The unsealed bytes are not UTF-8.")
        }
        return text
    }

    static func apply(_ bytes: [UInt8], _ seed: UInt64) -> [UInt8] {
        var generator = SplitMix64(seed: seed)
        var word: UInt64 = 0
        return bytes.enumerated().map { index, byte in
            if index % 8 == 0 { word = generator.next() }
            return byte ^ UInt8(truncatingIfNeeded: word >> (8 * UInt64(index % 8)))
        }
    }
}

extension FieldTransformer where Self == TestSealed {
    /// The sealed transformer with the tests' key.
    static var testSealed: TestSealed { TestSealed(key: 0x0123_4567_89AB_CDEF) }
}

/// The date `ms` milliseconds after 1970, as `MillisecondsSince1970` reads it.
func wholeMilliseconds(_ ms: Int64) -> Date { Date(timeIntervalSince1970: Double(ms) / 1000) }

/// A post whose date is whole seconds, so that writing it as milliseconds and reading it
/// back gives the same `Date` (a fraction of a millisecond in binary floating point could
/// round down to the millisecond before).
func post(_ id: Int?, rank: Int, title: String? = nil, userId: Int = 1, secret: String? = nil) -> RemotePost {
    RemotePost(id: id, userId: userId, title: title ?? "post \(rank)", rank: rank, createdAt: wholeMilliseconds(1_700_000_000_000 + 1000 * Int64(rank)), secret: secret)
}

// MARK: Transports

/// The per-request timeout of the remote-resource tests against healthy peers. Their
/// creates (POST without an idempotency key) are never retried, so a request must outlast a
/// stall of the whole test process: in full-suite runs on the 2-core machine under load, every
/// test of the process has been seen to pause for about 60 s at once (cause not found yet),
/// and 10 s made these POSTs fail.
let remoteTestTimeout: TimeInterval = 120

/// The real transport, counting what it sends (method and path), for tests of which read
/// policy asks the network.
final class CountingTransport: HTTPTransport {
    let inner = URLSessionTransport(timeout: remoteTestTimeout)
    let sent = Locked<[String]>([])
    func send(_ request: HTTPRequestSpec) async throws -> HTTPAnswer {
        sent.withLock { $0.append(request.method + " " + request.url.path) }
        return try await inner.send(request)
    }
    var count: Int { sent.withLock { $0.count } }
}

// MARK: simple-json-server, a third-party json-server clone from PyPI

/// The json-server clone `simple-json-server` (PyPI, pinned in scripts/install-deps), run as
/// a child process on a free loopback port over a `db.json` in a temporary folder.
final class JSONServerProcess: @unchecked Sendable {
    // @unchecked Sendable: `process` is set in init and only read after.
    let process: Process
    let url: URL
    let folder: URL
    var dbFile: URL { folder.appendingPathComponent("db.json") }

    static let installHint = "simple-json-server is not installed: run scripts/install-deps, which runs `python3 -m pip install --target .build-python simple-json-server==0.2.0` in the package folder (needs python3 with pip)."

    /// Where scripts/install-deps puts the package: `.build-python` in the package folder.
    static var packagePath: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(".build-python")
    }

    /// Starts the server over `db` (the whole `db.json` object).
    ///
    /// The port is free when chosen but may be taken before the server binds it (an outgoing
    /// connection of a test running beside this one gets ports from the same range); a
    /// server that exits before it answers is started again on another port, up to five times.
    /// - Throws: a failure naming what to install, with the server's last words, when it
    ///   cannot start.
    init(db: FieldValue) async throws {
        let modules = Self.packagePath
        guard FileManager.default.fileExists(atPath: modules.appendingPathComponent("simple_json_server").path) else {
            throw DepotError(.unsupported, Self.installHint)
        }
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("depot-json-server-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(JSONText.serialize(db).utf8).write(to: folder.appendingPathComponent("db.json"))
        let log = folder.appendingPathComponent("server.log")
        var lastWords = ""
        for _ in 0..<5 {
            let port = try freeLoopbackPort()
            guard let url = URL(string: "http://127.0.0.1:\(port)") else { throw DepotError(.internal, "url") }
            FileManager.default.createFile(atPath: log.path, contents: nil)
            let output = try FileHandle(forWritingTo: log)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", "-m", "simple_json_server.simple_json_server", "--host", "127.0.0.1", "--port", String(port), "--file", folder.appendingPathComponent("db.json").path]
            var environment = ProcessInfo.processInfo.environment
            environment["PYTHONPATH"] = modules.path
            environment["PYTHONUNBUFFERED"] = "1"
            process.environment = environment
            process.currentDirectoryURL = folder
            process.standardOutput = FileHandle.nullDevice
            process.standardError = output
            try process.run()
            try output.close()
            // Up to 60 s for the interpreter to start on a busy machine (or through a stall of
            // the test process, see remoteTestTimeout).
            let probe = URLSessionTransport(timeout: 2)
            for _ in 0..<600 {
                guard process.isRunning else { break }
                if let answer = try? await probe.send(HTTPRequestSpec(method: "GET", url: url.appendingPathComponent("_db"))), answer.status == 200 {
                    self.process = process
                    self.url = url
                    return
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                for _ in 0..<100 where process.isRunning {
                    try? await Task.sleep(for: .milliseconds(50))  // try?: a cancelled wait just ends sooner
                }
                lastWords = "it did not answer on port \(port) within 60 s"
                break
            }
            let text = String(decoding: (try? FileHandle(forReadingFrom: log).readToEnd()) ?? Data(), as: UTF8.self)  // try?: the log is only for the message
            lastWords = "it exited with status \(process.terminationStatus) on port \(port): " + String(text.suffix(300))
        }
        try? FileManager.default.removeItem(at: folder)  // try?: cleanup of a temporary folder
        throw DepotError(.unsupported, "simple-json-server did not start (\(lastWords)). " + Self.installHint)
    }

    /// The server's `db.json` as it is on disk now.
    func database() throws -> FieldValue {
        try JSONText.parse([UInt8](try (FileHandle(forReadingFrom: dbFile).readToEnd() ?? Data())))
    }

    /// Kills the server and waits for it, without blocking a thread of the cooperative pool.
    /// SIGKILL: the test runner blocks SIGTERM in the signal mask its children inherit.
    func stop() async {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        for _ in 0..<100 where process.isRunning {
            try? await Task.sleep(for: .milliseconds(50))  // try?: a cancelled wait just ends sooner
        }
        try? FileManager.default.removeItem(at: folder)  // try?: cleanup of a temporary folder
    }

    /// Runs `body` with a server over `db`, then stops it.
    static func with(_ db: FieldValue, _ body: (JSONServerProcess) async throws -> Void) async throws {
        let server = try await JSONServerProcess(db: db)
        do {
            try await body(server)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }
}

/// A port no one listens on now (bound to port 0, read, closed).
func freeLoopbackPort() throws -> Int {
    let listener = try LoopbackListener()
    let port = listener.port
    listener.close()
    return port
}

// MARK: A faulty peer: raw bytes on a loopback socket

/// A loopback TCP socket bound to a free port.
final class LoopbackListener: @unchecked Sendable {
    // @unchecked Sendable: `fd` is set in init; close() is idempotent under `closed`.
    let fd: Int32
    let port: Int
    private let closed = Locked(false)

    init() throws {
        #if canImport(Glibc)
        let stream = Int32(SOCK_STREAM.rawValue)
        #else
        let stream = SOCK_STREAM
        #endif
        let fd = socket(AF_INET, stream, 0)
        guard fd >= 0 else { throw DepotError(.io, "socket() failed") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            closeDescriptor(fd)
            throw DepotError(.io, "bind/listen on loopback failed")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func close() {
        let wasClosed = closed.withLock { value -> Bool in
            defer { value = true }
            return value
        }
        if !wasClosed {
            _ = shutdown(fd, Int32(SHUT_RDWR))
            closeDescriptor(fd)
        }
    }
}

/// A peer that answers the n-th connection with `responses[n]` (the last one again after
/// the end) as raw bytes, then closes it: a 500, a body cut short by a dropped connection,
/// a `Content-Length` that does not match the body.
final class RawHTTPPeer: @unchecked Sendable {
    // @unchecked Sendable: the listener is immutable; `requests` is behind a Locked.
    let listener: LoopbackListener
    let responses: [[UInt8]]
    let requests = Locked<[String]>([])
    let url: URL

    init(responses: [String]) throws {
        listener = try LoopbackListener()
        self.responses = responses.map { Array($0.utf8) }
        guard let url = URL(string: "http://127.0.0.1:\(listener.port)") else { throw DepotError(.internal, "url") }
        self.url = url
        let thread = Thread { [self] in self.serve() }
        thread.start()
    }

    private func serve() {
        while true {
            let client = accept(listener.fd, nil, nil)
            if client < 0 { return }
            var head: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !head.ends(with: Array("\r\n\r\n".utf8)) {
                let n = recv(client, &buffer, buffer.count, 0)
                if n <= 0 { break }
                head += buffer[0..<n]
            }
            let line = String(decoding: head.prefix { $0 != 13 }, as: UTF8.self)
            let index = requests.withLock { list -> Int in
                list.append(line)
                return list.count - 1
            }
            let response = responses[min(index, responses.count - 1)]
            _ = response.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            _ = shutdown(client, Int32(SHUT_WR))
            closeDescriptor(client)
        }
    }

    func stop() { listener.close() }

    var count: Int { requests.withLock { $0.count } }
}

extension Array where Element == UInt8 {
    func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
}
