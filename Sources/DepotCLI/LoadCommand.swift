import ArgumentParser
import Depot
import DepotCLIParsers
import Foundation

/// `depot load [STORE] COLLECTION [FILE]`: JSON Lines in, upserting, in atomic batches.
struct LoadCommand: DepotSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "load",
        abstract: "Load JSON Lines into a collection (upsert by id), in atomic batches.",
        usage: "depot load [STORE] COLLECTION [FILE] [--format jsonl|csv] [--types COL:TYPE,...] [--batch N] [--unique F[,F]]... [--index F[,F]]...",
        discussion: """
            Each line is one JSON object with an "id" (an integer or a string) and its fields; \
            blank lines are skipped. Records are saved (inserted or replaced by id). A line \
            without "id" is inserted with an id the store assigns, when the collection has \
            integer ids (or is new); for a collection with string ids it is a bad line (exit 1). Each batch \
            of --batch records is one atomic transaction; --batch 0 makes the whole input one \
            transaction. A bad line stops the load with its line number: the batches before it \
            are committed, nothing of its own batch is. Exit status 0 only when every line was \
            committed.

            --format csv reads CSV instead: a header row of field names (an "id" column is \
            the id), then one record per row, with RFC 4180 quoting. Types are inferred \
            without loss (see Docs/CLI.md); --types col:int,col2:string sets them.

            --unique and --index add constraints and indexes to the collection (creating it, \
            with the id kind of the first record) in the same transaction as the first batch.

            Examples:
              depot load sqlite:app.db books books.jsonl --unique isbn --index author
              cat people.jsonl | depot load json:people.json people --batch 0
              depot load sqlite:app.db books books.csv --format csv --types isbn:string
            """
    )

    @Argument(help: ArgumentHelp("[STORE] COLLECTION [FILE]: FILE defaults to standard input.", valueName: "args"))
    var arguments: [String] = []

    @Option(help: "Records per transaction; 0 for the whole input in one transaction.")
    var batch = 1000

    @Option(help: ArgumentHelp("A unique constraint over one or more comma-separated fields.", valueName: "F[,F]"))
    var unique: [String] = []

    @Option(help: ArgumentHelp("An index over one or more comma-separated fields.", valueName: "F[,F]"))
    var index: [String] = []

    @Option(help: ArgumentHelp("The input format: jsonl (JSON Lines) or csv (a header row, then one record per row).", valueName: "jsonl|csv"))
    var format = "jsonl"

    @Option(help: ArgumentHelp("CSV column types instead of inferred ones: int, double, bool or string.", valueName: "COL:TYPE[,COL:TYPE]"))
    var types: String?

    @OptionGroup var global: GlobalOptions

    func execute(_ context: CommandContext) async throws -> Int32 {
        let (stores, rest) = try StoreArguments.split(arguments, stores: 1, rest: 1...2, usage: "depot load [STORE] COLLECTION [FILE]")
        let storeString = stores[0]
        let collection = try StoreArguments.collectionName(rest[0])
        guard batch >= 0 else { throw CLIFailure.usage("--batch must be 0 or more", "use --batch 1000, or --batch 0 for one transaction") }
        let constraints = try unique.map { UniqueConstraint(try FieldListOption.fields($0, option: "--unique")) }
        let indexes = try index.map { IndexDefinition(try FieldListOption.fields($0, option: "--index")) }
        try CollectionSchema(name: collection, idKind: .string, uniqueConstraints: constraints, indexes: indexes).validateForCLI()
        guard format == "jsonl" || format == "csv" else {
            throw CLIFailure.usage("--format \(WhereParser.quoted(format)) is not a format 'depot load' reads", "use --format jsonl or --format csv")
        }
        let columnTypes = try CSV.types(types)
        guard format == "csv" || columnTypes.isEmpty else { throw CLIFailure.usage("--types applies to CSV input only", "add --format csv") }
        let reader = try rest.count == 2 && rest[1] != "-" ? LineReader(path: rest[1]) : LineReader()
        var csv = format == "csv" ? CSVRecordReader(reader: reader, types: columnTypes) : nil
        let next: () throws -> (line: Int, item: LoadItem)? = {
            if csv != nil { return try csv?.next() }
            while let line = try reader.next() {
                if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
                do {
                    return (reader.lineNumber, try LoadItem(json: try JSONText.parse(Array(line))))
                } catch let error as DepotError {
                    throw LoadLineError(line: reader.lineNumber, error: error)
                }
            }
            return nil
        }

        // The first record is read before the store is opened, so input that is bad from its
        // first line never touches the path: not even a file that exists and is not yet a
        // store, which opening would prepare (Docs/CLI.md, "A failed command leaves no trace").
        var first: (line: Int, item: LoadItem)?
        do {
            first = try next()
        } catch let error as LoadLineError {
            throw Self.lineFailure(error, summary: "(nothing was committed)")
        }
        let items: () throws -> (line: Int, item: LoadItem)? = {
            if let item = first {
                first = nil
                return item
            }
            return try next()
        }

        let (store, trace) = try await StoreArguments.openForWriting(storeString, context)
        // A load that fails before its first commit leaves no new store behind (Docs/CLI.md).
        var committedAny = false
        do {
            return try await load(into: store, collection: collection, constraints: constraints, indexes: indexes,
                                  reader: reader, next: items, context: context, committedAny: &committedAny)
        } catch {
            if !committedAny { trace?.removeCreated(context) }
            throw error
        }
    }

    /// The failure for a bad input line, with what was committed before it (exit 1).
    static func lineFailure(_ error: LoadLineError, summary: String) -> CLIFailure {
        CLIFailure.failed(
            "\(describe(error)) \(summary)",
            "fix line \(error.line) and load again; records with an id are upserted, so loading them twice is harmless")
    }

    /// Loads the items `next` reads from `reader` into `collection` and closes `store`; sets
    /// `committedAny` once a batch is committed.
    private func load(
        into store: Store, collection: CollectionName, constraints: [UniqueConstraint], indexes: [IndexDefinition],
        reader: LineReader, next: () throws -> (line: Int, item: LoadItem)?, context: CommandContext, committedAny: inout Bool
    ) async throws -> Int32 {
        try await StoreArguments.using(store) { store in
            var loader = BatchLoader(store: store, collection: collection, constraints: constraints, indexes: indexes)
            defer { committedAny = loader.committedBatches > 0 }
            let size = reader.fileSize
            let progress = context.progress("load \(collection)", total: size, unit: size == nil ? "records" : "B")
            var seen = 0
            defer { progress.finish() }
            var pending: [(line: Int, item: LoadItem)] = []
            do {
                while let (line, item) = try next() {
                    pending.append((line, item))
                    seen += 1
                    if batch > 0 && pending.count >= batch {
                        try await loader.commit(pending)
                        pending.removeAll(keepingCapacity: true)
                    }
                    progress.set(size == nil ? seen : reader.bytesRead)
                }
                if !pending.isEmpty { try await loader.commit(pending) }
            } catch let error as LoadLineError {
                progress.finish()
                if error.needsID {
                    // A bad line, not a bad command line: batches before it may be committed (exit 1).
                    throw CLIFailure.failed(
                        "\(Self.describe(error)) \(loader.summary(stopped: true))",
                        "give every record of '\(collection)' an \"id\", or load into a collection with integer ids")
                }
                throw Self.lineFailure(error, summary: loader.summary(stopped: true))
            } catch {
                progress.finish()
                // The command line was checked before the store was opened: whatever fails
                // now is the work, so exit 1 even for a code that means a usage error elsewhere.
                let failure = CLIFailure.from(error)
                throw CLIFailure.failed("\(failure.message) \(loader.summary(stopped: true))", failure.hint)
            }
            context.logger.notice("\(loader.summary(stopped: false))")
            return ExitStatus.success
        }
    }

    /// `line 12, column 7: malformed JSON: expected a key.` or `line 12: <message>`.
    static func describe(_ error: LoadLineError) -> String {
        let prefix = "Malformed JSON at line 1, "
        if error.error.message.hasPrefix(prefix) {
            let rest = error.error.message.dropFirst(prefix.count)
            if let colon = rest.firstIndex(of: ":") {
                return "line \(error.line), \(rest[..<colon]): malformed JSON:\(rest[rest.index(after: colon)...])"
            }
        }
        return "line \(error.line): \(error.error.message)"
    }
}

