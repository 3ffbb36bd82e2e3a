import Foundation

/// The conversions the code of a `@Model` type calls, one top-level field at a time
/// (Docs/Models.md).
///
/// Each function has overloads: a ``FieldCodable`` value (every scalar Depot stores) is
/// converted directly; any other `Codable` value (arrays, dictionaries, nested structs,
/// enums) goes through ``RecordEncoder`` or ``RecordDecoder`` for that one field; a
/// ``FieldTransformer`` replaces both. Every path gives the record the synthesized `Codable`
/// conformance of the same type gives, so a `@Model` type and its `Codable` twin read each
/// other's records.
///
/// ```swift
/// try sink.set(ModelCoding.encode(self.title, field: "title"), forField: "title")
/// self.title = try ModelCoding.decode(String.self, from: source, field: "title")
/// self.rating = try ModelCoding.decodeIfPresent(Int.self, from: source, field: "rating") ?? 0
/// ```
///
/// Errors name the field; ``Repository`` and the transactions add the collection and the id.
public enum ModelCoding {
    // MARK: Encoding

    /// A scalar's stored value. - Throws: `.invalidValue` (NaN, an unsigned integer above `Int64.max`).
    @inlinable
    public static func encode<T: FieldCodable>(_ value: T, field: String) throws -> FieldValue {
        try value.storedFieldValue(field: field)
    }

    /// An optional scalar's stored value: `.null` (an absent field) for `nil`.
    /// - Throws: `.invalidValue` as the non-optional overload does.
    @inlinable
    public static func encode<T: FieldCodable>(_ value: T?, field: String) throws -> FieldValue {
        guard let value else { return .null }
        return try value.storedFieldValue(field: field)
    }

    /// Any other `Encodable` value, as ``RecordEncoder`` encodes it in a top-level field
    /// (`nil` is `.null`, an absent field).
    /// - Throws: ``DepotError`` `.encoding` or `.invalidValue`, naming the field path.
    public static func encode<T: Encodable>(_ value: T, field: String) throws -> FieldValue {
        do {
            return try encodeValue(value, codingPath: [FieldKey(field)])
        } catch let error as DepotError {
            throw error
        } catch {
            throw DepotError(.encoding, "Could not encode field '\(field)' (\(T.self)): \(error)", cause: error)
        }
    }

    /// The value `transformer` stores for `value`.
    /// - Throws: the transformer's error, its message prefixed with the field's name.
    public static func encode<X: FieldTransformer>(_ value: X.Value, field: String, with transformer: X) throws -> FieldValue {
        do {
            return try transformer.encode(value)
        } catch {
            throw fieldError(error, field: field, code: .encoding)
        }
    }

    /// The value `transformer` stores for `value`; `.null` (an absent field) for `nil`
    /// without asking the transformer.
    /// - Throws: the transformer's error, its message prefixed with the field's name.
    public static func encode<X: FieldTransformer>(_ value: X.Value?, field: String, with transformer: X) throws -> FieldValue {
        guard let value else { return .null }
        return try encode(value, field: field, with: transformer)
    }

    // MARK: Decoding

    /// The scalar stored in `field`.
    /// - Throws: `.decoding` when the field is missing or holds a value that does not fit.
    @inlinable
    public static func decode<T: FieldCodable>(_ type: T.Type, from source: any FieldSource, field: String) throws -> T {
        guard let value = try source.value(forField: field) else { throw missingField(field, T.self) }
        return try T(storedFieldValue: value, field: field)
    }

    /// The scalar stored in `field`, `nil` when the record has no such field.
    /// - Throws: `.decoding` when the field holds a value that does not fit.
    @inlinable
    public static func decodeIfPresent<T: FieldCodable>(_ type: T.Type, from source: any FieldSource, field: String) throws -> T? {
        guard let value = try source.value(forField: field), !value.isNull else { return nil }
        return try T(storedFieldValue: value, field: field)
    }

    /// Any other `Decodable` value stored in `field`, read by ``RecordDecoder``'s rules.
    /// A missing field is `nil` when `T` is an `Optional`, an error otherwise.
    /// - Throws: `.decoding` naming the field path.
    public static func decode<T: Decodable>(_ type: T.Type, from source: any FieldSource, field: String) throws -> T {
        guard let value = try source.value(forField: field) else {
            if T.self is any OptionalMarker.Type, let none = Optional<Never>.none as Any as? T { return none }
            throw missingField(field, T.self)
        }
        return try decodeField(T.self, value, field)
    }

    /// Any other `Decodable` value stored in `field`, `nil` when the record has no such field.
    /// - Throws: `.decoding` naming the field path.
    public static func decodeIfPresent<T: Decodable>(_ type: T.Type, from source: any FieldSource, field: String) throws -> T? {
        guard let value = try source.value(forField: field), !value.isNull else { return nil }
        return try decodeField(T.self, value, field)
    }

