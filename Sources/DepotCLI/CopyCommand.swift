import ArgumentParser
import Depot
import DepotCLIParsers
import Foundation

/// `depot copy SRC DST [--collection NAME]...`: any backend to any other, verified.
struct CopyCommand: DepotSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "copy",
        abstract: "Copy collections with their constraints and indexes from one store to another, verified.",
        usage: "depot copy [SRC] DST [--collection NAME]... [--replace]",
        discussion: """
            Copies every collection of SRC (Depot's own _depot_ collections too: the schema \
            version, sync attachments and the outbox, so the copy is a faithful replica), or only \
            those named with --collection. Each collection is copied in one transaction of DST \
            with its id kind, unique constraints and indexes; DST's outbox is not fed by the copy.

            Afterwards every copied collection is verified: the record count and a SHA-256 \
            digest of the records' JSON in id order must match on both sides.

            A collection that already has records in DST is refused (nothing is written) unless \
            --replace is given, which replaces it in the same transaction. If copying a \
            collection fails, that collection is rolled back: the report names exactly the \
            collections that were copied before it.

            Each collection is read into memory before it is written (one transaction needs \
            all of it); copy very large stores collection by collection.

            Examples:
              depot copy json:data.json sqlite:data.db
              depot copy sqlite:app.db gdbm:backup --collection books --collection people
            """
    )

    @Argument(help: ArgumentHelp("[SRC] DST: SRC defaults to DEPOT_STORE.", valueName: "stores"))
    var arguments: [String] = []

    @Option(name: .customLong("collection"), help: ArgumentHelp("Copy only this collection; repeatable.", valueName: "NAME"))
    var collections: [String] = []

    @Flag(help: "Replace collections that already have records in DST.")
    var replace = false

    @OptionGroup var global: GlobalOptions

    func execute(_ context: CommandContext) async throws -> Int32 {
        let (stores, _) = try StoreArguments.split(arguments, stores: 2, rest: 0...0, usage: "depot copy [SRC] DST [--collection NAME]...")
        let (sourceString, destinationString) = (stores[0], stores[1])
        let named = try collections.map(StoreArguments.collectionName)
        guard sourceString != destinationString else {
            throw CLIFailure.usage("SRC and DST are the same store", "copy to another store string")
        }
        let sourceShown = StoreArguments.shown(sourceString), destinationShown = StoreArguments.shown(destinationString)
        let source = try await StoreArguments.open(sourceString, context, mustExist: true)
        return try await StoreArguments.using(source) { source in
            let (destination, trace) = try await StoreArguments.openForWriting(destinationString, context)
            // A copy that fails before its first commit leaves no new store behind (Docs/CLI.md).
            var copiedAny = false
            do {
                return try await copy(from: source, to: destination, sourceShown: sourceShown, destinationShown: destinationShown,
                                      named: named, context: context, copiedAny: &copiedAny)
            } catch {
                if !copiedAny { trace?.removeCreated(context) }
                throw error
            }
        }
    }

    /// Plans, copies and verifies, then closes `destination`; sets `copiedAny` once a
    /// collection is committed in it.
    private func copy(
        from source: Store, to destination: Store, sourceShown: String, destinationShown: String,
        named: [CollectionName], context: CommandContext, copiedAny: inout Bool
    ) async throws -> Int32 {
        try await StoreArguments.using(destination) { destination in
            var copier = StoreCopier(source: source, destination: destination, context: context)
            defer { copiedAny = !copier.copied.isEmpty }
            let names = try await copier.plan(named: named, replace: replace, sourceShown: sourceShown, destinationShown: destinationShown)
            try await copier.copy(names)
            let problems = try await copier.verify(names)
            for report in copier.copied {
                context.logger.notice("copied \(report.name): \(report.count) record\(report.count == 1 ? "" : "s"), sha256 \(report.digest.prefix(16))…\(problems.isEmpty ? ", verified" : "")")
            }
            guard problems.isEmpty else {
                throw CLIFailure.failed(
                    "verification failed: " + problems.joined(separator: "; "),
                    "the copy in \(destinationShown) differs from \(sourceShown); run 'depot check' on both")
            }
            context.logger.notice("copied \(names.count) collection\(names.count == 1 ? "" : "s") from \(sourceShown) to \(destinationShown), verified by count and SHA-256")
            return ExitStatus.success
        }
    }
}

/// Copies collections between two open stores and verifies them.
struct StoreCopier {
    /// One collection copied.
    struct Report {
        var name: CollectionName
        var count: Int
        var digest: String
    }

    let source: Store
    let destination: Store
    let context: CommandContext
    private(set) var copied: [Report] = []

    init(source: Store, destination: Store, context: CommandContext) {
        self.source = source
        self.destination = destination
        self.context = context
    }

