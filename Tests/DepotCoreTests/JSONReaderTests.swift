@testable import DepotCore
import Foundation
import Testing

/// The one JSON reader and writer (``JSONReader``, ``JSONWriter``) behind ``JSONText`` and
/// the JSON-file driver: each behaviour on which the two former readers or writers differed,
/// pinned to the one chosen.
@Suite struct JSONReaderTests {
    static func decodingError(_ text: String, legacy: Bool = false) -> DepotError? {
        do {
            _ = try JSONText.parse(Array(text.utf8), acceptingLegacyBase64: legacy)
            Issue.record("parsed \(text.prefix(40))")
            return nil
        } catch let error as DepotError {
            #expect(error.code == .decoding, "\(text.prefix(40)): \(error)")
            return error
        } catch {
            Issue.record("wrong error \(error)")
            return nil
        }
    }

    /// A store file's reader over `text`.
    static func fileReader<T>(_ text: String, _ body: (inout JSONReader) throws -> T) rethrows -> T {
        let bytes = Array(text.utf8)
        return try bytes.withUnsafeBufferPointer { buffer in
            var reader = JSONReader(buffer, reporting: .file)
            return try body(&reader)
        }
    }

    // MARK: $base64

    @Test func userObjectWithOnlyBase64KeyRoundTripsAsAnObject() throws {
        let value: FieldValue = ["$base64": "aGk="]
        let text = JSONText.serialize(value)
        #expect(text == #"{"$object":{"$base64":"aGk="}}"#)
        #expect(try JSONText.parse(text) == value)
        #expect(try JSONText.parse(Array(text.utf8), acceptingLegacyBase64: true) == value)
        #expect(try JSONText.parse(JSONText.serialize(value, pretty: true)) == value)
        // Nested, and beside other keys (not wrapped there, and never bytes).
        let nested: FieldValue = ["a": ["$base64": "aGk="], "b": ["$base64": "aGk=", "x": 1]]
        #expect(JSONText.serialize(nested) == #"{"a":{"$object":{"$base64":"aGk="}},"b":{"$base64":"aGk=","x":1}}"#)
        #expect(try JSONText.parse(Array(JSONText.serialize(nested).utf8), acceptingLegacyBase64: true) == nested)
    }

