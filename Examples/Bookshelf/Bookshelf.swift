import Depot
import Foundation

/// A book on the shelf: a typed model whose id the store assigns.
struct Book: Model {
    var id: Int64?
    var title: String
    var author: String
    var year: Int
    static let indexes = [IndexDefinition(["year"])]
}

/// A small program on Depot (see Examples/README.md):
///
///     bookshelf STORE add TITLE AUTHOR YEAR   adds a book, prints its id
///     bookshelf STORE list [--since YEAR]     lists books by year, then title
///     bookshelf STORE remove ID               removes a book
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

    static let usage = "usage: bookshelf STORE add TITLE AUTHOR YEAR | STORE list [--since YEAR] | STORE remove ID"

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
        case ("add", 3), ("list", 0), ("list", 2), ("remove", 1): break
        default: throw UsageError(message: "'\(command)' with \(rest.count) argument(s) is not a command")
        }
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
                print("\(book.id.map(String.init) ?? "?")\t\(book.year)\t\(book.title) — \(book.author)")
            }
        default:
            guard let id = Int64(rest[0]) else { throw UsageError(message: "ID '\(rest[0])' is not a number") }
            guard try await books.delete(id: id) else { throw NotFound(id: id) }
        }
    }

    /// `remove` named a book that is not on the shelf.
    struct NotFound: Error, CustomStringConvertible {
        let id: Int64
        var description: String { "no book with id \(id)" }
    }
}
