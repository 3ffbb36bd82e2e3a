import DepotCore
import Foundation
import Testing

/// `ModelCoding` (what `@Model` code calls) against the Codable path it must equal: for every
/// FieldCodable type, every edge value encodes to the same field (or fails with the same
/// code) as `RecordEncoder` writing a one-field model, and every stored value of any kind
/// decodes to the same value (or fails with the same code) as `RecordDecoder` reading one.
@Suite struct ModelCodingTests {
    struct Box<T: Codable>: Codable { var f: T }
    struct OptionalBox<T: Codable>: Codable { var f: T? }

    /// A result compared exactly: the value's exact text, or the error's code.
    enum Outcome: Equatable, CustomStringConvertible {
        case value(String)
        case failure(String)

        init(_ body: () throws -> String) {
            do {
                self = .value(try body())
            } catch let error as DepotError {
                self = .failure(error.code.name)
            } catch {
                self = .failure("not a DepotError: \(error)")
            }
        }

        var description: String {
            switch self {
            case .value(let text): "value \(text)"
            case .failure(let code): "error \(code)"
            }
        }
    }

    /// The field `f` a one-field Codable model stores (`absent` when none).
    static func recordEncoder<T: Codable>(_ box: T) throws -> String {
        let sink = DictionaryFieldSink()
        _ = try RecordEncoder().encodeRecord(box, into: sink)
        return sink.fields["f"].map { $0.description + exactDoubles($0) } ?? "absent"
    }

    /// ModelCoding's field value, a `.null` meaning absent.
    static func modelCoding(_ value: FieldValue) -> String {
        value.isNull ? "absent" : value.description + exactDoubles(value)
    }

    /// `description` prints doubles shortest-first; add the bit pattern so -0.0 and NaN payloads count.
    static func exactDoubles(_ value: FieldValue) -> String {
        if case .double(let d) = value { return " bits \(d.bitPattern)" }
        return ""
    }

    static func checkEncoding<T: FieldCodable>(_ values: [T], sourceLocation: SourceLocation = #_sourceLocation) {
        for value in values {
            let expected = Outcome { try recordEncoder(Box(f: value)) }
            let actual = Outcome { modelCoding(try ModelCoding.encode(value, field: "f")) }
            #expect(actual == expected, "\(T.self) \(value)", sourceLocation: sourceLocation)
        }
        for value in values.map(Optional.some) + [nil] {
            let expected = Outcome { try recordEncoder(OptionalBox(f: value)) }
            let actual = Outcome { modelCoding(try ModelCoding.encode(value, field: "f")) }
            #expect(actual == expected, "\(T.self)? \(String(describing: value))", sourceLocation: sourceLocation)
        }
    }

    /// Every kind of stored value, with the edges the decoder is lenient or strict about.
    static let storedValues: [FieldValue?] = [
        nil, true, false, 0, 1, -1, 127, 128, -129, 255, 256, 65_536, .int(.min), .int(.max), .int(Int64(Int32.max) + 1),
        1.0, 1.5, -0.0, 0.0, 255.0, -1.0, 1e300, -1e300, .double(.infinity), .double(-.infinity), .double(.nan),
        .double(9_223_372_036_854_775_807.0), .double(18_446_744_073_709_551_615.0), .double(.leastNonzeroMagnitude), .double(3.4e39),
        "", "x", "0", "12.5", "1e3", "not a number", "E621E1F8-C36C-495A-93FC-0C247A3E6E5F", "e621e1f8-c36c-495a-93fc-0c247a3e6e5f",
        "https://example.com/a%20b?q=1#frag", "file:///tmp/x", "a b", "a\u{0}b", .bytes(Data()), .bytes(Data([0, 255])),
        [], [1, "two"], [:], ["a": 1], .null,
    ]

    static func checkDecoding<T: FieldCodable>(_ type: T.Type, exact: (T) -> String, sourceLocation: SourceLocation = #_sourceLocation) {
        for stored in storedValues {
            let record = Record(id: 1, fields: stored.map { ["f": $0] } ?? [:])
            let expected = Outcome { exact(try RecordDecoder().decode(Box<T>.self, from: RecordFieldSource(record)).f) }
            let actual = Outcome { exact(try ModelCoding.decode(T.self, from: RecordFieldSource(record), field: "f")) }
            #expect(actual == expected, "\(T.self) from \(stored.map(\.description) ?? "absent")", sourceLocation: sourceLocation)
            let expectedOptional = Outcome { try RecordDecoder().decode(OptionalBox<T>.self, from: RecordFieldSource(record)).f.map(exact) ?? "nil" }
            let actualOptional = Outcome { try ModelCoding.decodeIfPresent(T.self, from: RecordFieldSource(record), field: "f").map(exact) ?? "nil" }
            #expect(actualOptional == expectedOptional, "\(T.self)? from \(stored.map(\.description) ?? "absent")", sourceLocation: sourceLocation)
        }
    }

    static func integerEdges<I: FixedWidthInteger>(_ type: I.Type) -> [I] { [.min, .max, 0, 1, I(clamping: -1), I(clamping: Int64.max), I(clamping: Int64.min)] }

