/// A record's fields handed to the driver one at a time as they are encoded, without
/// building a ``Record`` first: the write-side mirror of ``FieldSource``.
///
/// Storing a model costs, on the record path, a dictionary insert per field in the encoder
/// and a dictionary lookup per field in the driver. A driver that can place each field
/// where it will be stored (a SQLite driver binding it to its column's parameter) offers a
/// ``DriverFieldSink`` through ``WriteTransaction/write(_:into:_:)`` instead, and
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

/// The base class of the sink a driver hands to the closure of
/// ``WriteTransaction/write(_:into:_:)``: the driver stores fields in
/// ``accept(_:forField:)``; the base class checks each field first.
///
/// The store validates a model's fields here, on their way to the driver, with the rules of
/// ``Record/validate(collection:)``: a valid field name, no NaN, no nesting deeper than
/// ``FieldValue/maximumDepth``. A model sends the same names in the same order every time,
/// so the names of the first record are remembered and later records compare each name
/// with one string comparison instead of validating it again. When a write observer wants
/// the fields, the base class also keeps a copy of them. ``set(_:forField:)`` is final and
/// the store starts every record it encodes into the sink, so a driver's sink never sees a
/// field of a store's write that was not checked (a sink no record was started on passes
/// fields through: only the store's closure encodes into a driver's sink).
///
/// Checking in the driver's own object rather than in a wrapper around it spares a retain
/// and a release of the wrapped sink per field (Docs/Architecture.md, "One gateway").
///
/// A sink is used by one transaction's thread and never re-entrantly, so the dynamic
/// exclusivity checks of its stored properties are turned off.
open class DriverFieldSink: FieldSink {
    /// The collection of the record being written (for error messages); empty when not checking.
    @exclusivity(unchecked) private var collection = ""
    /// `false` until the store starts a record: the sink then stores what it is given.
    @exclusivity(unchecked) private var checking = false
    @exclusivity(unchecked) private var known: [String] = []
    @exclusivity(unchecked) private var cursor = 0
    /// The fields set since the record started, when asked to copy them.
    @exclusivity(unchecked) private var copy: DictionaryFieldSink?

    /// A sink that checks nothing until the store starts a record.
    public init() {}

    /// Stores one field that has passed the checks; `.null` makes the field absent. A
    /// later call for the same name replaces the value. The default throws `.internal`: a
    /// driver's sink overrides it.
    /// - Throws: whatever the driver reports.
    open func accept(_ value: FieldValue, forField name: String) throws {
        throw DepotError(.internal, "\(type(of: self)) does not override accept(_:forField:).")
    }

    /// Checks the field (once the store started a record), keeps its copy when asked, and
    /// hands it to ``accept(_:forField:)``.
    /// - Throws: `.invalidName`, `.invalidValue`, and what ``accept(_:forField:)`` throws.
    public final func set(_ value: FieldValue, forField name: String) throws {
        guard checking else { return try accept(value, forField: name) }
        // A null is an absent field: like Record.withoutNulls before validation, it is not checked.
        if value.isNull {
            copy?.set(value, forField: name)
            return try accept(value, forField: name)
        }
        if cursor < known.count && known[cursor] == name {
            cursor += 1
        } else {
            try FieldName.validate(name, collection: collection)
            if cursor == known.count && known.count < 1024 {
                known.append(name)
                cursor += 1
            }
        }
        switch value {
        case .double(let d) where d.isNaN: try value.validate(field: name)
        case .array, .object: try value.validate(field: name)
        default: break
        }
        copy?.set(value, forField: name)
        try accept(value, forField: name)
    }

    /// Starts checking a record of `collection`, copying its fields when `copying`. The
    /// names remembered stay while the collection does.
    func startRecord(collection: String, copying: Bool) {
        if collection != self.collection {
            self.collection = collection
            known.removeAll()
        }
        checking = true
        cursor = 0
        copy = copying ? DictionaryFieldSink() : nil
    }

    /// Ends the record: the fields copied since ``startRecord(collection:copying:)``, if
    /// it was asked to copy them.
    func finishRecord() -> [String: FieldValue]? {
        checking = false
        defer { copy = nil }
        return copy?.fields
    }
}

/// The ``DriverFieldSink`` of drivers without a faster path: it collects the fields in a
/// dictionary, for a ``Record``.
final class RecordFieldSink: DriverFieldSink {
    private(set) var fields: [String: FieldValue] = [:]

    override func accept(_ value: FieldValue, forField name: String) {
        if value.isNull {
            fields.removeValue(forKey: name)
        } else {
            fields[name] = value
        }
    }
}

extension WriteTransaction {
    /// The default ``WriteTransaction/write(_:into:_:)``: ``writeRecord(_:into:_:)``.
    public func write(_ mode: RecordWriteMode, into collection: CollectionName, _ encode: (DriverFieldSink) throws -> RecordID) throws -> WriteOutcome {
        try writeRecord(mode, into: collection, encode)
    }

    /// Collects the fields `encode` writes in a dictionary and stores the ``Record`` with
    /// ``WriteTransaction/write(_:as:into:)``: the fallback for drivers (and cases) without a
    /// faster path.
    /// - Throws: what `encode` throws, and the errors of the record method.
    public func writeRecord(_ mode: RecordWriteMode, into collection: CollectionName, _ encode: (DriverFieldSink) throws -> RecordID) throws -> WriteOutcome {
        let sink = RecordFieldSink()
        let id = try encode(sink)
        return try write(Record(id: id, fields: sink.fields), as: mode, into: collection)
    }
}
