import DepotCore
import Foundation
import Testing

@Suite struct JSONTextTests {
    @Test func everyValueRoundTripsExactly() throws {
        let value: FieldValue = [
            "i": .int(.min), "j": .int(.max), "d": 1.0, "z": -0.0, "g": .double(.greatestFiniteMagnitude),
            "inf": .double(.infinity), "ninf": .double(-.infinity), "t": .double(.leastNonzeroMagnitude),
            "s": "a\u{0}b\"\\\n👩‍👩‍👧 e\u{301}", "e": "{}", "b": .bytes(Data([0, 255, 1])), "empty": .bytes(Data()),
            "n": nil, "arr": [1, "x", [true]], "tag": ["$bytes": "not bytes"], "obj": ["k": ["$object": 1]], "two": ["$object": ["$bytes": .bytes(Data([1]))], "x": 1],
        ]
        for pretty in [false, true] {
            let text = JSONText.serialize(value, pretty: pretty)
            let back = try JSONText.parse(text)
            #expect(back == value)
        }
        #expect(JSONText.serialize(1.0) == "1.0")
        #expect(JSONText.serialize(["b": 1, "a": 2]) == #"{"a":2,"b":1}"#)
    }

    @Test func readsWhatOthersWrite() throws {
        #expect(try JSONText.parse(#" {"a": [1, 2.5e1, "\ud83d\ude00\u00e9"], "b": null} "#) == ["a": [1, 25.0, "😀é"], "b": nil])
        #expect(try JSONText.parse("1.2345678901234567e29") == .double(1.2345678901234568e29))
        #expect(throws: DepotError.self) { try JSONText.parse("123456789012345678901234567890") }
    }

    @Test(arguments: ["", "{", "[1,]", "{\"a\" 1}", "tru", "01", "1.", "\"\\x\"", "\"\\ud800\"", "{\"a\":1,\"a\":2}", "[1] x",
                      String(repeating: "[", count: 100) + String(repeating: "]", count: 100), "\"a\u{01}\""])
    func malformedInputIsATypedErrorWithAPosition(_ text: String) {
        do {
            _ = try JSONText.parse(text)
            Issue.record("parsed \(text.prefix(20))")
        } catch let error as DepotError {
            #expect(error.code == .decoding)
            #expect(error.message.contains("line"))
        } catch {
            Issue.record("wrong error \(error)")
        }
    }

    /// Bytes that are not UTF-8 inside a string, plain or after an escape: a typed error, never a repaired string.
    @Test func invalidUTF8InAStringIsADecodingError() throws {
        for bad: [UInt8] in [[0x22, 0xC3, 0x28, 0x22], [0x22, 0x5C, 0x6E, 0xFF, 0x22], [0x22, 0xF0, 0x90, 0x80, 0x41, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22]] {
            #expect(throws: DepotError.self) { try JSONText.parse(bad) }
        }
        #expect(try JSONText.parse([0x22, 0xC3, 0xA9, 0x5C, 0x6E, 0x22]) == .string("é\n"))
    }

    @Test func recordsAsJSONObjects() throws {
        let record = Record(id: 7, fields: ["name": "x"])
        #expect(record.jsonText == #"{"id":7,"name":"x"}"#)
        #expect(try Record(jsonObject: JSONText.parse(record.jsonText)) == record)
        #expect(throws: DepotError.self) { try Record(jsonObject: ["id": 1.5]) }
    }