    @Test func encodingEqualsRecordEncoder() {
        Self.checkEncoding([true, false])
        Self.checkEncoding(Self.integerEdges(Int.self))
        Self.checkEncoding(Self.integerEdges(Int8.self))
        Self.checkEncoding(Self.integerEdges(Int16.self))
        Self.checkEncoding(Self.integerEdges(Int32.self))
        Self.checkEncoding(Self.integerEdges(Int64.self))
        Self.checkEncoding(Self.integerEdges(UInt.self) + [UInt(Int64.max) + 1])
        Self.checkEncoding(Self.integerEdges(UInt8.self))
        Self.checkEncoding(Self.integerEdges(UInt16.self))
        Self.checkEncoding(Self.integerEdges(UInt32.self))
        Self.checkEncoding(Self.integerEdges(UInt64.self) + [UInt64(Int64.max) + 1])
        let doubles: [Double] = [0, -0.0, 1.5, .infinity, -.infinity, .nan, .greatestFiniteMagnitude, .leastNonzeroMagnitude, .ulpOfOne, -.leastNormalMagnitude]
        Self.checkEncoding(doubles)
        Self.checkEncoding([Float(0), -0.0, 0.1, .infinity, -.infinity, .nan, .greatestFiniteMagnitude, .leastNonzeroMagnitude])
        Self.checkEncoding(["", "a\u{0}b", "👩‍👩‍👧‍👦🇫🇷", "e\u{301}", "{\"$bytes\":1}"])
        Self.checkEncoding([Data(), Data([0, 1, 255]), Data(repeating: 7, count: 70_000)])
        Self.checkEncoding([
            Date(timeIntervalSinceReferenceDate: 0), Date(timeIntervalSinceReferenceDate: 786_000_000.000_123_4),
            Date(timeIntervalSince1970: -1_234_567_890.5), .distantPast, .distantFuture, Date(timeIntervalSinceReferenceDate: .nan),
        ])
        Self.checkEncoding([UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)), UUID()])
        Self.checkEncoding(["https://example.com/a%20b?q=1&r=%C3%A9#frag", "file:///tmp/x", "relative/path"].compactMap { URL(string: $0) })
        Self.checkEncoding(["12345678901234567890.123456789", "0", "-1.5", "1e-20"].compactMap { Decimal(string: $0) } + [Decimal.nan])
        Self.checkEncoding([FieldValue.null, 1, "x", [1, .null], ["k": .bytes(Data([1]))]])
    }

    @Test func decodingEqualsRecordDecoder() {
        Self.checkDecoding(Bool.self) { "\($0)" }
        Self.checkDecoding(Int.self) { "\($0)" }
        Self.checkDecoding(Int8.self) { "\($0)" }
        Self.checkDecoding(Int16.self) { "\($0)" }
        Self.checkDecoding(Int32.self) { "\($0)" }
        Self.checkDecoding(Int64.self) { "\($0)" }
        Self.checkDecoding(UInt.self) { "\($0)" }
        Self.checkDecoding(UInt8.self) { "\($0)" }
        Self.checkDecoding(UInt16.self) { "\($0)" }
        Self.checkDecoding(UInt32.self) { "\($0)" }
        Self.checkDecoding(UInt64.self) { "\($0)" }
        Self.checkDecoding(Double.self) { "\($0.bitPattern)" }
        Self.checkDecoding(Float.self) { "\($0.bitPattern)" }
        Self.checkDecoding(String.self) { String(reflecting: $0) }
        Self.checkDecoding(Data.self) { $0.base64EncodedString() }
        Self.checkDecoding(Date.self) { "\($0.timeIntervalSinceReferenceDate.bitPattern)" }
        Self.checkDecoding(UUID.self) { $0.uuidString }
        Self.checkDecoding(URL.self) { $0.absoluteString }
        Self.checkDecoding(Decimal.self) { $0.description }
        Self.checkDecoding(FieldValue.self) { $0.description + Self.exactDoubles($0) }
    }

    /// `Int64` and `Int` have overloads of their own (no protocol witness): each gives the
    /// record codec's answer for every stored value, as the generic path does.
    @Test func integerOverloadsEqualTheCodec() {
        for stored in Self.storedValues {
            let record = Record(id: 1, fields: stored.map { ["f": $0] } ?? [:])
            let label = stored.map(\.description) ?? "absent"
            #expect(Outcome { "\(try ModelCoding.decode(Int64.self, from: RecordFieldSource(record), field: "f"))" }
                == Outcome { "\(try RecordDecoder().decode(Box<Int64>.self, from: RecordFieldSource(record)).f)" }, "Int64 from \(label)")
            #expect(Outcome { "\(try ModelCoding.decode(Int.self, from: RecordFieldSource(record), field: "f"))" }
                == Outcome { "\(try RecordDecoder().decode(Box<Int>.self, from: RecordFieldSource(record)).f)" }, "Int from \(label)")
            #expect(Outcome { "\(String(describing: try ModelCoding.decodeIfPresent(Int64.self, from: RecordFieldSource(record), field: "f")))" }
                == Outcome { "\(String(describing: try RecordDecoder().decode(OptionalBox<Int64>.self, from: RecordFieldSource(record)).f))" }, "Int64? from \(label)")
            #expect(Outcome { "\(String(describing: try ModelCoding.decodeIfPresent(Int.self, from: RecordFieldSource(record), field: "f")))" }
                == Outcome { "\(String(describing: try RecordDecoder().decode(OptionalBox<Int>.self, from: RecordFieldSource(record)).f))" }, "Int? from \(label)")
        }
        for value in Self.integerEdges(Int64.self) {
            #expect(Outcome { Self.modelCoding(try ModelCoding.encode(value, field: "f")) } == Outcome { try Self.recordEncoder(Box(f: value)) }, "Int64 \(value)")
        }
        for value in Self.integerEdges(Int.self) {
            #expect(Outcome { Self.modelCoding(try ModelCoding.encode(value, field: "f")) } == Outcome { try Self.recordEncoder(Box(f: value)) }, "Int \(value)")
        }
    }

    enum Genre: String, Codable { case novel }
    struct Nested: Codable, Equatable { var a: [Int]; var b: [String: Double]? }
    typealias MaybeInt = Int?

    /// Values that are not FieldCodable take RecordEncoder and RecordDecoder themselves.
    @Test func otherCodableValuesFallBackToTheCodec() throws {
        let nested = Nested(a: [1, 2], b: ["x": -0.0])
        #expect(Outcome { Self.modelCoding(try ModelCoding.encode(nested, field: "f")) } == Outcome { try Self.recordEncoder(Box(f: nested)) })
        #expect(Outcome { Self.modelCoding(try ModelCoding.encode(Genre.novel, field: "f")) } == Outcome { try Self.recordEncoder(Box(f: Genre.novel)) })
        #expect(Outcome { Self.modelCoding(try ModelCoding.encode([Double.nan], field: "f")) } == .failure("invalidValue"))
        let source = RecordFieldSource(Record(id: 1, fields: ["f": ["a": [1, 2], "b": ["x": -0.0]], "g": "novel", "h": "poem"]))
        #expect(try ModelCoding.decode(Nested.self, from: source, field: "f") == nested)
        #expect(try ModelCoding.decode(Genre.self, from: source, field: "g") == .novel)
        #expect(try ModelCoding.decodeIfPresent(Genre.self, from: source, field: "missing") == nil)
        // An optional the macro cannot see (behind a type alias) still reads a missing field as nil.
        #expect(try ModelCoding.decode(MaybeInt.self, from: source, field: "missing") == nil)
        for (field, type) in [("h", "Genre"), ("missing", "Nested")] {
            do {
                if type == "Genre" { _ = try ModelCoding.decode(Genre.self, from: source, field: field) } else { _ = try ModelCoding.decode(Nested.self, from: source, field: field) }
                Issue.record("decoding \(type) from '\(field)' succeeded")
            } catch let error as DepotError {
                #expect(error.code == .decoding)
                #expect(error.message.contains("'\(field)'"), "the message names the field: \(error.message)")
            }
        }
    }

    /// A stored infinity read as a Decimal is a decoding error (Foundation's Decimal(Double) traps on it).
    @Test func infinityIsNotADecimal() {
        for value: FieldValue in [.double(.infinity), .double(-.infinity)] {
            let record = Record(id: 1, fields: ["f": value])
            #expect(Outcome { "\(try RecordDecoder().decode(Box<Decimal>.self, from: record).f)" } == .failure("decoding"))
            #expect(Outcome { "\(try ModelCoding.decode(Decimal.self, from: RecordFieldSource(record), field: "f"))" } == .failure("decoding"))
        }
    }

    @Test func millisecondsSince1970() throws {
        let transformer = MillisecondsSince1970()
        #expect(try transformer.encode(Date(timeIntervalSince1970: 1.2345)) == 1234)
        #expect(try transformer.encode(Date(timeIntervalSince1970: -0.0005)) == -1, "rounded down, before 1970 too")
        #expect(try transformer.decode(1234) == Date(timeIntervalSince1970: 1.234))
        #expect(try transformer.decode(.double(-1)) == Date(timeIntervalSince1970: -0.001))
        #expect(throws: DepotError.self) { try transformer.encode(Date(timeIntervalSince1970: 1e300)) }
        for bad: FieldValue in [1.5, "1234", .null] {
            #expect(throws: DepotError.self) { try transformer.decode(bad) }
        }
        // Through ModelCoding: nil is absent without the transformer, and errors name the field.
        #expect(try ModelCoding.encode(Date?.none, field: "d", with: .millisecondsSince1970) == .null)
        let source = RecordFieldSource(Record(id: 1, fields: ["d": "soon"]))
        #expect(try ModelCoding.decodeIfPresent(Date.self, from: source, field: "e", with: .millisecondsSince1970) == nil)
        do {
            _ = try ModelCoding.decode(Date.self, from: source, field: "d", with: .millisecondsSince1970)
            Issue.record("a string was read as milliseconds")
        } catch let error as DepotError {
            #expect(error.code == .decoding && error.message.hasPrefix("Field 'd': "))
        }
    }
}
