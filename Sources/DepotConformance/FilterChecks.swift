import DepotCore
import Foundation

/// Every filter operator with its null, number and string edge cases
/// (Docs/Semantics.md, "Filter operators" and "Null and missing").
///
/// Each check seeds a fixture, then verifies the ids the filter selects (derived by hand
/// from the contract), `count`, `exists`, that `not(filter)` selects exactly the other
/// records (logic is two-valued), and that `delete(matching:)` removes exactly the selected
/// records.
enum FilterChecks {
    /// One record per kind of value in field `v` (record 1 has no `v`).
    static let mixed: [Record] = [
        Record(id: 1),
        Record(id: 2, fields: ["v": false]),
        Record(id: 3, fields: ["v": true]),
        Record(id: 4, fields: ["v": 0]),
        Record(id: 5, fields: ["v": 1]),
        Record(id: 6, fields: ["v": 1.0]),
        Record(id: 7, fields: ["v": 2.5]),
        Record(id: 8, fields: ["v": -3]),
        Record(id: 9, fields: ["v": ""]),
        Record(id: 10, fields: ["v": "1"]),
        Record(id: 11, fields: ["v": "abc"]),
        Record(id: 12, fields: ["v": "Abc"]),
        Record(id: 13, fields: ["v": .bytes(Data([1]))]),
        Record(id: 14, fields: ["v": [1, 2]]),
        Record(id: 15, fields: ["v": ["a": 1]]),
        Record(id: 16, fields: ["v": .int(9_007_199_254_740_993)]),  // 2^53 + 1
        Record(id: 17, fields: ["v": .double(9_007_199_254_740_992.0)]),  // 2^53
    ]

    /// Strings holding the characters LIKE and GLOB treat as wildcards or escapes.
    static let patterns: [Record] = [
        Record(id: 1, fields: ["s": "100%"]),
        Record(id: 2, fields: ["s": "a_b"]),
        Record(id: 3, fields: ["s": "axb"]),
        Record(id: 4, fields: ["s": "a*b"]),
        Record(id: 5, fields: ["s": "a?b"]),
        Record(id: 6, fields: ["s": "[ab]"]),
        Record(id: 7, fields: ["s": "ab"]),
        Record(id: 8, fields: ["s": "A_B"]),
        Record(id: 9, fields: ["s": "100"]),
        Record(id: 10, fields: ["s": "%"]),
        Record(id: 11, fields: ["s": "x%y"]),
        Record(id: 12, fields: ["s": "_"]),
        Record(id: 13, fields: ["s": "a.b"]),
        Record(id: 14, fields: ["s": "a\\b"]),
        Record(id: 15, fields: ["s": "\u{E4}_b"]),
        Record(id: 16, fields: ["s": "e\u{301}t\u{E9}"]),
        Record(id: 17, fields: ["s": 5]),
    ]

    /// Numbers at the edges of Int64 and Double.
    static let numbers: [Record] = [
        Record(id: 1, fields: ["n": 0]),
        Record(id: 2, fields: ["n": -0.0]),
        Record(id: 3, fields: ["n": 0.0]),
        Record(id: 4, fields: ["n": -1]),
        Record(id: 5, fields: ["n": 1e300]),
        Record(id: 6, fields: ["n": .double(-.infinity)]),
        Record(id: 7, fields: ["n": .double(.infinity)]),
        Record(id: 8, fields: ["n": .int(.max)]),
        Record(id: 9, fields: ["n": .int(.min)]),
        Record(id: 10, fields: ["n": 0.5]),
    ]

    /// Two fields for and/or/not.
    static let pairs: [Record] = [
        Record(id: 1, fields: ["a": 1, "b": "x"]),
        Record(id: 2, fields: ["a": 1, "b": "y"]),
        Record(id: 3, fields: ["a": 2, "b": "x"]),
        Record(id: 4, fields: ["a": 2]),
        Record(id: 5, fields: ["b": "x"]),
        Record(id: 6, fields: [:]),
    ]

