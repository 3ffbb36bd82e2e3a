/// A record's fields handed to the driver one at a time as they are encoded, without
/// building a ``Record`` first: the write-side mirror of ``FieldSource``.
///
/// Storing a model costs, on the record path, a dictionary insert per field in the encoder
/// and a dictionary lookup per field in the driver. A driver that can place each field
/// where it will be stored (a SQLite driver binding it to its column's parameter) offers a
/// `FieldSink` through ``WriteTransaction/write(_:into:_:)`` instead, and
/// ``RecordEncoder/encodeRecord(_:into:)`` writes the model's fields into it.
///
/// A sink is valid only inside the closure it was passed to; it may be reused for the next
/// record.
public protocol FieldSink: AnyObject {
    /// Sets the top-level field `name` to `value`; `.null` makes the field absent (a
    /// top-level null is never stored). A later call for the same name replaces the value.
    ///
    /// Names and values reaching a driver's sink through the ``Store`` have been validated
    /// (``FieldName/validate(_:collection:)``, ``FieldValue/validate(field:depth:)``); the
    /// record id is never one of the fields.
    /// - Throws: whatever the driver reports.
    func set(_ value: FieldValue, forField name: String) throws
}

/// What ``WriteTransaction/write(_:as:into:)`` and ``WriteTransaction/write(_:into:_:)``
/// do with a record.
public enum RecordWriteMode: Sendable, Hashable {
    /// Add the record; `.alreadyExists` if its id is taken.
    case insert
    /// Replace an existing record; `.notFound` if there is none.
    case update
    /// Insert or replace.
    case save
}

/// A ``FieldSink`` collecting the fields in a dictionary: what drivers without a faster
/// path use.
public final class DictionaryFieldSink: FieldSink {
    /// The fields set so far, top-level nulls removed.
    public private(set) var fields: [String: FieldValue] = [:]

    /// An empty sink.
    public init() {}

    /// Stores `value` under `name`, or removes the field when `value` is `.null`.
    public func set(_ value: FieldValue, forField name: String) {
        if value.isNull {
            fields.removeValue(forKey: name)
        } else {
            fields[name] = value
        }
    }
}

extension WriteTransaction {
    /// The default ``WriteTransaction/write(_:into:_:)``: ``writeRecord(_:into:_:)``.
    public func write(_ mode: RecordWriteMode, into collection: CollectionName, _ encode: (any FieldSink) throws -> RecordID) throws -> WriteOutcome {
        try writeRecord(mode, into: collection, encode)
    }

    /// Collects the fields `encode` writes in a ``DictionaryFieldSink`` and stores the
    /// ``Record`` with ``WriteTransaction/write(_:as:into:)``: the fallback for drivers (and
    /// cases) without a faster path.
    /// - Throws: what `encode` throws, and the errors of the record method.
    public func writeRecord(_ mode: RecordWriteMode, into collection: CollectionName, _ encode: (any FieldSink) throws -> RecordID) throws -> WriteOutcome {
        let sink = DictionaryFieldSink()
        let id = try encode(sink)
        return try write(Record(id: id, fields: sink.fields), as: mode, into: collection)
    }
}
