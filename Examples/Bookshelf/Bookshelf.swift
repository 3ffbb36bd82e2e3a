import Depot
import Foundation

/// A book on the shelf: a typed model whose id the store assigns.
struct Book: Model {
    var id: Int64?
    var title: String
    var author: String
    var year: Int
    /// Who has the book; `nil` (no field stored) while it is on the shelf.
    var lentTo: String?
    static let indexes = [IndexDefinition(["year"])]
}

/// A record of who borrowed which book, written in the same transaction as the book.
struct Loan: Model {
    var id: Int64?
    var bookID: Int64
    var borrower: String
}

/// A small program on Depot (see Examples/README.md):
///
///     bookshelf STORE add TITLE AUTHOR YEAR   adds a book, prints its id
///     bookshelf STORE list [--since YEAR]     lists books by year, then title
///     bookshelf STORE remove ID               removes a book
///     bookshelf STORE lend ID BORROWER        marks the book lent and records the loan, atomically
///     bookshelf STORE sync URL                keeps the shelf in step with `depot serve` at URL
///
/// The same program runs on every backend: STORE is any store string (`sqlite:books.db`,
/// `gdbm:books`, `json:books.json`). Exit status 0 on success, 1 when the work failed, 2 for
/// a usage error.
@main
struct Bookshelf {
    /// A mistake on the command line.
    struct UsageError: Error {
        let message: String
    }

    static let usage = "usage: bookshelf STORE add TITLE AUTHOR YEAR | list [--since YEAR] | remove ID | lend ID BORROWER | sync URL"

    static func main() async {
        do {
            try await run(Array(CommandLine.arguments.dropFirst()))
            exit(0)
        } catch let error as UsageError {
            FileHandle.standardError.write(Data("bookshelf: \(error.message) (\(usage))\n".utf8))
            exit(2)
        } catch {
            FileHandle.standardError.write(Data("bookshelf: \(error)\n".utf8))
            exit(1)
        }
    }

    static func run(_ arguments: [String]) async throws {
        guard arguments.count >= 2 else { throw UsageError(message: "a store and a command are needed") }
        let command = arguments[1]
        let rest = Array(arguments.dropFirst(2))
        // Check the arguments before the store is opened (or created).
        switch (command, rest.count) {
        case ("add", 3), ("list", 0), ("list", 2), ("remove", 1), ("lend", 2), ("sync", 1): break
        default: throw UsageError(message: "'\(command)' with \(rest.count) argument(s) is not a command")
        }
        if command == "sync" { _ = try serverURL(rest[0]) }
        let store = try await Store.open(arguments[0])
        do {
            try await perform(command, rest, on: store)
            try await store.close()
        } catch {
            // The command's error is the one to report; a failure to close as well is secondary.
            do { try await store.close() } catch { FileHandle.standardError.write(Data("bookshelf: closing failed too: \(error)\n".utf8)) }
            throw error
        }
    }

    static func perform(_ command: String, _ rest: [String], on store: Store) async throws {
        let books = try await store.repository(Book.self)
        switch command {
        case "add":
            guard let year = Int(rest[2]) else { throw UsageError(message: "YEAR '\(rest[2])' is not a number") }
            let added = try await books.insert(Book(id: nil, title: rest[0], author: rest[1], year: year))
            print(added.id.map(String.init) ?? "?")
        case "list":
            var query = books.query()
            if rest.count == 2 {
                guard rest[0] == "--since", let since = Int(rest[1]) else { throw UsageError(message: "list takes --since YEAR") }
                query = query.filter(Field("year") >= since)
            }
            for book in try await query.sort("year").sort("title").all() {
                let lent = book.lentTo.map { " (lent to \($0))" } ?? ""
                print("\(book.id.map(String.init) ?? "?")\t\(book.year)\t\(book.title) — \(book.author)\(lent)")
            }
        case "remove":
            guard let id = Int64(rest[0]) else { throw UsageError(message: "ID '\(rest[0])' is not a number") }
            guard try await books.delete(id: id) else { throw NotFound(id: id) }
        case "lend":
            guard let id = Int64(rest[0]) else { throw UsageError(message: "ID '\(rest[0])' is not a number") }
            let borrower = rest[1]
            // One transaction over two collections: the book is marked and the loan recorded,
            // or, when the closure throws, neither.
            try await store.write { tx in
                let shelf = try tx.repository(Book.self)
                guard var book = try shelf.find(id: id) else { throw NotFound(id: id) }
                if let holder = book.lentTo { throw AlreadyLent(title: book.title, holder: holder) }
                book.lentTo = borrower
                try shelf.update(book)
                _ = try tx.repository(Loan.self).insert(Loan(id: nil, bookID: id, borrower: borrower))
            }
        default:
            try await sync(books, on: store, with: rest[0])
        }
    }

    /// Pulls the server's books, then pushes this shelf's changes, while an observed query
    /// watches the shelf. The first sync attaches the shelf to the server (the attachment is
    /// kept in the store); books added from then on are pushed by the next sync.
    static func sync(_ books: Repository<Book>, on store: Store, with address: String) async throws {
        let url = try serverURL(address)
        let coordinator = SyncCoordinator(store: store)
        let collection = try CollectionName("Book")
        // The server assigns the ids of pushed books, so two shelves never push the same id.
        try await coordinator.attach(collection, to: SyncEndpoint(baseURL: url, path: "/Book", idAssignment: .server))

        // The observed query yields the shelf now, then again after every commit to it,
        // the records the sync pulls included.
        let shelf = books.query().sort("year").sort("title")
        var updates = books.observe(shelf).makeAsyncIterator()
        let before = try await updates.next()?.count ?? 0
        let report = try await coordinator.sync(collection)
        guard report.succeeded else { throw SyncFailed(failures: report.failures) }
        let after = try await shelf.count()
        var seen = before
        while seen != after, let current = try await updates.next() { seen = current.count }
        print("synced with \(address): pulled \(report.pulled), pushed \(report.pushed); the shelf holds \(seen) books")
    }

    /// The server's address, checked: `http://` or `https://` with a host.
    static func serverURL(_ address: String) throws -> URL {
        guard let url = URL(string: address), url.scheme == "http" || url.scheme == "https", url.host != nil else {
            throw UsageError(message: "URL '\(address)' is not an http:// or https:// address")
        }
        return url
    }

    /// `remove` or `lend` named a book that is not on the shelf.
    struct NotFound: Error, CustomStringConvertible {
        let id: Int64
        var description: String { "no book with id \(id)" }
    }

    /// `lend` named a book someone already has.
    struct AlreadyLent: Error, CustomStringConvertible {
        let title: String
        let holder: String
        var description: String { "\(title) is already lent to \(holder)" }
    }

    /// The server could not be reached or refused something.
    struct SyncFailed: Error, CustomStringConvertible {
        let failures: [String]
        var description: String { "the sync did not complete: \(failures.first ?? "entries are still pending")" }
    }
}
