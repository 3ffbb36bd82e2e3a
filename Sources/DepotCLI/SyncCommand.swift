import ArgumentParser
import Depot

/// `depot sync [STORE] --remote BASE_URL --collection NAME [--path /RESOURCE] [--pull] [--push]`.
///
/// Registered with its documented arguments; the sync engine arrives on its own branch, so
/// in this build it fails with "not available in this build". The lead wires
/// ``execute(_:)`` to SyncCoordinator after merging.
struct SyncCommand: DepotSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Sync a collection with a REST server: pull, push the outbox, or both.",
        usage: "depot sync [STORE] --remote BASE_URL --collection NAME [--path /RESOURCE] [--pull] [--push]",
        discussion: """
            Both directions when neither --pull nor --push is given. Exit status 0 only when \
            everything asked for succeeded. Not available in this build: the command exits with \
            status 1.

            Example:
              depot sync sqlite:app.db --remote http://127.0.0.1:8080 --collection books
            """
    )

    @Argument(help: ArgumentHelp("[STORE]", valueName: "store"))
    var arguments: [String] = []

    @Option(help: ArgumentHelp("The server's base URL.", valueName: "BASE_URL"))
    var remote: String

    @Option(help: ArgumentHelp("The local collection to sync.", valueName: "NAME"))
    var collection: String

    @Option(help: ArgumentHelp("The resource path on the server (default /COLLECTION), nested ones too.", valueName: "/RESOURCE"))
    var path: String?

    @Flag(help: "Pull from the server.")
    var pull = false

    @Flag(help: "Push the outbox to the server.")
    var push = false

    @OptionGroup var global: GlobalOptions

    func execute(_ context: CommandContext) async throws -> Int32 {
        _ = try StoreArguments.split(arguments, stores: 1, rest: 0...0, usage: "depot sync [STORE] --remote BASE_URL --collection NAME")
        _ = try StoreArguments.collectionName(collection)
        throw NotInThisBuild.failure("sync", needs: "the SyncCoordinator")
    }
}
