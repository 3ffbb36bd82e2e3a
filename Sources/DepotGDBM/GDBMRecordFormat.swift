import DepotCore

/// Not public API: the record key and value format of the GDBM files, exposed for
/// benchmarks that compare the driver with raw `gdbm_fetch`/`gdbm_store` on the same bytes.
public enum _GDBMRecordFormat {
    /// The GDBM key of a record id.
    public static func key(for id: RecordID) -> [UInt8] { BinaryCodec.key(for: id) }

    /// The stored value of a record (version, CRC-32, fields).
    public static func encode(_ record: Record) -> [UInt8] {
        BinaryCodec.encodeRecord(key: BinaryCodec.key(for: record.id), fields: record.fields)
    }

    /// Decodes a stored value, verifying its checksum.
    /// - Throws: ``DepotError`` `.corrupted` when the value or the key is damaged.
    public static func decode(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, collection: String) throws -> Record {
        try decode(key: key, value: value, collection: collection, layouts: nil)
    }

    fileprivate static func decode(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, collection: String, layouts: FieldLayoutCache?) throws -> Record {
        // A damaged key is a damaged record too: `.corrupted`, never the codec's own error
        // (found by the gdbm-record fuzz target, Docs/Fuzzing.md).
        let id: RecordID
        do { id = try BinaryCodec.id(fromKey: key) } catch {
            throw GDBMErrors.corrupted("A key in collection '\(collection)' (file '\(collection).records.gdbm') is not a record id.", collection: collection)
        }
        do {
            return Record(id: id, fields: try BinaryCodec.decodeFields(key: key, value: value, layouts: layouts))
        } catch {
            throw GDBMErrors.badRecord(error, collection: collection, id: id)
        }
    }

    /// Decodes stored values as the driver does, field layouts included: records of a shape
    /// seen before are decoded through their layout (the driver's fast path).
    public final class Reader: Sendable {
        private let layouts = FieldLayoutCache()

        public init() {}

        /// Decodes a stored value, verifying its checksum.
        /// - Throws: ``DepotError`` `.corrupted`.
        public func decode(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, collection: String) throws -> Record {
            try _GDBMRecordFormat.decode(key: key, value: value, collection: collection, layouts: layouts)
        }
    }
}
