/// A record's fields read where they are stored, without building a ``Record`` first.
///
/// Decoding a model from a record costs two dictionary operations per field: the driver
/// inserts each field into ``Record/fields`` and the decoder looks it up again. A driver
/// that can read one field at a time from its own storage (the current row of a SQLite
/// statement) offers a `FieldSource` instead, and ``RecordDecoder/decode(_:from:)-(_,FieldSource)``
/// asks it for exactly the fields the model declares, in the model's order.
///
/// A source is valid only inside the closure it was passed to
/// (``ReadTransaction/forEachFields(_:in:_:)``, ``ReadTransaction/withFields(of:from:_:)``);
/// it may be reused for the next record.
///
/// The values a source returns are exactly the ones ``Record/fields`` would hold for the
/// same record: a top-level null is absent (`nil`).
public protocol FieldSource: AnyObject {
    /// The record id.
    var recordID: RecordID { get }

    /// The value of the top-level field `name`; `nil` when the record has no such field.
    /// - Throws: ``DepotError`` `.corrupted` when the stored value cannot be read.
    func value(forField name: String) throws -> FieldValue?

    /// The names of the fields the record has (order unspecified).
    func fieldNames() throws -> [String]
}

/// A ``Record`` seen as a ``FieldSource``: what drivers without a faster path offer.
///
/// Its fields are looked up as ``OfferedFields`` does (a short name found by comparing its
/// string's words, not by hashing it).
public final class RecordFieldSource: FieldSource {
    /// The record, replaceable so that one source serves a whole query.
    public var record: Record {
        didSet { offered.offer(record.fields) }
    }
    private var offered = OfferedFields()

    /// A source over `record`.
    public init(_ record: Record) {
        self.record = record
        offered.offer(record.fields)
    }

    /// The record's id.
    public var recordID: RecordID { record.id }
    /// The field's value, `nil` when the record does not have it.
    public func value(forField name: String) -> FieldValue? { offered.value(name) }
    /// The record's field names, in no particular order.
    public func fieldNames() -> [String] { Array(record.fields.keys) }
}

extension ReadTransaction {
    /// The default ``ReadTransaction/forEachFields(_:in:_:)``: ``forEachRecordAsFields(_:in:_:)``.
    public func forEachFields(_ query: Query, in collection: CollectionName, _ body: (any FieldSource) throws -> Bool) throws {
        try forEachRecordAsFields(query, in: collection, body)
    }

    /// The default ``ReadTransaction/withFields(of:from:_:)``: ``getRecordAsFields(of:from:_:)``.
    public func withFields<T>(of id: RecordID, from collection: CollectionName, _ body: (any FieldSource) throws -> T) throws -> T? {
        try getRecordAsFields(of: id, from: collection, body)
    }

    /// Each record of ``ReadTransaction/forEach(_:in:_:)``, seen through one
    /// ``RecordFieldSource``: the fallback for drivers (and transactions) that cannot read
    /// fields in place.
    public func forEachRecordAsFields(_ query: Query, in collection: CollectionName, _ body: (any FieldSource) throws -> Bool) throws {
        var source: RecordFieldSource?
        try forEach(query, in: collection) { record in
            if let source {
                source.record = record
                return try body(source)
            }
            let fresh = RecordFieldSource(record)
            source = fresh
            return try body(fresh)
        }
    }

    /// ``ReadTransaction/get(_:from:)`` seen through a ``RecordFieldSource``.
    public func getRecordAsFields<T>(of id: RecordID, from collection: CollectionName, _ body: (any FieldSource) throws -> T) throws -> T? {
        guard let record = try get(id, from: collection) else { return nil }
        return try body(RecordFieldSource(record))
    }
}
