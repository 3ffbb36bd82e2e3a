import Foundation

/// Turns ``FieldValue``s back into `Decodable` values, directly, with the mapping of
/// ``RecordEncoder``.
///
/// Decoding is exact for what the encoder wrote, and a little lenient for what a person
/// or another program wrote: a double with an integral value decodes as an integer, an
/// integer as a double, a UUID string in lower case as a UUID.
///
/// A top-level optional distinguishes absent (`nil`) from null (`.some(nil)` for a
/// double optional); deeper optional nesting collapses to `nil`.
public struct RecordDecoder: Sendable {
    /// A decoder; it holds no state, so one can be shared.
    public init() {}

    /// Decodes a value.
    /// - Throws: ``DepotError`` `.decoding`, naming the field path and what was found.
    public func decode<T: Decodable>(_ type: T.Type, from value: FieldValue) throws -> T {
        do {
            return try decodeValue(type, from: value, codingPath: [])
        } catch let error as DepotError {
            throw error
        } catch let error as DecodingError {
            throw DepotError(.decoding, "Could not decode \(T.self): \(describe(error))", cause: error)
        } catch {
            throw DepotError(.decoding, "Could not decode \(T.self).", cause: error)
        }
    }

    /// Decodes a model from a record: the record id is offered under the key `id`.
    public func decode<T: Decodable>(_ type: T.Type, from record: Record) throws -> T {
        do {
            return try T(from: FieldDecoder(value: .object(record.fields), codingPath: [], id: record.id.fieldValue))
        } catch let error as DepotError {
            throw error
        } catch let error as DecodingError {
            throw DepotError(.decoding, "Could not decode \(T.self): \(describe(error))", cause: error)
        } catch {
            throw DepotError(.decoding, "Could not decode \(T.self).", cause: error)
        }
    }

    /// Decodes a model from fields read in place (see ``FieldSource``): the same answer as
    /// decoding the ``Record`` the source stands for, without building it.
    /// - Throws: ``DepotError`` `.decoding`, naming the field path and what was found, or the
    ///   source's own error (`.corrupted`).
    public func decode<T: Decodable>(_ type: T.Type, from source: any FieldSource) throws -> T {
        let namesFailure = NamesFailure()
        do {
            let decoded = try T(from: FieldDecoder(value: .null, codingPath: [], id: source.recordID.fieldValue, source: source, namesFailure: namesFailure))
            // `allKeys` cannot throw: a model that listed the record's fields while the source
            // could not name them saw none, so its value is not the record's.
            if let error = namesFailure.error { throw error }
            return decoded
        } catch let error as DepotError {
            throw error
        } catch let error as DecodingError {
            throw DepotError(.decoding, "Could not decode \(T.self): \(describe(error))", cause: error)
        } catch {
            throw DepotError(.decoding, "Could not decode \(T.self).", cause: error)
        }
    }

    private func describe(_ error: DecodingError) -> String {
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .keyNotFound(_, let context), .dataCorrupted(let context):
            return "\(context.debugDescription) at \(pathText(context.codingPath))"
        @unknown default:
            return "\(error)"
        }
    }
}

func decodeValue<T: Decodable>(_ type: T.Type, from value: FieldValue, codingPath: [any CodingKey]) throws -> T {
    if T.self == Date.self {
        guard let seconds = value.doubleValue else { throw mismatch(T.self, value, codingPath) }
        return try cast(Date(timeIntervalSinceReferenceDate: seconds), T.self, codingPath)
    }
    if T.self == Data.self {
        guard case .bytes(let data) = value else { throw mismatch(T.self, value, codingPath) }
        return try cast(data, T.self, codingPath)
    }
    if T.self == UUID.self {
        guard case .string(let text) = value, let uuid = UUID(uuidString: text) else { throw mismatch(T.self, value, codingPath) }
        return try cast(uuid, T.self, codingPath)
    }
    if T.self == URL.self {
        guard case .string(let text) = value, let url = URL(string: text) else { throw mismatch(T.self, value, codingPath) }
        return try cast(url, T.self, codingPath)
    }
    if T.self == Decimal.self {
        let decimal: Decimal?
        switch value {
        case .string(let text): decimal = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX"))
        case .int(let i): decimal = Decimal(i)
        case .double(let d): decimal = d.isInfinite ? nil : Decimal(d)  // Decimal(_: Double) traps on infinity
        default: decimal = nil
        }
        guard let decimal else { throw mismatch(T.self, value, codingPath) }
        return try cast(decimal, T.self, codingPath)
    }
    if T.self == FieldValue.self { return try cast(value, T.self, codingPath) }
    return try T(from: FieldDecoder(value: value, codingPath: codingPath))
}

