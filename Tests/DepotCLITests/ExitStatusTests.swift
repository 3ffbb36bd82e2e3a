import Depot
import Foundation
import Testing

/// Docs/CLI.md's "Exit status" table, checked against what `depot` does: one case of every
/// cause the table names that a test can provoke.
@Suite("depot: exit statuses as Docs/CLI.md documents them")
struct ExitStatusTests {
    /// The statuses in Docs/CLI.md's "Exit status" table, in order.
    static func documentedStatuses() throws -> [Int32] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("Docs/CLI.md"), encoding: .utf8)
        guard let section = text.components(separatedBy: "## Exit status").dropFirst().first?.components(separatedBy: "\n## ").first else {
            throw HarnessError("Docs/CLI.md has no '## Exit status' section")
        }
        return section.split(separator: "\n").compactMap { line in
            let cells = line.split(separator: "|", omittingEmptySubsequences: true).map { $0.trimmingCharacters(in: .whitespaces) }
            return cells.first.flatMap { Int32($0) }
        }
    }

    @Test("one case of each documented cause exits with the documented status")
    func exitStatusesAsDocumented() async throws {
        #expect(try Self.documentedStatuses() == [0, 1, 2])
        let help = try await CLI.run(["--help"])
        for line in ["0  success", "1  the work failed", "2  usage error"] {
            #expect(help.stdout.contains(line), "--help lists '\(line)': \(help)")
        }

        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let sqlite = directory.storeString("sqlite", "app")
        let made = try await CLI.run(["load", sqlite, "people"], stdin: "{\"id\":\"ada\",\"born\":1815}\n")
        #expect(made.status == 0, "\(made)")

        let cases: [(cause: String, args: [String], stdin: String, status: Int32)] = [
            ("success", ["info", sqlite], "", 0),
            ("a store error: no store at the path", ["info", directory.storeString("sqlite", "missing")], "", 1),
            ("a store error: no such collection", ["count", sqlite, "nosuch"], "", 1),
            ("a bad input line", ["load", sqlite, "people"], "{\"id\":\"alan\"}\nnot json\n", 1),
            ("a record without an id for a string-id collection", ["load", sqlite, "people"], "{\"born\":1912}\n", 1),
            ("problems found by check", ["check", directory.storeString("gdbm", "missing")], "", 1),
            ("bad arguments (argument parser)", ["info", sqlite, "--no-such-flag"], "", 2),
            ("an option without its value (argument parser)", ["query", sqlite, "people", "--limit"], "", 2),
            ("an unknown subcommand", ["frobnicate"], "", 2),
            ("a malformed --where", ["query", sqlite, "people", "--where", "born >> 5"], "", 2),
            ("an SQL statement SQLite cannot prepare", ["sql", sqlite, "SELEKT 1"], "", 2),
            ("an invalid collection name", ["count", sqlite, "no such"], "", 2),
            ("an invalid field name", ["load", sqlite, "people", "--index", "a b"], "", 2),
            ("an unknown driver", ["info", "nosuchdriver:x"], "", 2),
            ("a malformed store string (bad option value)", ["info", sqlite + "?durability=sometimes"], "", 2),
            ("no store given", ["count", "people"], "", 2),
        ]
        for (cause, args, stdin, status) in cases {
            let run = try await CLI.run(args, stdin: stdin)
            #expect(run.status == status, "\(cause): depot \(args): \(run)")
            if status != 0 {
                let said = args.first == "check" ? run.stdout + run.stderr : run.stderr
                #expect(said.contains("depot: ") || said.contains("problem"), "\(cause): one line saying what went wrong: \(run)")
            }
        }
        // Nothing of the refused lines was committed, and usage errors changed nothing.
        let people = try await CLI.run(["count", sqlite, "people"])
        #expect(people.stdout == "1\n", "\(people)")
    }
}
