import Foundation

/// A type that converts to and from a single ``FieldValue`` without the `Codable` machinery,
/// giving exactly what ``RecordEncoder`` stores and accepting exactly what ``RecordDecoder``
/// reads (Docs/TypeMapping.md): the same value, the same leniency, the same error codes.
///
/// Code the `@Model` macro writes calls ``ModelCoding``, whose overloads take this fast path
/// for the conforming types and fall back to ``RecordEncoder`` and ``RecordDecoder`` for any
/// other `Codable` value. The conforming types are `Bool`, every fixed-width integer,
/// `Double`, `Float`, `String`, `Data`, `Date`, `UUID`, `URL`, `Decimal` and ``FieldValue``;
/// ``ModelCoding`` handles an `Optional` of any of them.
///
/// Conform your own type only if its `Codable` form is a single value and you write exactly
/// that value here: the conformance checks compare a `@Model` type's records with those of
/// the equivalent `Codable` type.
public protocol FieldCodable: Codable {
    /// The value as ``RecordEncoder`` stores it in a top-level field.
    /// - Parameter field: the field's name, for error messages.
    /// - Throws: ``DepotError`` `.invalidValue` where the encoder rejects the value (NaN, an
    ///   unsigned integer above `Int64.max`).
    func storedFieldValue(field: String) throws -> FieldValue

    /// The value ``RecordDecoder`` reads from `value`, with the same leniency (an integral
    /// double into an integer, an integer into a `Double`, a lower-case UUID).
    /// - Parameter field: the field's name, for error messages.
    /// - Throws: ``DepotError`` `.decoding` naming the field when `value` does not fit.
    init(storedFieldValue value: FieldValue, field: String) throws
}