/// `value as? T` where the caller has already checked `T`; throws instead of trapping.
@inline(__always) func cast<T>(_ value: Any, _ type: T.Type, _ path: [any CodingKey]) throws -> T {
    guard let result = value as? T else {
        throw DecodingError.typeMismatch(T.self, .init(codingPath: path, debugDescription: "Internal type check failed"))
    }
    return result
}

func mismatch(_ type: Any.Type, _ value: FieldValue, _ path: [any CodingKey]) -> DecodingError {
    .typeMismatch(type, DecodingError.Context(codingPath: path, debugDescription: "Expected \(type), found \(value.kind)"))
}

/// Marks `Optional` so the decoder can tell `.some(nil)` from `nil`.
protocol OptionalMarker {}
extension Optional: OptionalMarker {}

struct FieldDecoder: Decoder {
    let value: FieldValue
    let codingPath: [any CodingKey]
    /// A record's id, offered under the key `id` without copying the fields.
    var id: FieldValue? = nil
    /// A record read in place; when set, `value` is unused and the record is an object.
    var source: (any FieldSource)? = nil
    /// Where a keyed container over `source` leaves the error of a `fieldNames()` that threw.
    var namesFailure: NamesFailure? = nil
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    /// The value as a ``FieldValue``, building the object when the record is read in place.
    private func materialized() throws -> FieldValue {
        guard let source else { return value }
        var members: [String: FieldValue] = [:]
        for name in try source.fieldNames() { members[name] = try source.value(forField: name) }
        if let id { members["id"] = id }
        return .object(members)
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        if let source {
            return KeyedDecodingContainer(KeyedFieldDecoder<Key>(members: [:], codingPath: codingPath, id: id, source: source, namesFailure: namesFailure))
        }
        guard case .object(let members) = value else {
            throw DecodingError.typeMismatch([String: Any].self, .init(codingPath: codingPath, debugDescription: "Expected an object, found \(value.kind)"))
        }
        return KeyedDecodingContainer(KeyedFieldDecoder<Key>(members: members, codingPath: codingPath, id: id))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let value = try materialized()
        guard case .array(let items) = value else {
            throw DecodingError.typeMismatch([Any].self, .init(codingPath: codingPath, debugDescription: "Expected an array, found \(value.kind)"))
        }
        return UnkeyedFieldDecoder(items: items, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { SingleFieldDecoder(value: try materialized(), codingPath: codingPath) }
}

/// Reads scalars out of field values, shared by the three container kinds.
enum Scalar {
    static func bool(_ v: FieldValue, _ path: @autoclosure () -> [any CodingKey]) throws -> Bool {
        guard case .bool(let b) = v else { throw mismatch(Bool.self, v, path()) }
        return b
    }

    static func string(_ v: FieldValue, _ path: @autoclosure () -> [any CodingKey]) throws -> String {
        guard case .string(let s) = v else { throw mismatch(String.self, v, path()) }
        return s
    }

    static func double(_ v: FieldValue, _ path: @autoclosure () -> [any CodingKey]) throws -> Double {
        switch v {
        case .double(let d): return d
        case .int(let i): return Double(i)
        default: throw mismatch(Double.self, v, path())
        }
    }

    static func integer<I: FixedWidthInteger>(_ type: I.Type, _ v: FieldValue, _ path: @autoclosure () -> [any CodingKey]) throws -> I {
        switch v {
        case .int(let i):
            guard let value = I(exactly: i) else {
                throw DecodingError.dataCorrupted(.init(codingPath: path(), debugDescription: "\(i) does not fit in \(I.self)"))
            }
            return value
        case .double(let d):
            guard let value = I(exactly: d) else { throw mismatch(I.self, v, path()) }
            return value
        default:
            throw mismatch(I.self, v, path())
        }
    }
}

/// The first error a source threw from `fieldNames()` during one decode.
final class NamesFailure {
    var error: (any Error)?
}

/// A class, not a struct: `KeyedDecodingContainer` boxes its container and the box's
/// unspecialized methods copy a struct container on every field (a value-witness copy
/// retaining each reference it holds); a class reference costs one retain.
final class KeyedFieldDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let members: [String: FieldValue]
    let codingPath: [any CodingKey]
    let id: FieldValue?
    /// A record read in place; when set, fields come from it and `members` is unused.
    let source: (any FieldSource)?
    /// Where ``allKeys`` leaves the error of a source that cannot name its fields.
    let namesFailure: NamesFailure?

    init(members: [String: FieldValue], codingPath: [any CodingKey], id: FieldValue? = nil, source: (any FieldSource)? = nil, namesFailure: NamesFailure? = nil) {
        self.members = members
        self.codingPath = codingPath
        self.id = id
        self.source = source
        self.namesFailure = namesFailure
    }

    /// The record's keys. `allKeys` cannot throw: when the source cannot name its fields,
    /// the keys are the id's alone and the error goes to ``namesFailure``, which
    /// `RecordDecoder.decode(_:from:)` (over a source) throws once the model is built.
    var allKeys: [Key] {
        var names: [String] = []
        if let source {
            do {
                names = try source.fieldNames()
            } catch {
                if namesFailure?.error == nil { namesFailure?.error = error }
            }
        } else {
            names = Array(members.keys)
        }
        return (id == nil ? [] : [Key(stringValue: "id")].compactMap { $0 }) + names.compactMap { Key(stringValue: $0) }
    }
    /// A field whose value the source cannot read counts as present: `contains` cannot
    /// throw, and reporting it absent would let a model take its default in place of the
    /// source's error. The decode that follows throws that error.
    func contains(_ key: Key) -> Bool {
        do { return try lookup(key) != nil } catch { return true }
    }

    @inline(__always) private func lookup(_ key: Key) throws -> FieldValue? {
        try lookup(key.stringValue)
    }

    @inline(__always) private func lookup(_ name: String) throws -> FieldValue? {
        if name == "id", let id { return id }
        if let source { return try source.value(forField: name) }
        return members[name]
    }

    private func value(_ key: Key) throws -> FieldValue {
        guard let v = try lookup(key) else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "No value for '\(key.stringValue)'"))
        }
        return v
    }

    @inline(__always) private func nonNull(_ key: Key, _ type: Any.Type) throws -> FieldValue {
        guard let v = try lookup(key) else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "No value for '\(key.stringValue)'"))
        }
        if v.isNull { throw DecodingError.valueNotFound(type, .init(codingPath: codingPath + [key], debugDescription: "Found null")) }
        return v
    }

    func decodeNil(forKey key: Key) throws -> Bool { (try lookup(key) ?? .null).isNull }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try Scalar.bool(nonNull(key, type), codingPath + [key]) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try Scalar.string(nonNull(key, type), codingPath + [key]) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try Scalar.double(nonNull(key, type), codingPath + [key]) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { Float(try Scalar.double(nonNull(key, type), codingPath + [key])) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try Scalar.integer(type, nonNull(key, type), codingPath + [key]) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try Scalar.integer(type, nonNull(key, type), codingPath + [key]) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try Scalar.integer(type, nonNull(key, type), codingPath + [key]) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try Scalar.integer(type, nonNull(key, type), codingPath + [key]) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try Scalar.integer(type, nonNull(key, type), codingPath + [key]) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try Scalar.integer(type, nonNull(key, type), codingPath + [key]) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try Scalar.integer(type, nonNull(key, type), codingPath + [key]) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try Scalar.integer(type, nonNull(key, type), codingPath + [key]) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try Scalar.integer(type, nonNull(key, type), codingPath + [key]) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try Scalar.integer(type, nonNull(key, type), codingPath + [key]) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try decodeValue(type, from: value(key), codingPath: codingPath + [key])
    }

    /// Absent → `nil`; null → `nil`, except that an optional `T` receives `.some(nil)`.
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let v = try lookup(key) else { return nil }
        if v.isNull && !(T.self is any OptionalMarker.Type) { return nil }
        return try decodeValue(type, from: v, codingPath: codingPath + [key])
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try FieldDecoder(value: value(key), codingPath: codingPath + [key]).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try FieldDecoder(value: value(key), codingPath: codingPath + [key]).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder { FieldDecoder(value: try lookup("super") ?? .null, codingPath: codingPath) }
    func superDecoder(forKey key: Key) throws -> any Decoder { FieldDecoder(value: try lookup(key) ?? .null, codingPath: codingPath + [key]) }
}

