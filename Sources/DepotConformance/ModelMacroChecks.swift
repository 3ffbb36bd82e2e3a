import DepotCore
import Foundation

/// A nested Codable value, stored through ``RecordEncoder`` by both types.
struct ModelShelf: Codable, Sendable, Equatable {
    var room: String
    var levels: [Int]
}

// MODEL INPUT BEGIN
// @Model(collection: "macro_shaped", unique: [["author", "title"]], indexes: [["year", "title"]])
// struct MacroShaped {
//     @ID var key: UUID
//     var author: String
//     var title: String
//     var year: Int
//     @Stored("page_count") var pages: Int
//     @Default(3) var rating: Int
//     @Unique var slug: String
//     @Indexed var score: Double
//     var subtitle: String?
//     var tags: [String]
//     var shelf: ModelShelf?
//     var cover: Data?
// }
// MODEL INPUT END

// MODEL EXPANSION BEGIN
struct MacroShaped {
    var key: UUID
    var author: String
    var title: String
    var year: Int
    var pages: Int
    var rating: Int
    var slug: String
    var score: Double
    var subtitle: String?
    var tags: [String]
    var shelf: ModelShelf?
    var cover: Data?
}

extension MacroShaped: DepotCore.StoredModel {
    typealias ID = UUID
    static var collectionName: String {
        "macro_shaped"
    }
    static var uniqueConstraints: [DepotCore.UniqueConstraint] {
        [DepotCore.UniqueConstraint(["slug"]), DepotCore.UniqueConstraint(["author", "title"])]
    }
    static var indexes: [DepotCore.IndexDefinition] {
        [DepotCore.IndexDefinition(["score"]), DepotCore.IndexDefinition(["year", "title"])]
    }
    var storedRecordID: DepotCore.RecordID? {
        self.key.recordID
    }
    func encodeRecord(into sink: any DepotCore.FieldSink) throws -> DepotCore.RecordID? {
        try sink.set(DepotCore.ModelCoding.encode(self.author, field: "author"), forField: "author")
        try sink.set(DepotCore.ModelCoding.encode(self.title, field: "title"), forField: "title")
        try sink.set(DepotCore.ModelCoding.encode(self.year, field: "year"), forField: "year")
        try sink.set(DepotCore.ModelCoding.encode(self.pages, field: "page_count"), forField: "page_count")
        try sink.set(DepotCore.ModelCoding.encode(self.rating, field: "rating"), forField: "rating")
        try sink.set(DepotCore.ModelCoding.encode(self.slug, field: "slug"), forField: "slug")
        try sink.set(DepotCore.ModelCoding.encode(self.score, field: "score"), forField: "score")
        try sink.set(DepotCore.ModelCoding.encode(self.subtitle, field: "subtitle"), forField: "subtitle")
        try sink.set(DepotCore.ModelCoding.encode(self.tags, field: "tags"), forField: "tags")
        try sink.set(DepotCore.ModelCoding.encode(self.shelf, field: "shelf"), forField: "shelf")
        try sink.set(DepotCore.ModelCoding.encode(self.cover, field: "cover"), forField: "cover")
        return self.key.recordID
    }
    init(record source: any DepotCore.FieldSource) throws {
        self.key = try ID(recordID: source.recordID)
        self.author = try DepotCore.ModelCoding.decode(String.self, from: source, field: "author")
        self.title = try DepotCore.ModelCoding.decode(String.self, from: source, field: "title")
        self.year = try DepotCore.ModelCoding.decode(Int.self, from: source, field: "year")
        self.pages = try DepotCore.ModelCoding.decode(Int.self, from: source, field: "page_count")
        self.rating = try DepotCore.ModelCoding.decodeIfPresent(Int.self, from: source, field: "rating") ?? (3)
        self.slug = try DepotCore.ModelCoding.decode(String.self, from: source, field: "slug")
        self.score = try DepotCore.ModelCoding.decode(Double.self, from: source, field: "score")
        self.subtitle = try DepotCore.ModelCoding.decodeIfPresent(String.self, from: source, field: "subtitle")
        self.tags = try DepotCore.ModelCoding.decode([String].self, from: source, field: "tags")
        self.shelf = try DepotCore.ModelCoding.decodeIfPresent(ModelShelf.self, from: source, field: "shelf")
        self.cover = try DepotCore.ModelCoding.decodeIfPresent(Data.self, from: source, field: "cover")
    }
    func assigningID(_ id: DepotCore.RecordID) throws -> Self {
        var copy = self
        copy.key = try ID(recordID: id)
        return copy
    }
}
// MODEL EXPANSION END