/// Commits batches of loaded records and counts what was committed.
struct BatchLoader {
    let store: Store
    let collection: CollectionName
    let constraints: [UniqueConstraint]
    let indexes: [IndexDefinition]
    private(set) var committedRecords = 0
    private(set) var committedBatches = 0
    private(set) var lastCommittedLine = 0
    private var prepared = false

    init(store: Store, collection: CollectionName, constraints: [UniqueConstraint], indexes: [IndexDefinition]) {
        self.store = store
        self.collection = collection
        self.constraints = constraints
        self.indexes = indexes
    }

    /// Saves `records` in one transaction (preparing the collection in the first one).
    /// - Throws: ``LoadLineError`` naming the line whose record was refused.
    mutating func commit(_ records: [(line: Int, item: LoadItem)]) async throws {
        let collection = self.collection
        let constraints = self.constraints
        let indexes = self.indexes
        let prepare = !prepared
        let batch = records
        try await store.write { tx in
            if prepare, let first = batch.first {
                try BatchLoader.prepare(collection, idKind: first.item.idKind, constraints: constraints, indexes: indexes, in: tx)
            }
            var assignsIDs: Bool?
            for (line, item) in batch {
                do {
                    switch item {
                    case .record(let record):
                        try tx.save(record, into: collection)
                    case .fields(let fields):
                        if assignsIDs == nil { assignsIDs = try tx.schema(of: collection).map { $0.idKind == .int } ?? true }
                        guard assignsIDs == true else {
                            throw LoadLineError(
                                line: line,
                                error: DepotError(.decoding, "the record has no \"id\", and collection '\(collection)' has string ids, which the store does not assign."),
                                needsID: true)
                        }
                        _ = try tx.insert(fields: fields, into: collection)
                    }
                } catch let error as DepotError {
                    throw LoadLineError(line: line, error: error)
                }
            }
        }
        prepared = true
        committedRecords += records.count
        committedBatches += 1
        lastCommittedLine = records.last?.line ?? lastCommittedLine
    }

