import CSQLite
import DepotCore

/// The current row of a statement shaped like ``CollectionMeta/selectSQL`` (id, type tags,
/// then one column per field), read one field at a time as a ``FieldSource``.
///
/// Models decode straight from the row: no ``Record`` and no dictionary is built. The
/// decoder asks for the fields of a model in the same order for every row, which
/// ``FieldOrder`` learns, so a request costs one string comparison instead of a hash lookup.
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
    /// `tags` is not empty (checked without touching the dictionary).
    @exclusivity(unchecked) private var hasTags = false
    /// The order in which the model uses its fields.
    @exclusivity(unchecked) private var order = FieldOrder()

    init(meta: CollectionMeta) {
        self.meta = meta
    }

    /// Moves to `row`. - Throws: `.corrupted` when the id is neither an integer nor text.
    func load(_ row: Statement) throws {
        handle = row.handle
        order.rewind()
        recordID = try SQLiteTransaction.decodeID(row, meta)
        tags = SQLiteTransaction.decodeTags(row)
        hasTags = !tags.isEmpty
    }

    /// Forgets the row (its statement moves on), keeping the learned field order.
    func unload() {
        handle = nil
        tags = [:]
        hasTags = false
    }

    func value(forField name: String) throws -> FieldValue? {
        guard let handle, let index = order.position(of: name, in: meta) else { return nil }
        if !hasTags {
            // A row without type tags (most rows): integers, doubles and NULL read from the
            // column's value with one call into SQLite, the dictionary left alone.
            guard let column = sqlite3_column_value(handle, Int32(index + 2)) else { return nil }
            switch sqlite3_value_type(column) {
            case SQLITE_NULL: return nil
            case SQLITE_INTEGER: return .int(sqlite3_value_int64(column))
            case SQLITE_FLOAT: return .double(sqlite3_value_double(column))
            default: break
            }
        }
        return try SQLiteTransaction.decodeColumn(handle, meta, index: index, tags: tags)
    }

    func fieldNames() throws -> [String] {
        guard let handle else { return [] }
        return meta.fields.indices.compactMap { index in
            sqlite3_column_type(handle, Int32(index + 2)) == SQLITE_NULL ? nil : meta.fields[index]
        }
    }
}
