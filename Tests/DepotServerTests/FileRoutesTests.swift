import DepotCore
import DepotMemory
@testable import DepotServer
import Foundation
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A DepotServer serving a files folder on loopback, and raw HTTP against it.
struct FileServer {
    let server: DepotServer
    let base: String
    let folder: String

    static func start(folder: String, maxFileSize: Int64 = 1 << 30, faults: ServerFaults? = nil) async throws -> FileServer {
        var configuration = DepotServer.Configuration(faults: faults)
        configuration.filesDirectory = folder
        configuration.maxFileSize = maxFileSize
        let server = DepotServer(store: try await Store(driver: MemoryDriver()), configuration: configuration)
        let port = try await server.start()
        return FileServer(server: server, base: "http://127.0.0.1:\(port)", folder: folder)
    }

    func send(_ method: String, _ path: String, body: Data? = nil, headers: [String: String] = [:]) async throws -> Answer {
        try await rawSend(base: base, method, path, body: body, headers: headers)
    }
}

func rawSend(base: String, _ method: String, _ path: String, body: Data? = nil, headers: [String: String] = [:]) async throws -> Answer {
    guard let url = URL(string: base + path) else { throw DepotError(.invalidValue, "bad url \(path)") }
    var request = URLRequest(url: url)
    request.httpMethod = method
    for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
    request.httpBody = body
    let (data, response) = try await URLSession.shared.data(for: request)
    guard let http = response as? HTTPURLResponse else { throw DepotError(.remote, "not http") }
    var fields: [String: String] = [:]
    for (key, value) in http.allHeaderFields {
        if let key = key as? String, let value = value as? String { fields[key] = value }
    }
    return Answer(status: http.statusCode, headers: fields, body: data)
}

/// A fresh folder under the system's temporary directory, removed by `remove()`.
struct ScratchFolder {
    let path: String
    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("depot-files-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    func remove() { try? FileManager.default.removeItem(atPath: path) }
    /// The names in the folder, dot files included.
    func entries() -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted() }
}

/// Pseudo-random bytes from a seed, so each test's content is reproducible.
func seededBytes(_ count: Int, seed: UInt64) -> Data {
    var generator = SplitMix64(seed: seed)
    var out = [UInt8]()
    out.reserveCapacity(count + 8)
    while out.count < count {
        var word = generator.next()
        for _ in 0..<8 {
            out.append(UInt8(truncatingIfNeeded: word))
            word >>= 8
        }
    }
    return Data(out.prefix(count))
}

func withFileServer(maxFileSize: Int64 = 1 << 30, _ body: (FileServer, ScratchFolder) async throws -> Void) async throws {
    let folder = try ScratchFolder()
    let live = try await FileServer.start(folder: folder.path, maxFileSize: maxFileSize)
    do {
        try await body(live, folder)
    } catch {
        await live.server.stop()
        folder.remove()
        throw error
    }
    await live.server.stop()
    folder.remove()
}

@Suite("DepotServer /_files")
struct FileRoutesTests {
    @Test("PUT then GET gives the same bytes, the SHA-256 and a strong ETag; HEAD agrees; the list shows it")
    func roundTrip() async throws {
        try await withFileServer { live, folder in
            let content = seededBytes(700_000, seed: 1)
            let digest = SHA256Hasher.hash([UInt8](content))
            let put = try await live.send("PUT", "/_files/report.bin", body: content)
            #expect(put.status == 201)
            let etag = try #require(put.header("ETag"))
            #expect(etag.hasPrefix("\"") && !etag.hasPrefix("W/"))
            #expect(put.header("Depot-SHA256") == digest)
            let got = try await live.send("GET", "/_files/report.bin")
            #expect(got.status == 200)
            #expect(got.body == content)
            #expect(got.header("ETag") == etag)
            #expect(got.header("Depot-SHA256") == digest)
            #expect(got.header("Accept-Ranges") == "bytes")
            let head = try await live.send("HEAD", "/_files/report.bin")
            #expect(head.status == 200)
            #expect(head.header("Content-Length") == "700000")
            #expect(head.header("ETag") == etag)
            #expect(head.body.isEmpty)
            let list = try await live.send("GET", "/_files")
            #expect(list.json == .array([.object(["name": "report.bin", "size": .int(700_000), "etag": .string(etag)])]))
            let replaced = try await live.send("PUT", "/_files/report.bin", body: Data("short".utf8))
            #expect(replaced.status == 200)
            #expect(replaced.header("ETag") != etag)
            let again = try await live.send("GET", "/_files/report.bin")
            #expect(again.body == Data("short".utf8))
            #expect(folder.entries().contains("report.bin"))
        }
    }

