import DepotCore
import Foundation

/// A partial update applied to a stored record's bytes: the fields it does not name are
/// copied as they are, with no ``Record`` built and no value decoded into a ``FieldValue``
/// (Docs/GDBMDriver.md, "Partial updates").
extension BinaryCodec {
    /// Changes naming more fields than this are applied through a decoded record: a stored
    /// name is compared with each named field, so the cost grows with their product.
    static let patchFieldLimit = 8

    /// The stored record `value` (under `key`) with `change` applied: the bytes that
    /// decoding it, applying `change` to its fields and encoding the result would give a
    /// record equal to, field for field.
    ///
    /// Each field `change` sets replaces the stored value in place, each it removes is left
    /// out, and those the record lacks are appended. Of a name stored more than once only the
    /// last copy counts, as in decoding, and a stored top-level null is left out as a write of
    /// the decoded record would (no Depot writer leaves either). The rest is copied byte for
    /// byte, after the same checks a decode makes: version, checksum, every length in bounds,
    /// names and strings valid UTF-8, no NaN, no nesting past `FieldValue.maximumDepth`,
    /// nothing after the last field.
    /// - Parameter change: normalized (no `.null` in `set`), setting at most 64 fields.
    /// - Throws: ``RecordProblem`` as ``decodeFields(key:value:layouts:)`` does.
    static func patchRecord(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, applying change: FieldChange) throws(RecordProblem) -> [UInt8] {
        try verify(key: key, value: value)
        // The fields set, in one order for the whole call; bit `i` of `found`: set `i` was stored.
        let sets = Array(change.set)
        precondition(sets.count <= 64, "patchRecord takes at most 64 fields set (callers stop at patchFieldLimit)")
        var found: UInt64 = 0
        do {
            var r = ByteReader(value, from: 5)
            let n = try r.varint()
            guard n <= r.remaining else { throw ByteReader.Malformed() }
            return try withUnsafeTemporaryAllocation(of: KeptField.self, capacity: max(n, 1)) { kept in
                try withUnsafeTemporaryAllocation(of: NameKey.self, capacity: max(sets.count, 1)) { setKeys in
                    // Each set's name length and first 8 bytes, taken once: a stored name is
                    // compared with them, and byte for byte only past 8 bytes (no copy of the
                    // set's name per stored field).
                    for i in sets.indices {
                        var name = sets[i].key
                        setKeys[i] = name.withUTF8 { NameKey(count: $0.count, prefix: FieldLayout.prefix(UnsafeRawBufferPointer($0))) }
                    }
                    // Per stored field kept: its bytes as they are, or the set taking its value.
                    var keptCount = 0, live = 0
                    for _ in 0..<n {
                        let start = r.position
                        let name = try r.slice(try r.varint())
                        guard isUTF8(name) else { throw ByteReader.Malformed() }
                        let valueStart = r.position
                        try skipValue(&r)
                        // A later copy of a name replaces an earlier one, as decoding keeps the last.
                        let prefix = FieldLayout.prefix(name)
                        for j in 0..<keptCount where kept[j].live && kept[j].nameCount == name.count && kept[j].prefix == prefix {
                            let earlier = kept[j].nameStart..<(kept[j].nameStart + name.count)
                            if name.count > 8, !same(UnsafeRawBufferPointer(rebasing: value[earlier]), name) { continue }
                            kept[j].live = false
                            live -= 1
                            break
                        }
                        var set = -1
                        for i in sets.indices where setKeys[i].count == name.count && setKeys[i].prefix == prefix {
                            if name.count > 8, !same(sets[i].key, name) { continue }
                            set = i
                            break
                        }
                        let nameStart = valueStart - name.count
                        if set >= 0 {
                            found |= 1 << UInt64(set)
                            kept[keptCount] = KeptField(start: start, end: valueStart, set: set, live: true, nameStart: nameStart, nameCount: name.count, prefix: prefix)
                        } else if value[valueStart] == 0 || (!change.remove.isEmpty && change.remove.contains(where: { same($0, name) })) {
                            continue
                        } else {
                            kept[keptCount] = KeptField(start: start, end: r.position, set: -1, live: true, nameStart: nameStart, nameCount: name.count, prefix: prefix)
                        }
                        keptCount += 1
                        live += 1
                    }
                    guard r.isAtEnd else { throw ByteReader.Malformed() }
                    var capacity = value.count + 10
                    for (name, newValue) in sets { capacity += 10 + name.utf8.count + sizeBound(newValue) }
                    var w = ByteWriter(capacity: capacity)
                    w.u8(recordVersion)
                    w.u32(0)
                    w.varint(live + sets.count - found.nonzeroBitCount)
                    for field in kept[0..<keptCount] where field.live {
                        w.bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: value[field.start..<field.end]))
                        if field.set >= 0 { write(sets[field.set].value, to: &w, canonical: false) }
                    }
                    for (i, (name, newValue)) in sets.enumerated() where found & (1 << UInt64(i)) == 0 {
                        w.string(name)
                        write(newValue, to: &w, canonical: false)
                    }
                    var crc = CRC32.update(0, key)
                    w.bytes.withUnsafeBytes { crc = CRC32.update(crc, UnsafeRawBufferPointer(rebasing: $0[5...])) }
                    withUnsafeBytes(of: crc.littleEndian) { src in
                        for i in 0..<4 { w.bytes[1 + i] = src[i] }
                    }
                    return w.bytes
                }
            }
        } catch {
            throw .malformed
        }
    }

    /// A field name's UTF-8 length and ``FieldLayout/prefix(_:)``: equal for equal names, and
    /// for names of at most 8 bytes equal only for equal names.
    private struct NameKey {
        var count: Int
        var prefix: UInt64
    }

    /// A stored field a patch keeps: bytes `start..<end` copied, then set `set`'s value
    /// written when `set >= 0`; `live` until a later copy of its name replaces it.
    private struct KeptField {
        var start: Int
        var end: Int
        var set: Int
        var live: Bool
        var nameStart: Int
        var nameCount: Int
        var prefix: UInt64
    }

    /// Moves `r` past one value written by ``write(_:to:canonical:)``, checking it as
    /// ``readValue(_:depth:)`` does without building it.
    static func skipValue(_ r: inout ByteReader, depth: Int = 0) throws {
        guard depth <= FieldValue.maximumDepth else { throw ByteReader.Malformed() }
        switch try r.u8() {
        case 0, 1, 2:
            return
        case 3:
            _ = try r.slice(8)
        case 4:
            guard !Double(bitPattern: try r.u64()).isNaN else { throw ByteReader.Malformed() }
        case 5:
            guard isUTF8(try r.slice(try r.varint())) else { throw ByteReader.Malformed() }
        case 6:
            _ = try r.slice(try r.varint())
        case 7:
            let n = try r.varint()
            guard n <= r.remaining else { throw ByteReader.Malformed() }
            for _ in 0..<n { try skipValue(&r, depth: depth + 1) }
        case 8:
            let n = try r.varint()
            guard n <= r.remaining else { throw ByteReader.Malformed() }
            for _ in 0..<n {
                guard isUTF8(try r.slice(try r.varint())) else { throw ByteReader.Malformed() }
                try skipValue(&r, depth: depth + 1)
            }
        default:
            throw ByteReader.Malformed()
        }
    }

    /// `true` when `bytes` are valid UTF-8 that ``ByteReader/string()`` accepts: ASCII is
    /// checked eight bytes at a time, anything else by decoding.
    static func isUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        var i = 0
        while i + 8 <= bytes.count {
            if base.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { return String(exactUTF8: bytes) != nil }
            i += 8
        }
        while i < bytes.count {
            if base.load(fromByteOffset: i, as: UInt8.self) >= 0x80 { return String(exactUTF8: bytes) != nil }
            i += 1
        }
        return true
    }

    /// `true` when `name`'s UTF-8 bytes are `stored`.
    @inline(__always) private static func same(_ name: String, _ stored: UnsafeRawBufferPointer) -> Bool {
        var name = name
        return name.withUTF8 { same(UnsafeRawBufferPointer($0), stored) }
    }

    /// `true` when `a` and `b` hold the same bytes.
    @inline(__always) private static func same(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        guard let x = a.baseAddress, let y = b.baseAddress else { return true }
        return memcmp(x, y, a.count) == 0
    }
}
