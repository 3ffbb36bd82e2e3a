import DepotConformance
import DepotGDBM
import DepotJSONFile
import DepotMemory
import DepotModel
import DepotSQLite
import Foundation
import Testing

struct Shelf: Codable, Equatable, Sendable {
    var room: String
    var level: Int
}

enum Genre: String, Codable, Sendable {
    case novel, poetry
}

@Model(collection: "books", unique: [["author", "title"]], indexes: [["year", "title"]])
struct Book: Equatable {
    @ID var isbn: String
    var author: String
    var title: String
    var year: Int
    @Stored("page_count") var pages: Int
    @Default(3) var rating: Int
    var subtitle: String?
    var tags: [String]
    var shelf: Shelf?
    var genre: Genre
    @Unique var slug: String
    @Indexed var price: Double
    @Transform(.millisecondsSince1970) var published: Date
    @Transform(.millisecondsSince1970) var withdrawn: Date?
    @Transient var isSelected = false
}

/// A store-assigned id.
@Model struct Counter: Equatable {
    var id: Int64?
    var n: Int
}

/// A final class with a UUID id under another name.
@Model(collection: "people")
final class Person: Sendable {
    @ID let key: UUID
    let name: String
    let nickname: String?

    init(key: UUID, name: String, nickname: String?) {
        self.key = key
        self.name = name
        self.nickname = nickname
    }
}

/// An encrypted field.
@Model struct Diary {
    var id: Int
    @Transform(.sealed) var entry: String
    @Transform(.sealed) var secret: String?
}

/// A struct with a `let` id and a new property added later (see `modelGainsAProperty`).
@Model(collection: "notes")
struct NoteV1 {
    let id: String
    var text: String
}

@Model(collection: "notes")
struct NoteV2: Equatable {
    let id: String
    var text: String
    @Default([String]()) var labels: [String]
    var color: String?
}

/// Each driver, opened on a fresh directory.
enum Drivers {
    static let names = ["memory", "sqlite", "gdbm", "json"]

    static func open(_ name: String, in directory: String) async throws -> any StorageDriver {
        var registry = DriverRegistry()
        GDBMDriver.register(in: &registry)
        JSONFileDriver.register(in: &registry)
        switch name {
        case "memory": return MemoryDriver()
        case "sqlite": return try await SQLiteDriver(StoreLocation("sqlite:" + directory + "/store.sqlite"))
        case "gdbm": return try await registry.makeDriver("gdbm:" + directory + "/store")
        default: return try await registry.makeDriver("json:" + directory + "/db.json")
        }
    }

    /// Runs `body` with a store on driver `name`, removing its directory afterwards.
    static func withStore(_ name: String, _ body: (Store, any StorageDriver) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("depot-model-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let driver = try await open(name, in: directory)
        let store = try await Store(driver: driver)
        do {
            try await body(store, driver)
        } catch {
            try await driver.close()
            throw error
        }
        try await driver.close()
    }
}

func sampleBook(_ n: Int) -> Book {
    Book(
        isbn: "isbn-\(n)", author: "Author \(n % 2)", title: "Title \(n)", year: 1990 + n, pages: 100 * n, rating: 5,
        subtitle: n.isMultiple(of: 2) ? "Sub \(n)" : nil, tags: ["t\(n)", "x"], shelf: n.isMultiple(of: 2) ? Shelf(room: "A", level: n) : nil,
        genre: n.isMultiple(of: 2) ? .novel : .poetry, slug: "slug-\(n)", price: Double(n) + 0.25,
        published: Date(timeIntervalSince1970: 1_700_000_000.123 + Double(n)), withdrawn: nil, isSelected: true)
}

func raw(_ driver: any StorageDriver, _ id: RecordID, _ collection: String) async throws -> Record? {
    let name = try CollectionName(collection)
    return try await driver.read { tx in try tx.get(id, from: name) }
}

@Suite struct ModelMacroTests {
    @Test(arguments: Drivers.names)
    func storesExactlyTheDeclaredFields(_ driverName: String) async throws {
        try await Drivers.withStore(driverName) { store, driver in
            let books = try await store.repository(Book.self)
            let book = sampleBook(2)
            try await books.save(book)
            let record = try #require(try await raw(driver, "isbn-2", "books"))
            let published = Int64((book.published.timeIntervalSince1970 * 1000).rounded(.down))
            let expected: [String: FieldValue] = [
                "author": "Author 0", "title": "Title 2", "year": 1992, "page_count": 200, "rating": 5, "subtitle": "Sub 2",
                "tags": ["t2", "x"], "shelf": ["room": "A", "level": 2], "genre": "novel", "slug": "slug-2", "price": 2.25,
                "published": .int(published),
            ]
            #expect(record.fields == expected)
            var found = try #require(try await books.find(id: "isbn-2"))
            #expect(found.isSelected == false, "a transient property has its initial value when read")
            found.isSelected = true
            var saved = book
            saved.published = Date(timeIntervalSince1970: Double(published) / 1000)
            #expect(found == saved)
            // The stored name is what queries use.
            #expect(try await books.query().filter(Field("page_count") >= 200).all().map(\.isbn) == ["isbn-2"])
        }
    }