    /// The value `transformer` reads from `field`.
    /// - Throws: `.decoding` when the field is missing, and the transformer's error with the
    ///   field's name.
    public static func decode<X: FieldTransformer>(_ type: X.Value.Type, from source: any FieldSource, field: String, with transformer: X) throws -> X.Value {
        guard let value = try source.value(forField: field) else { throw missingField(field, X.Value.self) }
        return try transform(value, field, transformer)
    }

    /// The value `transformer` reads from `field`, `nil` when the record has no such field.
    /// - Throws: the transformer's error with the field's name.
    public static func decodeIfPresent<X: FieldTransformer>(_ type: X.Value.Type, from source: any FieldSource, field: String, with transformer: X) throws -> X.Value? {
        guard let value = try source.value(forField: field), !value.isNull else { return nil }
        return try transform(value, field, transformer)
    }

    // MARK: Int64 and Int without a protocol witness

    // The generic overloads above reach a scalar's conversion through its FieldCodable
    // witness, a call that is not inlined and that releases the field name on every field.
    // The usual id and counter types get overloads that inline their conversion instead
    // (Docs/Models.md, "Cost of a typed read").

    /// `.int(value)`.
    @inlinable
    public static func encode(_ value: Int64, field: String) throws -> FieldValue { .int(value) }

    /// `.int(value)`.
    @inlinable
    public static func encode(_ value: Int, field: String) throws -> FieldValue { .int(Int64(value)) }

    /// The integer stored in `field`.
    /// - Throws: `.decoding` when the field is missing or holds a value that does not fit.
    @inlinable
    public static func decode(_ type: Int64.Type, from source: any FieldSource, field: String) throws -> Int64 {
        guard let value = try source.value(forField: field) else { throw missingField(field, Int64.self) }
        return try Int64(storedFieldValue: value, field: field)
    }

    /// The integer stored in `field`.
    /// - Throws: `.decoding` when the field is missing or holds a value that does not fit.
    @inlinable
    public static func decode(_ type: Int.Type, from source: any FieldSource, field: String) throws -> Int {
        guard let value = try source.value(forField: field) else { throw missingField(field, Int.self) }
        return try Int(storedFieldValue: value, field: field)
    }

    /// The integer stored in `field`, `nil` when the record has no such field.
    /// - Throws: `.decoding` when the field holds a value that does not fit.
    @inlinable
    public static func decodeIfPresent(_ type: Int64.Type, from source: any FieldSource, field: String) throws -> Int64? {
        guard let value = try source.value(forField: field), !value.isNull else { return nil }
        return try Int64(storedFieldValue: value, field: field)
    }

    /// The integer stored in `field`, `nil` when the record has no such field.
    /// - Throws: `.decoding` when the field holds a value that does not fit.
    @inlinable
    public static func decodeIfPresent(_ type: Int.Type, from source: any FieldSource, field: String) throws -> Int? {
        guard let value = try source.value(forField: field), !value.isNull else { return nil }
        return try Int(storedFieldValue: value, field: field)
    }

    // MARK: Ids

    /// `model` with the record id `id`, made by encoding its fields and decoding them again
    /// under the new id: what a model whose id cannot be assigned in place (a `let` id, a
    /// class) returns from ``StoredModel/assigningID(_:)``.
    /// - Throws: the model's encoding and decoding errors.
    public static func copy<M: StoredModel>(of model: M, withID id: RecordID) throws -> M {
        let sink = DictionaryFieldSink()
        _ = try model.encodeRecord(into: sink)
        return try M(record: RecordFieldSource(Record(id: id, fields: sink.fields)))
    }

    // MARK: Errors

    /// The `.decoding` error for a required field the record lacks.
    public static func missingField(_ field: String, _ type: Any.Type) -> DepotError {
        DepotError(.decoding, "The record has no field '\(field)' for a \(type), and the property has no default.")
    }

    private static func decodeField<T: Decodable>(_ type: T.Type, _ value: FieldValue, _ field: String) throws -> T {
        do {
            return try decodeValue(T.self, from: value, codingPath: [FieldKey(field)])
        } catch let error as DepotError {
            throw error
        } catch let error as DecodingError {
            throw fieldDecodingError(error, field: field, type: T.self)
        } catch {
            throw DepotError(.decoding, "Could not decode field '\(field)' as \(T.self).", cause: error)
        }
    }

    private static func transform<X: FieldTransformer>(_ value: FieldValue, _ field: String, _ transformer: X) throws -> X.Value {
        do {
            return try transformer.decode(value)
        } catch {
            throw fieldError(error, field: field, code: .decoding)
        }
    }

    /// A transformer's error with the field named: a ``DepotError`` keeps its code, anything
    /// else becomes `code`.
    private static func fieldError(_ error: any Error, field: String, code: DepotError.Code) -> DepotError {
        if var depotError = error as? DepotError {
            depotError.message = "Field '\(field)': \(depotError.message)"
            return depotError
        }
        return DepotError(code, "Field '\(field)': \(error)", cause: error)
    }
}
