import Foundation

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
/// The collection is named after the type unless ``collectionName`` says otherwise.
/// Adding a property needs no migration; removing one leaves the old field in stored records.
public protocol Model: Codable, Sendable {
    /// The type of ``id``: `Int`, `Int64`, `String`, `UUID`, or an optional of one of them.
    associatedtype ID: ModelID
    /// The record id. An optional integer id that is `nil` asks the store to assign one.
    var id: ID { get }
    /// The collection's name; defaults to the type's name.
    static var collectionName: String { get }
    /// Unique constraints; none by default.
    static var uniqueConstraints: [UniqueConstraint] { get }
    /// Secondary indexes; none by default.
    static var indexes: [IndexDefinition] { get }
}

extension Model {
    /// The type's name, for example `"Book"` for `struct Book`.
    public static var collectionName: String { String(describing: Self.self) }
    /// No unique constraints.
    public static var uniqueConstraints: [UniqueConstraint] { [] }
    /// No secondary indexes.
    public static var indexes: [IndexDefinition] { [] }

    /// The validated collection name. - Throws: `.invalidName`.
    public static func collection() throws -> CollectionName { try CollectionName(collectionName) }

    /// The schema a repository prepares for this model.
    public static func schema() throws -> CollectionSchema {
        CollectionSchema(name: try collection(), idKind: ID.idKind, uniqueConstraints: uniqueConstraints, indexes: indexes)
    }
}

/// A type that can be a model's id: integers, strings, UUIDs, and optionals of them.
public protocol ModelID: Codable, Sendable {
    /// The kind of record id it stores as.
    static var idKind: IDKind { get }
    /// The record id, or `nil` for an id the store should assign.
    var recordID: RecordID? { get }
}

extension Int: ModelID {
    /// `Int` ids are stored as integer record ids.
    public static var idKind: IDKind { .int }
    /// The integer as a record id.
    public var recordID: RecordID? { .int(Int64(self)) }
}

extension Int64: ModelID {
    /// `Int64` ids are stored as integer record ids.
    public static var idKind: IDKind { .int }
    /// The integer as a record id.
    public var recordID: RecordID? { .int(self) }
}

extension String: ModelID {
    /// `String` ids are stored as string record ids.
    public static var idKind: IDKind { .string }
    /// The string as a record id.
    public var recordID: RecordID? { .string(self) }
}

extension UUID: ModelID {
    /// `UUID` ids are stored as string record ids.
    public static var idKind: IDKind { .string }
    /// The UUID's upper-case string form as a record id.
    public var recordID: RecordID? { .string(uuidString) }
}

extension Optional: ModelID where Wrapped: ModelID {
    /// The wrapped type's id kind.
    public static var idKind: IDKind { Wrapped.idKind }
    /// The wrapped id, or `nil`, which asks the store to assign an integer id on insert.
    public var recordID: RecordID? { self?.recordID }
}

extension Model {
    /// The model as a record. - Throws: `.encoding`, `.invalidValue`, or `.invalidValue` when the id is missing.
    func record() throws -> Record {
        let (id, fields) = try RecordEncoder().encodeRecord(self)
        guard let id else {
            throw DepotError(.invalidValue, "\(Self.self) has no id; insert it to have the store assign one.", collection: Self.collectionName)
        }
        return Record(id: id, fields: fields)
    }

    /// Decodes a model from a record read in place. - Throws: `.decoding` naming the collection and id.
    static func decode(_ source: any FieldSource) throws -> Self {
        do {
            return try RecordDecoder().decode(Self.self, from: source)
        } catch let error as DepotError {
            var error = error
            error.collection = collectionName
            error.id = source.recordID
            throw error
        }
    }

    /// Decodes a model from a record. - Throws: `.decoding` naming the collection and id.
    static func decode(_ record: Record) throws -> Self {
        do {
            return try RecordDecoder().decode(Self.self, from: record)
        } catch let error as DepotError {
            var error = error
            error.collection = collectionName
            error.id = record.id
            throw error
        }
    }
}