    /// The collections to copy, after checking that each exists in SRC and that DST will
    /// not be merged into silently. Writes nothing.
    func plan(named: [CollectionName], replace: Bool, sourceShown: String, destinationShown: String) async throws -> [CollectionName] {
        let available = try await source.collectionNames(includingReserved: true)
        let names: [CollectionName]
        if named.isEmpty {
            names = available
        } else {
            for name in named where !available.contains(name) {
                throw CLIFailure.failed("collection '\(name)' does not exist in \(sourceShown)", "run 'depot info \(sourceShown)' to list collections")
            }
            var seen = Set<CollectionName>()
            names = named.filter { seen.insert($0).inserted }
        }
        if !replace {
            for name in names {
                let existing = try await destination.collection(name).count()
                if existing > 0 {
                    throw CLIFailure.failed(
                        "collection '\(name)' already has \(existing) record\(existing == 1 ? "" : "s") in \(destinationShown); nothing was copied",
                        "copy into an empty store, or add --replace to replace those collections")
                }
            }
        }
        return names
    }

    /// Copies each collection in one transaction of DST.
    /// - Throws: a ``CLIFailure`` saying exactly which collections were copied before the failure.
    mutating func copy(_ names: [CollectionName]) async throws {
        for name in names {
            do {
                guard let schema = try await source.collection(name).schema() else { continue }
                let total = try await source.collection(name).count()
                let progress = context.progress("copy \(name)", total: total)
                var records: [Record] = []
                records.reserveCapacity(total)
                var hasher = CollectionDigest()
                for try await record in try source.collection(name).stream() {
                    records.append(record)
                    hasher.add(record)
                    progress.advance()
                }
                progress.finish()
                let batch = records
                try await destination.write(excluding: destination.writeObservers) { tx in
                    if try tx.schema(of: name) != nil { try tx.dropCollection(name) }
                    try tx.prepare(schema)
                    for record in batch { try tx.save(record, into: name) }
                }
                context.logger.debug("copied \(name): \(records.count) records")
                copied.append(Report(name: name, count: records.count, digest: hasher.finish()))
            } catch {
                let failure = CLIFailure.from(error)
                let done = copied.isEmpty
                    ? "nothing was copied"
                    : "copied before it: " + copied.map { "\($0.name) (\($0.count))" }.joined(separator: ", ")
                throw CLIFailure(
                    message: "copying '\(name)' failed, it was rolled back: \(failure.message); \(done)",
                    hint: failure.hint, status: failure.status)
            }
        }
    }

    /// Compares count, digest and schema of every copied collection with what was read from SRC.
    func verify(_ names: [CollectionName]) async throws -> [String] {
        var problems: [String] = []
        for report in copied {
            // The source side was fingerprinted while it was read for the copy.
            let (count, digest) = try await CollectionDigest.of(report.name, in: destination)
            let (sourceCount, sourceDigest) = (report.count, report.digest)
            if count != sourceCount { problems.append("\(report.name): \(sourceCount) records in SRC, \(count) in DST") }
            if digest != sourceDigest { problems.append("\(report.name): contents differ (SHA-256 \(sourceDigest.prefix(12))… vs \(digest.prefix(12))…)") }
            let sourceSchema = try await source.collection(report.name).schema()
            let destinationSchema = try await destination.collection(report.name).schema()
            if let sourceSchema, let destinationSchema, !CollectionDigest.sameShape(sourceSchema, destinationSchema) {
                problems.append("\(report.name): id kind, constraints or indexes differ")
            }
        }
        return problems
    }
}

/// A collection's fingerprint: the SHA-256 of each record's JSON (``Record/jsonText``,
/// top-level nulls dropped) followed by a newline, in id order.
struct CollectionDigest {
    private var sha = SHA256Hasher()
    private(set) var count = 0

    mutating func add(_ record: Record) {
        sha.update(Array(record.withoutNulls.jsonText.utf8))
        sha.update([0x0A])
        count += 1
    }

    mutating func finish() -> String { sha.finalize() }

    /// Streams `name` from `store` and returns its count and digest.
    static func of(_ name: CollectionName, in store: Store) async throws -> (count: Int, digest: String) {
        var digest = CollectionDigest()
        for try await record in try store.collection(name).stream() { digest.add(record) }
        return (digest.count, digest.finish())
    }

    /// `true` when two schemas have the same id kind, constraints and indexes (in any order).
    static func sameShape(_ a: CollectionSchema, _ b: CollectionSchema) -> Bool {
        a.idKind == b.idKind && Set(a.uniqueConstraints) == Set(b.uniqueConstraints) && Set(a.indexes) == Set(b.indexes)
    }
}
