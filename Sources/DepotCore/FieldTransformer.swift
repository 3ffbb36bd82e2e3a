import Foundation

/// Converts one property's value to the ``FieldValue`` that is stored and back, in place of
/// the type's own mapping (Docs/Models.md, "Transformers").
///
/// A `@Model` property marked `@Transform(transformer)` is written as
/// `transformer.encode(value)` and read as `transformer.decode(fieldValue)`; an optional
/// property stores `nil` as an absent field without asking the transformer. A transformer
/// knows nothing of records, drivers or stores, so the same one can convert a value on
/// the wire.
///
/// ```swift
/// struct Uppercased: FieldTransformer {
///     func encode(_ value: String) throws -> FieldValue { .string(value.uppercased()) }
///     func decode(_ value: FieldValue) throws -> String {
///         guard case .string(let text) = value else {
///             throw DepotError(.decoding, "Expected a string, found \(value.kind).")
///         }
///         return text
///     }
/// }
/// ```
public protocol FieldTransformer: Sendable {
    /// The property's type.
    associatedtype Value

    /// The field value stored for `value`. Must not be `.null` (that is an absent field).
    /// - Throws: ``DepotError`` `.invalidValue` or `.encoding` when `value` cannot be stored;
    ///   ``ModelCoding`` adds the field's name.
    func encode(_ value: Value) throws -> FieldValue

    /// The value `fieldValue` stands for.
    /// - Throws: ``DepotError`` `.decoding` when `fieldValue` is not one this transformer
    ///   writes; ``ModelCoding`` adds the field's name.
    func decode(_ fieldValue: FieldValue) throws -> Value
}

/// Stores a `Date` as an integer number of milliseconds since 1970-01-01 00:00 UTC,
/// rounded down, instead of ``RecordEncoder``'s seconds since 2001 as a double: what other
/// programs reading the store (JavaScript's `Date.now()`) expect.
///
/// Reads an `.int`, or a `.double` with an integral value. Sub-millisecond parts are lost.
///
/// ```swift
/// @Transform(.millisecondsSince1970) var created: Date
/// ```
public struct MillisecondsSince1970: FieldTransformer {
    /// The transformer; it holds no state.
    public init() {}

    /// The milliseconds since 1970, rounded down.
    /// - Throws: `.invalidValue` for a date whose milliseconds do not fit in 64 signed bits.
    public func encode(_ value: Date) throws -> FieldValue {
        let milliseconds = (value.timeIntervalSince1970 * 1000).rounded(.down)
        guard let exact = Int64(exactly: milliseconds) else {
            throw DepotError(.invalidValue, "The date \(value.timeIntervalSince1970) s since 1970 has no 64-bit millisecond count.")
        }
        return .int(exact)
    }

    /// The date `fieldValue` milliseconds after 1970-01-01.
    /// - Throws: `.decoding` for anything but an integer (or an integral double).
    public func decode(_ fieldValue: FieldValue) throws -> Date {
        let milliseconds: Int64
        switch fieldValue {
        case .int(let value): milliseconds = value
        case .double(let value):
            guard let exact = Int64(exactly: value) else {
                throw DepotError(.decoding, "Expected integer milliseconds since 1970, found \(value).")
            }
            milliseconds = exact
        default:
            throw DepotError(.decoding, "Expected integer milliseconds since 1970, found \(fieldValue.kind).")
        }
        return Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }
}

extension FieldTransformer where Self == MillisecondsSince1970 {
    /// A `Date` as integer milliseconds since 1970 (``MillisecondsSince1970``).
    public static var millisecondsSince1970: MillisecondsSince1970 { MillisecondsSince1970() }
}