    @Test("Range: 206 with Content-Range, suffix and open ranges; 416 past the end; If-Range with an old ETag gives the whole file")
    func ranges() async throws {
        try await withFileServer { live, _ in
            let content = seededBytes(10_000, seed: 2)
            let put = try await live.send("PUT", "/_files/r", body: content)
            let etag = try #require(put.header("ETag"))
            let middle = try await live.send("GET", "/_files/r", headers: ["Range": "bytes=100-199"])
            #expect(middle.status == 206)
            #expect(middle.header("Content-Range") == "bytes 100-199/10000")
            #expect(middle.body == content[100..<200])
            let open = try await live.send("GET", "/_files/r", headers: ["Range": "bytes=9990-", "If-Range": etag])
            #expect(open.status == 206)
            #expect(open.body == content[9990...])
            let suffix = try await live.send("GET", "/_files/r", headers: ["Range": "bytes=-5"])
            #expect(suffix.body == content[9995...])
            let past = try await live.send("GET", "/_files/r", headers: ["Range": "bytes=10000-"])
            #expect(past.status == 416)
            #expect(past.header("Content-Range") == "bytes */10000")
            let stale = try await live.send("GET", "/_files/r", headers: ["Range": "bytes=100-", "If-Range": "\"not-the-etag\""])
            #expect(stale.status == 200)
            #expect(stale.body == content)
        }
    }

    @Test("If-Match on PUT and DELETE: a stale ETag is 412 and changes nothing; If-None-Match: * refuses to overwrite")
    func preconditions() async throws {
        try await withFileServer { live, _ in
            let first = try await live.send("PUT", "/_files/doc", body: Data("v1".utf8))
            let etag1 = try #require(first.header("ETag"))
            let second = try await live.send("PUT", "/_files/doc", body: Data("v2".utf8), headers: ["If-Match": etag1])
            #expect(second.status == 200)
            let etag2 = try #require(second.header("ETag"))
            let stalePut = try await live.send("PUT", "/_files/doc", body: Data("v3".utf8), headers: ["If-Match": etag1])
            #expect(stalePut.status == 412)
            #expect(stalePut.errorCode == "preconditionFailed")
            let staleDelete = try await live.send("DELETE", "/_files/doc", headers: ["If-Match": etag1])
            #expect(staleDelete.status == 412)
            let create = try await live.send("PUT", "/_files/doc", body: Data("v4".utf8), headers: ["If-None-Match": "*"])
            #expect(create.status == 412)
            #expect(try await live.send("GET", "/_files/doc").body == Data("v2".utf8))
            let delete = try await live.send("DELETE", "/_files/doc", headers: ["If-Match": etag2])
            #expect(delete.status == 204)
            #expect(try await live.send("GET", "/_files/doc").status == 404)
            #expect(try await live.send("DELETE", "/_files/doc").status == 404)
            let missingMatch = try await live.send("PUT", "/_files/new", body: Data("x".utf8), headers: ["If-Match": "*"])
            #expect(missingMatch.status == 412)
        }
    }

    @Test("hostile names are a typed 400 and never touch a path outside the folder")
    func hostileNames() async throws {
        try await withFileServer { live, folder in
            let outside = URL(fileURLWithPath: folder.path).deletingLastPathComponent().appendingPathComponent("escaped-\(UUID().uuidString)").path
            let escapedName = URL(fileURLWithPath: outside).lastPathComponent
            let hostile = [
                "%2E%2E", "..%2F" + escapedName, "a%2Fb", "a%00b", ".hidden", "%2Edepot-files.lock", "a%5Cb", "a%0Ab",
                String(repeating: "x", count: 201),
            ]
            for name in hostile {
                let put = try await live.send("PUT", "/_files/" + name, body: Data("evil".utf8))
                #expect(put.status == 400, "PUT \(name)")
                #expect(put.errorCode == "invalidName", "PUT \(name)")
                let get = try await live.send("GET", "/_files/" + name)
                #expect(get.status == 400, "GET \(name)")
            }
            #expect(!FileManager.default.fileExists(atPath: outside))
            #expect(try await live.send("GET", "/_files").json == .array([]))
            let longest = try await live.send("PUT", "/_files/" + String(repeating: "y", count: 200), body: Data("ok".utf8))
            #expect(longest.status == 201)
            let unicode = try await live.send("PUT", "/_files/caf%C3%A9%20menu.txt", body: Data("ok".utf8))
            #expect(unicode.status == 201)
            #expect(folder.entries().contains("café menu.txt"))
        }
    }

    @Test("a body over the size limit is 413 and leaves nothing behind, not even a temporary file")
    func sizeLimit() async throws {
        try await withFileServer(maxFileSize: 1000) { live, folder in
            let tooBig = try await live.send("PUT", "/_files/big", body: seededBytes(1001, seed: 3))
            #expect(tooBig.status == 413)
            #expect(tooBig.errorCode == "tooLarge")
            #expect(try await live.send("GET", "/_files/big").status == 404)
            #expect(!folder.entries().contains { $0 == "big" || $0.hasPrefix(".upload-") })
            let fits = try await live.send("PUT", "/_files/big", body: seededBytes(1000, seed: 3))
            #expect(fits.status == 201)
        }
    }

