import CSQLite
import DepotCore

/// The current row of a statement shaped like ``CollectionMeta/selectSQL`` (id, type tags,
/// then one column per field), read one field at a time as a ``FieldSource``.
///
/// Models decode straight from the row: no ``Record`` and no dictionary is built. The
/// decoder asks for the fields of a model in the same order for every row, so the first row
/// records that order (field name and column position) and later rows check each request
/// against it with one string comparison instead of a hash lookup; a request that does not
/// match falls back to ``CollectionMeta/position``.
///
/// One instance serves a whole query; ``load(_:)`` moves it to the next row. It must not be
/// used after the statement moved on.
final class SQLiteRowFields: FieldSource {
    let meta: CollectionMeta
    // The row's statement handle: a plain pointer, so reading a field retains nothing.
    // Exclusivity checks are off for these stored properties: the object is used by one
    // thread (the connection's) and never re-entrantly.
    @exclusivity(unchecked) private var handle: OpaquePointer?
    @exclusivity(unchecked) private(set) var recordID: RecordID = .int(0)
    /// The row's type tags (column → tag), empty when the row has none.
    @exclusivity(unchecked) private var tags: [String: UInt8] = [:]
    /// Field requests in the order the decoder made them on earlier rows: the field name and
    /// its position in ``CollectionMeta/fields`` (`-1`: the collection has no such column).
    @exclusivity(unchecked) private var order: [(name: String, position: Int)] = []
    @exclusivity(unchecked) private var cursor = 0

    init(meta: CollectionMeta) {
        self.meta = meta
    }

    /// Moves to `row`. - Throws: `.corrupted` when the id is neither an integer nor text.
    func load(_ row: Statement) throws {
        handle = row.handle
        cursor = 0
        recordID = try SQLiteTransaction.decodeID(row, meta)
        tags = SQLiteTransaction.decodeTags(row)
    }

    /// The position in ``CollectionMeta/fields`` of field `name`, or `nil`.
    @inline(__always) private func position(of name: String) -> Int? {
        if cursor < order.count {
            let expected = order[cursor]
            if expected.name == name {
                cursor += 1
                return expected.position < 0 ? nil : expected.position
            }
        }
        let position = meta.position[name]
        if cursor == order.count && order.count < meta.fields.count + 16 {
            order.append((name, position ?? -1))
            cursor += 1
        }
        return position
    }

    func value(forField name: String) throws -> FieldValue? {
        guard let handle, let index = position(of: name) else { return nil }
        return try SQLiteTransaction.decodeColumn(handle, meta, index: index, tags: tags)
    }

    func fieldNames() throws -> [String] {
        guard let handle else { return [] }
        return meta.fields.indices.compactMap { index in
            sqlite3_column_type(handle, Int32(index + 2)) == SQLITE_NULL ? nil : meta.fields[index]
        }
    }
}
