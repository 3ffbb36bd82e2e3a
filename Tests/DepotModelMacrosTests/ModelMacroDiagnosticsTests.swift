import DepotModelMacrosCore
import SwiftSyntaxMacrosTestSupport
import XCTest

/// Every rule the macro enforces, each with the message and the place it points at. A
/// declaration it refuses gets no expansion at all.
final class ModelMacroDiagnosticsTests: XCTestCase {
    func testOnlyStructsAndFinalClasses() {
        let cases: [(String, String, String)] = [
            ("enum", "case a", "an enum"),
            ("protocol", "var a: Int { get }", "a protocol"),
            ("actor", "var id: Int = 0", "an actor"),
            ("class", "var id: Int = 0", "a class that is not final"),
        ]
        for (keyword, member, kind) in cases {
            expand(
                "@Model\n\(keyword) T {\n    \(member)\n}",
                "\(keyword) T {\n    \(member)\n}",
                diagnostics: [DiagnosticSpec(message: "@Model applies to a struct or a final class, not \(kind)", line: 1, column: 1)])
        }
    }

    func testNoIDAndTwoIDs() {
        expand(
            """
            @Model
            struct Tag {
                var name: String
            }
            """,
            """
            struct Tag {
                var name: String
            }
            """,
            diagnostics: [DiagnosticSpec(message: "Tag has no id: mark one property @ID, or name it 'id'", line: 2, column: 8)])
        expand(
            """
            @Model
            struct Tag {
                @ID var key: String
                @ID var other: String
            }
            """,
            """
            struct Tag {
                var key: String
                var other: String
            }
            """,
            diagnostics: [DiagnosticSpec(message: "'other' is a second id; 'key' is already the id", line: 4, column: 13)])
    }

    func testIDRules() {
        expand(
            """
            @Model
            struct Tag {
                let id: Int64?
                @Transform(.millisecondsSince1970) var when: Date
            }
            """,
            """
            struct Tag {
                let id: Int64?
                var when: Date
            }
            """,
            diagnostics: [DiagnosticSpec(message: "the id 'id' is assigned by the store on insert, so it must be 'var'", line: 3, column: 9)])
        expand(
            """
            @Model
            struct Tag {
                @ID @Transform(.sealed) var key: String
            }
            """,
            """
            struct Tag {
                var key: String
            }
            """,
            diagnostics: [DiagnosticSpec(message: "@Transform does not apply to the id, which is the record id and not a field", line: 3, column: 9)])
        expand(
            """
            @Model
            struct Tag {
                var id: Double
                var id2: String?
            }
            """,
            """
            struct Tag {
                var id: Double
                var id2: String?
            }
            """,
            diagnostics: [DiagnosticSpec(message: "the id 'id' is a Double; an id must be String, Int, Int64, UUID, Int? or Int64?", line: 3, column: 13)])
    }

    func testPropertyRules() {
        expand(
            """
            @Model
            struct Tag {
                var id: Int
                var name = "x"
                @Transient var cache: Int
                @Unique var upper: String { "X" }
                @Indexed static var count = 0
                let kind = "tag"
                @Transient @Stored("c") var scratch = 0
            }
            """,
            """
            struct Tag {
                var id: Int
                var name = "x"
                var cache: Int
                var upper: String { "X" }
                static var count = 0
                let kind = "tag"
                var scratch = 0
            }
            """,
            diagnostics: [
                DiagnosticSpec(message: "'name' needs a type annotation: @Model reads the type as written", line: 4, column: 9),
                DiagnosticSpec(message: "@Transient 'cache' needs an initial value, used when a model is read", line: 5, column: 20),
                DiagnosticSpec(message: "@Unique does not apply to 'upper', a computed property, which is not stored", line: 6, column: 5),
                DiagnosticSpec(message: "@Indexed does not apply to 'count', a static property, which is not stored", line: 7, column: 5),
                DiagnosticSpec(
                    message: "'kind' is a 'let' with an initial value, so it cannot be read from a record: make it 'var' or mark it @Transient",
                    line: 8, column: 9),
                DiagnosticSpec(message: "@Stored does not apply to 'scratch', which is @Transient and not stored", line: 9, column: 16),
            ])
    }

    func testStoredNames() {
        let rule = "is not a valid field name: use 1 to 63 ASCII letters, digits or '_', not starting with a digit, not 'id', not starting with '_depot'; choose another with @Stored(\"name\")"
        expand(
            """
            @Model
            struct Tag {
                @ID var key: String
                @Stored("_depot_x") var a: Int
                @Stored("1b") var b: Int
                var id: Int
                var _depotC: Int
                @Stored("d") var e: Int
                var d: Int
            }
            """,
            """
            struct Tag {
                var key: String
                var a: Int
                var b: Int
                var id: Int
                var _depotC: Int
                var e: Int
                var d: Int
            }
            """,
            diagnostics: [
                DiagnosticSpec(message: "'_depot_x' (stored name of 'a') \(rule)", line: 4, column: 5),
                DiagnosticSpec(message: "'1b' (stored name of 'b') \(rule)", line: 5, column: 5),
                DiagnosticSpec(message: "'id' (stored name of 'id') \(rule)", line: 6, column: 9),
                DiagnosticSpec(message: "'_depotC' (stored name of '_depotC') \(rule)", line: 7, column: 9),
                DiagnosticSpec(message: "'d' is stored as 'd', like 'e'", line: 9, column: 9),
            ])
    }

    func testTypeLevelLists() {
        expand(
            """
            @Model(collection: "1books", unique: [["nme"], ["title", "title"]], indexes: [["id"], ["cache"], []])
            struct Book {
                var id: Int
                var title: String
                @Transient var cache = 0
            }
            """,
            """
            struct Book {
                var id: Int
                var title: String
                var cache = 0
            }
            """,
            diagnostics: [
                DiagnosticSpec(message: "'1books' is not a valid collection name: use 1 to 63 ASCII letters, digits or '_', starting with a letter", line: 1, column: 20),
                DiagnosticSpec(message: "indexes holds an empty list of fields", line: 1, column: 98),
                DiagnosticSpec(message: "unique names 'nme', which is not a stored property of this type", line: 1, column: 40),
                DiagnosticSpec(message: "unique names 'title' twice in one list", line: 1, column: 58),
                DiagnosticSpec(message: "indexes names 'id', which is the id, the record id and not a field", line: 1, column: 80),
                DiagnosticSpec(message: "indexes names 'cache', which is @Transient and not stored", line: 1, column: 88),
            ])
        expand(
            """
            @Model(collection: name, unique: fields)
            struct Book {
                var id: Int
            }
            """,
            """
            struct Book {
                var id: Int
            }
            """,
            diagnostics: [
                DiagnosticSpec(message: "collection must be written as a literal", line: 1, column: 20),
                DiagnosticSpec(message: "unique must be written as a literal", line: 1, column: 34),
            ])
    }
}
