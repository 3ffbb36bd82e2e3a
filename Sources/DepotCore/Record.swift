/// The id of a record: a 64-bit integer or a string (UUIDs travel as strings).
///
/// Ids order integers numerically, then strings by their UTF-8 bytes; integers come
/// before strings if a collection ever holds both.
public enum RecordID: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// An integer id; integer ids order numerically.
    case int(Int64)
    /// A string id of 1 to 512 UTF-8 bytes without NUL; string ids order by their bytes.
    case string(String)

    /// Integers numerically, strings by their UTF-8 bytes, and every integer before every string.
    public static func < (lhs: RecordID, rhs: RecordID) -> Bool {
        switch (lhs, rhs) {
        case let (.int(a), .int(b)): return a < b
        case (.int, .string): return true
        case (.string, .int): return false
        case let (.string(a), .string(b)): return BinaryText.compare(a, b) < 0
        }
    }

    /// Ids are equal when they have the same kind and value; strings compare byte for byte (no
    /// Unicode normalization).
    public static func == (lhs: RecordID, rhs: RecordID) -> Bool {
        switch (lhs, rhs) {
        case let (.int(a), .int(b)): return a == b
        case let (.string(a), .string(b)): return BinaryText.equal(a, b)
        default: return false
        }
    }

    /// Hashes by kind and exact value, consistently with ``==(_:_:)``.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .int(let i): hasher.combine(0); hasher.combine(i)
        case .string(let s): hasher.combine(1); BinaryText.hash(s, into: &hasher)
        }
    }

    /// The id as a field value (`.int` or `.string`).
    public var fieldValue: FieldValue {
        switch self {
        case .int(let i): .int(i)
        case .string(let s): .string(s)
        }
    }

    /// Reads an id from a field value: ints and strings only.
    public init?(_ value: FieldValue) {
        switch value {
        case .int(let i): self = .int(i)
        case .string(let s): self = .string(s)
        default: return nil
        }
    }

    /// The id's kind.
    public var kind: IDKind {
        switch self {
        case .int: .int
        case .string: .string
        }
    }

    /// The integer, or the string quoted and shortened for messages.
    public var description: String {
        switch self {
        case .int(let i): String(i)
        case .string(let s): CollectionName.quotedForMessage(s)
        }
    }

    /// Checks the id can be stored: string ids are 1 to 512 UTF-8 bytes with no NUL.
    /// - Throws: ``DepotError`` `.invalidValue`.
    public func validate(collection: String? = nil) throws {
        if case .string(let s) = self {
            let count = s.utf8.count
            guard count >= 1, count <= 512, !s.utf8.contains(0) else {
                throw DepotError(.invalidValue, "String ids must be 1 to 512 bytes with no NUL.", collection: collection)
            }
        }
    }
}

extension RecordID: ExpressibleByIntegerLiteral, ExpressibleByStringLiteral {
    /// An integer literal is an ``int(_:)`` id.
    public init(integerLiteral value: Int64) { self = .int(value) }
    /// A string literal is a ``string(_:)`` id.
    public init(stringLiteral value: String) { self = .string(value) }
}

/// Which kind of id a collection uses.
public enum IDKind: String, Sendable, Hashable, Codable {
    /// 64-bit integer ids; the store can assign them.
    case int
    /// String ids (UUIDs travel as strings).
    case string
}

/// A stored record: an id and its top-level fields.
///
/// A field that is absent and a field that is `.null` are the same to queries; drivers
/// keep the difference when they can but need not.
public struct Record: Hashable, Sendable, CustomStringConvertible {
    /// The record's id, unique in its collection.
    public var id: RecordID
    /// The top-level fields by name; the id is not among them.
    public var fields: [String: FieldValue]

    /// Makes a record from an id and its fields.
    public init(id: RecordID, fields: [String: FieldValue] = [:]) {
        self.id = id
        self.fields = fields
    }

    /// The value of a field, `.null` when absent. The name `id` reads the record id.
    public subscript(field: String) -> FieldValue {
        get { field == "id" ? id.fieldValue : (fields[field] ?? .null) }
    }

    /// Validates field names and values before a write.
    /// - Throws: ``DepotError`` `.invalidName` or `.invalidValue`.
    public func validate(collection: String? = nil) throws {
        try id.validate(collection: collection)
        for (name, value) in fields {
            try FieldName.validate(name, collection: collection)
            try value.validate(field: name)
        }
    }

    /// The id and the fields as JSON-like text, for messages and debugging.
    public var description: String { "Record(\(id), \(FieldValue.object(fields)))" }
}

extension Record {
    /// The record with top-level `.null` fields removed: null and absent are the same, and
    /// drivers store neither.
    public var withoutNulls: Record {
        if !fields.values.contains(where: \.isNull) { return self }
        return Record(id: id, fields: fields.filter { !$0.value.isNull })
    }
}
