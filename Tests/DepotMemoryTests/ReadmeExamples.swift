// The README's first and third Swift examples, compiled here as written (see README.md).
// DocExampleTests checks that the lines from each "// example:" mark to "// end of example",
// less the lines ending in "// scaffold", are the README's block (leading spaces aside).
// Edit the README and this file together.

// example: README.md #1
import Depot
import Foundation
enum ReadmeExample1 { // scaffold

struct Book: Model {
    var id: Int64?                       // nil: the store assigns one
    var isbn: String
    var title: String
    var year: Int
    static let uniqueConstraints = [UniqueConstraint(["isbn"])]
    static let indexes = [IndexDefinition(["year"])]
}

static func run() async throws { // scaffold
let store = try await Store.open(ProcessInfo.processInfo.environment["DEPOT_STORE"] ?? "sqlite:books.db")
let books = try await store.repository(Book.self)
let dune = try await books.insert(Book(id: nil, isbn: "978-0441013593", title: "Dune", year: 1965))
try await books.upsert(Book(id: nil, isbn: "978-0441013593", title: "Dune (reissue)", year: 1965), uniqueOn: "isbn_unique")
let sixties = try await books.query().filter(Field("year") >= 1960 && Field("year") < 1970).sort("title").all()
for try await current in books.observe(books.query().filter(Field("title").hasPrefix("D"))) { print(current.count); break }
try await store.write { tx in                           // one atomic transaction, any collections
    try tx.repository(Book.self).delete(id: dune.id)
}
_ = sixties // scaffold
} // scaffold
} // scaffold
// end of example

// example: README.md #3
enum ReadmeExample3 { // scaffold
struct Shelf: Model {
    var id: Int64?
    var name: String
    static let items = HasMany<Shelf, Item>("items", field: "shelfID")
}

struct Item: Model {
    var id: Int64?
    var shelfID: Int64?
    var title: String
    var pages: Int
    static let shelf = BelongsTo<Item, Shelf>("shelf", field: "shelfID")
    static let references = [shelf.reference(onDelete: .cascade)]   // a shelf's items go with it
}

static func run(_ store: Store) async throws { // scaffold
let shelves = try await store.repository(Shelf.self).query().including(Shelf.items).all()
for shelf in shelves { print(shelf.name, try shelf.related(Shelf.items).map(\.title)) }
let perShelf = try await store.repository(Item.self).query()
    .aggregate([.count(), .sum("pages")], groupBy: ["shelfID"], having: Field("count") >= 2)
try await store.repository(Item.self).update(matching: Field("pages") > 500, FieldChange(set: ["long": true]))
_ = perShelf // scaffold
} // scaffold
} // scaffold
// end of example
