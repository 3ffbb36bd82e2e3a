import DepotCore
import Foundation
import Testing
@testable import DepotJSONFile

/// What the reader accepts from a person's editor, and how it refuses what it cannot read.
@Suite struct JSONBadInputTests {
    static func decode(_ text: String) throws -> JSONStoreState { try JSONDocument.decode(Array(text.utf8)) }

    static func users(_ state: JSONStoreState) throws -> [RecordID: [String: FieldValue]] {
        try #require(state.collections[try CollectionName("users")]).records
    }

    @Test func jsonServerFileWithoutMetadataOpens() throws {
        let state = try Self.decode("""
            \u{FEFF}{ "users": [ {"id": 2, "name": "Ada", "nick": null}, {"name": "Bob", "id": 1} ],
              "tags": [{"id": "b"}, {"id": "a", "x": 1.5e3}], "empty": [] }
            """)
        #expect(try Self.users(state) == [1: ["name": "Bob"], 2: ["name": "Ada"]])
        #expect(state.collections[try CollectionName("users")]?.schema.idKind == .int)
        #expect(state.collections[try CollectionName("users")]?.lastAssignedID == 2)
        #expect(state.collections[try CollectionName("tags")]?.schema.idKind == .string)
        #expect(state.collections[try CollectionName("tags")]?.records["a"]?["x"] == .double(1500))
        #expect(state.collections[try CollectionName("empty")]?.records.isEmpty == true)
    }

    @Test func emptyFileIsAnEmptyStore() throws {
        #expect(try Self.decode("").collections.isEmpty)
        #expect(try Self.decode(" \n\t").collections.isEmpty)
        #expect(try Self.decode("{}").collections.isEmpty)
    }

