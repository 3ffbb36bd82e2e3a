import DepotCore

/// A record's fields placed by column as a model encodes them, then bound straight to the
/// collection's INSERT or UPDATE statement: no ``Record`` and no dictionary is built.
///
/// Each field lands in the slot of its column, found through ``FieldOrder`` (a model sends
/// its fields in the same order for every record). A field the table has no column for yet is kept aside in ``extra``; the
/// transaction then takes the record path, which adds the column.
///
/// One instance serves many records of one collection (``reset()`` between them); it is
/// used only on the connection's thread and never re-entrantly, so the dynamic exclusivity
/// checks of its stored properties (a quarter of the cost of an insert) are turned off.
final class SQLiteFieldSink: DriverFieldSink {
    let meta: CollectionMeta
    /// The value of each column's field, by position in ``CollectionMeta/fields``.
    @exclusivity(unchecked) private var slots: [FieldValue?]
    /// Fields with no column yet.
    @exclusivity(unchecked) private(set) var extra: [String: FieldValue] = [:]
    /// The order in which the model uses its fields.
    @exclusivity(unchecked) private var order = FieldOrder()

    init(meta: CollectionMeta) {
        self.meta = meta
        slots = Array(repeating: nil, count: meta.fields.count)
        super.init()
    }

    /// Empties the sink for the next record.
    func reset() {
        order.rewind()
        for index in slots.indices where slots[index] != nil { slots[index] = nil }
        if !extra.isEmpty { extra.removeAll(keepingCapacity: true) }
    }

    override func accept(_ value: FieldValue, forField name: String) {
        let stored: FieldValue? = value.isNull ? nil : value
        if let index = order.position(of: name, in: meta) {
            slots[index] = stored
        } else if let stored {
            extra[name] = stored
        } else {
            extra.removeValue(forKey: name)
        }
    }

    /// The record the sink holds, for the record path.
    func record(id: RecordID) -> Record {
        var fields = extra
        for (index, value) in slots.enumerated() {
            if let value { fields[meta.fields[index]] = value }
        }
        return Record(id: id, fields: fields)
    }

    /// Binds the record to every parameter of `statement`, shaped like
    /// ``CollectionMeta/insertSQL`` (`idFirst`: id, type tags, columns) or
    /// ``CollectionMeta/updateSQL`` (type tags, columns, id); unset columns are bound to
    /// NULL. Returns `true` when it bound text or bytes (for
    /// ``SQLiteConnection/run(_:bindingAll:)``).
    func bind(_ statement: Statement, id: SQLValue, idFirst: Bool) throws -> Bool {
        var tags = ""
        var large = false
        if case .text = id { large = true }
        let first: Int32 = idFirst ? 3 : 2
        for index in slots.indices {
            guard let value = slots[index] else {
                try statement.bind(.null, at: first + Int32(index))
                continue
            }
            switch value {
            case .int(let int):
                // The common case, bound without building an SQLValue.
                try statement.bind(int: int, at: first + Int32(index))
                continue
            case .bool: tags += meta.columns[index] + ":b,"
            case .array, .object:
                tags += meta.columns[index] + ":j,"
                large = true
            case .string, .bytes: large = true
            default: break
            }
            try statement.bind(SQLiteQueryTranslator.sqlValue(value), at: first + Int32(index))
        }
        let tagValue: SQLValue = tags.isEmpty ? .null : .text("," + tags)
        if !tags.isEmpty { large = true }
        if idFirst {
            try statement.bind(id, at: 1)
            try statement.bind(tagValue, at: 2)
        } else {
            try statement.bind(tagValue, at: 1)
            try statement.bind(id, at: first + Int32(slots.count))
        }
        return large
    }
}
