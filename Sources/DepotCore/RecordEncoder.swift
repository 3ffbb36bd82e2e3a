import Foundation

/// Turns `Encodable` values into ``FieldValue``s directly, with no JSON in between.
///
/// The mapping (Docs/TypeMapping.md):
///
/// | Swift | stored as |
/// | --- | --- |
/// | `Bool` | `.bool` |
/// | `Int`, `Int8`...`Int64`, `UInt8`...`UInt32`, `UInt`/`UInt64` up to `Int64.max` | `.int` |
/// | `Double`, `Float` | `.double` (NaN is rejected) |
/// | `String` | `.string` |
/// | `Data` | `.bytes` |
/// | `Date` | `.double`: seconds since 2001-01-01 (`timeIntervalSinceReferenceDate`, exact) |
/// | `UUID` | `.string`, upper-case canonical form |
/// | `URL` | `.string` (`absoluteString`) |
/// | `Decimal` | `.string` (its exact decimal text) |
/// | raw-value enums | their raw value |
/// | structs, classes, `[String: T]` | `.object` |
/// | arrays, sets | `.array` |
/// | `nil` | absent at the top level of a record, `.null` inside arrays and objects |
///
/// ```swift
/// let value = try RecordEncoder().encode(user)   // .object(["id": 1, "name": "Ada"])
/// ```
public struct RecordEncoder: Sendable {
    /// An encoder; it holds no state, so one can be shared.
    public init() {}

    /// Encodes a value to a field value.
    /// - Throws: ``DepotError`` `.encoding` (unsupported key or value) or `.invalidValue` (NaN, overflow).
    public func encode<T: Encodable>(_ value: T) throws -> FieldValue {
        do {
            return try encodeValue(value, codingPath: [])
        } catch let error as DepotError {
            throw error
        } catch {
            throw DepotError(.encoding, "Could not encode \(T.self): \(error)", cause: error)
        }
    }

    /// Encodes a model to a record: its `id` key becomes the record id (`nil` when absent or null).
    public func encodeRecord<T: Encodable>(_ value: T) throws -> (id: RecordID?, fields: [String: FieldValue]) {
        guard case .object(var fields) = try encode(value) else {
            throw DepotError(.encoding, "\(T.self) does not encode as an object with fields, so it cannot be a record.")
        }
        let idValue = fields.removeValue(forKey: "id") ?? .null
        let id: RecordID?
        switch idValue {
        case .null: id = nil
        default:
            guard let parsed = RecordID(idValue) else {
                throw DepotError(.encoding, "The id of \(T.self) must encode as an integer or a string.")
            }
            id = parsed
        }
        if fields.values.contains(where: \.isNull) { fields = fields.filter { !$0.value.isNull } }
        return (id, fields)
    }

    /// Encodes a model's top-level fields straight into `sink`, one ``FieldSink/set(_:forField:)``
    /// per field in the order the model encodes them, and returns its id (`nil` when absent
    /// or null): the same id and fields as ``encodeRecord(_:)``, without building the
    /// dictionary. The `id` key is not handed to the sink; a top-level null is (as `.null`,
    /// meaning absent). Nested arrays and objects arrive whole.
    /// - Throws: ``DepotError`` `.encoding` or `.invalidValue` as ``encodeRecord(_:)`` does,
    ///   and whatever the sink throws.
    public func encodeRecord<T: Encodable>(_ value: T, into sink: any FieldSink) throws -> RecordID? {
        do {
            let storage = EncodingStorage()
            storage.sink = sink
            try value.encode(to: FieldEncoder(codingPath: [], storage: storage))
            func notAnObject() -> DepotError { DepotError(.encoding, "\(T.self) does not encode as an object with fields, so it cannot be a record.") }
            switch storage.shape {
            case .empty, .object:
                for (key, child) in storage.pendingMembers { try storage.setMember(try child.finish(), key) }
            case .value:
                // A model that encodes itself through a single-value container holding an object.
                guard case .object(let members) = storage.value else { throw notAnObject() }
                for (key, member) in members { try storage.setMember(member, key) }
            case .array:
                throw notAnObject()
            }
            switch storage.sinkID {
            case .null: return nil
            case let idValue:
                guard let parsed = RecordID(idValue) else {
                    throw DepotError(.encoding, "The id of \(T.self) must encode as an integer or a string.")
                }
                return parsed
            }
        } catch let error as DepotError {
            throw error
        } catch {
            throw DepotError(.encoding, "Could not encode \(T.self): \(error)", cause: error)
        }
    }
}