struct UnkeyedFieldDecoder: UnkeyedDecodingContainer {
    let items: [FieldValue]
    let codingPath: [any CodingKey]
    var currentIndex = 0
    var count: Int? { items.count }
    var isAtEnd: Bool { currentIndex >= items.count }

    private mutating func next(_ type: Any.Type) throws -> (FieldValue, [any CodingKey]) {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(type, .init(codingPath: codingPath + [IndexKey(currentIndex)], debugDescription: "The array has no more elements"))
        }
        defer { currentIndex += 1 }
        return (items[currentIndex], codingPath + [IndexKey(currentIndex)])
    }

    private mutating func nextNonNull(_ type: Any.Type) throws -> (FieldValue, [any CodingKey]) {
        let (v, path) = try next(type)
        if v.isNull {
            currentIndex -= 1
            throw DecodingError.valueNotFound(type, .init(codingPath: path, debugDescription: "Found null"))
        }
        return (v, path)
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd else { return false }
        if items[currentIndex].isNull {
            currentIndex += 1
            return true
        }
        return false
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { let (v, p) = try nextNonNull(type); return try Scalar.bool(v, p) }
    mutating func decode(_ type: String.Type) throws -> String { let (v, p) = try nextNonNull(type); return try Scalar.string(v, p) }
    mutating func decode(_ type: Double.Type) throws -> Double { let (v, p) = try nextNonNull(type); return try Scalar.double(v, p) }
    mutating func decode(_ type: Float.Type) throws -> Float { let (v, p) = try nextNonNull(type); return Float(try Scalar.double(v, p)) }
    mutating func decode(_ type: Int.Type) throws -> Int { let (v, p) = try nextNonNull(type); return try Scalar.integer(type, v, p) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { let (v, p) = try nextNonNull(type); return try Scalar.integer(type, v, p) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { let (v, p) = try nextNonNull(type); return try Scalar.integer(type, v, p) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { let (v, p) = try nextNonNull(type); return try Scalar.integer(type, v, p) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { let (v, p) = try nextNonNull(type); return try Scalar.integer(type, v, p) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { let (v, p) = try nextNonNull(type); return try Scalar.integer(type, v, p) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { let (v, p) = try nextNonNull(type); return try Scalar.integer(type, v, p) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { let (v, p) = try nextNonNull(type); return try Scalar.integer(type, v, p) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { let (v, p) = try nextNonNull(type); return try Scalar.integer(type, v, p) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { let (v, p) = try nextNonNull(type); return try Scalar.integer(type, v, p) }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let (v, p) = try next(type)
        return try decodeValue(type, from: v, codingPath: p)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        let (v, p) = try next([String: Any].self)
        return try FieldDecoder(value: v, codingPath: p).container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let (v, p) = try next([Any].self)
        return try FieldDecoder(value: v, codingPath: p).unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder {
        let (v, p) = try next(Any.self)
        return FieldDecoder(value: v, codingPath: p)
    }
}

struct SingleFieldDecoder: SingleValueDecodingContainer {
    let value: FieldValue
    let codingPath: [any CodingKey]

    private func nonNull(_ type: Any.Type) throws -> FieldValue {
        if value.isNull { throw DecodingError.valueNotFound(type, .init(codingPath: codingPath, debugDescription: "Found null")) }
        return value
    }

    func decodeNil() -> Bool { value.isNull }
    func decode(_ type: Bool.Type) throws -> Bool { try Scalar.bool(nonNull(type), codingPath) }
    func decode(_ type: String.Type) throws -> String { try Scalar.string(nonNull(type), codingPath) }
    func decode(_ type: Double.Type) throws -> Double { try Scalar.double(nonNull(type), codingPath) }
    func decode(_ type: Float.Type) throws -> Float { Float(try Scalar.double(nonNull(type), codingPath)) }
    func decode(_ type: Int.Type) throws -> Int { try Scalar.integer(type, nonNull(type), codingPath) }
    func decode(_ type: Int8.Type) throws -> Int8 { try Scalar.integer(type, nonNull(type), codingPath) }
    func decode(_ type: Int16.Type) throws -> Int16 { try Scalar.integer(type, nonNull(type), codingPath) }
    func decode(_ type: Int32.Type) throws -> Int32 { try Scalar.integer(type, nonNull(type), codingPath) }
    func decode(_ type: Int64.Type) throws -> Int64 { try Scalar.integer(type, nonNull(type), codingPath) }
    func decode(_ type: UInt.Type) throws -> UInt { try Scalar.integer(type, nonNull(type), codingPath) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try Scalar.integer(type, nonNull(type), codingPath) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try Scalar.integer(type, nonNull(type), codingPath) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try Scalar.integer(type, nonNull(type), codingPath) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try Scalar.integer(type, nonNull(type), codingPath) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decodeValue(type, from: value, codingPath: codingPath) }
}
