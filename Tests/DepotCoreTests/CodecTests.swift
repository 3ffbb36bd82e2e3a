import DepotCore
import Foundation
import Testing

enum Mood: String, Codable, Sendable { case calm, curious }
enum Level: Int, Codable, Sendable { case low = 1, high = 9 }

struct Inner: Codable, Equatable, Sendable {
    var label: String
    var weights: [Double]
}

/// Every type of the mapping table at its edge values.
struct Everything: Codable, Equatable, Sendable {
    var id: String
    var int64Min: Int64 = .min
    var int64Max: Int64 = .max
    var int8: Int8 = -128
    var uint32: UInt32 = .max
    var uint64: UInt64 = UInt64(Int64.max)
    var negativeZero: Double = -0.0
    var greatest: Double = .greatestFiniteMagnitude
    var tiny: Double = .leastNonzeroMagnitude
    var infinity: Double = .infinity
    var float: Float = 1.5
    var flag: Bool = true
    var nul: String = "a\u{0}b"
    var emoji: String = "👩‍👩‍👧‍👦 café e\u{301}"
    var empty: String = ""
    var emptyData = Data()
    var bigData = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
    var date = Date(timeIntervalSinceReferenceDate: 123_456_789.123_456_7)
    var oldDate = Date(timeIntervalSince1970: -1_000_000_000.000_001)
    var uuid = UUID()
    var url = URL(string: "https://example.com/a%20b?q=1#frag")!
    var decimal = Decimal(string: "12345678901234567890.123456789")!
    var mood: Mood = .curious
    var level: Level = .high
    var inner = Inner(label: "in", weights: [0.1, -0.0, 3])
    var list: [Int] = [3, 1, 2]
    var nestedList: [[String]] = [["a"], [], ["b", "c"]]
    var dictionary: [String: Int] = ["x": 1, "y": 2]
    var optionalSet: Int? = 5
    var optionalNil: Int? = nil
    var doubleOptionalSomeNil: Int?? = .some(nil)
    var doubleOptionalNil: Int?? = nil
    var optionalsInArray: [Int?] = [1, nil, 3]
    var innerOptional: Inner? = Inner(label: "", weights: [])
}

@Suite struct CodecTests {
    @Test func everyMappedTypeRoundTripsExactly() throws {
        let original = Everything(id: "e1")
        let value = try RecordEncoder().encode(original)
        let decoded = try RecordDecoder().decode(Everything.self, from: value)
        #expect(decoded == original)
        #expect(decoded.negativeZero.sign == .minus)
        #expect(decoded.date.timeIntervalSinceReferenceDate.bitPattern == original.date.timeIntervalSinceReferenceDate.bitPattern)
        #expect(decoded.oldDate.timeIntervalSinceReferenceDate.bitPattern == original.oldDate.timeIntervalSinceReferenceDate.bitPattern)
        // Through a record (id split off and offered back).
        let (id, fields) = try RecordEncoder().encodeRecord(original)
        #expect(id == "e1")
        #expect(fields["optionalNil"] == nil)
        let viaRecord = try RecordDecoder().decode(Everything.self, from: Record(id: id ?? "", fields: fields))
        // A record's top-level null is the same as absent (Docs/Semantics.md, "Field
        // values"), so `.some(nil)` at the top level of a record comes back as `nil`;
        // everywhere else it is exact.
        var expected = original
        expected.doubleOptionalSomeNil = nil
        #expect(viaRecord == expected)
    }

    @Test func storedShapesFollowTheTable() throws {
        let value = try RecordEncoder().encode(Everything(id: "e"))
        guard case .object(let o) = value else { Issue.record("not an object"); return }
        #expect(o["flag"] == .bool(true))
        #expect(o["int64Min"] == .int(.min))
        #expect(o["date"] == .double(123_456_789.123_456_7))
        #expect(o["mood"] == .string("curious"))
        #expect(o["level"] == .int(9))
        #expect(o["decimal"] == .string("12345678901234567890.123456789"))
        #expect(o["inner"]?.objectValue?["label"] == .string("in"))
        #expect(o["optionalsInArray"] == .array([.int(1), .null, .int(3)]))
        #expect(o["doubleOptionalSomeNil"] == .null)
        #expect(o["doubleOptionalNil"] == nil)
    }

