import DepotModelMacrosCore
import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacros
import SwiftSyntaxMacrosTestSupport
import XCTest

/// The macros under their names in DepotModel, with the conformance the extension adds.
let modelMacros: [String: MacroSpec] = [
    "Model": MacroSpec(type: ModelMacro.self, conformances: ["StoredModel"]),
    "ID": MacroSpec(type: PropertyMarkerMacro.self),
    "Unique": MacroSpec(type: PropertyMarkerMacro.self),
    "Indexed": MacroSpec(type: PropertyMarkerMacro.self),
    "Transient": MacroSpec(type: PropertyMarkerMacro.self),
    "Stored": MacroSpec(type: PropertyMarkerMacro.self),
    "Transform": MacroSpec(type: PropertyMarkerMacro.self),
    "Default": MacroSpec(type: PropertyMarkerMacro.self),
]

/// `assertMacroExpansion` with DepotModel's macros (it reports through XCTest, so these
/// tests are XCTest cases).
func expand(_ source: String, _ expanded: String, diagnostics: [DiagnosticSpec] = [], file: StaticString = #filePath, line: UInt = #line) {
    assertMacroExpansion(source, expandedSource: expanded, diagnostics: diagnostics, macroSpecs: modelMacros, file: file, line: line)
}

final class ModelMacroExpansionTests: XCTestCase {
    func testStructWithEveryAttribute() {
        expand(
            """
            @Model(collection: "books", unique: [["author", "title"]], indexes: [["year", "title"]])
            public struct Book {
                @ID public var isbn: String
                var author: String
                var title: String
                @Indexed var year: Int
                @Stored("page_count") @Unique var pages: Int
                @Default(3) var rating: Int
                var subtitle: String?
                var tags: [String]
                @Transform(.millisecondsSince1970) var published: Date?
                @Transient var isSelected = false
                var summary: String { title }
                static let shelf = "A"
            }
            """,
            """
            public struct Book {
                public var isbn: String
                var author: String
                var title: String
                var year: Int
                var pages: Int
                var rating: Int
                var subtitle: String?
                var tags: [String]
                var published: Date?
                var isSelected = false
                var summary: String { title }
                static let shelf = "A"
            }

            extension Book: DepotCore.StoredModel {
                public typealias ID = String
                public static var collectionName: String {
                    "books"
                }
                public static var uniqueConstraints: [DepotCore.UniqueConstraint] {
                    [DepotCore.UniqueConstraint(["page_count"]), DepotCore.UniqueConstraint(["author", "title"])]
                }
                public static var indexes: [DepotCore.IndexDefinition] {
                    [DepotCore.IndexDefinition(["year"]), DepotCore.IndexDefinition(["year", "title"])]
                }
                public var storedRecordID: DepotCore.RecordID? {
                    self.isbn.recordID
                }
                public func encodeRecord(into sink: any DepotCore.FieldSink) throws -> DepotCore.RecordID? {
                    try sink.set(DepotCore.ModelCoding.encode(self.author, field: "author"), forField: "author")
                    try sink.set(DepotCore.ModelCoding.encode(self.title, field: "title"), forField: "title")
                    try sink.set(DepotCore.ModelCoding.encode(self.year, field: "year"), forField: "year")
                    try sink.set(DepotCore.ModelCoding.encode(self.pages, field: "page_count"), forField: "page_count")
                    try sink.set(DepotCore.ModelCoding.encode(self.rating, field: "rating"), forField: "rating")
                    try sink.set(DepotCore.ModelCoding.encode(self.subtitle, field: "subtitle"), forField: "subtitle")
                    try sink.set(DepotCore.ModelCoding.encode(self.tags, field: "tags"), forField: "tags")
                    try sink.set(DepotCore.ModelCoding.encode(self.published, field: "published", with: .millisecondsSince1970), forField: "published")
                    return self.isbn.recordID
                }
                public init(record source: any DepotCore.FieldSource) throws {
                    self.isbn = try ID(recordID: source.recordID)
                    self.author = try DepotCore.ModelCoding.decode(String.self, from: source, field: "author")
                    self.title = try DepotCore.ModelCoding.decode(String.self, from: source, field: "title")
                    self.year = try DepotCore.ModelCoding.decode(Int.self, from: source, field: "year")
                    self.pages = try DepotCore.ModelCoding.decode(Int.self, from: source, field: "page_count")
                    self.rating = try DepotCore.ModelCoding.decodeIfPresent(Int.self, from: source, field: "rating") ?? (3)
                    self.subtitle = try DepotCore.ModelCoding.decodeIfPresent(String.self, from: source, field: "subtitle")
                    self.tags = try DepotCore.ModelCoding.decode([String].self, from: source, field: "tags")
                    self.published = try DepotCore.ModelCoding.decodeIfPresent(Date.self, from: source, field: "published", with: .millisecondsSince1970)
                }
                public func assigningID(_ id: DepotCore.RecordID) throws -> Self {
                    var copy = self
                    copy.isbn = try ID(recordID: id)
                    return copy
                }
            }
            """)
    }

    func testFinalClassGetsItsInitializerAsAMember() {
        expand(
            """
            @Model(collection: "people")
            public final class Person: Sendable {
                @ID let key: UUID
                let name: String
                let nickname: Optional<String>
                @Transient let loadedAt = 0
            }
            """,
            """
            public final class Person: Sendable {
                let key: UUID
                let name: String
                let nickname: Optional<String>
                let loadedAt = 0

                public init(record source: any DepotCore.FieldSource) throws {
                    self.key = try ID(recordID: source.recordID)
                    self.name = try DepotCore.ModelCoding.decode(String.self, from: source, field: "name")
                    self.nickname = try DepotCore.ModelCoding.decodeIfPresent((String).self, from: source, field: "nickname")
                }
            }

            extension Person: DepotCore.StoredModel {
                public typealias ID = UUID
                public static var collectionName: String {
                    "people"
                }
                public var storedRecordID: DepotCore.RecordID? {
                    self.key.recordID
                }
                public func encodeRecord(into sink: any DepotCore.FieldSink) throws -> DepotCore.RecordID? {
                    try sink.set(DepotCore.ModelCoding.encode(self.name, field: "name"), forField: "name")
                    try sink.set(DepotCore.ModelCoding.encode(self.nickname, field: "nickname"), forField: "nickname")
                    return self.key.recordID
                }
                public func assigningID(_ id: DepotCore.RecordID) throws -> Self {
                    try DepotCore.ModelCoding.copy(of: self, withID: id)
                }
            }
            """)
    }

    /// An id named `id`, already conforming: the extension adds no conformance, only members.
    func testAlreadyConformingTypeWithStoreAssignedID() {
        assertMacroExpansion(
            """
            @Model struct Counter: StoredModel {
                var id: Int64?
            }
            """,
            expandedSource: """
            struct Counter: StoredModel {
                var id: Int64?
            }

            extension Counter {
                typealias ID = Int64?
                var storedRecordID: DepotCore.RecordID? {
                    self.id.recordID
                }
                func encodeRecord(into sink: any DepotCore.FieldSink) throws -> DepotCore.RecordID? {
                    return self.id.recordID
                }
                init(record source: any DepotCore.FieldSource) throws {
                    self.id = try ID(recordID: source.recordID)
                }
                func assigningID(_ id: DepotCore.RecordID) throws -> Self {
                    var copy = self
                    copy.id = try ID(recordID: id)
                    return copy
                }
            }
            """,
            macroSpecs: ["Model": MacroSpec(type: ModelMacro.self, conformances: [])])
    }
}
