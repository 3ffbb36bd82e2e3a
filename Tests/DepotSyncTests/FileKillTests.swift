import DepotConformance
import DepotCore
import DepotServer
@testable import DepotSync
import Foundation
import Testing

/// `depot files get` as a real process, killed with SIGKILL mid-download, then run again.
@Suite("depot files get, killed and resumed")
struct FileKillTests {
    /// The built `depot` beside the test binary (or `DEPOT_CLI`).
    static func depotPath() throws -> String {
        if let path = ProcessInfo.processInfo.environment["DEPOT_CLI"] { return path }
        var directory = URL(fileURLWithPath: CommandLine.arguments.first ?? ".").deletingLastPathComponent()
        for _ in 0..<6 {
            let candidate = directory.appendingPathComponent("depot").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        throw DepotError(.notFound, "the depot executable was not found beside the test binary; run `swift build` first")
    }

    @Test("a download killed mid-way leaves only a .part; the next `depot files get` resumes it (Range) to the same SHA-256")
    func killAndResume() async throws {
        let depot = try Self.depotPath()
        let faults = FaultSwitch()
        try await withFilePeer(faults: faults.faults) { peer in
            let size = 6_000_000
            let content = fileBytes(size, seed: 21)
            let digest = SHA256Hasher.hash([UInt8](content))
            _ = try await peer.client().upload(from: try peer.write(content, local: "src"), name: "movie.bin").result()
            // The first GET is paced (30 ms a 256 KiB chunk, about 0.7 s in all) so the kill
            // lands mid-body.
            faults.queue(.pace(milliseconds: 30))
            let dest = peer.local("movie.bin")
            let part = dest.path + ".part"
            let child = try ChildProcess(path: depot, arguments: ["files", "get", peer.base.absoluteString, "movie.bin", dest.path])
            let deadline = ContinuousClock.now + .seconds(60)
            while (FileDigest.size(path: part) ?? 0) < 1_000_000 && ContinuousClock.now < deadline && child.isRunning {
                try await Task.sleep(for: .milliseconds(5))
            }
            child.kill(SIGKILL)
            let killed = await child.exit()
            #expect(killed.status == .signalled(SIGKILL), "the download ended before the kill: \(killed.errorText)")
            let partial = try #require(FileDigest.size(path: part))
            #expect(partial > 0 && partial < Int64(size))
            #expect(!FileManager.default.fileExists(atPath: dest.path))
            let before = faults.requests.count
            let resumed = try await ChildProcess.run(depot, ["files", "get", peer.base.absoluteString, "movie.bin", dest.path])
            #expect(resumed.status == .exited(0), "\(resumed.errorText)")
            #expect(faults.requests.count == before + 1)  // one request: the resumed range
            #expect(resumed.outputText.contains(digest))
            let whole = try (FileHandle(forReadingFrom: dest).readToEnd() ?? Data())
            #expect(SHA256Hasher.hash([UInt8](whole)) == digest)
            #expect(!FileManager.default.fileExists(atPath: part))
        }
    }

    @Test("depot files put, ls, get and rm against a live server; a pipe gets no progress bar")
    func cliRoundTrip() async throws {
        let depot = try Self.depotPath()
        try await withFilePeer { peer in
            let content = fileBytes(300_000, seed: 22)
            let source = try peer.write(content, local: "a.bin")
            let url = peer.base.absoluteString
            let put = try await ChildProcess.run(depot, ["files", "put", url, source.path, "a.bin"])
            #expect(put.status == .exited(0), "\(put.errorText)")
            #expect(put.errorText.isEmpty)  // no progress bar on a pipe
            #expect(put.outputText.contains(SHA256Hasher.hash([UInt8](content))))
            let ls = try await ChildProcess.run(depot, ["files", "ls", url])
            #expect(ls.outputText.contains("\"name\":\"a.bin\""))
            #expect(ls.outputText.contains("\"size\":300000"))
            let get = try await ChildProcess.run(depot, ["files", "get", url, "a.bin", peer.localFolder + "/b.bin"])
            #expect(get.status == .exited(0), "\(get.errorText)")
            #expect(try (FileHandle(forReadingFrom: peer.local("b.bin")).readToEnd() ?? Data()) == content)
            let rm = try await ChildProcess.run(depot, ["files", "rm", url, "a.bin"])
            #expect(rm.status == .exited(0))
            let missing = try await ChildProcess.run(depot, ["files", "get", url, "a.bin", peer.localFolder + "/c.bin"])
            #expect(missing.status == .exited(1))
            #expect(missing.errorText.contains("notFound"))
            let badName = try await ChildProcess.run(depot, ["files", "put", url, source.path, "../x"])
            #expect(badName.status == .exited(2))
        }
    }
}
