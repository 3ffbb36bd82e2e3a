/// The order in which a model asks for (decoding) or sends (encoding) its fields, learned on
/// the first record and checked on the next ones: a model uses the same order every time,
/// so each name costs one string comparison with the expected one instead of a hash lookup
/// in ``CollectionMeta/position``. A name that does not match falls back to the lookup.
///
/// Used by ``SQLiteRowFields`` and ``SQLiteFieldSink``; ``rewind()`` before each record.
struct FieldOrder {
    /// Names in the order earlier records used them, with their positions in
    /// ``CollectionMeta/fields`` (`-1`: the collection has no such column).
    private var order: [(name: String, position: Int)] = []
    private var cursor = 0

    /// Starts the next record.
    @inline(__always) mutating func rewind() { cursor = 0 }

    /// The position in `meta.fields` of field `name`, or `nil` when it has no column.
    @inline(__always) mutating func position(of name: String, in meta: CollectionMeta) -> Int? {
        // Compared in place, not copied out: a copy of the name retains and releases it.
        if cursor < order.count, order[cursor].name == name {
            let position = order[cursor].position
            cursor += 1
            return position < 0 ? nil : position
        }
        let position = meta.position[name]
        if cursor == order.count && order.count < meta.fields.count + 16 {
            order.append((name, position ?? -1))
            cursor += 1
        }
        return position
    }
}