    @Test(arguments: Drivers.names)
    func schemaComesFromTheAttributes(_ driverName: String) async throws {
        try await Drivers.withStore(driverName) { store, _ in
            _ = try await store.repository(Book.self)
            let schema = try #require(try await store.collection("books").schema())
            #expect(schema.idKind == .string)
            #expect(schema.uniqueConstraints == [UniqueConstraint(["slug"]), UniqueConstraint(["author", "title"])])
            #expect(Set(schema.indexes) == [IndexDefinition(["price"]), IndexDefinition(["year", "title"])])
        }
    }

    @Test(arguments: Drivers.names)
    func uniqueConstraintsAreEnforced(_ driverName: String) async throws {
        try await Drivers.withStore(driverName) { store, _ in
            let books = try await store.repository(Book.self)
            _ = try await books.insert(sampleBook(1))
            var sameSlug = sampleBook(3)
            sameSlug.slug = "slug-1"
            await #expect(throws: DepotError.self) { _ = try await books.insert(sameSlug) }
            var sameTitle = sampleBook(3)
            sameTitle.title = "Title 1"
            sameTitle.author = "Author 1"
            do {
                _ = try await books.insert(sameTitle)
                Issue.record("a second book by the same author with the same title was accepted")
            } catch let error as DepotError {
                #expect(error.code == .uniqueViolation)
                #expect(error.constraint == "author_title_unique")
            }
            // Upsert on the compound key keeps the stored id.
            var replacement = sampleBook(5)
            replacement.author = "Author 1"
            replacement.title = "Title 1"
            let upserted = try await books.upsert(replacement, uniqueOn: "author_title_unique")
            #expect(upserted.isbn == "isbn-1")
            #expect(try await books.count() == 1)
        }
    }

    @Test(arguments: Drivers.names)
    func missingFieldsTakeTheirDefaultOrNil(_ driverName: String) async throws {
        try await Drivers.withStore(driverName) { store, driver in
            let books = try await store.repository(Book.self)
            let collection = try CollectionName("books")
            var book = sampleBook(1)
            book.withdrawn = Date(timeIntervalSince1970: 5)
            try await books.save(book)
            var fields = try #require(try await raw(driver, "isbn-1", "books")).fields
            #expect(fields["rating"] != nil && fields["withdrawn"] == 5000)
            fields["rating"] = nil
            fields["subtitle"] = nil
            fields["shelf"] = nil
            fields["withdrawn"] = nil
            let stripped = Record(id: "isbn-9", fields: fields.merging(["slug": "slug-9", "title": "Title 9"]) { $1 })
            try await driver.write { tx in try tx.insert(stripped, into: collection) }
            let found = try #require(try await books.find(id: "isbn-9"))
            #expect(found.rating == 3, "@Default(3) fills a missing field")
            #expect(found.subtitle == nil && found.shelf == nil)
            #expect(found.withdrawn == nil)
        }
    }

