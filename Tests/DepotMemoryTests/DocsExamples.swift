// Swift examples of Docs/Aggregates.md, Docs/Relations.md, Docs/Models.md (#1 and #3) and
// Docs/ImplementingAStorageDriver.md, compiled here as written. DocExampleTests checks that
// the lines from each "// example:" mark to "// end of example", less the lines ending in
// "// scaffold", are the document's block. Edit the document and this file together.
// The types a block uses without defining them are defined here, outside the marks, as the
// document's text describes them; the statements are compiled inside functions.
import Depot
import DepotConformance
import DepotCore
import Foundation
import Testing

/// Docs/Aggregates.md: posts with optional fields (so that `Post(id:author:)` is an example
/// to match), books with a title and a year.
enum AggregatesDocExamples {
    struct Post: Model {
        var id: Int
        var author: String?
        var published: Bool?
        var views: Int?
        var rating: Double?
        var date: String?
        var draft: Bool?
        var archived: Bool?
    }

    struct Book: Model {
        var id: Int64?
        var title: String
        var year: Int
    }

    struct TitleAndYear: Decodable {
        var title: String
        var year: Int
    }

    static func grouped(_ store: Store, _ posts: Repository<Post>) async throws {
// example: Docs/Aggregates.md #1
// Untyped, as the CLI and the server use it.
let rows = try await store.collection("posts").aggregate(AggregateQuery(
    filter: Field("published") == true,
    groupBy: ["author"],
    aggregates: [.count(), .sum("views"), .average("rating", as: "rating"), .max("date")],
    having: Field("count") >= 2,
    sort: [SortKey("sum_views", descending: true)],
    limit: 10
))
for row in rows { print(row["author"], row["count"], row["sum_views"], row["rating"]) }

// Typed, from a repository query (its filter is the records grouped).
let perAuthor = try await posts.query().filter(Field("published") == true)
    .aggregate([.count(), .sum("views")], groupBy: ["author"], having: Field("count") >= 2)
let total = try await posts.query().sum("views")        // FieldValue: .int, .double or .null
let mean = try await posts.query().average("rating")    // Double?
_ = (perAuthor, total, mean) // scaffold
// end of example
    }

    static func projections(_ store: Store, _ books: Repository<Book>) async throws {
// example: Docs/Aggregates.md #2
let names = try await store.collection("users").query(Query(filter: Field("age") >= 18), selecting: ["name"])
let titles = try await books.query().sort("year").select(["title", "year"], as: TitleAndYear.self)
_ = (names, titles) // scaffold
// end of example
    }

    static func partialUpdates(_ store: Store, _ posts: Repository<Post>) async throws {
// example: Docs/Aggregates.md #3
try await posts.update(id: 7, FieldChange(set: ["views": 10], remove: ["draft"]))
try await store.collection("posts").update(matching: Field("author") == "ada", FieldChange(set: ["archived": true]))
try await posts.update(matching: Post(id: 0, author: "ada"), FieldChange(set: ["archived": true]))  // by example
try await posts.delete(matching: Post(id: 0, author: "ada"))                                         // by example
// end of example
    }
}

/// Docs/Relations.md: the profile and tag types its blocks use.
enum RelationsDocExamples {
// example: Docs/Relations.md #1
struct Author: Model {
    var id: Int?
    var name: String
    static let books = HasMany<Author, Book>("books", field: "authorID")
    static let profile = HasOne<Author, Profile>("profile", field: "authorID")
}

struct Book: Model {
    var id: Int?
    var title: String
    var authorID: Int?
    static let author = BelongsTo<Book, Author>("author", field: "authorID")
    static let tags = ManyToMany<Book, Tag>("tags", through: "book_tags", ownerField: "bookID", targetField: "tagID")
    // Referential integrity, with what deleting an author does to her books:
    static let references = [author.reference(onDelete: .cascade)]
}
// end of example

    struct Profile: Model {
        var id: Int?
        var authorID: Int?
        var bio: String
    }

    struct Tag: Model {
        var id: String
    }

    static func loading(_ store: Store) async throws {
// example: Docs/Relations.md #2
let authors = try await store.repository(Author.self).query()
    .filter(Field("name").hasPrefix("A"))
    .including(Author.books.including(Book.tags), Author.profile)
    .all()                                   // [Loaded<Author>]
for author in authors {
    print(author.name)                       // the model's properties, directly
    for book in try author.related(Author.books) {
        print(book.title, try book.related(Book.tags).map(\.id))
    }
}
// end of example
    }

