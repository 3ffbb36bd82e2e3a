import DepotCore
import Foundation
import Testing
@testable import DepotJSONFile

/// Every field value survives the file exactly, pretty or not.
@Suite struct JSONValueRoundTripTests {
    static let awkwardValues: [String: FieldValue] = [
        "intMin": .int(.min), "intMax": .int(.max), "zero": .int(0), "minusOne": .int(-1),
        "negZero": .double(-0.0), "posZero": .double(0.0), "one": .double(1.0), "tenth": .double(0.1),
        "big": .double(.greatestFiniteMagnitude), "tiny": .double(.leastNonzeroMagnitude),
        "negBig": .double(-.greatestFiniteMagnitude), "e16": .double(1e16), "intLike": .double(9_007_199_254_740_992),
        "inf": .double(.infinity), "negInf": .double(-.infinity),
        "t": .bool(true), "f": .bool(false),
        "nul": .string("a\u{0}b"), "emoji": .string("👩‍👩‍👧‍👦🇫🇷"), "combining": .string("e\u{301}\u{327}"),
        "controls": .string("\u{1}\u{1f}\n\r\t\u{8}\u{c}\u{7f}"), "quotes": .string("\"\\/\u{2028}\u{2029}"),
        "emptyString": .string(""), "braces": .string("{}"), "tagText": .string("{\"$bytes\":\"AA==\"}"),
        "emptyBytes": .bytes(Data()), "bytes": .bytes(Data([0, 1, 2, 255, 254])),
        "largeBytes": .bytes(Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })),
        "emptyArray": .array([]), "emptyObject": .object([:]),
        "mixed": .array([.null, .bool(true), .int(1), .double(1), .string("1"), .bytes(Data([1])), .array([]), .object([:])]),
        "nested": .object(["a": .object(["b": .array([.object(["c": .null])])]), "": .string("empty key"), "é": .int(1)]),
        "tagBytes": .object(["$bytes": .string("not base64 !")]),
        "tagDouble": .object(["$double": .int(1)]),
        "tagObject": .object(["$object": .object(["$bytes": .string("x")])]),
        "tagObjectNested": .object(["$object": .object(["$object": .object(["$double": .string("Infinity")])])]),
        "tagAmongOthers": .object(["$object": .object(["$bytes": .string("??")]), "b": .int(2)]),
        "tagAmongOthers2": .object(["$bytes": .bytes(Data([9])), "$double": .double(.infinity)]),
        "dollarKey": .object(["$other": .int(1)]),
    ]

    static func deep(_ levels: Int) -> FieldValue {
        var value: FieldValue = .int(1)
        for level in 0..<levels { value = level % 2 == 0 ? .array([value]) : .object(["k": value]) }
        return value
    }

    static func roundTrip(_ state: JSONStoreState, pretty: Bool) throws -> JSONStoreState {
        try JSONDocument.decode(JSONDocument.encode(state, pretty: pretty))
    }

    @Test(arguments: [true, false])
    func everyAwkwardValueRoundTrips(pretty: Bool) throws {
        let name = try CollectionName("things")
        var collection = InMemoryCollection(schema: CollectionSchema(name: name, idKind: .string))
        for (key, value) in Self.awkwardValues {
            collection.put(Record(id: .string("id-" + key), fields: ["v": value]))
        }
        collection.put(Record(id: "all", fields: Self.awkwardValues.filter { FieldName.isValid($0.key) }))
        collection.put(Record(id: "deepest", fields: ["v": Self.deep(FieldValue.maximumDepth)]))
        collection.put(Record(id: "👩‍👩‍👧 é\u{301}", fields: [:]))
        var state = JSONStoreState()
        state.collections[name] = collection
        let back = try Self.roundTrip(state, pretty: pretty)
        let records = try #require(back.collections[name]?.records)
        #expect(records.count == collection.records.count)
        for (id, fields) in collection.records {
            #expect(records[id] == fields, "record \(id)")
        }
        // Kinds are exact, not just equal under query rules.
        #expect(records["id-one"]?["v"] == .double(1.0))
        #expect(records["id-zero"]?["v"] == .int(0))
        if case .double(let d)? = records["id-negZero"]?["v"] { #expect(d.sign == .minus) } else { Issue.record("-0.0 lost") }
    }

    @Test func intIDsAndMetadataRoundTrip() throws {
        let name = try CollectionName("users")
        var collection = InMemoryCollection(schema: CollectionSchema(
            name: name, idKind: .int, uniqueConstraints: [UniqueConstraint(["email"]), UniqueConstraint(["a", "b"], name: "ab")],
            indexes: [IndexDefinition(["age"])]))
        collection.put(Record(id: .int(.min), fields: ["email": "x"]))
        collection.put(Record(id: .int(.max), fields: ["email": "y"]))
        collection.put(Record(id: 7, fields: [:]))
        collection.lastAssignedID = .max
        var state = JSONStoreState()
        state.collections[name] = collection
        state.collections[try CollectionName(reserved: "_depot_outbox")] = InMemoryCollection(schema: CollectionSchema(name: try CollectionName(reserved: "_depot_outbox"), idKind: .string))
        let back = try Self.roundTrip(state, pretty: true)
        #expect(back.collections[name]?.schema == collection.schema)
        #expect(back.collections[name]?.records == collection.records)
        #expect(back.collections[name]?.lastAssignedID == .max)
        #expect(back.collections[name]?.uniqueIndexes == collection.uniqueIndexes)
        #expect(back.collections.count == 2)
    }

    @Test func outputIsStableAndSorted() throws {
        let name = try CollectionName("b")
        var b = InMemoryCollection(schema: CollectionSchema(name: name, idKind: .int))
        for id in [10, 2, 33, 1] as [Int64] { b.put(Record(id: .int(id), fields: ["z": 1, "a": ["y": 1, "x": 2]])) }
        var a = InMemoryCollection(schema: CollectionSchema(name: try CollectionName("a"), idKind: .string))
        a.put(Record(id: "é", fields: [:]))
        a.put(Record(id: "Z", fields: [:]))
        a.put(Record(id: "a", fields: [:]))
        var state = JSONStoreState()
        state.collections[name] = b
        state.collections[try CollectionName("a")] = a
        let compact = String(decoding: JSONDocument.encode(state, pretty: false), as: UTF8.self)
        #expect(compact == """
            {
            "_depot":{"collections":{"a":{"idKind":"string","indexes":[],"unique":[]},"b":{"idKind":"int","indexes":[],"lastAssignedID":33,"unique":[]}},"format":1},
            "a":[
            {"id":"Z"},
            {"id":"a"},
            {"id":"é"}
            ],
            "b":[
            {"id":1,"a":{"x":2,"y":1},"z":1},
            {"id":2,"a":{"x":2,"y":1},"z":1},
            {"id":10,"a":{"x":2,"y":1},"z":1},
            {"id":33,"a":{"x":2,"y":1},"z":1}
            ]
            }

            """)
        #expect(JSONDocument.encode(state, pretty: true) == JSONDocument.encode(try Self.roundTrip(state, pretty: true), pretty: true))
        let pretty = String(decoding: JSONDocument.encode(state, pretty: true), as: UTF8.self)
        #expect(pretty.contains("\n  \"b\": [\n    {\n      \"id\": 1,\n      \"a\": {\n        \"x\": 2,"))
    }

    /// A file as the driver wrote it before its reader and writer moved into DepotCore reads
    /// back the same: `\b` and `\f` escapes, a raw DEL, pretty tags with `": "`, an
    /// unwrapped `{"$base64":...}` user object, and `"inf"` from hand edits.
    @Test func filesWrittenBeforeTheMoveReadTheSame() throws {
        let old = #"""
            {
              "_depot": {
                "collections": {
                  "things": {
                    "idKind": "string",
                    "indexes": [],
                    "unique": []
                  }
                },
                "format": 1
              },
              "things": [
                {
                  "id": "a",
                  "b": {"$bytes": "AQ=="},
                  "c": "x\b\f<DEL>",
                  "d": {"$double": "-Infinity"},
                  "e": {"$double": "inf"},
                  "o": {"$base64": "aGk="},
                  "w": {"$object": {
                    "$bytes": "x"
                  }}
                }
              ]
            }

            """#
        let state = try JSONDocument.decode(Array(old.replacingOccurrences(of: "<DEL>", with: "\u{7f}").utf8))
        let fields = try #require(state.collections[try CollectionName("things")]?.records["a"])
        #expect(fields == [
            "b": .bytes(Data([1])), "c": "x\u{8}\u{c}\u{7f}", "d": .double(-.infinity), "e": .double(.infinity),
            "o": ["$base64": "aGk="], "w": ["$bytes": "x"],
        ])
    }

    @Test func exactTextOfTaggedValues() {
        func text(_ value: FieldValue) -> String {
            var w = JSONWriter(pretty: false)
            w.value(value, level: 0)
            return String(decoding: w.bytes, as: UTF8.self)
        }
        #expect(text(.double(1)) == "1.0")
        #expect(text(.double(-0.0)) == "-0.0")
        #expect(text(.double(1e-5)) == "1e-05")
        #expect(text(.int(-9_223_372_036_854_775_808)) == "-9223372036854775808")
        #expect(text(.double(.infinity)) == #"{"$double":"Infinity"}"#)
        #expect(text(.double(-.infinity)) == #"{"$double":"-Infinity"}"#)
        #expect(text(.bytes(Data([0xFF, 0]))) == #"{"$bytes":"/wA="}"#)
        #expect(text(.object(["$bytes": "x"])) == #"{"$object":{"$bytes":"x"}}"#)
        #expect(text(.object(["$bytes": "x", "y": 1])) == #"{"$bytes":"x","y":1}"#)
        #expect(text(.string("a\u{0}\u{1F}\"\\é")) == #""a\u0000\u001f\"\\é""#)
    }
}

/// The file's representations are those of DepotCore's `JSONText` (one reader and writer
/// since both went into DepotCore), so a value copied between a store file, JSON Lines and
/// HTTP bodies means the same everywhere.
@Suite struct JSONTextAgreementTests {
    @Test func bothReadEachOthersOutput() throws {
        for (name, value) in JSONValueRoundTripTests.awkwardValues {
            var w = JSONWriter(pretty: false)
            w.value(value, level: 0)
            #expect(try JSONText.parse(w.bytes) == value, "JSONText reads the driver's \(name)")
            let theirs = Array(JSONText.serialize(value).utf8)
            let ours = try theirs.withUnsafeBufferPointer { buffer in
                var reader = JSONReader(buffer, reporting: .file)
                return try reader.readValue(depth: 0)
            }
            #expect(ours == value, "the driver reads JSONText's \(name)")
        }
    }
}
