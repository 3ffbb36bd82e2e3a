import DepotConformance
import DepotCore
import DepotMemory
import DepotServer
@testable import DepotSync
import Foundation
import Testing

/// A DepotServer with a files folder on loopback, a scratch folder for the client's side,
/// and the client; faults can be switched per request.
struct FilePeer {
    let server: DepotServer
    let base: URL
    let serverFolder: String
    let localFolder: String

    static func start(faults: ServerFaults? = nil, maxFileSize: Int64 = 1 << 30) async throws -> FilePeer {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("depot-fileclient-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root + "/server", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root + "/local", withIntermediateDirectories: true)
        var configuration = DepotServer.Configuration(faults: faults)
        configuration.filesDirectory = root + "/server"
        configuration.maxFileSize = maxFileSize
        let server = DepotServer(store: try await Store(driver: MemoryDriver()), configuration: configuration)
        let port = try await server.start()
        return FilePeer(server: server, base: URL(string: "http://127.0.0.1:\(port)").unsafelyUnwrapped, serverFolder: root + "/server", localFolder: root + "/local")
    }

    func client(attempts: Int = 1) -> FileClient {
        FileClient(baseURL: base, retryPolicy: RetryPolicy(baseDelay: .milliseconds(1), maxDelay: .milliseconds(5), maxAttempts: attempts), timeout: 20)
    }

    func local(_ name: String) -> URL { URL(fileURLWithPath: localFolder + "/" + name) }

    func write(_ data: Data, local name: String) throws -> URL {
        let url = local(name)
        try data.write(to: url)
        return url
    }

    func exists(_ name: String) -> Bool { FileManager.default.fileExists(atPath: localFolder + "/" + name) }

    func stop() async {
        await server.stop()
        try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: serverFolder).deletingLastPathComponent().path)
    }
}

func withFilePeer(faults: ServerFaults? = nil, maxFileSize: Int64 = 1 << 30, _ body: (FilePeer) async throws -> Void) async throws {
    let peer = try await FilePeer.start(faults: faults, maxFileSize: maxFileSize)
    do {
        try await body(peer)
    } catch {
        await peer.stop()
        throw error
    }
    await peer.stop()
}

