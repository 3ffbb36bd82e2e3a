import Depot
import DepotConformance
import Foundation
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Runs Examples/Bookshelf (Examples/README.md) as a user would, on every persistent backend.
@Suite("Examples/Bookshelf")
struct ExampleAppTests {
    /// Finds the `Bookshelf` executable beside the test binary.
    static func executable() throws -> String {
        var directory = URL(fileURLWithPath: CommandLine.arguments.first ?? ".").deletingLastPathComponent()
        for _ in 0..<6 {
            let candidate = directory.appendingPathComponent("Bookshelf").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        throw HarnessError("the Bookshelf executable was not found beside the test binary; run `swift build` first")
    }

    static func run(_ args: [String]) async throws -> CLI.Run {
        let result = try await ChildProcess.run(try executable(), args, environment: ProcessInfo.processInfo.environment, standardInput: Data())
        let status: Int32
        switch result.status {
        case .exited(let code): status = code
        case .signalled(let signal): status = 128 + signal
        }
        return CLI.Run(status: status, stdout: result.outputText, stderr: result.errorText)
    }

    @Test("adds, lists by year, filters, removes; depot sees the same records")
    func bookshelf() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        for scheme in try await CLI.persistentSchemes() {
            let store = directory.storeString(scheme, "shelf")
            let dune = try await Self.run([store, "add", "Dune", "Frank Herbert", "1965"])
            let emma = try await Self.run([store, "add", "Emma", "Jane Austen", "1815"])
            #expect(dune.status == 0 && emma.status == 0, "\(scheme): \(dune) \(emma)")
            let duneID = dune.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            let emmaID = emma.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(Int64(duneID) != nil && Int64(emmaID) != nil && duneID != emmaID, "\(scheme): \(dune) \(emma)")
            let all = try await Self.run([store, "list"])
            #expect(all.lines == ["\(emmaID)\t1815\tEmma — Jane Austen", "\(duneID)\t1965\tDune — Frank Herbert"], "\(scheme): \(all)")
            let recent = try await Self.run([store, "list", "--since", "1900"])
            #expect(recent.lines == ["\(duneID)\t1965\tDune — Frank Herbert"], "\(scheme): \(recent)")
            let count = try await CLI.run(["count", store, "Book"])
            #expect(count.stdout == "2\n", "\(scheme): \(count)")
            #expect(try await Self.run([store, "remove", duneID]).status == 0)
            let missing = try await Self.run([store, "remove", duneID])
            #expect(missing.status == 1 && missing.stderr.contains("no book with id"), "\(scheme): \(missing)")
            #expect(try await Self.run([store, "list"]).lines.count == 1)
            let usage = try await Self.run([store, "add", "Dune", "Frank Herbert", "nineteen"])
            #expect(usage.status == 2, "\(scheme): \(usage)")
        }
    }

    /// A port nothing on loopback listens on now (a connection attempt is refused), below
    /// Linux's ephemeral range (32768–60999), where the kernel does not hand it to an outgoing
    /// connection meanwhile.
    static func unusedPort() throws -> Int {
        for _ in 0..<100 {
            let port = Int.random(in: 20_000...32_000)
            let probe = try ChildProcess.run("/bin/bash", ["-c", "exec 3<>/dev/tcp/127.0.0.1/\(port)"])
            if probe.status != .exited(0) { return port }
        }
        throw HarnessError("no unused loopback port found in 100 tries")
    }

    /// `true` once something answers HTTP on `port` (tried for up to 15 s, each attempt
    /// given 2 s: URLSession's default would let one lost attempt take a minute).
    static func answers(_ port: Int) async throws -> Bool {
        let url = try #require(URL(string: "http://127.0.0.1:\(port)/"))
        var request = URLRequest(url: url)
        request.timeoutInterval = 2
        for _ in 0..<300 {
            do {
                _ = try await URLSession.shared.data(for: request)
                return true
            } catch {
                try await Task.sleep(for: .milliseconds(50))  // not listening yet
            }
        }
        return false
    }

    @Test("lend is one transaction over two collections; two shelves sync through depot serve on loopback, and sync's observed query sees the pulled books")
    func lendAndSync() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let schemes = try await CLI.persistentSchemes()
        let (shelfA, shelfB) = (directory.storeString(schemes.first ?? "sqlite", "a"), directory.storeString(schemes.last ?? "sqlite", "b"))
        let served = directory.storeString("sqlite", "served")
        let port = try Self.unusedPort()
        let server = try ChildProcess(path: try CLI.executable(), arguments: ["serve", served, "--port", String(port), "--quiet"])
        defer {
            server.kill(SIGTERM)
            _ = server.waitForExit()
        }
        try #require(try await Self.answers(port), "depot serve answered on port \(port)")
        let url = "http://127.0.0.1:\(port)"

        // The first sync attaches the shelf; books added from then on are pushed.
        let attach = try await Self.run([shelfA, "sync", url])
        #expect(attach.status == 0 && attach.stdout.contains("pulled 0, pushed 0; the shelf holds 0 books"), "\(attach)")
        let dune = try await Self.run([shelfA, "add", "Dune", "Frank Herbert", "1965"])
        let emma = try await Self.run([shelfA, "add", "Emma", "Jane Austen", "1815"])
        let duneID = dune.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(dune.status == 0 && emma.status == 0 && Int64(duneID) != nil, "\(dune) \(emma)")

        // lend: the book and the loan in one transaction, or neither.
        let lent = try await Self.run([shelfA, "lend", duneID, "Ada"])
        #expect(lent.status == 0, "\(lent)")
        let again = try await Self.run([shelfA, "lend", duneID, "Grace"])
        #expect(again.status == 1 && again.stderr.contains("already lent to Ada"), "\(again)")
        let missing = try await Self.run([shelfA, "lend", "999", "Grace"])
        #expect(missing.status == 1 && missing.stderr.contains("no book with id 999"), "\(missing)")
        let loans = try await CLI.run(["dump", shelfA, "Loan"])
        #expect(loans.lines.count == 1 && loans.stdout.contains("\"borrower\":\"Ada\""), "only the first lend wrote a loan: \(loans)")

        let push = try await Self.run([shelfA, "sync", url])
        #expect(push.status == 0 && push.stdout.contains("the shelf holds 2 books"), "\(push)")
        #expect(!push.stdout.contains("pushed 0"), "\(push)")
        let onServer = try await CLI.run(["count", served, "Book"])
        #expect(onServer.status == 0 && onServer.stdout == "2\n", "the served store holds the pushed books: \(onServer)")

        // Another shelf, on another backend, pulls them; its observed query sees them arrive.
        let pull = try await Self.run([shelfB, "sync", url])
        #expect(pull.status == 0 && pull.stdout.contains("pulled 2") && pull.stdout.contains("the shelf holds 2 books"), "\(pull)")
        let listed = try await Self.run([shelfB, "list"])
        #expect(listed.lines.count == 2 && listed.lines[0].contains("Emma") && listed.lines[1].contains("Dune — Frank Herbert (lent to Ada)"), "\(listed)")

        let badURL = try await Self.run([shelfB, "sync", "not a url"])
        #expect(badURL.status == 2, "\(badURL)")
    }
}