    /// A check of one filter over `fixture`, selecting exactly `expected` (in id order).
    static func filter(_ name: String, _ fixture: [Record], _ filter: Filter, _ expected: [RecordID], collection: String = "items") -> ConformanceCheck {
        .driver("filter." + name) { driver, expect in
            let items = try CollectionName(collection)
            try await driver.seed(fixture, into: items)
            let allIDs = fixture.map(\.id).sorted()
            let complement = allIDs.filter { !expected.contains($0) }
            try expect.equal(try await driver.ids(Query(filter: filter), in: items), expected, "ids matching \(filter)")
            try expect.equal(try await driver.count(filter, in: items), expected.count, "count of \(filter)")
            let exists = try await driver.read { tx in try tx.exists(filter, in: items) }
            try expect.equal(exists, !expected.isEmpty, "exists of \(filter)")
            try expect.equal(try await driver.ids(Query(filter: .not(filter)), in: items), complement, "ids matching not(\(filter))")
            try expect.equal(try await driver.count(.not(filter), in: items), complement.count, "count of not(\(filter))")
            let deleted = try await driver.write { tx in try tx.delete(matching: filter, from: items) }
            try expect.equal(deleted, expected.count, "records deleted matching \(filter)")
            try expect.equal(try await driver.ids(in: items), complement, "records left after deleting matching \(filter)")
        }
    }

    static let all: [ConformanceCheck] = equality + ranges + membership + strings + numeric + logic + ids

