/// A dictionary with each of a set of field names mapped to `.null`, and each name's index
/// in it. Decoding a record with exactly those names copies ``fields`` and sets each value
/// through its index, so no name is hashed per record: a copy of a dictionary keeps its
/// buckets, so the indices stay valid in the copy. Used by drivers' row and record decoders.
package struct FieldTemplate: Sendable {
    /// Every name mapped to `.null` (a repeated name once).
    package let fields: [String: FieldValue]
    /// The index of `names[i]` in ``fields``.
    package let indices: [Dictionary<String, FieldValue>.Index]

    package init(names: [String]) {
        var fields = [String: FieldValue](minimumCapacity: names.count)
        for name in names { fields[name] = .null }
        self.fields = fields
        // Every name was just inserted, so `index(forKey:)` finds it.
        indices = names.map { fields.index(forKey: $0) ?? fields.startIndex }
    }
}