    /// `JSONText.recordBytes`, which writes a record's JSON from its fields without building
    /// the object, gives the bytes of the object written whole: keys of several scripts and
    /// lengths, every kind of value, a field named `id` (the record id wins), and with the
    /// nulls dropped as a sync state hash drops them.
    @Test func recordBytesAreTheRecordObjectsText() throws {
        var random = SplitMix64(seed: 20261127)
        let keys = ["a", "aa", "a_", "A", "Z", "_x", "é", "e\u{301}", "b2", "b10", "name", "id", "$bytes", "ß", "日本", "zz"]
        let values: [FieldValue] = [
            .null, true, 0, -7, 1.5, -0.0, .double(.infinity), "", "tab\t\"q\"", .bytes(Data([0, 255])),
            ["x", 1, .null], ["$bytes": "not bytes"], ["é": 1, "e": 2, "nested": ["$double": "Infinity"]],
        ]
        for round in 0..<300 {
            var fields: [String: FieldValue] = [:]
            for _ in 0..<Int.random(in: 0...10, using: &random) {
                fields[keys[Int.random(in: 0..<keys.count, using: &random)]] = values[Int.random(in: 0..<values.count, using: &random)]
            }
            let id: RecordID = round.isMultiple(of: 2) ? .int(Int64(round) - 150) : .string("r\(round)é")
            let whole = Array(JSONText.serialize(Record(id: id, fields: fields).jsonObject).utf8)
            #expect(JSONText.recordBytes(id: id, fields: fields) == whole)
            #expect(Array(Record(id: id, fields: fields).jsonText.utf8) == whole)
            let withoutNulls = Array(JSONText.serialize(Record(id: id, fields: fields.filter { !$0.value.isNull }).jsonObject).utf8)
            #expect(JSONText.recordBytes(id: id, fields: fields, droppingNulls: true) == withoutNulls)
        }
    }

    /// Object keys are written in the order of their UTF-8 bytes: a key before the longer
    /// keys it begins, capitals before small letters, other scripts after ASCII.
    @Test func membersSortByUTF8Bytes() {
        let object: [String: FieldValue] = ["é": 1, "f": 3, "ea": 4, "e": 5, "E": 6, "": 7, "日": 8, "_": 9]
        let order = JSONWriter.sortedMembers(object).map(\.key)
        #expect(order == ["", "E", "_", "e", "ea", "f", "é", "日"])
        #expect(Array(JSONText.serialize(.object(object)).utf8) == Array(#"{"":7,"E":6,"_":9,"e":5,"ea":4,"f":3,"é":1,"日":8}"#.utf8))
    }

    /// Keys that share their first eight bytes, differ only past them, hold NUL or other
    /// scripts are written in the order of their UTF-8 bytes, in an object and in a
    /// record's text (each compared with text built here from keys sorted byte by byte).
    @Test func membersSortByUTF8BytesPastTheirPrefix() {
        var random = SplitMix64(seed: 77)
        let pieces = ["a", "ab", "\u{0}", "é", "Z", "longprefix", "longprefiy", "_", "日本", "z"]
        func byBytes(_ a: String, _ b: String) -> Bool { Array(a.utf8).lexicographicallyPrecedes(Array(b.utf8)) }
        func text(_ members: [(String, Int64)]) -> [UInt8] {
            var out: [UInt8] = [0x7B]
            for (n, (key, value)) in members.enumerated() {
                if n > 0 { out.append(0x2C) }
                JSONText.writeString(key, into: &out)
                out.append(0x3A)
                out.append(contentsOf: Array(String(value).utf8))
            }
            out.append(0x7D)
            return out
        }
        for _ in 0..<300 {
            var object: [String: FieldValue] = [:]
            var values: [String: Int64] = [:]
            for n in 0..<Int.random(in: 1...12, using: &random) {
                var key = ""
                for _ in 0..<Int.random(in: 0...3, using: &random) { key += pieces[Int.random(in: 0..<pieces.count, using: &random)] }
                object[key] = .int(Int64(n))
                values[key] = Int64(n)
            }
            let sortedKeys = object.keys.sorted(by: byBytes)
            #expect(JSONWriter.sortedMembers(object).map(\.key) == sortedKeys)
            #expect(Array(JSONText.serialize(.object(object)).utf8) == text(sortedKeys.map { ($0, values[$0] ?? -1) }))
            let withID = (Array(object.keys) + ["id"]).sorted(by: byBytes)
            #expect(JSONText.recordBytes(id: .int(-5), fields: object) == text(withID.map { ($0, $0 == "id" ? -5 : values[$0] ?? -1) }))
        }
    }
}
