import Foundation

/// One value stored in a record field.
///
/// Every backend stores exactly these eight kinds, and every backend gives each of them
/// back unchanged: a bool stays a bool, an object stays an object, `-0.0` keeps its sign.
///
/// Equality (`==`) is structural and exact: `.int(1) != .double(1.0)` and
/// `.double(0.0) != .double(-0.0)`. Query semantics (where `1 == 1.0`) live in
/// ``QueryEvaluator``, not here.
///
/// ```swift
/// let v: FieldValue = ["name": "Ada", "tags": ["x", "y"], "age": 36]
/// ```
public enum FieldValue: Sendable {
    /// No value. At the top level of a record, null and a missing field are the same.
    case null
    /// `true` or `false`; never equal to a number.
    case bool(Bool)
    /// A 64-bit signed integer.
    case int(Int64)
    /// A 64-bit floating-point number, stored bit for bit (`-0.0`, infinities); never NaN.
    case double(Double)
    /// Text, compared and ordered by its UTF-8 bytes; NUL and any Unicode are kept as they are.
    case string(String)
    /// Raw bytes of any length, ordered byte by byte.
    case bytes(Data)
    /// An ordered list of values, which may nest.
    case array([FieldValue])
    /// Named values; keys inside an object are free text.
    case object([String: FieldValue])
}

extension FieldValue: Hashable {
    /// Exact structural equality: kinds must match (`.int(1) != .double(1.0)`), doubles compare
    /// by bit pattern (`0.0 != -0.0`) and strings by their UTF-8 bytes.
    public static func == (lhs: FieldValue, rhs: FieldValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.int(a), .int(b)): return a == b
        case let (.double(a), .double(b)): return a.bitPattern == b.bitPattern
        case let (.string(a), .string(b)): return BinaryText.equal(a, b)
        case let (.bytes(a), .bytes(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)): return a == b
        default: return false
        }
    }

    /// Hashes consistently with `==`: by kind, then exact value.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let b): hasher.combine(1); hasher.combine(b)
        case .int(let i): hasher.combine(2); hasher.combine(i)
        case .double(let d): hasher.combine(3); hasher.combine(d.bitPattern)
        case .string(let s): hasher.combine(4); BinaryText.hash(s, into: &hasher)
        case .bytes(let d): hasher.combine(5); hasher.combine(d)
        case .array(let a): hasher.combine(6); hasher.combine(a)
        case .object(let o): hasher.combine(7); hasher.combine(o)
        }
    }
}

extension FieldValue {
    /// The kind of a value, in the order used when a sort key meets several kinds:
    /// null < bool < number < string < bytes < array < object.
    public enum Kind: Int, Sendable, Comparable, CustomStringConvertible {
        /// The kinds, in the order a sort puts them; ints and doubles are both `number`.
        case null = 0, bool, number, string, bytes, array, object

        /// Orders kinds as a sort key does: null < bool < number < string < bytes < array < object.
        public static func < (lhs: Kind, rhs: Kind) -> Bool { lhs.rawValue < rhs.rawValue }

        /// The kind's name, as used in messages (`"number"`, `"string"`, …).
        public var description: String {
            switch self {
            case .null: "null"
            case .bool: "bool"
            case .number: "number"
            case .string: "string"
            case .bytes: "bytes"
            case .array: "array"
            case .object: "object"
            }
        }
    }

    /// The value's kind; ints and doubles are both `.number`.
    public var kind: Kind {
        switch self {
        case .null: .null
        case .bool: .bool
        case .int, .double: .number
        case .string: .string
        case .bytes: .bytes
        case .array: .array
        case .object: .object
        }
    }

    /// `true` for `.null`.
    public var isNull: Bool { if case .null = self { true } else { false } }

    /// The bool, or `nil` for any other kind.
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }
    /// The integer, or `nil` for any other kind (a double is not converted).
    public var intValue: Int64? { if case .int(let i) = self { i } else { nil } }
    /// The number as a `Double`: a double as it is, an integer converted (rounding past 2^53);
    /// `nil` for any other kind.
    public var doubleValue: Double? {
        switch self {
        case .double(let d): d
        case .int(let i): Double(i)
        default: nil
        }
    }
    /// The string, or `nil` for any other kind.
    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    /// The bytes, or `nil` for any other kind.
    public var bytesValue: Data? { if case .bytes(let d) = self { d } else { nil } }
    /// The array's elements, or `nil` for any other kind.
    public var arrayValue: [FieldValue]? { if case .array(let a) = self { a } else { nil } }
    /// The object's members, or `nil` for any other kind.
    public var objectValue: [String: FieldValue]? { if case .object(let o) = self { o } else { nil } }

    /// Checks that a value can be stored: no NaN anywhere (no backend keeps it exactly,
    /// and it breaks equality), nesting at most ``maximumDepth`` levels.
    /// - Throws: ``DepotError`` with code `.invalidValue`.
    public func validate(field: String, depth: Int = 0) throws {
        guard depth <= FieldValue.maximumDepth else {
            throw DepotError(.invalidValue, "Field '\(field)' nests deeper than \(FieldValue.maximumDepth) levels.")
        }
        switch self {
        case .double(let d) where d.isNaN:
            throw DepotError(.invalidValue, "Field '\(field)' holds NaN, which Depot does not store.")
        case .array(let items):
            for item in items { try item.validate(field: field, depth: depth + 1) }
        case .object(let members):
            for (_, item) in members { try item.validate(field: field, depth: depth + 1) }
        default: break
        }
    }

    /// The deepest nesting of arrays and objects a value may have.
    public static let maximumDepth = 64
}

