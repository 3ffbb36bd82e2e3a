import Depot
import DepotCLIParsers
import DepotServer
import Foundation

/// The tour's model: a book with a unique ISBN and an index on its author.
struct Book: Model, Equatable {
    var id: Int64
    var isbn: String
    var title: String
    var author: String
    var year: Int
    var rating: Double
    var tags: [String]
    var subtitle: String?

    static let collectionName = "books"
    static let uniqueConstraints = [UniqueConstraint(["isbn"])]
    static let indexes = [IndexDefinition(["author"])]
}

/// The steps of `depot tour`, printed as short sections.
struct Tour {
    let directory: URL
    let keep: Bool
    let context: CommandContext
    let schemes = DriverRegistry.standard.schemes

    /// The embedded default: SQLite when this build has it.
    var defaultScheme: String { schemes.contains("sqlite") ? "sqlite" : "memory" }

    /// A store string for `scheme` inside the tour's directory (`memory:` has no file).
    func storeString(_ scheme: String, _ name: String) -> String {
        scheme == "memory" ? "memory:" : "\(scheme):\(directory.appendingPathComponent("\(name).\(scheme)").path)"
    }

    func run() async throws -> Int32 {
        heading("Depot tour", underline: "=")
        say("One typed, Codable-first storage API over many drivers. This build has: \(schemes.joined(separator: ", ")).")
        say(keep ? "Stores are kept in \(directory.path)." : "Stores live in a temporary directory, removed at the end (keep them with --dir DIR).")

        try await modelStep()
        let agreed = try await agreementStep()
        try await tourNetworkStep()
        try await comparisonStep()

        heading("Next", underline: "-")
        say("depot info STORE · depot load STORE COLLECTION FILE · depot query STORE COLLECTION --where 'year >= 1950'")
        say("depot copy SRC DST · depot check STORE · depot --help · Docs/CLI.md")
        if !agreed {
            Console.error("the drivers gave different answers (see the table above) (please report this with the table)")
            return ExitStatus.failure
        }
        return ExitStatus.success
    }

    // MARK: 1. A model

    func modelStep() async throws {
        let string = storeString(defaultScheme, "tour")
        heading("1. A model, saved and queried", underline: "-")
        say("struct Book: Model { var id: Int64; var isbn, title, author: String; var year: Int; var rating: Double; var tags: [String]; var subtitle: String? }")
        say("  unique isbn, index on author · store: \(StoreArguments.shown(string))\(defaultScheme == "memory" ? " (SQLite is not in this build)" : "")")
        let store = try await Store.open(string)
        try await StoreArguments.using(store) { store in
            let books = try await store.repository(Book.self)
            try await books.deleteAll()
            try await books.save(Tour.sampleBooks)
            say("saved \(Tour.sampleBooks.count) books in one transaction: try await books.save(library)")
            let modern = try await books.query().filter(Field("year") >= 1960).sort("year").limit(5).all()
            say("")
            say("books.query().filter(Field(\"year\") >= 1960).sort(\"year\").limit(5).all():")
            table(["id", "year", "title", "author"], modern.map { [String($0.id), String($0.year), $0.title, $0.author] }, numeric: [0, 1])
            say("")
            var duplicate = Tour.sampleBooks[0]
            duplicate.id = 100
            do {
                _ = try await books.insert(duplicate)
                say("a second book with ISBN \(duplicate.isbn) was accepted (unexpected)")
            } catch let error as DepotError where error.code == .uniqueViolation {
                say("insert of another book with ISBN \(duplicate.isbn) → refused: \(error.code) on \(error.constraint ?? "?")")
            }
            var revised = Tour.sampleBooks[1]
            revised.id = 200
            revised.rating = 4.9
            let kept = try await books.upsert(revised, uniqueOn: "isbn_unique")
            say("upsert by ISBN \(revised.isbn) → updated the stored book, which keeps id \(kept.id)")
            let count = try await books.count()
            let plan = try await books.query().filter(Field("author") == "Ursula K. Le Guin").explain()
            var parts = [String]()
            parts.append("filter in \(plan.filterInEngine ? "engine" : "memory")")
            if !plan.indexesUsed.isEmpty { parts.append("index \(plan.indexesUsed.joined(separator: ", "))") }
            say("books.count() → \(count) · query(author == ...).explain() → \(plan.backend): \(parts.joined(separator: ", "))")
        }
    }

