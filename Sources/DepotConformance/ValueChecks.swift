import DepotCore
import Foundation

/// Every field value kind comes back exactly (Docs/Semantics.md, "Field values"): through
/// `get`, a query and a stream.
enum ValueChecks {
    /// Writes each value as field `v` of its own record (ids 1...), then reads every record
    /// back through `get`, a query and a stream, and compares exactly (`FieldValue ==`:
    /// an int is not a double, -0.0 is not 0.0, strings by bytes).
    static func roundTrip(_ name: String, _ values: [FieldValue]) -> ConformanceCheck {
        .driver("values." + name) { driver, expect in
            let items = try Fixture.items
            let records = values.enumerated().map { Record(id: .int(Int64($0 + 1)), fields: ["v": $1, "k": .int(Int64($0))]) }
            try await driver.seed(records, into: items)
            for record in records {
                let got = try await driver.record(record.id, in: items)
                try expect.sameRecord(got, record, "get of record \(record.id)")
            }
            try expect.sameRecords(try await driver.records(in: items), records, "query of all records")
            try expect.sameRecords(try await driver.streamed(from: items), records, "stream of all records")
        }
    }

    static let deep: FieldValue = {
        var value: FieldValue = ["leaf": "bottom", "n": .null]
        for level in 0..<(FieldValue.maximumDepth - 1) { value = level % 2 == 0 ? .array([value, .int(Int64(level))]) : .object(["l\(level)": value]) }
        return value
    }()

