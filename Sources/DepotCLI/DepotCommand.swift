import ArgumentParser
import Depot
import DepotCLIParsers
import Foundation

/// The `depot` command: opens any store by its store string and works on it.
///
/// Every subcommand lives in its own file (`InfoCommand.swift`, `LoadCommand.swift`, ...).
/// ``main()`` maps argument errors to exit status 2 and prints every failure as one line
/// `depot: <message> (<what to do>)` on standard error.
@main
struct DepotCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "depot",
        abstract: "Open any Depot store by its store string: tour, inspect, load, dump, query, sql, copy, check.",
        discussion: """
            A STORE is a store string: memory:, sqlite:PATH, gdbm:PATH, json:PATH (the drivers \
            in this build: \(DriverRegistry.cli.schemes.map { $0 + ":" }.joined(separator: ", "))). \
            When STORE is left out, the DEPOT_STORE environment variable names it.

            Data goes to standard output as JSON Lines: one record per line, an object with its \
            "id" and its fields (bytes as {"$bytes":"<base64>"}, infinities as \
            {"$double":"Infinity"}). Messages, progress and errors go to standard error.

            Exit status:
              0  success
              1  the work failed: a store error ('no store at ...' included),
                 a bad input line, a failed copy verification, problems
                 found by 'check', or a command not available in this build
              2  usage error, found before anything is changed: bad
                 arguments, a malformed --where, an invalid collection or
                 field name, an unknown driver or a malformed store string,
                 no store given

            See Docs/CLI.md for every command with examples.
            """,
        version: "0.1.0",
        subcommands: [
            TourCommand.self, InfoCommand.self, LoadCommand.self, DumpCommand.self, CountCommand.self,
            QueryCommand.self, SQLCommand.self, CopyCommand.self, CheckCommand.self, SyncCommand.self, ServeCommand.self, FilesCommand.self,
            BenchCommand.self, BenchSyncCommand.self, BenchRelationsCommand.self,
        ]
    )

    /// Parses the command line and runs the chosen subcommand. Argument errors exit with
    /// status 2 and one line on standard error; `--help` and `--version` exit 0.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let exit as ExitCode {
            Foundation.exit(exit.rawValue)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                self.exit(withError: error)  // --help, --version: prints and exits 0
            }
            let message = fullMessage(for: error)
                .split(separator: "\n").first.map(String.init)?
                .replacingOccurrences(of: "Error: ", with: "") ?? "invalid arguments"
            Console.error("\(message) (see 'depot help' or 'depot help COMMAND')")
            Foundation.exit(ExitStatus.usage)
        }
    }
}
