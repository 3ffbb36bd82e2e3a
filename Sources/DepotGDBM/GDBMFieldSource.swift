import DepotCore

/// A stored GDBM record's fields, read without building its ``Record``: what
/// ``GDBMTransaction/withFields(of:from:_:)`` offers a model read.
///
/// A record whose names match one of the store's known ``FieldLayout``s is decoded into an
/// array by layout position (``BinaryCodec/decodeFieldValues(key:value:layouts:known:into:)``), so
/// no stored name becomes a `String` and no dictionary is built; a name asked for is found
/// through the layout's own table (its length and first 8 bytes compared as integers). A
/// record of no known layout is read into a dictionary, as ``GDBMTransaction/get(_:from:)``
/// does. Either way the values are the ones the record's ``Record/fields`` would hold.
final class GDBMFieldSource: FieldSource {
    private(set) var recordID: RecordID = .int(0)
    /// The layout the current record matched; `nil`: its fields are in ``fields``.
    private var layout: FieldLayout? {
        didSet { if let layout { current = layout } }
    }
    /// ``layout`` while it is not `nil` (kept alive by it): read without retaining it, once
    /// per field asked for.
    @exclusivity(unchecked) private unowned(unsafe) var current: FieldLayout = FieldLayout.empty
    /// The current record's values by ``layout`` position.
    @exclusivity(unchecked) private var values: [FieldValue] = []
    /// The current record's fields when it matched no layout.
    private var fields: [String: FieldValue] = [:]
    /// The position of the next name asked for, tried first: a model that asks in the
    /// layout's order finds each name at once.
    @exclusivity(unchecked) private var nextAsk = 0
    /// Whether a caller is reading the current record (a nested read takes a fresh source).
    var inUse = false

    /// Loads the stored record `value` under `key`, with id `id`.
    /// - Throws: ``BinaryCodec/RecordProblem`` when the record is corrupt.
    /// `known`: the layouts to try (a reader slot's copies), `nil` for `layouts`' own.
    func load(id: RecordID, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, layouts: FieldLayoutCache, known: [FieldLayout]? = nil) throws(BinaryCodec.RecordProblem) {
        recordID = id
        nextAsk = 0
        if let matched = try BinaryCodec.decodeFieldValues(key: key, value: value, layouts: layouts, known: known, into: &values) {
            layout = matched
            if !fields.isEmpty { fields = [:] }
        } else {
            layout = nil
            fields = try BinaryCodec.decodeVerifiedFields(value, layouts: layouts, known: known)
        }
    }

    func value(forField name: String) -> FieldValue? {
        if layout == nil { return fields[name] }
        let layout = current
        let hint = nextAsk
        let found = name.utf8.withContiguousStorageIfAvailable { bytes in
            let raw = UnsafeRawBufferPointer(bytes)
            return layout.position(of: raw, prefix: FieldLayout.prefix(raw), hint: hint)
        }
        let position: Int?
        if let found {
            position = found
        } else {
            var utf8 = name
            position = utf8.withUTF8 { bytes in
                let raw = UnsafeRawBufferPointer(bytes)
                return layout.position(of: raw, prefix: FieldLayout.prefix(raw), hint: hint)
            }
        }
        guard let position else { return nil }
        nextAsk = position + 1
        return values[position]
    }

    func fieldNames() -> [String] {
        layout?.names ?? Array(fields.keys)
    }
}