func encodeValue<T: Encodable>(_ value: T, codingPath: [any CodingKey]) throws -> FieldValue {
    // Metatype comparisons first: a dynamic cast per candidate type costs more than the
    // encoding of a small struct.
    if T.self == Date.self || T.self == Data.self || T.self == UUID.self || T.self == URL.self
        || T.self == Decimal.self || T.self == FieldValue.self {
        switch value {
        case let v as Date: return .double(v.timeIntervalSinceReferenceDate)
        case let v as Data: return .bytes(v)
        case let v as UUID: return .string(v.canonicalText)
        case let v as URL: return .string(v.absoluteString)
        case let v as Decimal: return .string(v.description)
        case let v as FieldValue: return v
        default: break
        }
    }
    let type = ObjectIdentifier(T.self)
    let capacity = keyCountByType.withLock { $0[type] } ?? 0
    let encoder = FieldEncoder(codingPath: codingPath, capacity: capacity)
    try value.encode(to: encoder)
    let result = try encoder.finish()
    if capacity == 0, case .object(let members) = result, !members.isEmpty {
        keyCountByType.withLock { $0[type] = members.count }
    }
    return result
}

/// Storage of one encoder level: a value, an object being built, or an array being built.
/// A class with plain stored properties, so every write mutates in place. One encode call
/// uses it on one thread, and no access to a property overlaps another (values are computed
/// before they are stored), so the dynamic exclusivity checks are turned off.
final class EncodingStorage {
    enum Shape { case empty, value, object, array }
    @exclusivity(unchecked) var shape: Shape = .empty
    @exclusivity(unchecked) var value: FieldValue = .null
    @exclusivity(unchecked) var members: [String: FieldValue] = [:]
    @exclusivity(unchecked) var items: [FieldValue] = []
    @exclusivity(unchecked) var pendingMembers: [String: EncodingStorage] = [:]
    @exclusivity(unchecked) var pendingItems: [Int: EncodingStorage] = [:]
    /// Set on a record's top level only: members go to the sink as they are encoded, except
    /// `id`, kept in ``sinkID``.
    @exclusivity(unchecked) var sink: (any FieldSink)?
    @exclusivity(unchecked) var sinkID: FieldValue = .null

    /// Sets member `key` of an object.
    @inline(__always) func setMember(_ value: FieldValue, _ key: String) throws {
        guard let sink else {
            members[key] = value
            return
        }
        if key == "id" {
            sinkID = value
        } else {
            try sink.set(value, forField: key)
        }
    }

    func becomeObject(capacity: Int) {
        guard shape != .object else { return }
        shape = .object
        if capacity > 0 && sink == nil { members.reserveCapacity(capacity) }
    }

    func becomeArray() {
        guard shape != .array else { return }
        shape = .array
    }

    func finish() throws -> FieldValue {
        switch shape {
        case .empty: return .object([:])
        case .value: return value
        case .object:
            for (key, storage) in pendingMembers { members[key] = try storage.finish() }
            return .object(members)
        case .array:
            for (index, storage) in pendingItems where index < items.count { items[index] = try storage.finish() }
            return .array(items)
        }
    }
}

/// How many keys each type encoded last time, so the next object is allocated at its size once.
let keyCountByType = Locked<[ObjectIdentifier: Int]>([:])

final class FieldEncoder: Encoder {
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    let storage: EncodingStorage
    let capacity: Int

    init(codingPath: [any CodingKey], storage: EncodingStorage = EncodingStorage(), capacity: Int = 0) {
        self.codingPath = codingPath
        self.storage = storage
        self.capacity = capacity
    }