    // MARK: 2. Same answers everywhere

    /// The queries every driver answers in step 2.
    static let queries: [(label: String, query: Query)] = [
        ("year >= 1960, by year", Query(filter: .greaterOrEqual("year", 1960), sort: [SortKey("year")])),
        ("author prefix \"Ursula\"", Query(filter: .hasPrefix("author", "Ursula"))),
        ("title contains \"the\"", Query(filter: .contains("title", "the"))),
        ("rating > 4.2, best 3", Query(filter: .greater("rating", 4.2), sort: [SortKey("rating", descending: true)], limit: 3)),
        ("year in [1965, 1969]", Query(filter: .isIn("year", [1965, 1969]))),
        ("year != 1965", Query(filter: .notEqual("year", 1965))),
        ("subtitle is-null", Query(filter: .isNull("subtitle"))),
        ("rating = 4 (int vs double)", Query(filter: .equal("rating", 4))),
        ("by title, page 2 of 4", Query(sort: [SortKey("title")], offset: 4, limit: 4)),
    ]

    func agreementStep() async throws -> Bool {
        heading("2. The same data and queries on every driver", underline: "-")
        var answers: [String: [String]] = [:]
        var failures: [String: String] = [:]
        for scheme in schemes {
            do {
                answers[scheme] = try await answer(on: storeString(scheme, "agree"))
            } catch {
                failures[scheme] = CLIFailure.from(error).message
            }
        }
        let reference = answers[defaultScheme] ?? schemes.compactMap { answers[$0] }.first ?? []
        var agreed = true
        var rows: [[String]] = []
        for (n, entry) in Tour.queries.enumerated() {
            var row = [entry.label, reference.indices.contains(n) ? reference[n] : "-"]
            for scheme in schemes {
                guard let mine = answers[scheme], mine.indices.contains(n) else { row.append("error"); continue }
                let same = reference.indices.contains(n) && mine[n] == reference[n]
                if !same { agreed = false }
                row.append(same ? "same" : "DIFFERS: \(mine[n])")
            }
            rows.append(row)
        }
        table(["query", "ids (\(defaultScheme))"] + schemes, rows)
        for (scheme, message) in failures.sorted(by: { $0.key < $1.key }) {
            agreed = false
            say("\(scheme): could not run: \(message)")
        }
        say(agreed
            ? "All \(schemes.count) driver\(schemes.count == 1 ? "" : "s") gave the same \(Tour.queries.count) answers."
            : "The drivers disagree: this is a bug, please report it with this table.")
        return agreed
    }

    /// Loads the sample into a fresh store and answers every query as a list of ids.
    func answer(on string: String) async throws -> [String] {
        let store = try await Store.open(string)
        return try await StoreArguments.using(store) { store in
            let books = try await store.repository(Book.self)
            try await books.deleteAll()
            try await books.save(Tour.sampleBooks)
            var out: [String] = []
            for entry in Tour.queries {
                let records = try await store.collection(try Book.collection()).query(entry.query)
                out.append(records.map { $0.id.description }.joined(separator: ","))
            }
            return out
        }
    }

    // MARK: 3. Network

