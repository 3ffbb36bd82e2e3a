import Depot
import DepotCLIParsers
import Foundation

/// Finds the STORE arguments among a subcommand's positional arguments and opens stores.
///
/// A store string always has a scheme and a colon (`memory:`, `sqlite:app.db`), and a
/// collection name never has a colon, so a leading argument with a colon is a STORE; when
/// there is none, `DEPOT_STORE` names the store.
enum StoreArguments {
    /// The environment variable naming the default store.
    static let environmentKey = "DEPOT_STORE"

    /// `true` when `argument` is a store string rather than a collection name.
    static func isStoreString(_ argument: String) -> Bool { argument.contains(":") }

    /// Splits `arguments` into `stores` store strings (the first ones taken from
    /// `DEPOT_STORE` when fewer are given) and the rest, whose count must be in `rest`.
    /// - Throws: a usage ``CLIFailure`` naming what is missing or extra.
    static func split(_ arguments: [String], stores: Int, rest: ClosedRange<Int>, usage: String) throws -> (stores: [String], rest: [String]) {
        var given: [String] = []
        var remaining = arguments[...]
        while given.count < stores, let first = remaining.first, isStoreString(first) {
            given.append(first)
            remaining = remaining.dropFirst()
        }
        if given.count < stores {
            guard stores - given.count == 1, let fallback = ProcessInfo.processInfo.environment[environmentKey], !fallback.isEmpty else {
                throw CLIFailure.usage("no store given", "name one, such as sqlite:app.db or memory:, or set \(environmentKey); usage: \(usage)")
            }
            given.insert(fallback, at: 0)
        }
        guard rest.contains(remaining.count) else {
            let what = remaining.count < rest.lowerBound ? "missing arguments" : "too many arguments"
            throw CLIFailure.usage(what, "usage: \(usage)")
        }
        return (given, Array(remaining))
    }

    /// Validates a collection name given on the command line (before any store is opened).
    /// - Throws: a usage ``CLIFailure``.
    static func collectionName(_ text: String) throws -> CollectionName {
        do {
            return try CollectionName(text)
        } catch let error as DepotError {
            throw CLIFailure.usage(error.message, "run 'depot info STORE' to list collections")
        }
    }

    /// The store string safe to show (secrets hidden).
    static func shown(_ string: String) -> String {
        (try? StoreLocation(string).description) ?? "the store"
    }

    /// Opens a store with every driver of this build.
    ///
    /// - Parameter mustExist: for commands that only read: a local path that does not
    ///   already hold a store of the driver (``StoreProbe/holdsStore(scheme:at:)``) is an
    ///   error ("no store at ..."), and nothing is created or locked there.
    /// - Throws: a usage ``CLIFailure`` for a malformed string or unknown driver; the
    ///   driver's error otherwise.
    static func open(_ string: String, _ context: CommandContext, mustExist: Bool) async throws -> Store {
        try await openTracing(string, context, mustExist: mustExist).store
    }

    /// Opens a store for a command that writes, and returns with it which of the store's
    /// files did not exist before (`nil` for a store without local files), so that a command
    /// failing before it commits anything can remove them (``NewStoreTrace``).
    static func openForWriting(_ string: String, _ context: CommandContext) async throws -> (store: Store, trace: NewStoreTrace?) {
        try await openTracing(string, context, mustExist: false)
    }

    private static func openTracing(_ string: String, _ context: CommandContext, mustExist: Bool) async throws -> (store: Store, trace: NewStoreTrace?) {
        let location: StoreLocation
        do {
            location = try StoreLocation(string)
        } catch let error as DepotError {
            throw CLIFailure.usage(error.message, "write SCHEME:PATH, for example sqlite:app.db, json:data.json or memory:")
        }
        let schemes = DriverRegistry.cli.schemes
        guard schemes.contains(location.scheme) else {
            throw CLIFailure.usage(
                "no driver for '\(location.scheme):' in this build",
                "use one of: \(schemes.map { $0 + ":" }.joined(separator: ", "))")
        }
        let onDisk = try location.resolvingDataFolder(create: false)
        let local = isLocalPath(location)
        if mustExist, local, !(try StoreProbe.holdsStore(scheme: location.scheme, at: onDisk.path)) {
            let something = FileManager.default.fileExists(atPath: onDisk.path)
                ? " (\(StoreProbe.describeStore(scheme: location.scheme)); something else is there)" : ""
            throw CLIFailure.failed(
                "no store at \(location.description)\(something)",
                "check the path and the driver; 'depot load' and 'depot copy' create stores")
        }
        let trace = !mustExist && local ? try NewStoreTrace(scheme: location.scheme, path: onDisk.path) : nil
        context.logger.debug("opening \(location.description)")
        do {
            return (try await Store.open(string, registry: .cli), trace)
        } catch {
            trace?.removeCreated(context)
            throw error
        }
    }

    /// `true` when the location's path names a local file or directory.
    static func isLocalPath(_ location: StoreLocation) -> Bool {
        location.scheme != "memory" && !location.path.isEmpty && !location.path.hasPrefix(":") && !location.path.hasPrefix("//")
    }

    /// Runs `body` with an open store and closes it afterwards, also when `body` throws.
    static func using<T>(_ store: Store, _ body: (Store) async throws -> T) async throws -> T {
        do {
            let result = try await body(store)
            try await store.close()
            return result
        } catch {
            try? await store.close()
            throw error
        }
    }

    /// Fails when `collection` does not exist in `store` (for commands that read it).
    static func requireCollection(_ collection: CollectionName, in store: Store, shownAs string: String) async throws {
        if try await store.collection(collection).schema() == nil {
            throw CLIFailure.failed(
                "collection '\(collection)' does not exist in \(shown(string))",
                "run 'depot info \(shown(string))' to list collections")
        }
    }
}
