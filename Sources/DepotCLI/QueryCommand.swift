import ArgumentParser
import Depot
import DepotCLIParsers
import Foundation

/// `depot query [STORE] COLLECTION [--where ...]... [--sort ...]... [--limit N] [--offset N] [--explain]`.
struct QueryCommand: DepotSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "query",
        abstract: "Query a collection; results as JSON Lines.",
        usage: "depot query [STORE] COLLECTION [--where 'FIELD OP VALUE']... [--sort FIELD[:desc]]... [--limit N] [--offset N] [--select FIELDS] [--group-by FIELDS --aggregate LIST [--having 'NAME OP VALUE']...] [--explain]",
        discussion: """
            --where 'FIELD OP VALUE' (several are ANDed). FIELD is a top-level field or id. OP is \
            one of = != < <= > >= in not-in prefix contains is-null is-not-null (the last two take \
            no VALUE). VALUE is a JSON literal: "text", 42, 1.5, true, null, [1,2]. The semantics \
            are Depot's on every driver: numbers compare by value (1 = 1.0), strings by UTF-8 \
            bytes, case-sensitive; != and not-in match missing fields; < <= > >= match only values \
            of the operand's kind.

            --sort FIELD or FIELD:desc (several: first is most significant); the id always breaks \
            ties, and without --sort records come in id order.

            --select FIELD,FIELD prints only those fields of each record (and its id).

            --aggregate LIST groups instead of listing records (Docs/Aggregates.md): LIST is \
            comma-separated count, count(FIELD), sum(FIELD), min(FIELD), max(FIELD), avg(FIELD). \
            --group-by FIELD,FIELD makes one row per group (one row for all without it); \
            --having 'NAME OP VALUE' filters the rows by a group field or an aggregate named \
            count, count_F, sum_F, min_F, max_F, avg_F; --sort, --limit and --offset then order \
            and page the rows. Rows are JSON Lines too.

            --explain prints what the driver runs in its engine and what in memory, instead of \
            the records.

            Examples:
              depot query sqlite:app.db books --where 'year >= 1950' --sort year:desc --limit 10
              depot query sqlite:app.db books --where 'tags contains "sf"' --explain
              depot query json:data.json people --where 'name in ["Ada","Grace"]'
              depot query sqlite:app.db books --select title,year --where 'year < 1900'
              depot query sqlite:app.db posts --group-by author --aggregate 'count,sum(views),avg(rating)' --having 'count >= 2' --sort sum_views:desc
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

    @Option(help: ArgumentHelp("Print only these fields (comma-separated) of each record.", valueName: "FIELDS"))
    var select: String?

    @Option(name: .customLong("group-by"), help: ArgumentHelp("Group by these fields (comma-separated); needs --aggregate.", valueName: "FIELDS"))
    var groupBy: String?

    @Option(help: ArgumentHelp("Aggregates, comma-separated: count, count(F), sum(F), min(F), max(F), avg(F).", valueName: "LIST"))
    var aggregate: String?

    @Option(help: ArgumentHelp("A condition on the grouped rows 'NAME OP VALUE'; several are ANDed.", valueName: "condition"))
    var having: [String] = []

    @OptionGroup var global: GlobalOptions

    func execute(_ context: CommandContext) async throws -> Int32 {
        let (stores, rest) = try StoreArguments.split(arguments, stores: 1, rest: 1...1, usage: "depot query [STORE] COLLECTION")
        let collection = try StoreArguments.collectionName(rest[0])
        let grouped = try makeAggregateQuery()
        let query = grouped == nil ? try makeQuery() : Query()
        let selection = try select.map { try Self.fieldList($0, option: "--select") }
        if selection != nil && grouped != nil {
            throw CLIFailure.usage("--select cannot be used with --aggregate", "the rows of --aggregate have the group fields and the aggregates")
        }
        let store = try await StoreArguments.open(stores[0], context, mustExist: true)
        return try await StoreArguments.using(store) { store in
            try await StoreArguments.requireCollection(collection, in: store, shownAs: stores[0])
            let target = store.collection(collection)
            if let grouped {
                if explain {
                    Self.printPlan(try await target.explain(grouped))
                    return ExitStatus.success
                }
                let out = OutputBuffer()
                defer { out.flush() }
                for row in try await target.aggregate(grouped) { out.line(row.description) }
                return ExitStatus.success
            }
            if let selection, !explain {
                let out = OutputBuffer()
                defer { out.flush() }
                for record in try await target.query(query, selecting: selection) { out.line(record.jsonText) }
                return ExitStatus.success
            }
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

    /// The grouped query `--aggregate`, `--group-by` and `--having` describe, `nil` without
    /// `--aggregate`.
    /// - Throws: a usage ``CLIFailure``.
    func makeAggregateQuery() throws -> AggregateQuery? {
        guard let aggregate else {
            if groupBy != nil || !having.isEmpty {
                throw CLIFailure.usage("--group-by and --having need --aggregate", "add --aggregate count")
            }
            return nil
        }
        if let limit, limit < 0 { throw CLIFailure.usage("--limit must be 0 or more", "write --limit 10") }
        if let offset, offset < 0 { throw CLIFailure.usage("--offset must be 0 or more", "write --offset 20") }
        let query = AggregateQuery(
            filter: try WhereParser.filter(conditions),
            groupBy: try groupBy.map { try Self.fieldList($0, option: "--group-by") } ?? [],
            aggregates: try Self.aggregates(aggregate),
            having: try WhereParser.filter(having),
            sort: try sort.map(WhereParser.sortKey), offset: offset ?? 0, limit: limit)
        do {
            try query.validate()
        } catch let error as DepotError {
            throw CLIFailure.usage(error.message, "check --aggregate, --group-by, --having and --sort")
        }
        return query
    }

    /// Comma-separated field names.
    static func fieldList(_ text: String, option: String) throws -> [String] {
        let names = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        guard !names.isEmpty, !names.contains(where: \.isEmpty) else {
            throw CLIFailure.usage("\(option) needs field names separated by commas", "write \(option) title,year")
        }
        return names
    }

    /// Parses `count,sum(views),avg(rating)`.
    static func aggregates(_ text: String) throws -> [Aggregate] {
        try text.split(separator: ",").map { item in
            let spec = item.trimmingCharacters(in: .whitespaces)
            let usage = CLIFailure.usage("unknown aggregate '\(spec)'", "use count, count(FIELD), sum(FIELD), min(FIELD), max(FIELD) or avg(FIELD)")
            if spec == "count" { return .count() }
            guard spec.hasSuffix(")"), let open = spec.firstIndex(of: "(") else { throw usage }
            let name = String(spec[..<open])
            let field = String(spec[spec.index(after: open)..<spec.index(before: spec.endIndex)]).trimmingCharacters(in: .whitespaces)
            guard !field.isEmpty else { throw usage }
            switch name {
            case "count": return .count(field)
            case "sum": return .sum(field)
            case "min": return .min(field)
            case "max": return .max(field)
            case "avg", "average": return .average(field)
            default: throw usage
            }
        }
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