    static func saving(_ store: Store) async throws {
// example: Docs/Relations.md #3
let graph = Loaded(Author(id: nil, name: "Dee"))
    .with(Author.books, [Loaded(Book(id: nil, title: "One", authorID: nil)).with(Book.tags, [Loaded(Tag(id: "new"))])])
    .with(Author.profile, Loaded(Profile(id: nil, authorID: nil, bio: "…")))
let dee = try await store.repository(Author.self).save(graph: graph)
_ = dee // scaffold
// end of example
    }

// example: Docs/Relations.md #4
struct Note: Model {
    var id: Int
    var text: String?
    var priority: Int?
    static let requiredFields = ["text"]                        // NOT NULL
    static let fieldDefaults: [String: FieldValue] = ["priority": 3]
}
// end of example
}

/// Docs/Models.md #1.
enum ModelsDocExamples {
// example: Docs/Models.md #1
struct User: Model {
    var id: Int64?                  // nil: the store assigns one on insert
    var email: String
    static let uniqueConstraints = [UniqueConstraint(["email"])]
}
// end of example
}

/// `struct Counter { var id: Int64?; var n: Int }`, which Docs/Models.md shows `@Model`
/// expanding into the extension below (written out here instead of the macro).
struct Counter {
    var id: Int64?
    var n: Int
}

// example: Docs/Models.md #3
extension Counter: DepotCore.StoredModel {
    typealias ID = Int64?
    var storedRecordID: DepotCore.RecordID? {
        self.id.recordID
    }
    func encodeRecord(into sink: any DepotCore.FieldSink) throws -> DepotCore.RecordID? {
        try sink.set(DepotCore.ModelCoding.encode(self.n, field: "n"), forField: "n")
        return self.id.recordID
    }
    init(record source: any DepotCore.FieldSource) throws {
        self.id = try ID(recordID: source.recordID)
        self.n = try DepotCore.ModelCoding.decode(Int.self, from: source, field: "n")
    }
    func assigningID(_ id: DepotCore.RecordID) throws -> Self {
        var copy = self
        copy.id = try ID(recordID: id)
        return copy
    }
}
// end of example

/// The driver that Docs/ImplementingAStorageDriver.md calls `MyDriver`: here every call goes
/// to a ``MemoryDriver``, so that the article's registration and conformance test compile
/// and run as written.
final class MyDriver: StorageDriver {
    private let base = MemoryDriver()

    init(path: String, durability: Durability = .full) throws {}

    /// The backend whose transactions run: a query plan names it (`errors.explainNamesBackend`).
    var backendName: String { base.backendName }
    var capabilities: DriverCapabilities { base.capabilities }

    func read<T: Sendable>(_ body: @escaping @Sendable (any ReadTransaction) throws -> T) async throws -> T {
        try await base.read(body)
    }

    @discardableResult
    func write<T: Sendable>(_ body: @escaping @Sendable (any WriteTransaction) throws -> T) async throws -> T {
        try await base.write(body)
    }

    func readBlocking<T>(_ body: (any ReadTransaction) throws -> T) throws -> T { try base.readBlocking(body) }

    @discardableResult
    func writeBlocking<T>(_ body: (any WriteTransaction) throws -> T) throws -> T { try base.writeBlocking(body) }

    func stream(_ query: Query, from collection: CollectionName) -> RecordStream { base.stream(query, from: collection) }

    func integrityCheck() async throws -> [String] { try await base.integrityCheck() }

    func close() async throws { try await base.close() }
}

// example: Docs/ImplementingAStorageDriver.md #1
extension MyDriver {
    public static func register(in registry: inout DriverRegistry) {
        registry.register("mydb") { location in       // "mydb:PATH?option=value"
            try location.rejectUnknownOptions(["durability"])
            return try MyDriver(path: location.path, durability: location.durability())
        }
    }
}
@Test("Docs/ImplementingAStorageDriver.md: a registered driver opens by its store string") func registeredDriverOpens() async throws { // scaffold
var registry = DriverRegistry.standard
MyDriver.register(in: &registry)
let store = try await Store.open("mydb:/data/app", registry: registry)
#expect(store.driver is MyDriver) // scaffold
try await store.close() // scaffold
} // scaffold
// end of example

// example: Docs/ImplementingAStorageDriver.md #2
import DepotConformance
import Testing

// One check at a time: the same checks as MemoryConformanceTests run beside the whole suite. // scaffold
@Suite(.serialized) struct MyDriverConformanceExample { // scaffold
@Test(arguments: Conformance.checkNames)
func conformance(_ name: String) async throws {
    let factory = DriverFactory(name: "mydb") { directory in try MyDriver(path: directory + "/store") }
    if case .notSupported(let missing) = try await Conformance.run(name, factory: factory) {
        withKnownIssue("mydb does not declare \(missing)") { throw ConformanceNotRun() }
    }
}
} // scaffold
// end of example