extension FieldValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    /// `nil` is ``null``.
    public init(nilLiteral: ()) { self = .null }
    /// A boolean literal is ``bool(_:)``.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// An integer literal is ``int(_:)``.
    public init(integerLiteral value: Int64) { self = .int(value) }
    /// A floating-point literal is ``double(_:)``.
    public init(floatLiteral value: Double) { self = .double(value) }
    /// A string literal is ``string(_:)``.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An array literal is ``array(_:)``.
    public init(arrayLiteral elements: FieldValue...) { self = .array(elements) }
    /// A dictionary literal is ``object(_:)``; a repeated key keeps its last value.
    public init(dictionaryLiteral elements: (String, FieldValue)...) {
        var object: [String: FieldValue] = [:]
        for (key, value) in elements { object[key] = value }
        self = .object(object)
    }
}

extension FieldValue: CustomStringConvertible {
    /// A JSON-like rendering for messages and debugging (bytes as `b64:...`).
    public var description: String {
        switch self {
        case .null: return "null"
        case .bool(let b): return b ? "true" : "false"
        case .int(let i): return String(i)
        case .double(let d): return d.description
        case .string(let s): return "\"" + s.replacingOccurrences(of: "\"", with: "\\\"") + "\""
        case .bytes(let d): return "b64:" + d.base64EncodedString()
        case .array(let a): return "[" + a.map(\.description).joined(separator: ",") + "]"
        case .object(let o):
            return "{" + o.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value.description)" }.joined(separator: ",") + "}"
        }
    }
}

/// A type that converts to a ``FieldValue``, used where filters take Swift values.
public protocol FieldValueConvertible {
    /// The value as Depot stores it: for example a `Date` becomes seconds since 2001-01-01 and
    /// a `UUID` its upper-case string.
    var fieldValue: FieldValue { get }
}

extension FieldValue: FieldValueConvertible { public var fieldValue: FieldValue { self } }
extension Bool: FieldValueConvertible { public var fieldValue: FieldValue { .bool(self) } }
extension Int: FieldValueConvertible { public var fieldValue: FieldValue { .int(Int64(self)) } }
extension Int64: FieldValueConvertible { public var fieldValue: FieldValue { .int(self) } }
extension Int32: FieldValueConvertible { public var fieldValue: FieldValue { .int(Int64(self)) } }
extension Double: FieldValueConvertible { public var fieldValue: FieldValue { .double(self) } }
extension String: FieldValueConvertible { public var fieldValue: FieldValue { .string(self) } }
extension Data: FieldValueConvertible { public var fieldValue: FieldValue { .bytes(self) } }
extension UUID: FieldValueConvertible { public var fieldValue: FieldValue { .string(canonicalText) } }
extension Date: FieldValueConvertible { public var fieldValue: FieldValue { .double(timeIntervalSinceReferenceDate) } }
extension Optional: FieldValueConvertible where Wrapped: FieldValueConvertible {
    /// The wrapped value's field value, or ``FieldValue/null`` for `nil`.
    public var fieldValue: FieldValue { self?.fieldValue ?? .null }
}

extension FieldValue: Codable {
    /// Encodes as plain JSON-shaped values for other encoders (bytes as base64 text);
    /// ``RecordEncoder`` stores a `FieldValue` as it is.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let b): try container.encode(b)
        case .int(let i): try container.encode(i)
        case .double(let d): try container.encode(d)
        case .string(let s): try container.encode(s)
        case .bytes(let d): try container.encode(d.base64EncodedString())
        case .array(let a): try container.encode(a)
        case .object(let o): try container.encode(o)
        }
    }

    /// Decodes whatever shape is there; ``RecordDecoder`` returns stored values as they are.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let b = try? container.decode(Bool.self) { self = .bool(b) }
        else if let i = try? container.decode(Int64.self) { self = .int(i) }
        else if let d = try? container.decode(Double.self) { self = .double(d) }
        else if let s = try? container.decode(String.self) { self = .string(s) }
        else if let a = try? container.decode([FieldValue].self) { self = .array(a) }
        else if let o = try? container.decode([String: FieldValue].self) { self = .object(o) }
        else { throw DecodingError.dataCorruptedError(in: container, debugDescription: "Not a field value") }
    }
}