/// The same model written as a Codable ``Model``, as one would without the macro.
struct CodableShaped: Model {
    static let collectionName = "codable_shaped"
    static let uniqueConstraints = [UniqueConstraint(["slug"]), UniqueConstraint(["author", "title"])]
    static let indexes = [IndexDefinition(["score"]), IndexDefinition(["year", "title"])]
    var id: UUID
    var author: String
    var title: String
    var year: Int
    var pages: Int
    var rating: Int
    var slug: String
    var score: Double
    var subtitle: String?
    var tags: [String]
    var shelf: ModelShelf?
    var cover: Data?

    enum CodingKeys: String, CodingKey {
        case id, author, title, year, pages = "page_count", rating, slug, score, subtitle, tags, shelf, cover
    }

    init(_ m: MacroShaped) {
        (id, author, title, year, pages, rating, slug) = (m.key, m.author, m.title, m.year, m.pages, m.rating, m.slug)
        (score, subtitle, tags, shelf, cover) = (m.score, m.subtitle, m.tags, m.shelf, m.cover)
    }

    /// Synthesized decoding, except that a missing `rating` is 3 (what `@Default(3)` does).
    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(UUID.self, forKey: .id)
        author = try c.decode(String.self, forKey: .author)
        title = try c.decode(String.self, forKey: .title)
        year = try c.decode(Int.self, forKey: .year)
        pages = try c.decode(Int.self, forKey: .pages)
        rating = try c.decodeIfPresent(Int.self, forKey: .rating) ?? 3
        slug = try c.decode(String.self, forKey: .slug)
        score = try c.decode(Double.self, forKey: .score)
        subtitle = try c.decodeIfPresent(String.self, forKey: .subtitle)
        tags = try c.decode([String].self, forKey: .tags)
        shelf = try c.decodeIfPresent(ModelShelf.self, forKey: .shelf)
        cover = try c.decodeIfPresent(Data.self, forKey: .cover)
    }
}

/// A `@Model` type and the equivalent `Codable` ``Model`` store identical records through a
/// ``Store`` on the driver under test, and each reads the other's (Docs/Models.md).
///
/// This library must not depend on DepotModel (the `depot` executable links it and must not
/// build swift-syntax), so ``MacroShaped`` is the macro's expansion of the declaration in the
/// comment above it, written out. DepotModelMacrosTests expands that comment with the real
/// macro and requires the text between the EXPANSION markers, exactly: the two cannot drift.
enum ModelMacroChecks {

    /// Whether the two hold the same values (doubles to the bit).
    static func same(_ m: MacroShaped, _ c: CodableShaped) -> Bool {
        m.key == c.id && m.author == c.author && m.title == c.title && m.year == c.year && m.pages == c.pages && m.rating == c.rating
            && m.slug == c.slug && m.score.bitPattern == c.score.bitPattern && m.subtitle == c.subtitle && m.tags == c.tags
            && m.shelf == c.shelf && m.cover == c.cover
    }

