import ArgumentParser
import Depot
import Foundation

/// `depot dump [STORE] [COLLECTION]`: JSON Lines out, ordered by id, streamed.
struct DumpCommand: DepotSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "dump",
        abstract: "Write a collection (or every collection) as JSON Lines, ordered by id.",
        usage: "depot dump [STORE] [COLLECTION]",
        discussion: """
            With COLLECTION, each line is one record: {"id":...,"field":...}, the shape \
            'depot load' reads. Without it, every collection (Depot's reserved _depot_ ones \
            excluded) is written in name order, each line saying its collection:
              {"collection":"books","record":{"id":1,"title":"Dune"}}
            Records stream: a huge collection is never held in memory whole.

            Examples:
              depot dump sqlite:app.db books > books.jsonl
              depot dump json:data.json | jq -c 'select(.collection == "people") | .record'
            """
    )

    @Argument(help: ArgumentHelp("[STORE] [COLLECTION]", valueName: "args"))
    var arguments: [String] = []

    @OptionGroup var global: GlobalOptions

    func execute(_ context: CommandContext) async throws -> Int32 {
        let (stores, rest) = try StoreArguments.split(arguments, stores: 1, rest: 0...1, usage: "depot dump [STORE] [COLLECTION]")
        let named = try rest.first.map(StoreArguments.collectionName)
        let store = try await StoreArguments.open(stores[0], context, mustExist: true)
        return try await StoreArguments.using(store) { store in
            let out = OutputBuffer()
            defer { out.flush() }
            if let named {
                try await StoreArguments.requireCollection(named, in: store, shownAs: stores[0])
                for try await record in try store.collection(named).stream() {
                    out.line(record.jsonText)
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
}
