import ArgumentParser
import Depot
import DepotCLIParsers

/// `depot count [STORE] COLLECTION [--where ...]`: prints a number.
struct CountCommand: DepotSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "count",
        abstract: "Print the number of records in a collection (matching every --where).",
        usage: "depot count [STORE] COLLECTION [--where 'FIELD OP VALUE']...",
        discussion: """
            --where takes the same 'FIELD OP VALUE' conditions as 'depot query'.

            Examples:
              depot count sqlite:app.db books
              depot count sqlite:app.db books --where 'year >= 1950' --where 'author prefix "Le"'
            """
    )

    @Argument(help: ArgumentHelp("[STORE] COLLECTION", valueName: "args"))
    var arguments: [String] = []

    @Option(name: .customLong("where"), help: ArgumentHelp("A condition 'FIELD OP VALUE'; several are ANDed.", valueName: "condition"))
    var conditions: [String] = []

    @OptionGroup var global: GlobalOptions

    func execute(_ context: CommandContext) async throws -> Int32 {
        let (stores, rest) = try StoreArguments.split(arguments, stores: 1, rest: 1...1, usage: "depot count [STORE] COLLECTION")
        let collection = try StoreArguments.collectionName(rest[0])
        let filter = try WhereParser.filter(conditions)
        let store = try await StoreArguments.open(stores[0], context, mustExist: true)
        return try await StoreArguments.using(store) { store in
            try await StoreArguments.requireCollection(collection, in: store, shownAs: stores[0])
            let count = try await store.collection(collection).count(filter)
            Console.print(String(count))
            return ExitStatus.success
        }
    }
}