    @Test("a Depot-SHA256 that does not match the body is refused and nothing is stored")
    func digestChecked() async throws {
        try await withFileServer { live, folder in
            let body = Data("hello".utf8)
            let wrong = try await live.send("PUT", "/_files/h", body: body, headers: ["Depot-SHA256": SHA256Hasher.hash(Array("other".utf8))])
            #expect(wrong.status == 400)
            #expect(wrong.errorCode == "digestMismatch")
            #expect(!folder.entries().contains { $0 == "h" || $0.hasPrefix(".upload-") })
            let right = try await live.send("PUT", "/_files/h", body: body, headers: ["Depot-SHA256": SHA256Hasher.hash(Array(body))])
            #expect(right.status == 201)
        }
    }

    @Test("files the server keeps for itself (temporary uploads, hash sidecars, the lock) are never listed or served")
    func internalFilesHidden() async throws {
        try await withFileServer { live, folder in
            _ = try await live.send("PUT", "/_files/a", body: Data("a".utf8))
            try Data("partial".utf8).write(to: URL(fileURLWithPath: folder.path + "/.upload-123.tmp"))
            let entries = folder.entries()
            #expect(entries.contains(".a.sha256"))
            #expect(entries.contains(".depot-files.lock"))
            let list = try await live.send("GET", "/_files")
            #expect(list.json.arrayValue?.compactMap { $0.objectValue?["name"]?.stringValue } == ["a"])
            #expect(try await live.send("GET", "/_files/.upload-123.tmp").status == 400)
            #expect(try await live.send("GET", "/_files/.a.sha256").status == 400)
        }
    }

    @Test("a file dropped into the folder by hand is served with a computed SHA-256")
    func foreignFile() async throws {
        try await withFileServer { live, folder in
            let content = seededBytes(3000, seed: 4)
            try content.write(to: URL(fileURLWithPath: folder.path + "/dropped"))
            let got = try await live.send("GET", "/_files/dropped")
            #expect(got.body == content)
            #expect(got.header("Depot-SHA256") == SHA256Hasher.hash([UInt8](content)))
        }
    }

    @Test("two servers over the same folder serve the same files with the same ETags and honour each other's If-Match")
    func twoServers() async throws {
        let folder = try ScratchFolder()
        defer { folder.remove() }
        let one = try await FileServer.start(folder: folder.path)
        let two = try await FileServer.start(folder: folder.path)
        do {
            let content = seededBytes(50_000, seed: 5)
            let put = try await one.send("PUT", "/_files/shared", body: content)
            let etag = try #require(put.header("ETag"))
            let viaTwo = try await two.send("GET", "/_files/shared")
            #expect(viaTwo.body == content)
            #expect(viaTwo.header("ETag") == etag)
            #expect(viaTwo.header("Depot-SHA256") == put.header("Depot-SHA256"))
            let replaced = try await two.send("PUT", "/_files/shared", body: Data("new".utf8), headers: ["If-Match": etag])
            #expect(replaced.status == 200)
            let stale = try await one.send("PUT", "/_files/shared", body: Data("lost update".utf8), headers: ["If-Match": etag])
            #expect(stale.status == 412)
            #expect(try await one.send("GET", "/_files/shared").body == Data("new".utf8))
            #expect(try await one.send("GET", "/_files").json == (try await two.send("GET", "/_files").json))
        } catch {
            await one.server.stop()
            await two.server.stop()
            throw error
        }
        await one.server.stop()
        await two.server.stop()
    }

    @Test("a server without a files folder answers 404 on /_files, and records still work beside files")
    func filesOff() async throws {
        try await withServer { live in
            let answer = try await live.send("GET", "/_files")
            #expect(answer.status == 404)
        }
        try await withFileServer { live, _ in
            let record = try await rawSend(base: live.base, "POST", "/posts", body: Data(#"{"title":"x","attachment":"report.bin"}"#.utf8), headers: ["Content-Type": "application/json"])
            #expect(record.status == 201)
        }
    }

    @Test("ByteRange parses single ranges and ignores what it does not serve")
    func rangeParsing() {
        #expect(ByteRange.parse("bytes=0-9", size: 100) == .span(0, 9))
        #expect(ByteRange.parse("bytes=90-200", size: 100) == .span(90, 99))
        #expect(ByteRange.parse("bytes=-10", size: 100) == .span(90, 99))
        #expect(ByteRange.parse("bytes=-500", size: 100) == .span(0, 99))
        #expect(ByteRange.parse("bytes=100-", size: 100) == .unsatisfiable)
        #expect(ByteRange.parse("bytes=-0", size: 100) == .unsatisfiable)
        #expect(ByteRange.parse("bytes=0-1,5-6", size: 100) == .ignored)
        #expect(ByteRange.parse("bytes=5-1", size: 100) == .ignored)
        #expect(ByteRange.parse("items=0-1", size: 100) == .ignored)
        #expect(ByteRange.parse("bytes=x-1", size: 100) == .ignored)
    }
}