/// Pseudo-random bytes from a seed.
func fileBytes(_ count: Int, seed: UInt64) -> Data {
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

/// Faults switched on and off by the test: the next GET of a file gets `nextGet`.
final class FaultSwitch: Sendable {
    private let next = Locked<[ServerFault]>([])
    private let seen = Locked<[String]>([])
    func queue(_ faults: ServerFault...) { next.withLock { $0.append(contentsOf: faults) } }
    var requests: [String] { seen.withLock { $0 } }
    var faults: ServerFaults {
        ServerFaults { method, path in
            self.seen.withLock { $0.append(method + " " + path) }
            guard path.hasPrefix("/_files/") else { return nil }
            return self.next.withLock { $0.isEmpty ? nil : $0.removeFirst() }
        }
    }
}

@Suite("FileClient")
struct FileClientTests {
    @Test("upload then download: same bytes, same SHA-256, progress rises to the size, no .part left")
    func roundTrip() async throws {
        try await withFilePeer { peer in
            let content = fileBytes(3_000_000, seed: 11)
            let digest = SHA256Hasher.hash([UInt8](content))
            let source = try peer.write(content, local: "source.bin")
            let client = peer.client()
            let upload = client.upload(from: source, name: "big.bin")
            var upSteps: [FileTransferProgress] = []
            for await step in upload { upSteps.append(step) }
            let up = try await upload.result()
            #expect(up.sha256 == digest)
            #expect(up.size == 3_000_000)
            #expect(upSteps.first?.totalBytes == 3_000_000)
            let download = client.download(name: "big.bin", to: peer.local("copy.bin"))
            var downSteps: [FileTransferProgress] = []
            for await step in download { downSteps.append(step) }
            let down = try await download.result()
            #expect(down.sha256 == digest)
            #expect(down.etag == up.etag)
            #expect(try (FileHandle(forReadingFrom: peer.local("copy.bin")).readToEnd() ?? Data()) == content)
            #expect(!peer.exists("copy.bin.part") && !peer.exists("copy.bin.part.etag"))
            #expect(downSteps.last?.bytesDone == 3_000_000)
            #expect(downSteps.last?.totalBytes == 3_000_000)
            #expect(zip(downSteps, downSteps.dropFirst()).allSatisfy { $0.bytesDone <= $1.bytesDone })
            let listed = try await client.list()
            #expect(listed.map(\.name) == ["big.bin"])
            #expect(listed.first?.size == 3_000_000)
            try await client.delete(name: "big.bin", ifMatch: up.etag)
            #expect(try await client.list().isEmpty)
        }
    }

    @Test("a download cut mid-body is a typed, retryable .remote error, keeps its .part, and the next run resumes with Range to the same SHA-256")
    func droppedMidBody() async throws {
        let faults = FaultSwitch()
        try await withFilePeer(faults: faults.faults) { peer in
            let content = fileBytes(2_000_000, seed: 12)
            _ = try await peer.client().upload(from: try peer.write(content, local: "src"), name: "f").result()
            faults.queue(.truncateBody(afterBytes: 700_000))
            let dest = peer.local("out")
            do {
                _ = try await peer.client().download(name: "f", to: dest).result()
                Issue.record("a cut download succeeded")
            } catch let error as DepotError {
                #expect(error.code == .remote)
                #expect((error.cause as? FileTransferFailure)?.retryable == true)
            }
            #expect(!peer.exists("out"))
            let partSize = try #require(FileDigest.size(path: dest.path + ".part"))
            #expect(partSize > 0 && partSize < 2_000_000)
            let result = try await peer.client().download(name: "f", to: dest).result()
            #expect(result.sha256 == SHA256Hasher.hash([UInt8](content)))
            #expect(try (FileHandle(forReadingFrom: dest).readToEnd() ?? Data()) == content)
            #expect(!peer.exists("out.part"))
        }
    }

    @Test("with retries, a cut download resumes inside the same call")
    func retriedInside() async throws {
        let faults = FaultSwitch()
        try await withFilePeer(faults: faults.faults) { peer in
            let content = fileBytes(1_500_000, seed: 13)
            _ = try await peer.client().upload(from: try peer.write(content, local: "src"), name: "f").result()
            faults.queue(.truncateBody(afterBytes: 300_000), .status(503), .truncateBody(afterBytes: 300_000))
            let result = try await peer.client(attempts: 5).download(name: "f", to: peer.local("out")).result()
            #expect(result.sha256 == SHA256Hasher.hash([UInt8](content)))
            #expect(try (FileHandle(forReadingFrom: peer.local("out")).readToEnd() ?? Data()) == content)
        }
    }

    @Test("a 500 is a typed .remote error with its status; nothing is written to the destination")
    func serverError() async throws {
        let faults = FaultSwitch()
        try await withFilePeer(faults: faults.faults) { peer in
            _ = try await peer.client().upload(from: try peer.write(Data("abc".utf8), local: "src"), name: "f").result()
            faults.queue(.status(500))
            do {
                _ = try await peer.client().download(name: "f", to: peer.local("out")).result()
                Issue.record("a 500 succeeded")
            } catch let error as DepotError {
                #expect(error.code == .remote)
                #expect((error.cause as? FileTransferFailure)?.status == 500)
                #expect((error.cause as? FileTransferFailure)?.retryable == true)
            }
            #expect(!peer.exists("out"))
            faults.queue(.status(500))
            do {
                _ = try await peer.client().upload(from: peer.local("src"), name: "g").result()
                Issue.record("a 500 upload succeeded")
            } catch let error as DepotError {
                #expect((error.cause as? FileTransferFailure)?.status == 500)
            }
            #expect(try await peer.client().list().map(\.name) == ["f"])
        }
    }

    @Test("a body shorter than the file (a wrong Content-Length) is .corrupted: the destination stays absent, the bad part is removed")
    func wrongLength() async throws {
        let faults = FaultSwitch()
        try await withFilePeer(faults: faults.faults) { peer in
            let content = fileBytes(400_000, seed: 14)
            _ = try await peer.client().upload(from: try peer.write(content, local: "src"), name: "f").result()
            faults.queue(.understateLength(by: 1000))
            do {
                _ = try await peer.client().download(name: "f", to: peer.local("out")).result()
                Issue.record("a short body passed")
            } catch let error as DepotError {
                #expect(error.code == .corrupted)
            }
            #expect(!peer.exists("out") && !peer.exists("out.part"))
            #expect(try await peer.client().download(name: "f", to: peer.local("out")).result().size == 400_000)
        }
    }

    @Test("a .part whose file changed on the server is dropped (If-Range) and the download starts over")
    func changedOnServer() async throws {
        try await withFilePeer { peer in
            let client = peer.client()
            let old = fileBytes(100_000, seed: 15)
            let first = try await client.upload(from: try peer.write(old, local: "v1"), name: "f").result()
            try old.prefix(50_000).write(to: URL(fileURLWithPath: peer.localFolder + "/out.part"))
            try Data((first.etag ?? "").utf8).write(to: URL(fileURLWithPath: peer.localFolder + "/out.part.etag"))
            let new = fileBytes(120_000, seed: 16)
            _ = try await client.upload(from: try peer.write(new, local: "v2"), name: "f").result()
            let result = try await client.download(name: "f", to: peer.local("out")).result()
            #expect(result.sha256 == SHA256Hasher.hash([UInt8](new)))
            #expect(try (FileHandle(forReadingFrom: peer.local("out")).readToEnd() ?? Data()) == new)
        }
    }

    @Test("upload errors are typed: 413 over the size limit, 412 on a stale If-Match, invalidName before any request")
    func uploadErrors() async throws {
        try await withFilePeer(maxFileSize: 1000) { peer in
            let client = peer.client()
            do {
                _ = try await client.upload(from: try peer.write(fileBytes(2000, seed: 17), local: "big"), name: "big").result()
                Issue.record("an upload over the limit succeeded")
            } catch let error as DepotError {
                #expect((error.cause as? FileTransferFailure)?.status == 413)
                #expect((error.cause as? FileTransferFailure)?.retryable == false)
            }
            let small = try peer.write(Data("x".utf8), local: "small")
            let first = try await client.upload(from: small, name: "s").result()
            _ = try await client.upload(from: small, name: "s", ifMatch: first.etag).result()
            do {
                _ = try await client.upload(from: small, name: "s", ifMatch: first.etag).result()
                Issue.record("a stale If-Match succeeded")
            } catch let error as DepotError {
                #expect(error.code == .conflict)
            }
            for bad in ["", ".x", "a/b", "../up", String(repeating: "z", count: 201)] {
                do {
                    _ = try await client.upload(from: small, name: bad).result()
                    Issue.record("name \(bad) accepted")
                } catch let error as DepotError {
                    #expect(error.code == .invalidName)
                }
            }
            #expect(try await client.list().map(\.name) == ["s"])
        }
    }

    @Test("a missing file is .notFound and leaves no .part")
    func missing() async throws {
        try await withFilePeer { peer in
            do {
                _ = try await peer.client().download(name: "nope", to: peer.local("out")).result()
                Issue.record("a missing file downloaded")
            } catch let error as DepotError {
                #expect(error.code == .notFound)
            }
            #expect(!peer.exists("out") && !peer.exists("out.part"))
        }
    }

    @Test("cancelling a download stops it and keeps the .part to resume from")
    func cancelled() async throws {
        let faults = FaultSwitch()
        try await withFilePeer(faults: faults.faults) { peer in
            let content = fileBytes(4_000_000, seed: 18)
            _ = try await peer.client().upload(from: try peer.write(content, local: "src"), name: "f").result()
            faults.queue(.pace(milliseconds: 30))
            let dest = peer.local("out")
            let transfer = peer.client().download(name: "f", to: dest)
            for await step in transfer where step.bytesDone > 500_000 {
                transfer.cancel()
                break
            }
            do {
                _ = try await transfer.result()
                Issue.record("a cancelled download finished")
            } catch let error as DepotError {
                #expect(error.code == .cancelled)
            }
            #expect(!peer.exists("out"))
            #expect((FileDigest.size(path: dest.path + ".part") ?? 0) > 0)
            let result = try await peer.client().download(name: "f", to: dest).result()
            #expect(result.sha256 == SHA256Hasher.hash([UInt8](content)))
        }
    }
}