    /// Models with every optional both present and absent, and awkward values.
    static func samples() -> [MacroShaped] {
        [
            MacroShaped(
                key: UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)), author: "Ada", title: "Notes", year: 1843, pages: 65,
                rating: 5, slug: "notes", score: -0.0, subtitle: "On the Analytical Engine", tags: ["math", ""], shelf: ModelShelf(room: "A", levels: [1, 2]),
                cover: Data([0, 255, 7])),
            MacroShaped(
                key: UUID(uuid: (16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1)), author: "Ada", title: "Letters\u{0}two", year: -1, pages: 0,
                rating: Int.min, slug: "👩‍👩‍👧‍👦", score: .infinity, subtitle: nil, tags: [], shelf: nil, cover: nil),
            MacroShaped(
                key: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)), author: "Bo", title: "Notes", year: Int.max, pages: Int.min,
                rating: 0, slug: "e\u{301}", score: .leastNonzeroMagnitude, subtitle: "", tags: ["x"], shelf: ModelShelf(room: "", levels: []), cover: Data()),
        ]
    }

    static let all: [ConformanceCheck] = [
        .driver("modelMacro.sameRecordsAsCodable", requires: .uniqueConstraints) { driver, expect in
            let store = try await Store(driver: driver)
            let macroRepository = try await store.repository(MacroShaped.self)
            let codableRepository = try await store.repository(CodableShaped.self)
            for model in samples() {
                try await macroRepository.save(model)
                try await codableRepository.save(CodableShaped(model))
            }
            let macroCollection = try MacroShaped.collection(), codableCollection = try CodableShaped.collection()
            for model in samples() {
                let id = RecordID.string(model.key.uuidString)
                guard let macroRecord = try await driver.record(id, in: macroCollection) else { throw expect.failure("the @Model record \(id) is missing") }
                let codableRecord = try await driver.record(id, in: codableCollection)
                try expect.sameRecord(macroRecord, codableRecord ?? Record(id: id), "the @Model record equals the Codable one")
                try expect.that(macroRecord.fields.values.allSatisfy { !$0.isNull }, "no top-level null is stored")
                let asCodable = try RecordDecoder().decode(CodableShaped.self, from: macroRecord)
                try expect.that(same(model, asCodable), "the @Model record read as the Codable type gives the same values")
                if let codableRecord {
                    let asMacro = try MacroShaped(record: RecordFieldSource(codableRecord))
                    try expect.that(same(asMacro, CodableShaped(model)), "the Codable record read as the @Model type gives the same values")
                }
                let found = try await macroRepository.find(id: model.key)
                try expect.that(found.map { same($0, CodableShaped(model)) } ?? false, "the @Model repository reads back what it saved")
            }
            let macroSchema = try await driver.read { tx in try tx.schema(of: macroCollection) }
            let codableSchema = try await driver.read { tx in try tx.schema(of: codableCollection) }
            try expect.equal(macroSchema?.uniqueConstraints, codableSchema?.uniqueConstraints, "the same unique constraints")
            try expect.equal(macroSchema.map { Set($0.indexes) }, codableSchema.map { Set($0.indexes) }, "the same indexes")
        },
        .driver("modelMacro.missingFieldsReadAlike", requires: .uniqueConstraints) { driver, expect in
            let store = try await Store(driver: driver)
            let macroRepository = try await store.repository(MacroShaped.self)
            let codableRepository = try await store.repository(CodableShaped.self)
            // A record written before `rating`, `subtitle`, `shelf` and `cover` existed.
            let old = Record(id: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F", fields: [
                "author": "Cy", "title": "Old", "year": 1999.0, "page_count": 10, "slug": "old", "score": 2, "tags": ["t"],
            ])
            try await driver.seed([old], into: try MacroShaped.collection())
            try await driver.seed([old], into: try CodableShaped.collection())
            let key = UUID(uuid: (0xE6, 0x21, 0xE1, 0xF8, 0xC3, 0x6C, 0x49, 0x5A, 0x93, 0xFC, 0x0C, 0x24, 0x7A, 0x3E, 0x6E, 0x5F))
            guard let viaMacro = try await macroRepository.find(id: key), let viaCodable = try await codableRepository.find(id: key) else {
                throw expect.failure("the old record was not found by id")
            }
            try expect.that(same(viaMacro, viaCodable), "both types read the old record alike (integral double into Int, Int into Double)")
            try expect.equal(viaMacro.rating, 3, "@Default(3) fills the missing rating")
            try expect.that(viaMacro.subtitle == nil && viaMacro.shelf == nil && viaMacro.cover == nil, "missing optionals are nil")
            try expect.equal(viaMacro.score.bitPattern, Double(2).bitPattern, "an integer read into a Double")
        },
    ]
}