    @Test func bareBase64IsBytesOnlyWithTheLegacyFlag() throws {
        let text = #"{"$base64":"aGk="}"#
        #expect(try JSONText.parse(text) == ["$base64": "aGk="])
        #expect(try JSONText.parse(Array(text.utf8)) == ["$base64": "aGk="])
        #expect(try JSONText.parse(Array(text.utf8), acceptingLegacyBase64: true) == .bytes(Data("hi".utf8)))
        #expect(try JSONText.parse(Array(#"[{"$base64":""}]"#.utf8), acceptingLegacyBase64: true) == [.bytes(Data())])
        // With the flag it is a tag like the others: malformed is an error; without it, any value is an object.
        _ = Self.decodingError(#"{"$base64":"%%"}"#, legacy: true)
        _ = Self.decodingError(#"{"$base64":5}"#, legacy: true)
        #expect(try JSONText.parse(#"{"$base64":5}"#) == ["$base64": 5])
        // The store file never reads it as bytes.
        let fromFile = try Self.fileReader(#"{"$base64":"aGk="}"#) { try $0.readValue(depth: 0) }
        #expect(fromFile == ["$base64": "aGk="])
    }

    @Test func writerWrapsEveryTagKey() {
        for key in ["$bytes", "$double", "$object", "$base64"] {
            #expect(JSONText.serialize([key: 1]) == #"{"$object":{"\#(key)":1}}"#)
        }
        #expect(JSONText.serialize(["$other": 1]) == #"{"$other":1}"#)
        #expect(JSONText.serialize(["$bytes": 1, "$double": 2]) == #"{"$bytes":1,"$double":2}"#)
    }

    // MARK: Tags

    /// The store file has always read `"inf"` and `"-inf"`; JSONText reads them too now.
    @Test func infinityAlsoReadAsInf() throws {
        #expect(try JSONText.parse(#"{"$double":"inf"}"#) == .double(.infinity))
        #expect(try JSONText.parse(#"{"$double":"-inf"}"#) == .double(-.infinity))
        #expect(try JSONText.parse(#"{"$double":"-Infinity"}"#) == .double(-.infinity))
        #expect(JSONText.serialize(.double(.infinity)) == #"{"$double":"Infinity"}"#)
        for bad in [#"{"$double":"NaN"}"#, #"{"$double":"nan"}"#, #"{"$double":"INF"}"#, #"{"$double":1}"#] {
            #expect(Self.decodingError(bad)?.message.contains("Infinity") == true)
        }
    }

    /// A one-key object whose key is a tag and whose value is of the wrong kind is an error
    /// (JSONText used to take it for an ordinary object; the writer never produces it).
    @Test func malformedTagsAreErrors() throws {
        #expect(Self.decodingError(#"{"$bytes":5}"#)?.message.contains("base64") == true)
        #expect(Self.decodingError(#"{"$bytes":"%%"}"#)?.message.contains("base64") == true)
        #expect(Self.decodingError(#"{"$object":5}"#)?.message.contains("hold an object") == true)
        #expect(Self.decodingError(#"{"$object":[1]}"#)?.message.contains("hold an object") == true)
        // Beside other keys a tag key is an ordinary key; other `$` keys are never tags.
        #expect(try JSONText.parse(#"{"$bytes":5,"a":1}"#) == ["$bytes": 5, "a": 1])
        #expect(try JSONText.parse(#"{"$object":{"a":1},"b":2}"#) == ["$object": ["a": 1], "b": 2])
        #expect(try JSONText.parse(#"{"$other":5}"#) == ["$other": 5])
        // The escape takes its object as it is: a tag inside is not interpreted.
        #expect(try JSONText.parse(#"{"$object":{"$bytes":"AA=="}}"#) == ["$bytes": "AA=="])
        #expect(try JSONText.parse(#"{"$object" : { "$object" : {"$bytes":"AA=="} } }"#) == ["$object": .bytes(Data([0]))])
    }

    // MARK: Nesting

    /// `{"$object":...}` wrappers are not levels, so a value at the deepest nesting whose
    /// objects all need wrapping reads back (JSONText used to count them and refuse it).
    @Test func wrappersAreNotLevels() throws {
        var value: FieldValue = 1
        for _ in 0..<FieldValue.maximumDepth { value = ["$object": value] }
        let text = JSONText.serialize(value)
        #expect(text.hasPrefix(#"{"$object":{"$object":{"$object":"#))
        #expect(try JSONText.parse(text) == value)
        let fromFile = try Self.fileReader(text) { try $0.readValue(depth: 0) }
        #expect(fromFile == value)
    }

    @Test func depthLimits() throws {
        func nested(_ levels: Int) -> String { String(repeating: "[", count: levels) + "1" + String(repeating: "]", count: levels) }
        _ = try JSONText.parse(nested(JSONText.maximumDepth))
        #expect(Self.decodingError(nested(JSONText.maximumDepth + 1))?.message.contains("nest deeper than \(JSONText.maximumDepth)") == true)
        _ = Self.decodingError(nested(1_000_000))
        _ = Self.decodingError(String(repeating: #"{"a":"#, count: 100_000))
        // The store file's limit is a field value's.
        _ = try Self.fileReader(nested(FieldValue.maximumDepth)) { try $0.readValue(depth: 0) }
        #expect(throws: DepotError.self) { try Self.fileReader(nested(FieldValue.maximumDepth + 1)) { try $0.readValue(depth: 0) } }
    }

    // MARK: Numbers

    /// An integer literal outside Int64 is a typed error, in JSONText and in store files:
    /// never silently the nearest double.
    @Test func integerOverflowIsAnError() throws {
        #expect(try JSONText.parse("9223372036854775807") == .int(.max))
        #expect(try JSONText.parse("-9223372036854775808") == .int(.min))
        for text in ["9223372036854775808", "-9223372036854775809", "100000000000000000000"] {
            #expect(Self.decodingError(text)?.message.contains("does not fit in 64 bits") == true, "\(text)")
        }
        #expect(try JSONText.parse("1e20") == .double(1e20))
        #expect(throws: DepotError.self) { try Self.fileReader("[99999999999999999999]") { try $0.readValue(depth: 0) } }
        #expect(Self.decodingError("1e400")?.message.contains("too large") == true)
        #expect(Self.decodingError("-1" + String(repeating: "0", count: 400))?.message.contains("does not fit in 64 bits") == true)
        #expect(Self.decodingError("-1" + String(repeating: "0", count: 400) + ".0")?.message.contains("too large") == true)
    }

    @Test func negativeZero() throws {
        #expect(try JSONText.parse("-0") == .int(0))
        let double = try JSONText.parse("-0.0")
        if case .double(let d) = double { #expect(d == 0 && d.sign == .minus) } else { Issue.record("\(double)") }
        if case .double(let d) = try JSONText.parse("-0e0") { #expect(d.sign == .minus) } else { Issue.record("-0e0") }
        #expect(JSONText.serialize(.double(-0.0)) == "-0.0")
        #expect(JSONText.serialize(.int(0)) == "0")
    }

    // MARK: Strings and keys

    /// Compact text is what JSONText always wrote (the SQLite driver compares nested values
    /// as this text): control characters other than `\n`, `\r`, `\t`, and DEL, as `\u00XX`.
    @Test func escapes() throws {
        #expect(JSONText.serialize("\u{8}\u{c}\u{7f}\u{0}\u{1f}\n\r\t\"\\/é") == #""\u0008\u000c\u007f\u0000\u001f\n\r\t\"\\/é""#)
        // Readers take the short forms and a raw DEL too.
        #expect(try JSONText.parse(#""\b\f\/\u007F\u007f""#) == "\u{8}\u{c}/\u{7f}\u{7f}")
        #expect(try JSONText.parse([0x22, 0x7F, 0x22]) == "\u{7f}")
        var out: [UInt8] = Array("x".utf8)
        JSONText.writeString("a\u{7f}", into: &out)
        #expect(out == Array(#"x"a\u007f""#.utf8))
    }

    @Test func keysSortedByUTF8Bytes() throws {
        // UTF-16 order would put the emoji (D83D) before U+FFFD; UTF-8 puts it after.
        let value: FieldValue = ["\u{FFFD}": 1, "😀": 2, "a": 3, "Z": 4, "é": 5, "": 6]
        #expect(JSONText.serialize(value) == #"{"":6,"Z":4,"a":3,"é":5,"\#u{FFFD}":1,"😀":2}"#)
    }

    @Test func duplicateKeysAreErrors() throws {
        let error = Self.decodingError("{\"a\":1,\n \"a\":2}")
        #expect(error?.message == "Malformed JSON at line 2, column 2: key 'a' appears twice in one object.")
        #expect(error?.detail == "byte offset 9")
        _ = Self.decodingError(#"{"$object":{"a":1,"a":1}}"#)
        #expect(throws: DepotError.self) { try Self.fileReader(#"{"a":1,"a":1}"#) { try $0.readValue(depth: 0) } }
    }

    // MARK: Text

    /// Compact and pretty layouts, exactly; pretty tags take `": "` like every member.
    @Test func exactLayouts() {
        let value: FieldValue = ["b": [1, 2.5, .bytes(Data([1]))], "a": ["$bytes": "x"], "c": [], "d": [:], "e": .double(-.infinity)]
        #expect(JSONText.serialize(value) == #"{"a":{"$object":{"$bytes":"x"}},"b":[1,2.5,{"$bytes":"AQ=="}],"c":[],"d":{},"e":{"$double":"-Infinity"}}"#)
        #expect(JSONText.serialize(value, pretty: true) == """
            {
              "a": {"$object": {
                "$bytes": "x"
              }},
              "b": [
                1,
                2.5,
                {"$bytes": "AQ=="}
              ],
              "c": [],
              "d": {},
              "e": {"$double": "-Infinity"}
            }
            """)
        var out: [UInt8] = Array("> ".utf8)
        JSONText.write([1], into: &out, pretty: true, indent: 2)
        #expect(String(decoding: out, as: UTF8.self) == "> [\n      1\n    ]")
    }

    /// JSONText's errors: `.decoding`, "Malformed JSON at line L, column C: what.", the byte
    /// offset in the detail (the CLI rewrites the line for JSON Lines).
    @Test func textErrorsNameLineAndColumn() {
        let error = Self.decodingError("[1,\n  2,\n  tru]")
        #expect(error?.message == "Malformed JSON at line 3, column 3: unexpected word.")
        #expect(error?.detail == "byte offset 11")
        #expect(error?.collection == nil)
        #expect(Self.decodingError(#"{"id":3,}"#)?.message == "Malformed JSON at line 1, column 9: expected a quoted key.")
        #expect(Self.decodingError("[1] x")?.message.contains("after the value") == true)
        #expect(Self.decodingError(#"{"a":{"$bytes":"%"}}"#)?.message == #"Malformed JSON at line 1, column 6: a {"$bytes": ...} value must hold a base64 string."#)
    }

    /// The store file's errors: `.corrupted` for text that is not JSON, `.decoding` for what
    /// Depot cannot store, both naming the collection, line, column and byte offset.
    @Test func fileErrorsNameCollectionLineColumnAndByte() throws {
        func failure(_ text: String) -> DepotError? {
            Self.fileReader(text) { reader in
                reader.context = "users"
                do {
                    _ = try reader.readValue(depth: 0)
                    Issue.record("read \(text)")
                    return nil
                } catch let error as DepotError {
                    return error
                } catch {
                    Issue.record("\(error)")
                    return nil
                }
            }
        }
        let syntax = failure("[1,\n  2,\n  tru]")
        #expect(syntax?.code == .corrupted)
        #expect(syntax?.message == "In collection 'users', the file is not valid JSON: unexpected word at line 3, column 3 (byte 11).")
        #expect(syntax?.collection == "users")
        #expect(syntax?.detail == "byte offset 11")
        let value = failure("[\n {\"$double\":\"x\"}]")
        #expect(value?.code == .decoding)
        #expect(value?.message.hasSuffix("(NaN is not stored) at line 2, column 2 (byte 3).") == true, "\(value?.message ?? "")")
        let twice = failure(#"{"a":1,"a":2}"#)
        #expect(twice?.code == .decoding)
        #expect(twice?.message == "In collection 'users', key 'a' appears twice in one object at line 1, column 8 (byte 7).")
    }

    /// Every value survives the writer and the reader, compact and pretty, through JSONText
    /// and through a store file's reader.
    @Test func everyValueRoundTrips() throws {
        let value: FieldValue = [
            "i": .int(.min), "j": .int(.max), "d": 1.0, "z": -0.0, "e": 1e-5, "big": 1e16, "g": .double(.greatestFiniteMagnitude),
            "inf": .double(.infinity), "ninf": .double(-.infinity), "t": .double(.leastNonzeroMagnitude),
            "s": "a\u{0}\u{8}\u{c}\u{7f}b\"\\\n👩‍👩‍👧 e\u{301}\u{2028}", "b": .bytes(Data([0, 255, 1])), "empty": .bytes(Data()),
            "n": nil, "arr": [1, "x", [true], [:], []], "tags": ["$bytes": "x"], "tags2": ["$double": 1], "tags3": ["$base64": "aGk="],
            "tags4": ["$object": ["$object": ["$double": "Infinity"]]], "two": ["$object": ["$bytes": .bytes(Data([1]))], "x": 1],
        ]
        for pretty in [false, true] {
            let text = JSONText.serialize(value, pretty: pretty)
            #expect(try JSONText.parse(text) == value)
            #expect(try JSONText.parse(Array(text.utf8), acceptingLegacyBase64: true) == value)
            #expect(try Self.fileReader(text) { try $0.readValue(depth: 0) } == value)
            var writer = JSONWriter(pretty: pretty)
            writer.value(value, level: 0)
            #expect(writer.bytes == Array(text.utf8))
        }
    }
}