    @Test func nanAndOverflowAreRejectedWithTypedErrors() throws {
        struct Bad: Codable { var x: Double }
        #expect(throws: DepotError.self) { try RecordEncoder().encode(Bad(x: .nan)) }
        struct Big: Codable { var x: UInt64 }
        do {
            _ = try RecordEncoder().encode(Big(x: .max))
            Issue.record("UInt64.max encoded")
        } catch let error as DepotError {
            #expect(error.code == .invalidValue)
        }
    }

    @Test func decodingErrorsNameThePath() throws {
        struct Wants: Codable { var inner: Inner }
        do {
            _ = try RecordDecoder().decode(Wants.self, from: ["inner": ["label": 5, "weights": []]])
            Issue.record("decoded a number as a string")
        } catch let error as DepotError {
            #expect(error.code == .decoding)
            #expect(error.message.contains("inner.label"))
        }
    }

    @Test func untypedValuesRoundTripThroughTheCodec() throws {
        let value: FieldValue = ["b": true, "o": ["k": [1, 2.5, "{}"]], "s": "{}", "z": -0.0]
        let again = try RecordDecoder().decode(FieldValue.self, from: try RecordEncoder().encode(value))
        #expect(again == value)
        #expect(again != ["b": 1, "o": ["k": [1, 2.5, "{}"]], "s": "{}", "z": 0.0])
    }

    @Test func lenientNumbersFromPeopleButNotBools() throws {
        struct N: Codable { var i: Int; var d: Double }
        let n = try RecordDecoder().decode(N.self, from: ["i": 3.0, "d": 2])
        #expect(n.i == 3 && n.d == 2)
        #expect(throws: DepotError.self) { try RecordDecoder().decode(N.self, from: ["i": true, "d": 2]) }
        #expect(throws: DepotError.self) { try RecordDecoder().decode(N.self, from: ["i": 3.5, "d": 2]) }
    }

    /// A source that cannot read one field (a damaged stored value) throws `.corrupted`.
    final class DamagedSource: FieldSource {
        let recordID: RecordID = 1
        func value(forField name: String) throws -> FieldValue? {
            if name == "title" { throw DepotError(.corrupted, "The stored value of 'title' cannot be read.") }
            return name == "pages" ? 12 : nil
        }
        func fieldNames() throws -> [String] { ["title", "pages"] }
    }

    /// A model that checks for a field before reading it, with a default when it is absent.
    struct Titled: Decodable {
        enum CodingKeys: String, CodingKey { case title, pages }
        var title: String
        var pages: Int
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            title = container.contains(.title) ? try container.decode(String.self, forKey: .title) : "untitled"
            pages = container.contains(.pages) ? try container.decode(Int.self, forKey: .pages) : 0
        }
    }

    /// `contains` cannot throw: a field the source cannot read counts as present, so the
    /// decode after it throws the source's error instead of the model taking its default.
    @Test func aFieldTheSourceCannotReadIsNotTakenForAbsent() throws {
        let damaged = #expect(throws: DepotError.self) { try RecordDecoder().decode(Titled.self, from: DamagedSource()) }
        #expect(damaged?.code == .corrupted)
        let whole = RecordFieldSource(Record(id: 1, fields: ["pages": 3]))
        let absent = try RecordDecoder().decode(Titled.self, from: whole)
        #expect(absent.title == "untitled" && absent.pages == 3)
    }

    /// A source that can read its values but not list its fields.
    final class UnlistableSource: FieldSource {
        let recordID: RecordID = 1
        func value(forField name: String) throws -> FieldValue? { name == "pages" ? 12 : nil }
        func fieldNames() throws -> [String] { throw DepotError(.corrupted, "The stored field names cannot be read.") }
    }

    /// A model that keeps every field it finds, by listing the record's keys.
    struct AllFields: Decodable {
        struct Name: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }
        var values: [String: FieldValue] = [:]
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: Name.self)
            for key in container.allKeys { values[key.stringValue] = try container.decode(FieldValue.self, forKey: key) }
        }
    }

    /// `allKeys` cannot throw: a source that cannot name its fields makes the whole decode
    /// throw its error instead of a model that found no fields (or only the id).
    @Test func aSourceThatCannotNameItsFieldsFailsTheDecode() throws {
        let unlisted = #expect(throws: DepotError.self) { try RecordDecoder().decode(AllFields.self, from: UnlistableSource()) }
        #expect(unlisted?.code == .corrupted)
        let listed = try RecordDecoder().decode(AllFields.self, from: RecordFieldSource(Record(id: 1, fields: ["pages": 3])))
        #expect(listed.values == ["id": 1, "pages": 3])
    }
}
