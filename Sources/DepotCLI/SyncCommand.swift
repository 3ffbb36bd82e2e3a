import ArgumentParser
import Depot
import DepotCLIParsers
import DepotHTTPClient
import DepotServer
import Foundation

/// `depot sync [STORE] --remote BASE_URL --collection NAME [--path /RESOURCE] [--pull] [--push]`.
///
/// Attaches the collection to the remote (so later writes through any Depot API record
/// outbox entries), then pulls and/or pushes with the SyncCoordinator.
struct SyncCommand: DepotSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Sync a collection with a REST server: pull, push the outbox, or both.",
        usage: "depot sync [STORE] --remote BASE_URL --collection NAME [--path /RESOURCE] [--pull] [--push]",
        discussion: """
            Both directions when neither --pull nor --push is given. Exit status 0 only when \
            everything asked for succeeded (nothing left pending or dead-lettered). Plain http:// \
            to a host other than loopback needs --allow-insecure-http. See Docs/Sync.md.

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

    @Flag(help: "The server assigns ids on POST (integer-id collections against json-server-style servers).")
    var serverAssignsIDs = false

    @Flag(help: "Allow plain http:// to a host other than loopback.")
    var allowInsecureHTTP = false

    @OptionGroup var global: GlobalOptions

    func execute(_ context: CommandContext) async throws -> Int32 {
        let (stores, _) = try StoreArguments.split(arguments, stores: 1, rest: 0...0, usage: "depot sync [STORE] --remote BASE_URL --collection NAME")
        let name = try StoreArguments.collectionName(collection)
        guard let base = URL(string: remote), let scheme = base.scheme, ["http", "https"].contains(scheme), base.host != nil else {
            throw CLIFailure.usage("--remote must be an http:// or https:// URL", "for example --remote http://127.0.0.1:8080")
        }
        var endpoint = SyncEndpoint(baseURL: base, path: path ?? "/" + name.rawValue, idAssignment: serverAssignsIDs ? .server : .client)
        endpoint.allowInsecureHTTP = allowInsecureHTTP
        do { try endpoint.validate() } catch let error as DepotError {
            throw CLIFailure.usage(error.message, "check --remote and --path")
        }
        let store = try await StoreArguments.open(stores[0], context, mustExist: false)
        let (doPull, doPush) = (pull || !push, push || !pull)
        let progress = context.progress("sync \(name)", total: nil)
        return try await StoreArguments.using(store) { store in
            // http:// over NIO (a quarter of a loopback push's CPU went to URLSession's
            // dispatch machinery); https:// over URLSession (Docs/Sync.md, "Transports").
            let coordinator = SyncCoordinator(store: store, transport: NIOHTTPTransport())
            try await coordinator.attach(name, to: endpoint)
            // Uploads queued in the outbox (SyncCoordinator.enqueueUpload) go to the same server.
            await coordinator.attachFiles(FileClient(baseURL: base, allowInsecureHTTP: allowInsecureHTTP))
            let events = await coordinator.events()
            let watcher = Task {
                var pulled = 0, pushed = 0
                var fileBar: (name: String, bar: Progress)?
                for await event in events {
                    switch event {
                    case .fileProgress(let file, let done, let total):
                        if fileBar?.name != file {
                            fileBar?.bar.finish()
                            fileBar = (file, context.progress("upload \(file)", total: total.map { Int($0) }, unit: "B"))
                        }
                        fileBar?.bar.set(Int(done))
                        continue
                    case .pulled(_, let count, _): pulled = count
                    case .pushed: pushed += 1
                    case .retrying(let request, let attempt, _): context.logger.info("retrying \(request) (attempt \(attempt))")
                    case .deadLettered(_, let id, let status): context.logger.warning("server refused \(id) with \(status); kept as a dead letter")
                    case .finished: return
                    default: break
                    }
                    progress.set(pulled + pushed)
                }
            }
            let report = try await coordinator.sync(name, pull: doPull, push: doPush)
            watcher.cancel()
            progress.finish()
            if !global.quiet {
                Console.stderr("depot: \(name): pulled \(report.pulled), deleted \(report.remoteDeletions), pushed \(report.pushed), conflicts \(report.conflicts), retries \(report.retries), pending \(report.pendingLeft), dead \(report.deadLeft)\n")
            }
            guard report.succeeded else {
                let why = report.failures.first ?? "\(report.pendingLeft) pending and \(report.deadLeft) dead-lettered outbox entries remain"
                throw CLIFailure.failed("sync of \(name) did not finish: \(why)", "run 'depot info' to see the outbox, fix the cause and sync again")
            }
            return ExitStatus.success
        }
    }
}
