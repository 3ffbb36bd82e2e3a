import ArgumentParser
import Depot
import DepotCLIParsers
import Foundation

/// `depot dump [STORE] [COLLECTION]`: JSON Lines out, ordered by id, streamed.
struct DumpCommand: DepotSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "dump",
        abstract: "Write a collection (or every collection) as JSON Lines, ordered by id.",
        usage: "depot dump [STORE] [COLLECTION] [--format jsonl|csv]",
        discussion: """
            With COLLECTION, each line is one record: {"id":...,"field":...}, the shape \
            'depot load' reads. Without it, every collection (Depot's reserved _depot_ ones \
            excluded) is written in name order, each line saying its collection:
              {"collection":"books","record":{"id":1,"title":"Dune"}}
            Records stream: a huge collection is never held in memory whole.

            --format csv writes one COLLECTION as CSV: a header of id and every top-level \
            field name (sorted), one row per record; arrays, objects and bytes as JSON text.

            Examples:
              depot dump sqlite:app.db books > books.jsonl
              depot dump json:data.json | jq -c 'select(.collection == "people") | .record'
              depot dump sqlite:app.db books --format csv > books.csv
            """
    )

    @Argument(help: ArgumentHelp("[STORE] [COLLECTION]", valueName: "args"))
    var arguments: [String] = []

    @Option(help: ArgumentHelp("The output format: jsonl (JSON Lines) or csv (needs COLLECTION).", valueName: "jsonl|csv"))
    var format = "jsonl"

    @OptionGroup var global: GlobalOptions

    func execute(_ context: CommandContext) async throws -> Int32 {
        let (stores, rest) = try StoreArguments.split(arguments, stores: 1, rest: 0...1, usage: "depot dump [STORE] [COLLECTION]")
        let named = try rest.first.map(StoreArguments.collectionName)
        guard format == "jsonl" || format == "csv" else {
            throw CLIFailure.usage("--format \(WhereParser.quoted(format)) is not a format 'depot dump' writes", "use --format jsonl or --format csv")
        }
        guard format == "jsonl" || named != nil else {
            throw CLIFailure.usage("--format csv writes one collection", "name it: depot dump STORE COLLECTION --format csv")
        }
        let store = try await StoreArguments.open(stores[0], context, mustExist: true)
        return try await StoreArguments.using(store) { store in
            let out = OutputBuffer()
            defer { out.flush() }
            if let named {
                try await StoreArguments.requireCollection(named, in: store, shownAs: stores[0])
                if format == "csv" {
                    try await Self.writeCSV(named, of: store, to: out)
                } else {
                    for try await record in try store.collection(named).stream() {
                        out.line(record.jsonText)
                    }
                }
            } else {
                for name in try await store.collectionNames() {
                    let prefix = "{\"collection\":" + JSONText.serialize(.string(name.rawValue)) + ",\"record\":"
                    for try await record in try store.collection(name).stream() {
                        out.line(prefix + record.jsonText + "}")
                    }
                }
            }
            return ExitStatus.success
        }
    }

    /// Writes `collection` as CSV (Docs/CLI.md, "CSV"): a header of `id` and then every
    /// top-level field name of any record, sorted; one row per record in id order. The
    /// records are streamed twice (once for the names), so none is held in memory.
    static func writeCSV(_ name: CollectionName, of store: Store, to out: OutputBuffer) async throws {
        let collection = store.collection(name)
        var names = Set<String>()
        for try await record in try collection.stream() { names.formUnion(record.fields.keys) }
        let columns = names.sorted()
        out.line((["id"] + columns).map(CSV.quotedIfNeeded).joined(separator: ","))
        for try await record in try collection.stream() {
            out.line(([CSV.text(record.id.fieldValue)] + columns.map { CSV.text(record.fields[$0]) }).joined(separator: ","))
        }
    }
}
