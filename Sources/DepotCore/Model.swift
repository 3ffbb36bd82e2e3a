import Foundation

/// A type stored as records of one collection: its id, its schema, and how its fields are
/// written to a record and read back.
///
/// Two kinds of types conform:
/// - ``Model``: any `Codable` type with an `id`; the mapping goes through the `Codable`
///   machinery (``RecordEncoder``, ``RecordDecoder``) and needs no code of its own.
/// - A type marked `@Model` (the `DepotModel` product): the macro writes the mapping
///   straight to ``FieldSink`` and from ``FieldSource``, so nothing of `Codable` runs when
///   it is stored or read, and its attributes choose the id property, stored names,
///   transformers, defaults, constraints and indexes.
///
/// ``Repository``, ``TransactionRepository`` and ``StoreReadTransaction/models(_:_:in:)``
/// take any `StoredModel`. The requirements are the contract the macro fulfils; write them
/// by hand only when neither suits (Docs/Models.md shows what each one must do).
public protocol StoredModel: Sendable {
    /// The type of the model's id: `Int`, `Int64`, `String`, `UUID`, or an optional of one
    /// of them (an optional integer that is `nil` asks the store to assign the id).
    associatedtype ID: ModelID
    /// The collection's name; defaults to the type's name.
    static var collectionName: String { get }
    /// Unique constraints; none by default.
    static var uniqueConstraints: [UniqueConstraint] { get }
    /// Secondary indexes; none by default.
    static var indexes: [IndexDefinition] { get }
    /// References from this model's fields to other models' ids, with delete rules
    /// (Docs/Relations.md); none by default.
    static var references: [Reference] { get }
    /// Fields every stored record must have (NOT NULL); none by default.
    static var requiredFields: [String] { get }
    /// Values the store gives to fields a written record leaves out; none by default.
    static var fieldDefaults: [String: FieldValue] { get }

    /// The model's id as a record id; `nil` when the store is to assign one on insert.
    var storedRecordID: RecordID? { get }

    /// Hands every stored field to `sink` (``FieldSink/set(_:forField:)``, a `.null` for an
    /// absent optional) and returns the record id, `nil` when the store is to assign one.
    /// The id is never one of the fields. Must write the same names in the same order each
    /// time: the store validates a model's names once and then only compares them.
    /// - Throws: ``DepotError`` `.encoding` or `.invalidValue`, and what `sink` throws.
    func encodeRecord(into sink: any FieldSink) throws -> RecordID?

    /// Reads a model from a stored record's fields.
    /// - Throws: ``DepotError`` `.decoding` naming the field that is missing or does not
    ///   fit, or the source's `.corrupted`.
    init(record source: any FieldSource) throws

    /// This model with its id replaced by `id`, which the store just assigned.
    /// - Throws: `.invalidValue` when the id type cannot hold `id`.
    func assigningID(_ id: RecordID) throws -> Self
}

/// A Codable type stored as records of one collection.
///
/// Conform with an `id` and nothing else; declare constraints and indexes when you need them:
///
/// ```swift
/// struct User: Model {
///     var id: Int64?                 // nil: the store assigns one on insert
///     var email: String
///     var name: String
///     static let uniqueConstraints = [UniqueConstraint(["email"])]
///     static let indexes = [IndexDefinition(["name"])]
/// }
/// ```
///
/// The collection is named after the type unless ``StoredModel/collectionName`` says
/// otherwise. Adding a property needs no migration as long as it is optional; removing one
/// leaves the old field in stored records.
public protocol Model: StoredModel, Codable {
    /// The type of ``id`` (restated here so that it is inferred from ``id``).
    associatedtype ID
    /// The record id. An optional integer id that is `nil` asks the store to assign one.
    var id: ID { get }
}

extension StoredModel {
    /// The type's name, for example `"Book"` for `struct Book`.
    public static var collectionName: String { String(describing: Self.self) }
    /// No unique constraints.
    public static var uniqueConstraints: [UniqueConstraint] { [] }
    /// No secondary indexes.
    public static var indexes: [IndexDefinition] { [] }
    /// No references.
    public static var references: [Reference] { [] }
    /// No required fields.
    public static var requiredFields: [String] { [] }
    /// No defaults.
    public static var fieldDefaults: [String: FieldValue] { [:] }

    /// The validated collection name. - Throws: `.invalidName`.
    public static func collection() throws -> CollectionName { try CollectionName(collectionName) }

    /// The schema a repository prepares for this model.
    public static func schema() throws -> CollectionSchema {
        CollectionSchema(
            name: try collection(), idKind: ID.idKind, uniqueConstraints: uniqueConstraints, indexes: indexes,
            references: references, requiredFields: requiredFields, defaults: fieldDefaults)
    }
}

extension Model {
    /// ``Model/id`` as a record id.
    public var storedRecordID: RecordID? { id.recordID }

    /// Encodes the model with ``RecordEncoder/encodeRecord(_:into:)``: its `id` key is the
    /// record id, every other key a field.
    public func encodeRecord(into sink: any FieldSink) throws -> RecordID? {
        try RecordEncoder().encodeRecord(self, into: sink)
    }

    /// Decodes the model with ``RecordDecoder/decode(_:from:)-(_,FieldSource)``; the record
    /// id is offered under the key `id`.
    public init(record source: any FieldSource) throws {
        self = try RecordDecoder().decode(Self.self, from: source)
    }

