import ArgumentParser
import Depot

/// `depot query [STORE] COLLECTION [--where ...]... [--sort ...]... [--limit N] [--offset N] [--explain]`.
struct QueryCommand: DepotSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "query",
        abstract: "Query a collection; results as JSON Lines.",
        usage: "depot query [STORE] COLLECTION [--where 'FIELD OP VALUE']... [--sort FIELD[:desc]]... [--limit N] [--offset N] [--explain]",
        discussion: """
            --where 'FIELD OP VALUE' (several are ANDed). FIELD is a top-level field or id. OP is \
            one of = != < <= > >= in not-in prefix contains is-null is-not-null (the last two take \
            no VALUE). VALUE is a JSON literal: "text", 42, 1.5, true, null, [1,2]. The semantics \
            are Depot's on every driver: numbers compare by value (1 = 1.0), strings by UTF-8 \
            bytes, case-sensitive; != and not-in match missing fields; < <= > >= match only values \
            of the operand's kind.

            --sort FIELD or FIELD:desc (several: first is most significant); the id always breaks \
            ties, and without --sort records come in id order.

            --explain prints what the driver runs in its engine and what in memory, instead of \
            the records.

            Examples:
              depot query sqlite:app.db books --where 'year >= 1950' --sort year:desc --limit 10
              depot query sqlite:app.db books --where 'tags contains "sf"' --explain
              depot query json:data.json people --where 'name in ["Ada","Grace"]'
            """
    )

    @Argument(help: ArgumentHelp("[STORE] COLLECTION", valueName: "args"))
    var arguments: [String] = []

    @Option(name: .customLong("where"), help: ArgumentHelp("A condition 'FIELD OP VALUE'; several are ANDed.", valueName: "condition"))
    var conditions: [String] = []

    @Option(help: ArgumentHelp("Sort by FIELD, ascending, or FIELD:desc; repeatable.", valueName: "FIELD[:desc]"))
    var sort: [String] = []

    @Option(help: "At most this many records.")
    var limit: Int?

    @Option(help: "Skip this many records first.")
    var offset: Int?

    @Flag(help: "Print how the driver runs the query instead of its results.")
    var explain = false

    @OptionGroup var global: GlobalOptions

    func execute(_ context: CommandContext) async throws -> Int32 {
        let (stores, rest) = try StoreArguments.split(arguments, stores: 1, rest: 1...1, usage: "depot query [STORE] COLLECTION")
        let collection = try StoreArguments.collectionName(rest[0])
        let query = try makeQuery()
        let store = try await StoreArguments.open(stores[0], context, mustExist: true)
        return try await StoreArguments.using(store) { store in
            try await StoreArguments.requireCollection(collection, in: store, shownAs: stores[0])
            let target = store.collection(collection)
            if explain {
                let plan = try await target.explain(query)
                Self.printPlan(plan)
                return ExitStatus.success
            }
            let out = OutputBuffer()
            defer { out.flush() }
            for try await record in try target.stream(query) {
                out.line(record.jsonText)
            }
            return ExitStatus.success
        }
    }

    /// The query the options describe.
    /// - Throws: a usage ``CLIFailure``.
    func makeQuery() throws -> Query {
        if let limit, limit < 0 { throw CLIFailure.usage("--limit must be 0 or more", "write --limit 10") }
        if let offset, offset < 0 { throw CLIFailure.usage("--offset must be 0 or more", "write --offset 20") }
        let query = Query(filter: try WhereParser.filter(conditions), sort: try sort.map(WhereParser.sortKey), offset: offset ?? 0, limit: limit)
        do {
            try query.validate()
        } catch let error as DepotError {
            throw CLIFailure.usage(error.message, "check --where and --sort")
        }
        return query
    }

    /// Prints a plan as aligned lines.
    static func printPlan(_ plan: QueryPlan) {
        func place(_ inEngine: Bool) -> String { inEngine ? "engine" : "memory (Depot's shared evaluator)" }
        Console.print("driver:   \(plan.backend)")
        Console.print("filter:   \(place(plan.filterInEngine))")
        Console.print("sort:     \(place(plan.sortInEngine))")
        Console.print("paging:   \(place(plan.pagingInEngine))")
        Console.print("indexes:  \(plan.indexesUsed.isEmpty ? "none (full scan)" : plan.indexesUsed.joined(separator: ", "))")
        if !plan.detail.isEmpty { Console.print("detail:   \(plan.detail)") }
    }
}