    /// Creates the collection, or adds the requested constraints and indexes to the ones it has.
    static func prepare(_ collection: CollectionName, idKind: IDKind, constraints: [UniqueConstraint], indexes: [IndexDefinition], in tx: StoreWriteTransaction) throws {
        if var schema = try tx.schema(of: collection) {
            guard !constraints.isEmpty || !indexes.isEmpty else { return }
            for constraint in constraints where !schema.uniqueConstraints.contains(where: { $0.name == constraint.name }) {
                schema.uniqueConstraints.append(constraint)
            }
            for index in indexes where !schema.indexes.contains(where: { $0.name == index.name }) {
                schema.indexes.append(index)
            }
            try tx.prepare(schema)
        } else {
            try tx.prepare(CollectionSchema(name: collection, idKind: idKind, uniqueConstraints: constraints, indexes: indexes))
        }
    }

    /// What was committed, as a sentence.
    func summary(stopped: Bool) -> String {
        let records = committedRecords == 1 ? "1 record" : "\(committedRecords) records"
        let batches = committedBatches == 1 ? "1 batch" : "\(committedBatches) batches"
        if stopped {
            return committedRecords == 0
                ? "(nothing was committed)"
                : "(\(records) in \(batches) \(committedBatches == 1 ? "was" : "were") committed, through line \(lastCommittedLine))"
        }
        return "loaded \(records) into \(collection) in \(batches)"
    }
}

extension CollectionSchema {
    /// Validates constraint and index definitions given on the command line.
    /// - Throws: a usage ``CLIFailure``.
    func validateForCLI() throws {
        do {
            try validate()
        } catch let error as DepotError {
            throw CLIFailure.usage(error.message, "give each --unique and --index distinct fields once")
        }
    }
}