    func finish() throws -> FieldValue { try storage.finish() }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        storage.becomeObject(capacity: capacity)
        return KeyedEncodingContainer(KeyedFieldEncoder<Key>(storage: storage, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        storage.becomeArray()
        return UnkeyedFieldEncoder(storage: storage, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { SingleFieldEncoder(storage: storage, codingPath: codingPath) }
}

@inline(__always) func checkedDouble(_ d: Double, _ path: @autoclosure () -> [any CodingKey]) throws -> FieldValue {
    if d.isNaN { throw DepotError(.invalidValue, "NaN at \(pathText(path())) cannot be stored.") }
    return .double(d)
}

@inline(__always) func checkedInt<I: BinaryInteger>(_ i: I, _ path: @autoclosure () -> [any CodingKey]) throws -> FieldValue {
    guard let v = Int64(exactly: i) else { throw DepotError(.invalidValue, "The integer at \(pathText(path())) does not fit in 64 signed bits.") }
    return .int(v)
}

func pathText(_ path: [any CodingKey]) -> String {
    path.isEmpty ? "the top level" : path.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
}

struct KeyedFieldEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let storage: EncodingStorage
    let codingPath: [any CodingKey]

    @inline(__always) private func set(_ value: FieldValue, _ key: Key) throws { try storage.setMember(value, key.stringValue) }

    mutating func encodeNil(forKey key: Key) throws { try set(.null, key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { try set(.bool(value), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { try set(.string(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { try set(try checkedDouble(value, codingPath + [key]), key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try set(try checkedDouble(Double(value), codingPath + [key]), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { try set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try set(.int(value), key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try set(try checkedInt(value, codingPath + [key]), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try set(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try set(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try set(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try set(try checkedInt(value, codingPath + [key]), key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { try set(try encodeValue(value, codingPath: codingPath + [key]), key) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let child = EncodingStorage()
        child.becomeObject(capacity: 0)
        addPending(child, key)
        return KeyedEncodingContainer(KeyedFieldEncoder<NestedKey>(storage: child, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let child = EncodingStorage()
        child.becomeArray()
        addPending(child, key)
        return UnkeyedFieldEncoder(storage: child, codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder {
        if let key = Key(stringValue: "super") { return superEncoder(forKey: key) }
        return FieldEncoder(codingPath: codingPath, storage: EncodingStorage())
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        let child = EncodingStorage()
        addPending(child, key)
        return FieldEncoder(codingPath: codingPath + [key], storage: child)
    }

    private func addPending(_ child: EncodingStorage, _ key: Key) { storage.pendingMembers[key.stringValue] = child }
}

struct UnkeyedFieldEncoder: UnkeyedEncodingContainer {
    let storage: EncodingStorage
    let codingPath: [any CodingKey]
    var count: Int { storage.items.count }

    @inline(__always) private func append(_ value: FieldValue) { storage.items.append(value) }

    private var indexKey: any CodingKey { IndexKey(count) }

    mutating func encodeNil() throws { append(.null) }
    mutating func encode(_ value: Bool) throws { append(.bool(value)) }
    mutating func encode(_ value: String) throws { append(.string(value)) }
    mutating func encode(_ value: Double) throws { append(try checkedDouble(value, codingPath + [indexKey])) }
    mutating func encode(_ value: Float) throws { append(try checkedDouble(Double(value), codingPath + [indexKey])) }
    mutating func encode(_ value: Int) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { append(.int(value)) }
    mutating func encode(_ value: UInt) throws { append(try checkedInt(value, codingPath + [indexKey])) }
    mutating func encode(_ value: UInt8) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: UInt16) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: UInt32) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: UInt64) throws { append(try checkedInt(value, codingPath + [indexKey])) }
    mutating func encode<T: Encodable>(_ value: T) throws { append(try encodeValue(value, codingPath: codingPath + [indexKey])) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let child = EncodingStorage()
        child.becomeObject(capacity: 0)
        let key = indexKey
        addPending(child)
        return KeyedEncodingContainer(KeyedFieldEncoder<NestedKey>(storage: child, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let child = EncodingStorage()
        child.becomeArray()
        let key = indexKey
        addPending(child)
        return UnkeyedFieldEncoder(storage: child, codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder {
        let child = EncodingStorage()
        let key = indexKey
        addPending(child)
        return FieldEncoder(codingPath: codingPath + [key], storage: child)
    }

    private func addPending(_ child: EncodingStorage) {
        storage.pendingItems[storage.items.count] = child
        storage.items.append(.null)
    }
}

struct SingleFieldEncoder: SingleValueEncodingContainer {
    let storage: EncodingStorage
    let codingPath: [any CodingKey]

    private func set(_ value: FieldValue) {
        storage.shape = .value
        storage.value = value
    }

    mutating func encodeNil() throws { set(.null) }
    mutating func encode(_ value: Bool) throws { set(.bool(value)) }
    mutating func encode(_ value: String) throws { set(.string(value)) }
    mutating func encode(_ value: Double) throws { set(try checkedDouble(value, codingPath)) }
    mutating func encode(_ value: Float) throws { set(try checkedDouble(Double(value), codingPath)) }
    mutating func encode(_ value: Int) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { set(.int(value)) }
    mutating func encode(_ value: UInt) throws { set(try checkedInt(value, codingPath)) }
    mutating func encode(_ value: UInt8) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: UInt16) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: UInt32) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: UInt64) throws { set(try checkedInt(value, codingPath)) }
    mutating func encode<T: Encodable>(_ value: T) throws { set(try encodeValue(value, codingPath: codingPath)) }
}

struct IndexKey: CodingKey {
    let intValue: Int?
    let stringValue: String
    init(_ index: Int) {
        intValue = index
        stringValue = String(index)
    }
    init?(intValue: Int) { self.init(intValue) }
    init?(stringValue: String) {
        guard let i = Int(stringValue) else { return nil }
        self.init(i)
    }
}
