/// A partial update: fields to set and fields to remove, applied to records in place
/// without the caller reading them first (Docs/Semantics.md, "Partial updates").
///
/// Setting a field to `.null` removes it (null and missing are the same). The id cannot
/// be changed. Unique constraints and the collection's rules hold as for a full write.
///
/// ```swift
/// try await posts.update(id: 7, FieldChange(set: ["views": 10], remove: ["draft"]))
/// ```
public struct FieldChange: Hashable, Sendable {
    /// The fields to set, by name; a `.null` value removes the field.
    public var set: [String: FieldValue]
    /// The fields to remove.
    public var remove: Set<String>

    /// A change setting `set` and removing `remove`.
    public init(set: [String: FieldValue] = [:], remove: Set<String> = []) {
        self.set = set
        self.remove = remove
    }

    /// The change with every `.null` in ``set`` moved to ``remove``: what drivers receive.
    public var normalized: FieldChange {
        guard set.values.contains(where: \.isNull) else { return self }
        var copy = self
        for (name, value) in set where value.isNull {
            copy.set[name] = nil
            copy.remove.insert(name)
        }
        return copy
    }

    /// `true` when the change sets and removes nothing.
    public var isEmpty: Bool { self.set.isEmpty && remove.isEmpty }

    /// Checks names (valid field names, never `id`, none both set and removed) and values.
    /// - Throws: ``DepotError`` `.invalidName` or `.invalidValue`.
    public func validate(collection: String? = nil) throws {
        for (name, value) in set {
            try FieldName.validate(name, collection: collection)
            try value.validate(field: name)
        }
        // Most changes remove nothing: no sets are built for them (the check ran on every update).
        guard !remove.isEmpty else { return }
        for name in remove { try FieldName.validate(name, collection: collection) }
        let both = remove.filter { name in set[name].map { !$0.isNull } ?? false }
        if let name = both.sorted().first {
            throw DepotError(.invalidValue, "A change both sets and removes '\(name)'.", collection: collection)
        }
    }

    /// `record` with the change applied.
    public func applied(to record: Record) -> Record {
        var fields = record.fields
        for name in remove { fields[name] = nil }
        for (name, value) in set { fields[name] = value.isNull ? nil : value }
        return Record(id: record.id, fields: fields)
    }
}
