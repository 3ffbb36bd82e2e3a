import ArgumentParser
import Depot
import DepotCLIParsers
import Foundation

/// `depot bench-relations`: an eager load of parents with their children on each embedded
/// driver, against the same data read by hand-written queries (Docs/Relations.md, "Costs").
struct BenchRelationsCommand: DepotSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-relations",
        abstract: "Benchmark an eager load (parents with their children) against hand-written queries, per driver.",
        usage: "depot bench-relations [--parents N] [--children N] [--rounds N] [--drivers LIST]",
        discussion: """
            For each driver, a new store in a temporary folder (durability normal) gets --parents \
            authors with --children books each (books indexed on authorID), in one transaction. Each round then reads every \
            author with its books twice, in alternating order: with the relation loader \
            (query().including(Author.books), typed results) and by hand (every author, then \
            every book, grouped by author in a dictionary; the same decoding). Prints the \
            median time of each and their ratio. Not a test: it checks only the counts.

            Example:
              depot bench-relations --parents 10000 --children 10
            """
    )

    @Option(help: "Authors.")
    var parents = 10_000

    @Option(help: "Books per author.")
    var children = 10

    @Option(help: "Rounds (the median is reported).")
    var rounds = 5

    @Option(help: ArgumentHelp("Drivers, comma-separated: memory, sqlite, gdbm, json.", valueName: "LIST"))
    var drivers = "memory,sqlite,gdbm,json"

    @Flag(help: "Also print how each driver runs the eager load (LoadingQuery.explain()).")
    var explain = false

    @OptionGroup var global: GlobalOptions

    struct Author: Model {
        static let collectionName = "authors"
        var id: Int
        var name: String
        var born: Int
        static let books = HasMany<Author, Book>("books", field: "authorID")
    }

    struct Book: Model {
        static let collectionName = "books"
        var id: Int
        var authorID: Int
        var title: String
        var year: Int
        // The reference is indexed, as an app would: drivers with indexes let the loader
        // read up to 2,000 authors' books by chunked in-queries.
        static let indexes = [IndexDefinition(["authorID"])]
    }

    func execute(_ context: CommandContext) async throws -> Int32 {
        guard parents >= 1, children >= 0, rounds >= 1 else {
            throw CLIFailure.usage("--parents and --rounds must be 1 or more, --children 0 or more", "for example --parents 10000 --children 10")
        }
        let names = drivers.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("depot-bench-relations-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        Console.print("depot bench-relations: \(parents) authors × \(children) books, \(rounds) rounds, durability normal, Codable models")
        Console.print("driver   eager load (ms)   hand-written (ms)   eager ÷ hand")
        for name in names {
            let location: String
            switch name {
            case "memory": location = "memory:"
            case "sqlite": location = "sqlite:\(directory)/r.sqlite?durability=normal"
            case "gdbm": location = "gdbm:\(directory)/r.gdbm?durability=normal"
            case "json": location = "json:\(directory)/r.json?durability=normal"
            default: throw CLIFailure.usage("unknown driver '\(name)'", "use memory, sqlite, gdbm or json")
            }
            let store = try await Store.open(location)
            let (eager, hand) = try await measure(store)
            if explain {
                for line in try await store.repository(Author.self).query().including(Author.books).explain() { Console.print("  " + line) }
            }
            try await store.close()
            let e = BenchSyncCommand.median(eager), h = BenchSyncCommand.median(hand)
            Console.print(name.padding(toLength: 9, withPad: " ", startingAt: 0)
                + String(format: "%17.1f   %17.1f   %12.2f", e, h, e / h))
        }
        return ExitStatus.success
    }

    /// Loads the data, then times each way `rounds` times (alternating which goes first).
    func measure(_ store: Store) async throws -> (eager: [Double], hand: [Double]) {
        let authors = try await store.repository(Author.self)
        let books = try await store.repository(Book.self)
        let parents = self.parents, children = self.children
        try await store.write { tx in
            let a = try tx.repository(Author.self), b = try tx.repository(Book.self)
            for i in 1...parents {
                try a.insert(Author(id: i, name: "author \(i)", born: 1800 + i % 200))
                for j in 0..<children {
                    try b.insert(Book(id: i * children + j, authorID: i, title: "book \(j)", year: 1900 + j))
                }
            }
        }
        _ = books
        let expected = parents * children
        var eager: [Double] = [], hand: [Double] = []
        for round in 0..<rounds {
            for step in (round % 2 == 0 ? [0, 1] : [1, 0]) {
                let start = DispatchTime.now().uptimeNanoseconds
                let loaded: Int
                if step == 0 {
                    let result = try await authors.query().including(Author.books).all()
                    loaded = try result.reduce(0) { $0 + (try $1.related(Author.books).count) }
                } else {
                    loaded = try await store.read { tx in
                        let all = try tx.models(Author.self, Query(), in: try CollectionName("authors"))
                        let owned = try tx.models(Book.self, Query(), in: try CollectionName("books"))
                        var byAuthor: [Int: [Book]] = [:]
                        for book in owned { byAuthor[book.authorID, default: []].append(book) }
                        return all.reduce(0) { $0 + (byAuthor[$1.id]?.count ?? 0) }
                    }
                }
                let ms = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
                guard loaded == expected else {
                    throw CLIFailure.failed("the \(step == 0 ? "eager" : "hand-written") read found \(loaded) books, not \(expected)", "this is a bug in the relation loader or the driver; please report it")
                }
                if step == 0 { eager.append(ms) } else { hand.append(ms) }
            }
        }
        return (eager, hand)
    }
}
