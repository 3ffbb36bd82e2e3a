import ArgumentParser
import Depot

/// `depot serve [STORE] --host H --port P`: serves a store over HTTP with DepotServer.
///
/// Registered with its documented arguments; the server engine arrives on its own branch,
/// so in this build it fails with "not available in this build". The lead wires
/// ``execute(_:)`` to DepotServer after merging.
struct ServeCommand: DepotSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve a store over HTTP (json-server conventions, ETags, idempotency keys, a change feed).",
        usage: "depot serve [STORE] [--host H] [--port P]",
        discussion: """
            Binds to loopback unless --host says otherwise. Not available in this build: the \
            command exits with status 1.

            Example:
              depot serve sqlite:app.db --port 8080
            """
    )

    @Argument(help: ArgumentHelp("[STORE]", valueName: "store"))
    var arguments: [String] = []

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on.")
    var port = 8080

    @OptionGroup var global: GlobalOptions

    func execute(_ context: CommandContext) async throws -> Int32 {
        _ = try StoreArguments.split(arguments, stores: 1, rest: 0...0, usage: "depot serve [STORE] [--host H] [--port P]")
        throw NotInThisBuild.failure("serve", needs: "DepotServer")
    }
}

/// The one failure of a command whose engine is not part of this build.
enum NotInThisBuild {
    static func failure(_ command: String, needs engine: String) -> CLIFailure {
        CLIFailure.failed("\(command) is not available in this build", "it needs \(engine); use a build of Depot that includes it")
    }
}