    /// Step 3 of the tour: DepotServer on loopback and a second store synced through it,
    /// with offline edits waiting in the outbox.
    func tourNetworkStep() async throws {
        heading("3. Serving and syncing", underline: "-")
        let serverStore = try await Store.open(storeString(defaultScheme, "served"))
        try await StoreArguments.using(serverStore) { serverStore in
            let books = try await serverStore.repository(Book.self)
            try await books.deleteAll()
            try await books.save(Array(Tour.sampleBooks.prefix(5)))
            let server = DepotServer(store: serverStore, configuration: .init(host: "127.0.0.1", port: 0))
            let port = try await server.start()
            defer { Task { await server.stop() } }
            say("DepotServer serves \(StoreArguments.shown(storeString(defaultScheme, "served"))) on http://127.0.0.1:\(port) (loopback only)")

            let clientString = storeString(defaultScheme, "client")
            let client = try await Store.open(clientString)
            try await StoreArguments.using(client) { client in
                let collection = try CollectionName(Book.collectionName)
                let coordinator = SyncCoordinator(store: client)
                guard let base = URL(string: "http://127.0.0.1:\(port)") else { return }
                try await coordinator.attach(collection, to: SyncEndpoint(baseURL: base, path: "/books"))
                let pulled = try await coordinator.sync(collection, pull: true, push: false)
                let local = try await client.repository(Book.self)
                say("a second store (\(StoreArguments.shown(clientString))) pulled \(pulled.pulled) books through the server")

                // Offline: edits are committed locally and wait in the outbox.
                var edited = try await local.find(id: Tour.sampleBooks[0].id) ?? Tour.sampleBooks[0]
                edited.rating = 5.0
                try await local.save(edited)
                try await local.delete(id: Tour.sampleBooks[1].id)
                let waiting = try await coordinator.outbox(for: collection).count
                say("offline, the client edited one book and deleted another: \(waiting) entries wait in its outbox")

                let pushed = try await coordinator.sync(collection, pull: false, push: true)
                let onServer = try await books.find(id: Tour.sampleBooks[0].id)
                let deletedOnServer = try await books.find(id: Tour.sampleBooks[1].id) == nil
                let left = try await coordinator.outbox(for: collection).count
                say("back online: pushed \(pushed.pushed) (idempotency keys, If-Match); the server now has rating \(onServer?.rating ?? 0) and the deleted book is \(deletedOnServer ? "gone" : "still there"); outbox left: \(left)")
            }
            await server.stop()
        }
    }

    // MARK: 4. A rough comparison

    func comparisonStep() async throws {
        let count = 2_000, commits = 50, queries = 20
        heading("4. The drivers side by side (rough tour figures, not a benchmark)", underline: "-")
        say("\(commits) single-record commits, then \(count) books in one transaction, then \(queries) runs of")
        say("'year >= 1990 by rating, desc, limit 10'; one run on this machine, default durability.")
        var rows: [[String]] = []
        for scheme in schemes {
            do {
                let figures = try await measure(on: storeString(scheme, "compare"), count: count, commits: commits, queries: queries)
                rows.append([scheme] + figures)
            } catch {
                rows.append([scheme, "error: \(CLIFailure.from(error).message)", "", "", ""])
            }
        }
        table(["driver", "persistent", "commit (each)", "insert \(count)", "query (each)"], rows, numeric: [2, 3, 4])
        say("For real figures: depot bench (YCSB A-F against the raw engines).")
    }

    func measure(on string: String, count: Int, commits: Int, queries: Int) async throws -> [String] {
        let store = try await Store.open(string)
        return try await StoreArguments.using(store) { store in
            let books = try await store.repository(Book.self)
            try await books.deleteAll()
            let clock = ContinuousClock()
            let commitStart = clock.now
            for i in 0..<commits { try await books.save(Tour.generatedBook(Int64(1_000_000 + i))) }
            let commitTime = commitStart.duration(to: clock.now)
            let generated = (0..<count).map { Tour.generatedBook(Int64($0)) }
            let insertStart = clock.now
            try await books.save(generated)
            let insertTime = insertStart.duration(to: clock.now)
            let query = books.query().filter(Field("year") >= 1990).sort("rating", descending: true).limit(10)
            let queryStart = clock.now
            for _ in 0..<queries { _ = try await query.all() }
            let queryTime = queryStart.duration(to: clock.now)
            return [
                store.driver.capabilities.contains(.persistence) ? "yes" : "no",
                Tour.milliseconds(commitTime / commits),
                Tour.milliseconds(insertTime),
                Tour.milliseconds(queryTime / queries),
            ]
        }
    }

    static func milliseconds(_ duration: Duration) -> String {
        let ms = Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
        return ms >= 100 ? String(format: "%.0f ms", ms) : String(format: "%.2f ms", ms)
    }