    static let equality: [ConformanceCheck] = [
        filter("equalIntMatchesDouble", mixed, .equal("v", 1), [5, 6]),
        filter("equalDoubleMatchesInt", mixed, .equal("v", 1.0), [5, 6]),
        filter("equalTrueIsNotOne", mixed, .equal("v", true), [3]),
        filter("equalFalseIsNotZero", mixed, .equal("v", false), [2]),
        filter("equalZeroIsNotFalse", mixed, .equal("v", 0), [4]),
        filter("equalStringIsNotNumber", mixed, .equal("v", "1"), [10]),
        filter("equalEmptyString", mixed, .equal("v", ""), [9]),
        filter("equalCaseSensitive", mixed, .equal("v", "abc"), [11]),
        filter("equalNullMatchesMissing", mixed, .equal("v", .null), [1]),
        filter("equalBytes", mixed, .equal("v", .bytes(Data([1]))), [13]),
        filter("equalArrayExact", mixed, .equal("v", [1, 2]), [14]),
        filter("equalArrayOrderMatters", mixed, .equal("v", [2, 1]), []),
        filter("equalObjectExact", mixed, .equal("v", ["a": 1]), [15]),
        filter("equalObjectOtherValue", mixed, .equal("v", ["a": 2]), []),
        filter("notEqualMatchesMissing", mixed, .notEqual("v", 1), [1, 2, 3, 4, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]),
        filter("notEqualNullIsNotNull", mixed, .notEqual("v", .null), [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]),
        filter("notEqualString", mixed, .notEqual("v", "abc"), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 15, 16, 17]),
        filter("notEqualTrue", mixed, .notEqual("v", true), [1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]),
        filter("isNull", mixed, .isNull("v"), [1]),
        filter("isNotNull", mixed, .isNotNull("v"), [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]),
        filter("unknownFieldEqualsNullEverywhere", mixed, .equal("nothere", .null), mixed.map(\.id)),
        filter("unknownFieldNeverEqualsValue", mixed, .equal("nothere", 1), []),
        filter("unknownFieldNotEqualMatchesAll", mixed, .notEqual("nothere", 1), mixed.map(\.id)),
    ]

    static let ranges: [ConformanceCheck] = [
        filter("greaterNumberSkipsOtherKinds", mixed, .greater("v", 0), [5, 6, 7, 16, 17]),
        filter("greaterOrEqualNumber", mixed, .greaterOrEqual("v", 1), [5, 6, 7, 16, 17]),
        filter("lessNumber", mixed, .less("v", 1), [4, 8]),
        filter("lessOrEqualDouble", mixed, .lessOrEqual("v", 1.0), [4, 5, 6, 8]),
        filter("greaterStringBinary", mixed, .greater("v", "a"), [11]),
        filter("greaterOrEqualEmptyStringIsAllStrings", mixed, .greaterOrEqual("v", ""), [9, 10, 11, 12]),
        filter("lessStringUppercaseFirst", mixed, .less("v", "a"), [9, 10, 12]),
        filter("greaterFalseIsTrue", mixed, .greater("v", false), [3]),
        filter("lessTrueIsFalse", mixed, .less("v", true), [2]),
        filter("greaterBytes", mixed, .greater("v", .bytes(Data([0]))), [13]),
        filter("rangeNeverMatchesArraysOrObjects", mixed, .or([.less("v", [9]), .greater("v", [0]), .greaterOrEqual("v", [:])]), []),
        filter("rangeWithNullOperandMatchesNothing", mixed, .or([.less("v", .null), .greaterOrEqual("v", .null)]), []),
        filter("greaterNumberNeverMatchesString", [
            Record(id: 1, fields: ["views": "abc"]), Record(id: 2, fields: ["views": 10]), Record(id: 3, fields: ["views": "9"]),
            Record(id: 4, fields: ["views": 3]), Record(id: 5),
        ], .greater("views", 5), [2]),
        filter("lessStringNeverMatchesNumber", [
            Record(id: 1, fields: ["s": 1]), Record(id: 2, fields: ["s": "b"]), Record(id: 3, fields: ["s": "z"]), Record(id: 4, fields: ["s": true]),
        ], .less("s", "c"), [2]),
        filter("stringOrderIsBinaryNotLocale", [
            Record(id: 1, fields: ["s": "Z"]), Record(id: 2, fields: ["s": "a"]), Record(id: 3, fields: ["s": "\u{E9}"]),
            Record(id: 4, fields: ["s": "😀"]), Record(id: 5, fields: ["s": "\u{FFFD}"]), Record(id: 6, fields: ["s": "e"]),
        ], .greater("s", "z"), [3, 4, 5]),
        filter("supplementaryAboveBMPInUTF8Order", [
            Record(id: 1, fields: ["s": "😀"]), Record(id: 2, fields: ["s": "\u{FFFD}"]), Record(id: 3, fields: ["s": "\u{E000}"]),
        ], .greater("s", "\u{FFFD}"), [1]),
        filter("betweenInclusive", [
            Record(id: 1, fields: ["n": 1]), Record(id: 2, fields: ["n": 2.0]), Record(id: 3, fields: ["n": 3]),
            Record(id: 4, fields: ["n": 4.5]), Record(id: 5, fields: ["n": 5]), Record(id: 6, fields: ["n": "3"]),
        ], .and([.greaterOrEqual("n", 2), .lessOrEqual("n", 4.5)]), [2, 3, 4]),
    ]

    static let membership: [ConformanceCheck] = [
        filter("inMixedKinds", mixed, .isIn("v", [1, "abc", .null]), [1, 5, 6, 11]),
        filter("inEmptyListMatchesNothing", mixed, .isIn("v", []), []),
        filter("inNullOnly", mixed, .isIn("v", [.null]), [1]),
        filter("inBoolIsNotNumber", mixed, .isIn("v", [true, 0]), [3, 4]),
        filter("inArrayAndObject", mixed, .isIn("v", [[1, 2], ["a": 1], [2]]), [14, 15]),
        filter("notInMatchesMissing", mixed, .notIn("v", [1, "abc"]), [1, 2, 3, 4, 7, 8, 9, 10, 12, 13, 14, 15, 16, 17]),
        filter("notInEmptyListMatchesAll", mixed, .notIn("v", []), mixed.map(\.id)),
        filter("notInNullExcludesMissing", mixed, .notIn("v", [.null]), [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]),
        filter("notInWithNullAndValue", mixed, .notIn("v", [.null, false, 2.5]), [3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]),
        filter("inLargeList", mixed, .isIn("v", (0..<500).map { FieldValue.int(Int64($0 * 2)) }), [4]),
    ]

    static let strings: [ConformanceCheck] = [
        filter("prefixPercentIsPlain", patterns, .hasPrefix("s", "100%"), [1]),
        filter("prefixUnderscoreIsPlain", patterns, .hasPrefix("s", "a_"), [2]),
        filter("prefixStarIsPlain", patterns, .hasPrefix("s", "a*"), [4]),
        filter("prefixBracketIsPlain", patterns, .hasPrefix("s", "["), [6]),
        filter("prefixCaseSensitive", patterns, .hasPrefix("s", "A"), [8]),
        filter("prefixLowercaseA", patterns, .hasPrefix("s", "a"), [2, 3, 4, 5, 7, 13, 14]),
        filter("prefixEmptyMatchesEveryString", patterns, .hasPrefix("s", ""), (1...16).map { RecordID.int(Int64($0)) }),
        filter("prefixBackslashIsPlain", patterns, .hasPrefix("s", "a\\"), [14]),
        filter("prefixNeverMatchesNumbers", patterns, .hasPrefix("s", "5"), []),
        filter("containsPercent", patterns, .contains("s", "%"), [1, 10, 11]),
        filter("containsUnderscore", patterns, .contains("s", "_"), [2, 8, 12, 15]),
        filter("containsQuestionMark", patterns, .contains("s", "?"), [5]),
        filter("containsStar", patterns, .contains("s", "*"), [4]),
        filter("containsBracketClassIsPlain", patterns, .contains("s", "[ab]"), [6]),
        filter("containsCaseSensitive", patterns, .contains("s", "a_b"), [2]),
        filter("containsDot", patterns, .contains("s", "."), [13]),
        filter("containsBackslash", patterns, .contains("s", "\\"), [14]),
        filter("containsNonASCII", patterns, .contains("s", "\u{E4}"), [15]),
        filter("containsBytesNotCanonical", patterns, .contains("s", "\u{E9}"), [16]),
        filter("prefixBytesNotCanonical", patterns, .hasPrefix("s", "\u{E9}"), []),
        filter("equalBytesNotCanonical", [
            Record(id: 1, fields: ["s": "\u{E9}"]), Record(id: 2, fields: ["s": "e\u{301}"]),
        ], .equal("s", "\u{E9}"), [1]),
        filter("containsEmptyMatchesEveryString", mixed, .contains("v", ""), [9, 10, 11, 12]),
        filter("prefixNeverMatchesMissingOrNull", mixed, .hasPrefix("v", "a"), [11]),
        filter("containsMiddle", mixed, .contains("v", "bc"), [11, 12]),
    ]

    static let numeric: [ConformanceCheck] = [
        filter("equalPast2to53IntOperand", mixed, .equal("v", .int(9_007_199_254_740_993)), [16]),
        filter("equalPast2to53DoubleOperand", mixed, .equal("v", .double(9_007_199_254_740_992.0)), [17]),
        filter("equal2to53AsInt", mixed, .equal("v", .int(9_007_199_254_740_992)), [17]),
        filter("greaterPast2to53", mixed, .greater("v", .double(9_007_199_254_740_992.0)), [16]),
        filter("lessPast2to53", mixed, .less("v", .int(9_007_199_254_740_993)), [4, 5, 6, 7, 8, 17]),
        filter("zeroEqualsNegativeZero", numbers, .equal("n", 0), [1, 2, 3]),
        filter("negativeZeroOperandEqualsZero", numbers, .equal("n", -0.0), [1, 2, 3]),
        filter("lessThanZeroExcludesNegativeZero", numbers, .less("n", 0), [4, 6, 9]),
        filter("int64MaxBelow2to63", numbers, .greaterOrEqual("n", 9.223372036854775808e18), [5, 7]),
        filter("int64MinEquals2to63Negative", numbers, .equal("n", -9.223372036854775808e18), [9]),
        filter("lessThanInt64Min", numbers, .less("n", -9.223372036854775808e18), [6]),
        filter("greaterThanInt64Max", numbers, .greater("n", .int(.max)), [5, 7]),
        filter("infinityComparisons", numbers, .or([.equal("n", .double(.infinity)), .lessOrEqual("n", .double(-.infinity))]), [6, 7]),
        filter("fractionBetweenInts", numbers, .and([.greater("n", 0), .less("n", 1)]), [10]),
    ]

    static let logic: [ConformanceCheck] = [
        filter("andBoth", pairs, .and([.equal("a", 1), .equal("b", "x")]), [1]),
        filter("orEither", pairs, .or([.equal("a", 2), .equal("b", "y")]), [2, 3, 4]),
        filter("notOfEqualMatchesMissing", pairs, .not(.equal("a", 1)), [3, 4, 5, 6]),
        filter("notOfNotEqualIsEqual", pairs, .not(.notEqual("b", "x")), [1, 3, 5]),
        filter("notOfRangeMatchesMissing", pairs, .not(.greater("a", 1)), [1, 2, 5, 6]),
        filter("notOfAndIsTwoValued", pairs, .not(.and([.equal("a", 2), .equal("b", "x")])), [1, 2, 4, 5, 6]),
        filter("nestedAndOr", pairs, .or([.and([.equal("a", 1), .notEqual("b", "x")]), .and([.isNull("a"), .isNotNull("b")])]), [2, 5]),
        filter("andOfOrs", pairs, .and([.or([.equal("a", 1), .equal("a", 2)]), .or([.isNull("b"), .equal("b", "y")])]), [2, 4]),
        filter("emptyAndMatchesAll", pairs, .and([]), [1, 2, 3, 4, 5, 6]),
        filter("emptyOrMatchesNothing", pairs, .or([]), []),
        filter("doubleNot", pairs, .not(.not(.equal("b", "x"))), [1, 3, 5]),
        filter("allMatchesAll", pairs, .all, [1, 2, 3, 4, 5, 6]),
        filter("notInInsideNot", pairs, .not(.notIn("a", [1])), [1, 2]),
    ]

    static let ids: [ConformanceCheck] = [
        filter("idEqual", pairs, .equal("id", 3), [3]),
        filter("idRange", pairs, .and([.greater("id", 2), .lessOrEqual("id", 5)]), [3, 4, 5]),
        filter("idIn", pairs, .isIn("id", [1, 6, 9]), [1, 6]),
        filter("idEqualDoubleOperand", pairs, .equal("id", 2.0), [2]),
        filter("idNotEqual", pairs, .notEqual("id", 4), [1, 2, 3, 5, 6]),
        filter("idIsNeverNull", pairs, .isNull("id"), []),
        filter("stringIdPrefix", [
            Record(id: "user:1", fields: ["n": 1]), Record(id: "user:2", fields: ["n": 2]), Record(id: "User:3", fields: ["n": 3]),
            Record(id: "users", fields: ["n": 4]), Record(id: "user_%", fields: ["n": 5]),
        ], .hasPrefix("id", "user:"), ["user:1", "user:2"], collection: "tags"),
        filter("stringIdRange", [
            Record(id: "a"), Record(id: "b"), Record(id: "B"), Record(id: "ba"), Record(id: "c"),
        ], .and([.greaterOrEqual("id", "b"), .less("id", "c")]), ["b", "ba"], collection: "tags"),
        filter("stringIdNeverEqualsNumber", [Record(id: "1"), Record(id: "2")], .equal("id", 1), [], collection: "tags"),
    ]
}