    /// Encodes the model and decodes it again with the record id `id`.
    public func assigningID(_ id: RecordID) throws -> Self {
        let sink = DictionaryFieldSink()
        _ = try encodeRecord(into: sink)
        return try RecordDecoder().decode(Self.self, from: Record(id: id, fields: sink.fields))
    }
}

/// A type that can be a model's id: integers, strings, UUIDs, and optionals of them.
public protocol ModelID: Codable, Sendable {
    /// The kind of record id it stores as.
    static var idKind: IDKind { get }
    /// The record id, or `nil` for an id the store should assign.
    var recordID: RecordID? { get }
    /// Other record ids the same id may have been stored under (a UUID in lower case);
    /// ``TransactionRepository/find(id:)`` and ``Repository/find(id:)`` look there when
    /// ``recordID`` finds nothing. None by default.
    var alternateRecordIDs: [RecordID] { get }
    /// The id a record id stands for.
    /// - Throws: `.decoding` when `recordID` is of the other kind or does not fit.
    init(recordID: RecordID) throws
}

extension ModelID {
    /// No other forms.
    public var alternateRecordIDs: [RecordID] { [] }
}

extension Int: ModelID {
    /// `Int` ids are stored as integer record ids.
    public static var idKind: IDKind { .int }
    /// The integer as a record id.
    public var recordID: RecordID? { .int(Int64(self)) }
    /// The integer of an integer record id. - Throws: `.decoding` for a string id.
    public init(recordID: RecordID) throws {
        guard case .int(let value) = recordID, let int = Int(exactly: value) else { throw recordID.mismatch(Int.self) }
        self = int
    }
}

extension Int64: ModelID {
    /// `Int64` ids are stored as integer record ids.
    public static var idKind: IDKind { .int }
    /// The integer as a record id.
    public var recordID: RecordID? { .int(self) }
    /// The integer of an integer record id. - Throws: `.decoding` for a string id.
    public init(recordID: RecordID) throws {
        guard case .int(let value) = recordID else { throw recordID.mismatch(Int64.self) }
        self = value
    }
}

extension String: ModelID {
    /// `String` ids are stored as string record ids.
    public static var idKind: IDKind { .string }
    /// The string as a record id.
    public var recordID: RecordID? { .string(self) }
    /// The string of a string record id. - Throws: `.decoding` for an integer id.
    public init(recordID: RecordID) throws {
        guard case .string(let value) = recordID else { throw recordID.mismatch(String.self) }
        self = value
    }
}

extension UUID {
    /// The one text form Depot writes for a UUID, everywhere: upper case, as Foundation's
    /// `uuidString` gives it (model ids, UUID fields, sync idempotency keys, ids the server
    /// makes). Readers accept either case. Docs/TypeMapping.md.
    public var canonicalText: String { uuidString }
}

extension UUID: ModelID {
    /// `UUID` ids are stored as string record ids.
    public static var idKind: IDKind { .string }
    /// The UUID's canonical (upper-case) text as a record id.
    public var recordID: RecordID? { .string(canonicalText) }
    /// The lower-case text, under which another writer (an older Depot server, another
    /// library) may have stored the record.
    public var alternateRecordIDs: [RecordID] { [.string(uuidString.lowercased())] }
    /// The UUID a string record id spells (either case). - Throws: `.decoding` otherwise.
    public init(recordID: RecordID) throws {
        guard case .string(let text) = recordID, let uuid = UUID(uuidString: text) else { throw recordID.mismatch(UUID.self) }
        self = uuid
    }
}

extension Optional: ModelID where Wrapped: ModelID {
    /// The wrapped type's id kind.
    public static var idKind: IDKind { Wrapped.idKind }
    /// The wrapped id, or `nil`, which asks the store to assign an integer id on insert.
    public var recordID: RecordID? { self?.recordID }
    /// The wrapped id's other forms.
    public var alternateRecordIDs: [RecordID] { self?.alternateRecordIDs ?? [] }
    /// The wrapped id of `recordID`.
    public init(recordID: RecordID) throws { self = try Wrapped(recordID: recordID) }
}

extension RecordID {
    func mismatch<T>(_ type: T.Type) -> DepotError {
        DepotError(.decoding, "The record id \(self) cannot be a \(T.self).", id: self)
    }
}

extension StoredModel {
    /// The model as a record. - Throws: `.encoding`, `.invalidValue`, or `.invalidValue` when the id is missing.
    func record() throws -> Record {
        let sink = DictionaryFieldSink()
        guard let id = try encodeRecord(into: sink) else {
            throw DepotError(.invalidValue, "\(Self.self) has no id; insert it to have the store assign one.", collection: Self.collectionName)
        }
        return Record(id: id, fields: sink.fields)
    }

    /// The model's fields, nulls removed, and its id (`nil` when the store is to assign one).
    func fieldsAndID() throws -> (id: RecordID?, fields: [String: FieldValue]) {
        let sink = DictionaryFieldSink()
        let id = try encodeRecord(into: sink)
        return (id, sink.fields)
    }

    /// Decodes a model from a record read in place. - Throws: `.decoding` naming the collection and id.
    @inlinable
    static func decode(_ source: any FieldSource) throws -> Self {
        do {
            return try Self(record: source)
        } catch let error as DepotError {
            var error = error
            error.collection = collectionName
            error.id = source.recordID
            throw error
        }
    }

    /// Decodes a model from a record. - Throws: `.decoding` naming the collection and id.
    static func decode(_ record: Record) throws -> Self {
        try decode(RecordFieldSource(record))
    }
}
