import Depot
import DepotConformance
import Foundation
import Testing

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
}
