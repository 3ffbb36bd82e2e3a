/// A unique constraint over one or more top-level fields.
///
/// A record is bound by the constraint only when every one of its fields is non-null
/// (as in SQL). Values compare with query equality: `1` and `1.0` collide, strings by bytes.
/// A violation is a ``DepotError`` with code `.uniqueViolation` naming the constraint.
public struct UniqueConstraint: Hashable, Sendable, Codable {
    /// The constraint's name, unique within its collection; a valid field-style name.
    public var name: String
    /// The constrained top-level fields, in order; two records collide only when all of them are
    /// non-null and equal.
    public var fields: [String]

    /// - Parameters:
    ///   - fields: the constrained fields, in order.
    ///   - name: defaults to the fields joined by `_`, then `_unique`.
    public init(_ fields: [String], name: String? = nil) {
        self.fields = fields
        self.name = name ?? (fields.joined(separator: "_") + "_unique")
    }
}

/// A secondary index over one or more top-level fields, used by drivers that can.
public struct IndexDefinition: Hashable, Sendable, Codable {
    /// The index's name, unique among its collection's constraints and indexes; a valid
    /// field-style name.
    public var name: String
    /// The indexed top-level fields, in order.
    public var fields: [String]

    /// - Parameters:
    ///   - fields: the indexed fields, in order.
    ///   - name: defaults to the fields joined by `_`, then `_idx`.
    public init(_ fields: [String], name: String? = nil) {
        self.fields = fields
        self.name = name ?? (fields.joined(separator: "_") + "_idx")
    }
}

/// What a collection is: its name, id kind, unique constraints and indexes.
///
/// ``WriteTransaction/prepare(_:)`` makes a collection match a schema exactly: it creates
/// the collection, adds constraints and indexes that are new (checking existing records),
/// and drops those no longer listed. Fields need no declaration: any valid top-level field
/// may appear in any record.
public struct CollectionSchema: Hashable, Sendable {
    /// The collection the schema describes.
    public var name: CollectionName
    /// Whether the collection's ids are integers or strings; it cannot change once created.
    public var idKind: IDKind
    /// The unique constraints the collection enforces.
    public var uniqueConstraints: [UniqueConstraint]
    /// The secondary indexes drivers keep where they can; they never change query results.
    public var indexes: [IndexDefinition]
    /// References from fields of this collection to the ids of others, with their delete
    /// rules; kept by the store on every driver (Docs/Relations.md).
    public var references: [Reference]
    /// Fields every record must have (NOT NULL), kept by the store on every driver.
    public var requiredFields: [String]
    /// Values given to fields a written record leaves out (Docs/Semantics.md, "Required
    /// fields and defaults").
    public var defaults: [String: FieldValue]

    /// Describes a collection; no constraints, indexes, references, required fields or
    /// defaults unless given.
    public init(
        name: CollectionName, idKind: IDKind, uniqueConstraints: [UniqueConstraint] = [], indexes: [IndexDefinition] = [],
        references: [Reference] = [], requiredFields: [String] = [], defaults: [String: FieldValue] = [:]
    ) {
        self.name = name
        self.idKind = idKind
        self.uniqueConstraints = uniqueConstraints
        self.indexes = indexes
        self.references = references
        self.requiredFields = requiredFields
        self.defaults = defaults
    }

    /// The schema without the parts the store keeps (references, required fields,
    /// defaults): what a driver prepares and reports.
    public var driverPart: CollectionSchema {
        CollectionSchema(name: name, idKind: idKind, uniqueConstraints: uniqueConstraints, indexes: indexes)
    }

    /// Checks constraint and index names and fields.
    /// - Throws: ``DepotError`` `.invalidName` or `.invalidValue`.
    public func validate() throws {
        var names = Set<String>()
        let all: [(String, [String])] = uniqueConstraints.map { ($0.name, $0.fields) } + indexes.map { ($0.name, $0.fields) }
        for (name, fields) in all {
            guard FieldName.isValid(name) else {
                throw DepotError(.invalidName, "Constraint or index name \(CollectionName.quotedForMessage(name)) is not allowed.", collection: self.name.rawValue)
            }
            guard names.insert(name).inserted else {
                throw DepotError(.invalidName, "Two constraints or indexes are named '\(name)'.", collection: self.name.rawValue)
            }
            guard !fields.isEmpty, Set(fields).count == fields.count else {
                throw DepotError(.invalidValue, "Constraint or index '\(name)' needs one or more distinct fields.", collection: self.name.rawValue)
            }
            for field in fields { try FieldName.validate(field, collection: self.name.rawValue) }
        }
    }
}

extension UniqueConstraint {
    /// The key a record has under this constraint, normalized so that values equal under
    /// query equality are equal keys (`1.0` becomes `1`, `-0.0` becomes `0`);
    /// `nil` when any field is null or missing (the record is not bound).
    public func key(for record: Record) -> [FieldValue]? {
        var key: [FieldValue] = []
        key.reserveCapacity(fields.count)
        for field in fields {
            let value = record[field]
            if value.isNull { return nil }
            key.append(UniqueConstraint.normalize(value))
        }
        return key
    }

    static func normalize(_ value: FieldValue) -> FieldValue {
        if case .double(let d) = value, d.rounded(.towardZero) == d,
            d >= -9_223_372_036_854_775_808.0, d < 9_223_372_036_854_775_808.0
        {
            return .int(Int64(d))
        }
        return value
    }
}
