import DepotCore

/// A collection's catalog entry: its schema and the greatest integer id it has ever had.
///
/// Stored in `_depotsys_catalog.gdbm` under `c:NAME` as a sealed value (CRC-32 then payload):
/// format version (1), id kind (0 int, 1 string), last assigned id (u64), then the unique
/// constraints and the indexes, each a varint count of (name, varint field count, fields).
struct CollectionMeta: Hashable, Sendable {
    var schema: CollectionSchema
    var lastAssignedID: Int64

    static let version: UInt8 = 1

    static func catalogKey(_ name: CollectionName) -> [UInt8] { Array("c:".utf8) + Array(name.rawValue.utf8) }

    func encoded() -> [UInt8] {
        var w = ByteWriter()
        w.u8(CollectionMeta.version)
        w.u8(schema.idKind == .int ? 0 : 1)
        w.u64(UInt64(bitPattern: lastAssignedID))
        w.varint(schema.uniqueConstraints.count)
        for u in schema.uniqueConstraints {
            w.string(u.name)
            w.varint(u.fields.count)
            for f in u.fields { w.string(f) }
        }
        w.varint(schema.indexes.count)
        for i in schema.indexes {
            w.string(i.name)
            w.varint(i.fields.count)
            for f in i.fields { w.string(f) }
        }
        return BinaryCodec.sealed(w.bytes)
    }

    /// Decodes a catalog entry found under `key`.
    /// - Throws: `.corrupted` when the key or value is damaged, `.schemaMismatch` for a newer format.
    static func decode(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) throws -> CollectionMeta {
        guard key.count > 2, key[0] == UInt8(ascii: "c"), key[1] == UInt8(ascii: ":"),
            let text = String(exactUTF8: UnsafeRawBufferPointer(rebasing: key[2...])),
            let name = try? CollectionName(validating: text)
        else { throw GDBMErrors.corrupted("The GDBM store's catalog (file '_depotsys_catalog.gdbm') holds an entry that is not a collection.") }
        guard let payload = BinaryCodec.unsealed(value) else {
            throw GDBMErrors.corrupted("The catalog entry of collection '\(name)' (file '_depotsys_catalog.gdbm') fails its checksum.", collection: name.rawValue)
        }
        do {
            var r = ByteReader(payload)
            let version = try r.u8()
            guard version <= CollectionMeta.version else {
                throw DepotError(.schemaMismatch, "Collection '\(name)' was written by a newer GDBM driver (catalog format \(version)).", collection: name.rawValue)
            }
            let kind: IDKind
            switch try r.u8() {
            case 0: kind = .int
            case 1: kind = .string
            default: throw ByteReader.Malformed()
            }
            let last = Int64(bitPattern: try r.u64())
            func list() throws -> [(String, [String])] {
                let n = try r.varint()
                guard n <= r.remaining else { throw ByteReader.Malformed() }
                var out: [(String, [String])] = []
                for _ in 0..<n {
                    let item = try r.string()
                    let m = try r.varint()
                    guard m <= r.remaining else { throw ByteReader.Malformed() }
                    var fields: [String] = []
                    for _ in 0..<m { fields.append(try r.string()) }
                    out.append((item, fields))
                }
                return out
            }
            let uniques = try list().map { UniqueConstraint($0.1, name: $0.0) }
            let indexes = try list().map { IndexDefinition($0.1, name: $0.0) }
            guard r.isAtEnd else { throw ByteReader.Malformed() }
            let schema = CollectionSchema(name: name, idKind: kind, uniqueConstraints: uniques, indexes: indexes)
            try schema.validate()
            return CollectionMeta(schema: schema, lastAssignedID: last)
        } catch let error as DepotError where error.code == .schemaMismatch {
            throw error
        } catch {
            throw GDBMErrors.corrupted("The catalog entry of collection '\(name)' (file '_depotsys_catalog.gdbm') cannot be decoded.", collection: name.rawValue)
        }
    }
}