    @Test func unicodeEscapes() throws {
        let state = try Self.decode(#"{"users":[{"id":1,"s":"\u00e9\ud83d\ude00\u0000\n\/\"","t":"é😀"}]}"#)
        #expect(try Self.users(state)[1]?["s"] == .string("é😀\u{0}\n/\""))
        #expect(try Self.users(state)[1]?["t"] == .string("é😀"))
    }

    /// Text that is not JSON: `.corrupted`, naming the collection and the place.
    @Test(arguments: [
        (#"{"users":[{"id":1,"a":tru}]}"#, "line 1"),
        ("{\"users\":[\n{\"id\":1},\n{\"id\":2,}\n]}", "line 3, column 9"),
        (#"{"users":[{"id":1,"s":"\ud800"}]}"#, "lone surrogate"),
        (#"{"users":[{"id":1,"s":"\udc00\ud800"}]}"#, "lone surrogate"),
        (#"{"users":[{"id":1,"s":"\x"}]}"#, "escape"),
        ("{\"users\":[{\"id\":1,\"s\":\"a\u{1}\"}]}", "control"),
        (#"{"users":[{"id":1,"n":01}]}"#, "start with 0"),
        (#"{"users":[{"id":1,"n":1.}]}"#, "digits"),
        (#"{"users":[{"id":1}]} x"#, "after"),
        (#"{"users":[{"id":1}]"#, "ends"),
        (#"{"users":[{"id":1,"s":"abc}]}"#, "not closed"),
    ])
    func malformedJSON(text: String, expected: String) async throws {
        let error = await expectError(.corrupted) { _ = try Self.decode(text) }
        #expect(error?.message.contains(expected) == true, "\(error?.message ?? "")")
        if text.contains("\"id\":1,\"") || text.contains("id\":2") {
            #expect(error?.collection == "users")
        }
    }

    @Test func invalidUTF8IsCorrupted() async {
        var bytes = Array(#"{"users":[{"id":1,"s":"a"#.utf8)
        bytes += [0xC3, 0x28]
        bytes += Array(#""}]}"#.utf8)
        let error = await expectError(.corrupted) { _ = try JSONDocument.decode(bytes) }
        #expect(error?.message.contains("UTF-8") == true)
    }

    /// Valid JSON that is not a store: `.decoding`, naming the collection and the place.
    @Test(arguments: [
        (#"[1,2]"#, "one JSON object"),
        (#"{"users":{"id":1}}"#, "array of records"),
        (#"{"users":[1]}"#, "not an object"),
        (#"{"users":[{"name":"x"}]}"#, "no \"id\""),
        (#"{"users":[{"id":1.0}]}"#, "neither an integer nor a string"),
        (#"{"users":[{"id":true}]}"#, "neither an integer nor a string"),
        (#"{"users":[{"id":""}]}"#, "empty"),
        (#"{"users":[{"id":1},{"id":2},{"id":1}]}"#, "two records have id 1"),
        (#"{"users":[{"id":1},{"id":"a"}]}"#, "string id"),
        (#"{"users":[{"id":1,"bad-name":1}]}"#, "not a valid field name"),
        (#"{"users":[{"id":1,"a":1,"a":2}]}"#, "appears twice"),
        (#"{"users":[{"id":1,"n":1e400}]}"#, "too large"),
        (#"{"users":[{"id":1,"b":{"$bytes":"%%%"}}]}"#, "base64"),
        (#"{"users":[{"id":1,"d":{"$double":"nan"}}]}"#, "NaN"),
        (#"{"users":[{"id":1,"o":{"$object":[1]}}]}"#, "hold an object"),
        (#"{"bad name":[]}"#, "not a valid collection name"),
        (#"{"_depot":{"collections":{"users":{"idKind":"uuid"}}},"users":[]}"#, "idKind"),
        (#"{"_depot":{"collections":{"users":{"idKind":"string"}}},"users":[{"id":1}]}"#, "int id"),
        (#"{"_depot":{"collections":{"users":{"idKind":"int","unique":[{"name":"e","fields":["e"]}]}}},"users":[{"id":1,"e":1},{"id":2,"e":1.0}]}"#, "unique constraint 'e'"),
        (#"{"_depot":3}"#, "must be an object"),
    ])
    func wrongShapes(text: String, expected: String) async throws {
        let error = await expectError(.decoding) { _ = try Self.decode(text) }
        #expect(error?.message.contains(expected) == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("line 1, column") == true, "\(error?.message ?? "")")
        if text.contains("users\":[{") { #expect(error?.collection == "users") }
    }

    /// An integer literal beyond Int64 (JavaScript writes 1e20 as `100000000000000000000`)
    /// is refused with a typed error naming the collection and the place, as everywhere Depot
    /// reads JSON: rounding it to a double would change the value without a word.
    @Test func largeIntegerLiteralsAreRefused() async throws {
        for text in [#"{"users":[{"id":1,"n":100000000000000000000}]}"#, #"{"users":[{"id":1,"m":-9223372036854775809}]}"#, #"{"users":[{"id":99999999999999999999}]}"#] {
            let error = await expectError(.decoding) { _ = try Self.decode(text) }
            #expect(error?.message.contains("does not fit in 64 bits") == true, "\(error?.message ?? "")")
            #expect(error?.collection == "users")
        }
        #expect(try Self.users(try Self.decode(#"{"users":[{"id":1,"n":1e20,"m":9223372036854775807}]}"#))[1]?["n"] == .double(1e20))
    }

    /// The whole message: the collection, what is wrong, line, column and byte offset.
    @Test func errorsCarryCollectionLineColumnAndByte() async {
        let syntax = await expectError(.corrupted) { _ = try Self.decode("{\"users\":[\n{\"id\":1},\n{\"id\":2,}\n]}") }
        #expect(syntax?.message == "In collection 'users', the file is not valid JSON: expected a quoted key at line 3, column 9 (byte 29).")
        #expect(syntax?.collection == "users")
        #expect(syntax?.detail == "byte offset 29")
        let value = await expectError(.decoding) { _ = try Self.decode(#"{"users":[{"id":1,"d":{"$double":"nan"}}]}"#) }
        #expect(value?.message == #"In collection 'users', a {"$double": ...} value must be "Infinity" or "-Infinity" (NaN is not stored) at line 1, column 23 (byte 22)."#)
        #expect(value?.detail == "byte offset 22")
        let top = await expectError(.corrupted) { _ = try Self.decode("{\"users\":[]} x") }
        #expect(top?.message == "the file is not valid JSON: unexpected text after the top-level object at line 1, column 14 (byte 13).")
        // `$base64` is not a tag in a store file: an ordinary object.
        let state = try? Self.decode(#"{"users":[{"id":1,"o":{"$base64":"aGk="}}]}"#)
        #expect(state.flatMap { try? Self.users($0)[1]?["o"] } == ["$base64": "aGk="])
    }

    @Test func newerFormatIsASchemaMismatch() async {
        await expectError(.schemaMismatch) { _ = try Self.decode(#"{"_depot":{"format":2},"users":[]}"#) }
    }

    @Test func nestingLimit() async throws {
        func nested(_ levels: Int) -> String {
            String(repeating: "[", count: levels) + "1" + String(repeating: "]", count: levels)
        }
        // Depth 64 below the field is the most a field value may have.
        _ = try Self.decode(#"{"users":[{"id":1,"v":"# + nested(FieldValue.maximumDepth) + "}]}")
        let error = await expectError(.decoding) { _ = try Self.decode(#"{"users":[{"id":1,"v":"# + nested(FieldValue.maximumDepth + 1) + "}]}") }
        #expect(error?.message.contains("nest deeper") == true)
        #expect(error?.collection == "users")
        // A hostile file far deeper than the stack could take fails the same clean way.
        await expectError(.decoding) { _ = try Self.decode(#"{"users":[{"id":1,"v":"# + nested(1_000_000) + "}]}") }
        await expectError(.decoding) { _ = try Self.decode(#"{"users":[{"id":1,"v":"# + String(repeating: #"{"a":"#, count: 100_000)) }
    }
}
