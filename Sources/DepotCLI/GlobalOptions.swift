import ArgumentParser
import Depot
import DepotCLIParsers
import DepotCore
import Foundation
import Logging

/// `--quiet` and `--verbose`, offered by every subcommand.
struct GlobalOptions: ParsableArguments {
    @Flag(name: .shortAndLong, help: "Print only errors: no progress, no summaries.")
    var quiet = false

    @Flag(name: .shortAndLong, help: "Print what is being done (debug logging to standard error).")
    var verbose = false

    /// The log level these flags ask for.
    var logLevel: Logger.Level { quiet ? .error : (verbose ? .debug : .notice) }

    /// Progress lines are shown on a terminal only, and never with `--quiet`.
    var showsProgress: Bool { !quiet && Console.stderrIsTerminal }
}

/// What a running subcommand is given: its logger and whether to show progress.
struct CommandContext: Sendable {
    let logger: Logger
    let showsProgress: Bool
    let quiet: Bool

    /// A progress reporter for `what` (quiet unless standard error is a terminal).
    func progress(_ what: String, total: Int?, unit: String = "records") -> Progress {
        Progress(what, total: total, unit: unit, enabled: showsProgress)
    }
}

/// A `depot` subcommand: runs with a ``CommandContext`` and lets the shared code turn any
/// error into one line on standard error and the right exit status.
protocol DepotSubcommand: AsyncParsableCommand {
    var global: GlobalOptions { get }
    /// Does the work. Throw ``CLIFailure`` or any error; return an exit status (0 success).
    func execute(_ context: CommandContext) async throws -> Int32
}

/// Whether swift-log was set up: it allows one bootstrap per process.
private let bootstrapped = Locked(false)

/// Sets swift-log up once per process, at `level` for every logger, so that `--verbose`
/// also shows the SQLite driver's statement log (Docs/SQLiteDriver.md, "Statement log").
func bootstrapLogging(_ level: Logger.Level) {
    bootstrapped.withLock { done in
        guard !done else { return }
        done = true
        LoggingSystem.bootstrap { label in
            var handler = StderrLogHandler(label: label)
            handler.logLevel = level
            return handler
        }
    }
}

extension DepotSubcommand {
    mutating func run() async throws {
        bootstrapLogging(global.logLevel)
        var logger = Logger(label: "depot")
        logger.logLevel = global.logLevel
        let context = CommandContext(logger: logger, showsProgress: global.showsProgress, quiet: global.quiet)
        let status: Int32
        do {
            status = try await execute(context)
        } catch {
            let failure = CLIFailure.from(error)
            Console.error("\(failure.message) (\(failure.hint))")
            throw ExitCode(failure.status)
        }
        if status != ExitStatus.success { throw ExitCode(status) }
    }
}

/// Writes log messages to standard error as `depot: message`, debug ones marked.
struct StderrLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .notice
    var metadata: Logger.Metadata = [:]

    init(label: String) { self.label = label }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let marker = event.level <= .debug ? "[\(event.level)] " : (event.level >= .warning ? "\(event.level): " : "")
        Console.progressClear()
        Console.stderr("depot: \(marker)\(event.message)\n")
    }
}
