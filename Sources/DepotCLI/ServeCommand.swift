import ArgumentParser
import Depot
import DepotCLIParsers
import DepotServer

/// `depot serve [STORE] --host H --port P`: serves a store over HTTP with DepotServer.
///
/// Runs DepotServer in the foreground until SIGINT or SIGTERM.
struct ServeCommand: DepotSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve a store over HTTP (json-server conventions, ETags, idempotency keys, a change feed).",
        usage: "depot serve [STORE] [--host H] [--port P] [--files DIR] [--retention DURATION] [--retention-sweep DURATION]",
        discussion: """
            Binds to loopback (127.0.0.1) unless --host says otherwise; --port 0 picks a free \
            port. Prints the address it listens on, then serves until interrupted (Ctrl-C). \
            Routes: GET/POST /NAME, GET/PUT/PATCH/DELETE /NAME/ID, nested GET /NAME/ID/OTHER, \
            GET /_changes?since=CURSOR&limit=N. With --files DIR, also GET/HEAD/PUT/DELETE \
            /_files/NAME and GET /_files (Docs/Remote.md, "Files"). Idempotency records and \
            change-feed tombstones are kept for --retention (default 7d; 'forever' keeps them) \
            and removed every --retention-sweep (default 1h). See Docs/Server.md.

            Example:
              depot serve sqlite:app.db --port 8080
              depot serve sqlite:app.db --files ./files
              depot serve sqlite:app.db --retention 30d --retention-sweep 6h
            """
    )

    @Argument(help: ArgumentHelp("[STORE]", valueName: "store"))
    var arguments: [String] = []

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on.")
    var port = 8080

    @Option(help: ArgumentHelp("Serve files from this folder at /_files/NAME (created if missing; see 'depot files').", valueName: "DIR"))
    var files: String?

    @Option(help: ArgumentHelp("The largest file accepted by /_files, in bytes.", valueName: "BYTES"))
    var maxFileSize: Int64 = 4 << 30

    @Option(help: ArgumentHelp("How long idempotency keys and deletions in the change feed are kept: a number and s, m, h or d (90s, 12h, 7d), or 'forever'.", valueName: "DURATION"))
    var retention = "7d"

    @Option(help: ArgumentHelp("How often expired idempotency keys and deletions are removed: a number and s, m, h or d.", valueName: "DURATION"))
    var retentionSweep = "1h"

    @OptionGroup var global: GlobalOptions

    func execute(_ context: CommandContext) async throws -> Int32 {
        let (stores, _) = try StoreArguments.split(arguments, stores: 1, rest: 0...0, usage: "depot serve [STORE] [--host H] [--port P]")
        guard (0...65535).contains(port) else {
            throw CLIFailure.usage("--port must be between 0 and 65535", "use 0 to pick a free port")
        }
        guard maxFileSize > 0 else { throw CLIFailure.usage("--max-file-size must be positive", "for example --max-file-size 1073741824") }
        let window = try DurationOption.retention(retention)
        let sweepInterval = try DurationOption.interval(retentionSweep, option: "--retention-sweep")
        let store = try await StoreArguments.open(stores[0], context, mustExist: false)
        var configuration = DepotServer.Configuration(host: host, port: port)
        configuration.filesDirectory = files
        configuration.maxFileSize = maxFileSize
        configuration.retention = window
        configuration.retentionSweepInterval = sweepInterval
        let server = DepotServer(store: store, configuration: configuration)
        let shown = StoreArguments.shown(stores[0])
        let quiet = global.quiet
        return try await StoreArguments.using(store) { _ in
            try await server.run { bound in
                if !quiet { Console.stderr("depot: serving \(shown) on http://\(host):\(bound) (Ctrl-C to stop)\n") }
                if !quiet, let files { Console.stderr("depot: serving files from \(files) at /_files\n") }
            }
            return ExitStatus.success
        }
    }
}

/// The one failure of a command whose engine is not part of this build.
enum NotInThisBuild {
    static func failure(_ command: String, needs engine: String) -> CLIFailure {
        CLIFailure.failed("\(command) is not available in this build", "it needs \(engine); use a build of Depot that includes it")
    }
}