    static let allBytes = Data((0...255).map { UInt8($0) })
    static let megabyte = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) })

    static let all: [ConformanceCheck] = [
        roundTrip("boolStaysBool", [true, false]),
        roundTrip("intStaysInt", [0, 1, -1, 2, 1000]),
        roundTrip("intExtremes", [.int(.max), .int(.min), .int(.max - 1), .int(.min + 1), .int(9_007_199_254_740_993)]),
        roundTrip("integralDoubleStaysDouble", [1.0, 0.0, -2.0, 1e15, 9_007_199_254_740_992.0]),
        roundTrip("negativeZeroKeepsSign", [.double(-0.0), .double(0.0)]),
        roundTrip("doubleExtremes", [
            .double(.greatestFiniteMagnitude), .double(-.greatestFiniteMagnitude), .double(.leastNonzeroMagnitude),
            .double(.leastNormalMagnitude), .double(-.leastNonzeroMagnitude), .double(9.223372036854775808e18),
        ]),
        roundTrip("doublesExact", [0.1, .double(1.0 / 3.0), .double(.pi), 2.5, -1e-300, 1e300, 123_456.789_012_345_6]),
        roundTrip("infinities", [.double(.infinity), .double(-.infinity)]),
        roundTrip("stringWithNUL", ["a\u{0}b", "\u{0}", "\u{0}\u{0}end"]),
        roundTrip("emojiAndCombiningMarks", ["👩‍👩‍👧‍👦", "e\u{301}", "\u{E9}", "🇫🇷", "a\u{300}\u{301}\u{302}", "👍🏽"]),
        roundTrip("unicodeText", ["日本語テキスト", "עברית", "\u{FEFF}bom", "line\u{2028}sep", "\u{1}\t\n\r\u{7F}", "\u{FFFD}", "𝄞"]),
        roundTrip("emptyString", [""]),
        roundTrip("stringsThatLookLikeOtherKinds", ["{}", "[]", "null", "true", "1", "1.0", "\"q\"", "b64:AAA=", "{\"a\":1}", "NaN", "-0"]),
        roundTrip("emptyBytes", [.bytes(Data())]),
        roundTrip("bytesAllValues", [.bytes(allBytes), .bytes(Data([0])), .bytes(Data("text".utf8))]),
        roundTrip("largeBytes", [.bytes(megabyte)]),
        roundTrip("largeString", [.string(String(repeating: "0123456789abcdé😀", count: 60_000))]),
        roundTrip("nestedArrays", [[1, [2, [3, []]], "x", .null, true, 1.5, .bytes(Data([1, 2]))], [], [[]], [.null]]),
        roundTrip("nestedObjects", [
            ["a": ["b": ["c": .null]], "": 1, "with space": "x", "é": true, "id": 5, "_depot": 1, "0": [1, 2]],
            [:], ["x": [:]],
        ]),
        roundTrip("objectStaysObjectStringStaysString", [["k": "v"], "{\"k\":\"v\"}", [:], "{}", ["k"], "[\"k\"]"]),
        roundTrip("numbersInsideContainersKeepKind", [[1, 1.0, -0.0, .int(.max), .double(.greatestFiniteMagnitude)], ["i": 1, "d": 1.0, "z": -0.0, "b": true]]),
        roundTrip("deepNesting", [deep]),
        .driver("values.mixedKindsInOneField") { driver, expect in
            let items = try Fixture.items
            let values: [FieldValue] = [1, "1", 1.0, true, .bytes(Data([1])), [1], ["a": 1], -0.0, "", .int(.min)]
            let records = values.enumerated().map { Record(id: .int(Int64($0 + 1)), fields: ["v": $1]) }
            for record in records { try await driver.write { tx in try tx.insert(record, into: items) } }
            try expect.sameRecords(try await driver.records(in: items), records, "every record keeps its own kind in field 'v'")
        },
        .driver("values.kindChangesOnUpdate") { driver, expect in
            let items = try Fixture.items
            let steps: [FieldValue] = [1, "text", 2.5, false, ["a": [1]], .bytes(Data([0, 255])), [1, "x"], .int(.min)]
            try await driver.seed([Record(id: 1, fields: ["v": 0])], into: items)
            for value in steps {
                try await driver.write { tx in try tx.update(Record(id: 1, fields: ["v": value]), in: items) }
                try expect.sameRecord(try await driver.record(1, in: items), Record(id: 1, fields: ["v": value]), "after updating 'v' to \(value)")
            }
        },
        .driver("values.topLevelNullIsAbsent") { driver, expect in
            let items = try Fixture.items
            try await driver.seed([Record(id: 1, fields: ["a": 1, "b": .null]), Record(id: 2, fields: ["a": 2, "b": 3])], into: items)
            let got = try await driver.record(1, in: items)
            try expect.that(got?.fields["b"] == nil || got?.fields["b"] == .null, "field 'b' written as null reads back absent or null, got \(String(describing: got))")
            try expect.equal(got?.fields["a"], .int(1), "field 'a'")
            try expect.equal(try await driver.ids(Query(filter: .isNull("b")), in: items), [1], "isNull(b)")
            try expect.equal(try await driver.ids(Query(filter: .equal("b", .null)), in: items), [1], "b == null")
            try expect.equal(try await driver.ids(Query(filter: .isNotNull("b")), in: items), [2], "isNotNull(b)")
        },
        .driver("values.updateToNullRemovesField") { driver, expect in
            let items = try Fixture.items
            try await driver.seed([Record(id: 1, fields: ["a": 1, "b": "x"])], into: items)
            try await driver.write { tx in try tx.update(Record(id: 1, fields: ["a": 1, "b": .null]), in: items) }
            try expect.sameRecord(try await driver.record(1, in: items), Record(id: 1, fields: ["a": 1]), "after setting b to null")
            try expect.equal(try await driver.ids(Query(filter: .isNull("b")), in: items), [1], "isNull(b)")
        },
        .driver("values.sameValuesInManyRecords") { driver, expect in
            let items = try Fixture.items
            let shared: [String: FieldValue] = ["s": "same", "o": ["k": [1, 2]], "b": .bytes(Data([9, 9]))]
            let records = (1...50).map { Record(id: .int(Int64($0)), fields: shared.merging(["n": .int(Int64($0))]) { a, _ in a }) }
            try await driver.seed(records, into: items)
            try expect.sameRecords(try await driver.records(in: items), records, "50 records sharing values")
        },
    ]
}