    static func generatedBook(_ n: Int64) -> Book {
        Book(id: n, isbn: "978-\(n)", title: "Book \(n)", author: "Author \(n % 97)", year: 1900 + Int(n % 120),
             rating: Double(n % 50) / 10, tags: n % 3 == 0 ? ["sf"] : ["novel"], subtitle: n % 4 == 0 ? "vol. \(n % 7)" : nil)
    }

    // MARK: Output

    func heading(_ text: String, underline: Character) {
        guard !context.quiet else { return }
        Console.print("")
        Console.print(text)
        Console.print(String(repeating: underline, count: text.count))
    }

    func say(_ text: String) {
        guard !context.quiet else { return }
        Console.print(text.isEmpty ? "" : "  " + text)
    }

    /// Prints an aligned table; columns in `numeric` are right-aligned.
    func table(_ headers: [String], _ rows: [[String]], numeric: Set<Int> = []) {
        guard !context.quiet else { return }
        var widths = headers.map(\.count)
        for row in rows {
            for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) }
        }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, cell in
                let width = i < widths.count ? widths[i] : cell.count
                return numeric.contains(i) ? cell.leftPadding(width) : cell.padding(width)
            }.joined(separator: "  ").trimmingTrailingSpaces
        }
        Console.print("  " + line(headers))
        Console.print("  " + widths.map { String(repeating: "-", count: $0) }.joined(separator: "  "))
        for row in rows { Console.print("  " + line(row)) }
    }

    // MARK: Data

    static let sampleBooks: [Book] = [
        Book(id: 1, isbn: "978-0441013593", title: "Dune", author: "Frank Herbert", year: 1965, rating: 4.3, tags: ["sf", "classic"]),
        Book(id: 2, isbn: "978-0441478125", title: "The Left Hand of Darkness", author: "Ursula K. Le Guin", year: 1969, rating: 4.1, tags: ["sf"]),
        Book(id: 3, isbn: "978-0061054884", title: "The Dispossessed", author: "Ursula K. Le Guin", year: 1974, rating: 4.2, tags: ["sf"], subtitle: "An Ambiguous Utopia"),
        Book(id: 4, isbn: "978-0547928227", title: "The Hobbit", author: "J. R. R. Tolkien", year: 1937, rating: 4.3, tags: ["fantasy"], subtitle: "There and Back Again"),
        Book(id: 5, isbn: "978-0553293357", title: "Foundation", author: "Isaac Asimov", year: 1951, rating: 4.2, tags: ["sf"]),
        Book(id: 6, isbn: "978-0345391803", title: "The Hitchhiker's Guide to the Galaxy", author: "Douglas Adams", year: 1979, rating: 4.2, tags: ["sf", "comic"]),
        Book(id: 7, isbn: "978-0441569595", title: "Neuromancer", author: "William Gibson", year: 1984, rating: 3.9, tags: ["cyberpunk"]),
        Book(id: 8, isbn: "978-0547249643", title: "A Wizard of Earthsea", author: "Ursula K. Le Guin", year: 1968, rating: 4.0, tags: ["fantasy"]),
        Book(id: 9, isbn: "978-0765377067", title: "The Three-Body Problem", author: "Liu Cixin", year: 2008, rating: 4.1, tags: ["sf"]),
        Book(id: 10, isbn: "978-0312863555", title: "Hyperion", author: "Dan Simmons", year: 1989, rating: 4.25, tags: ["sf"]),
        Book(id: 11, isbn: "978-0062315007", title: "The Alchemist", author: "Paulo Coelho", year: 1988, rating: 3.9, tags: ["novel"]),
        Book(id: 12, isbn: "978-1250313188", title: "Leviathan Wakes", author: "James S. A. Corey", year: 2011, rating: 4.0, tags: ["sf", "space"], subtitle: "The Expanse 1"),
    ]
}

extension String {
    /// The text without trailing spaces.
    var trimmingTrailingSpaces: String {
        var text = Substring(self)
        while text.last == " " { text = text.dropLast() }
        return String(text)
    }
}