/// The coding key naming a top-level field in the errors of ``FieldCodable`` conversions.
struct FieldKey: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }
    init(_ name: String) { stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// Runs one of the decoder's scalar readers for a top-level field and turns its
/// `DecodingError` into the ``DepotError`` `.decoding` that ``RecordDecoder`` would throw.
/// `read` gets a maker of the coding path, not the path: the scalar readers take it as an
/// autoclosure, so the path (an array of one existential key) is built only for an error,
/// never for a value that fits.
@inline(__always) func readScalar<T>(_ field: String, _ read: (() -> [any CodingKey]) throws -> T) throws -> T {
    do {
        return try read { [FieldKey(field)] }
    } catch let error as DecodingError {
        throw fieldDecodingError(error, field: field, type: T.self)
    }
}

/// The ``DepotError`` `.decoding` for a `DecodingError` met while reading `field`.
func fieldDecodingError(_ error: DecodingError, field: String, type: Any.Type) -> DepotError {
    let detail: String
    switch error {
    case .typeMismatch(_, let context), .valueNotFound(_, let context), .keyNotFound(_, let context), .dataCorrupted(let context):
        detail = context.debugDescription
    @unknown default:
        detail = "\(error)"
    }
    return DepotError(.decoding, "Could not decode field '\(field)' as \(type): \(detail).", cause: error)
}

extension Bool: FieldCodable {
    /// `.bool`.
    public func storedFieldValue(field: String) throws -> FieldValue { .bool(self) }
    /// Reads a `.bool`. - Throws: `.decoding` for any other kind.
    public init(storedFieldValue value: FieldValue, field: String) throws {
        if case .bool(let exact) = value {
            self = exact
            return
        }
        self = try readScalar(field) { try Scalar.bool(value, $0()) }
    }
}

extension String: FieldCodable {
    /// `.string`.
    public func storedFieldValue(field: String) throws -> FieldValue { .string(self) }
    /// Reads a `.string`. - Throws: `.decoding` for any other kind.
    public init(storedFieldValue value: FieldValue, field: String) throws {
        if case .string(let exact) = value {
            self = exact
            return
        }
        self = try readScalar(field) { try Scalar.string(value, $0()) }
    }
}

extension Double: FieldCodable {
    /// `.double`. - Throws: `.invalidValue` for NaN.
    public func storedFieldValue(field: String) throws -> FieldValue { try checkedDouble(self, [FieldKey(field)]) }
    /// Reads a `.double`, or an `.int` converted. - Throws: `.decoding` for any other kind.
    public init(storedFieldValue value: FieldValue, field: String) throws {
        if case .double(let exact) = value {
            self = exact
            return
        }
        self = try readScalar(field) { try Scalar.double(value, $0()) }
    }
}

extension Float: FieldCodable {
    /// `.double`. - Throws: `.invalidValue` for NaN.
    public func storedFieldValue(field: String) throws -> FieldValue { try checkedDouble(Double(self), [FieldKey(field)]) }
    /// Reads a number as a `Double` and converts it to `Float`. - Throws: `.decoding` for any other kind.
    public init(storedFieldValue value: FieldValue, field: String) throws {
        self = Float(try readScalar(field) { try Scalar.double(value, $0()) })
    }
}

/// The integer types' conversion, shared: `.int`, and `.invalidValue` for an unsigned
/// value above `Int64.max`; reads an `.int` that fits, or an integral `.double`.
public protocol FieldCodableInteger: FieldCodable, FixedWidthInteger {}

extension FieldCodableInteger {
    /// `.int`. - Throws: `.invalidValue` when the value does not fit in 64 signed bits.
    public func storedFieldValue(field: String) throws -> FieldValue { try checkedInt(self, [FieldKey(field)]) }
    /// Reads an `.int` that fits, or a `.double` with an integral value that fits.
    /// - Throws: `.decoding` otherwise.
    @inlinable
    public init(storedFieldValue value: FieldValue, field: String) throws {
        // The common case first: an `.int` that fits, with no closure and no generic reader.
        if case .int(let int) = value, let exact = Self(exactly: int) {
            self = exact
            return
        }
        self = try Self.readInteger(value, field: field)
    }

    /// The other cases of ``init(storedFieldValue:field:)``: an integral `.double`, or the error.
    @usableFromInline
    static func readInteger(_ value: FieldValue, field: String) throws -> Self {
        try readScalar(field) { try Scalar.integer(Self.self, value, $0()) }
    }
}

// `Int` and `Int64`, the usual id and counter types, have concrete conversions: the
// protocol extension's generic ones, reached through the conformance's witness, looked up
// generic metadata on every field a model decoded (Docs/Models.md, "Cost of a typed read").

extension Int: FieldCodableInteger {
    /// `.int` (every `Int` fits in 64 bits).
    @inlinable
    public func storedFieldValue(field: String) throws -> FieldValue { .int(Int64(self)) }

    /// Reads an `.int` that fits, or a `.double` with an integral value that fits.
    /// - Throws: `.decoding` otherwise.
    @inlinable
    public init(storedFieldValue value: FieldValue, field: String) throws {
        if case .int(let int) = value, int >= Int64(Int.min), int <= Int64(Int.max) {
            self = Int(truncatingIfNeeded: int)
            return
        }
        self = try Self.readInteger(value, field: field)
    }
}

extension Int64: FieldCodableInteger {
    /// `.int`.
    @inlinable
    public func storedFieldValue(field: String) throws -> FieldValue { .int(self) }

    /// Reads an `.int`, or a `.double` with an integral value that fits.
    /// - Throws: `.decoding` otherwise.
    @inlinable
    public init(storedFieldValue value: FieldValue, field: String) throws {
        if case .int(let int) = value {
            self = int
            return
        }
        self = try Self.readInteger(value, field: field)
    }
}

extension Int8: FieldCodableInteger {}
extension Int16: FieldCodableInteger {}
extension Int32: FieldCodableInteger {}
extension UInt: FieldCodableInteger {}
extension UInt8: FieldCodableInteger {}
extension UInt16: FieldCodableInteger {}
extension UInt32: FieldCodableInteger {}
extension UInt64: FieldCodableInteger {}

extension Data: FieldCodable {
    /// `.bytes`.
    public func storedFieldValue(field: String) throws -> FieldValue { .bytes(self) }
    /// Reads `.bytes`. - Throws: `.decoding` for any other kind.
    public init(storedFieldValue value: FieldValue, field: String) throws {
        self = try readScalar(field) { try decodeValue(Data.self, from: value, codingPath: $0()) }
    }
}

extension Date: FieldCodable {
    /// `.double`: seconds since 2001-01-01.
    public func storedFieldValue(field: String) throws -> FieldValue { .double(timeIntervalSinceReferenceDate) }
    /// Reads a number of seconds since 2001-01-01. - Throws: `.decoding` for any other kind.
    public init(storedFieldValue value: FieldValue, field: String) throws {
        self = try readScalar(field) { try decodeValue(Date.self, from: value, codingPath: $0()) }
    }
}

extension UUID: FieldCodable {
    /// `.string`, upper case.
    public func storedFieldValue(field: String) throws -> FieldValue { .string(canonicalText) }
    /// Reads a UUID string in either case. - Throws: `.decoding` otherwise.
    public init(storedFieldValue value: FieldValue, field: String) throws {
        self = try readScalar(field) { try decodeValue(UUID.self, from: value, codingPath: $0()) }
    }
}

extension URL: FieldCodable {
    /// `.string`: the URL's `absoluteString`.
    public func storedFieldValue(field: String) throws -> FieldValue { .string(absoluteString) }
    /// Reads a string that `URL(string:)` accepts. - Throws: `.decoding` otherwise.
    public init(storedFieldValue value: FieldValue, field: String) throws {
        self = try readScalar(field) { try decodeValue(URL.self, from: value, codingPath: $0()) }
    }
}

extension Decimal: FieldCodable {
    /// `.string`: the decimal's exact text.
    public func storedFieldValue(field: String) throws -> FieldValue { .string(description) }
    /// Reads decimal text, an `.int` or a `.double`. - Throws: `.decoding` otherwise.
    public init(storedFieldValue value: FieldValue, field: String) throws {
        self = try readScalar(field) { try decodeValue(Decimal.self, from: value, codingPath: $0()) }
    }
}

extension FieldValue: FieldCodable {
    /// The value itself.
    public func storedFieldValue(field: String) throws -> FieldValue { self }
    /// The value itself; never throws.
    public init(storedFieldValue value: FieldValue, field: String) throws { self = value }
}
