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
}