    @Test func decodingErrorsNameTheFieldCollectionAndID() async throws {
        try await Drivers.withStore("memory") { store, driver in
            let books = try await store.repository(Book.self)
            try await books.save(sampleBook(1))
            var record = try #require(try await raw(driver, "isbn-1", "books"))
            record.fields["year"] = "nineteen ninety"
            let broken = record
            try await driver.write { tx in try tx.update(broken, in: try CollectionName("books")) }
            do {
                _ = try await books.find(id: "isbn-1")
                Issue.record("a string was read as an Int")
            } catch let error as DepotError {
                #expect(error.code == .decoding)
                #expect(error.message.contains("'year'"))
                #expect(error.collection == "books")
                #expect(error.id == "isbn-1")
            }
            record.fields["year"] = nil
            let missing = record
            try await driver.write { tx in try tx.update(missing, in: try CollectionName("books")) }
            do {
                _ = try await books.find(id: "isbn-1")
                Issue.record("a missing required field was read")
            } catch let error as DepotError {
                #expect(error.code == .decoding)
                #expect(error.message.contains("'year'"))
            }
        }
    }

    @Test(arguments: Drivers.names)
    func storeAssignedIDs(_ driverName: String) async throws {
        try await Drivers.withStore(driverName) { store, _ in
            let counters = try await store.repository(Counter.self)
            let first = try await counters.insert(Counter(id: nil, n: 10))
            let second = try await counters.insert(Counter(id: nil, n: 20))
            #expect(first == Counter(id: 1, n: 10))
            #expect(second == Counter(id: 2, n: 20))
            #expect(try await counters.find(id: 2) == second)
            #expect(try await store.collection("Counter").schema()?.idKind == .int)
        }
    }

    @Test(arguments: Drivers.names)
    func finalClassModels(_ driverName: String) async throws {
        try await Drivers.withStore(driverName) { store, driver in
            let people = try await store.repository(Person.self)
            let key = UUID()
            try await people.save(Person(key: key, name: "Ada", nickname: nil))
            let record = try #require(try await raw(driver, .string(key.uuidString), "people"))
            #expect(record.fields == ["name": "Ada"])
            let found = try #require(try await people.find(id: key))
            #expect(found.key == key && found.name == "Ada" && found.nickname == nil)
            let other = UUID()
            let moved = try Person(key: key, name: "Ada", nickname: "A").assigningID(.string(other.uuidString))
            #expect(moved.key == other && moved.nickname == "A")
        }
    }

    @Test(arguments: Drivers.names)
    func encryptedFieldsAreStoredSealed(_ driverName: String) async throws {
        try await Drivers.withStore(driverName) { store, driver in
            let diaries = try await store.repository(Diary.self)
            try await diaries.save(Diary(id: 1, entry: "dear diary", secret: nil))
            try await diaries.save(Diary(id: 2, entry: "dear diary", secret: "hidden"))
            let first = try #require(try await raw(driver, 1, "Diary"))
            let second = try #require(try await raw(driver, 2, "Diary"))
            let sealedFirst = try #require(first.fields["entry"]?.bytesValue)
            let sealedSecond = try #require(second.fields["entry"]?.bytesValue)
            #expect(sealedFirst.count == 12 + "dear diary".utf8.count)
            #expect(sealedFirst != sealedSecond, "each value gets its own nonce")
            #expect(!sealedFirst.elementsEqual(Data("dear diary".utf8)) && !Data(sealedFirst.dropFirst(12)).elementsEqual(Data("dear diary".utf8)))
            #expect(first.fields["secret"] == nil)
            let read = try #require(try await diaries.find(id: 2))
            #expect(read.entry == "dear diary" && read.secret == "hidden")
            #expect(try await diaries.find(id: 1)?.secret == nil)
        }
    }

    @Test(arguments: Drivers.names)
    func modelGainsAProperty(_ driverName: String) async throws {
        try await Drivers.withStore(driverName) { store, _ in
            try await store.repository(NoteV1.self).save(NoteV1(id: "n1", text: "old"))
            let notes = try await store.repository(NoteV2.self)
            #expect(try await notes.find(id: "n1") == NoteV2(id: "n1", text: "old", labels: [], color: nil))
            try await notes.save(NoteV2(id: "n2", text: "new", labels: ["a"], color: "red"))
            #expect(try await notes.find(id: "n2") == NoteV2(id: "n2", text: "new", labels: ["a"], color: "red"))
            // A `let` id is reassigned by re-encoding (upsert returns the stored id).
            let moved = try NoteV2(id: "n2", text: "x", labels: [], color: nil).assigningID("n3")
            #expect(moved == NoteV2(id: "n3", text: "x", labels: [], color: nil))
        }
    }
}
