import CGDBM
import DepotCore
import Foundation

/// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), the checksum of records, catalog
/// entries and journal records.
///
/// Slicing-by-8: eight tables built once, eight bytes per step (about 4× the speed of the
/// byte-at-a-time table on records of a kilobyte, which every read and write checksums
/// once or twice); the same values as the byte-wise algorithm, which the tail uses. On
/// x86-64 with PCLMULQDQ, messages of 64 bytes or more are first folded with carry-less
/// multiplication (`CGDBM/crc32_fold.h`), again with the same values.
enum CRC32 {
    /// `tables[k * 256 + n]`: the CRC of byte `n` followed by `k` zero bytes.
    static let tables: [UInt32] = {
        var t = [UInt32](repeating: 0, count: 8 * 256)
        for n in 0..<256 {
            var c = UInt32(n)
            for _ in 0..<8 { c = (c & 1) != 0 ? (0xEDB8_8320 ^ (c >> 1)) : (c >> 1) }
            t[n] = c
        }
        for k in 1..<8 {
            for n in 0..<256 {
                let previous = t[(k - 1) * 256 + n]
                t[k * 256 + n] = t[Int(previous & 0xFF)] ^ (previous >> 8)
            }
        }
        return t
    }()

    /// The CPU can fold with carry-less multiplication (`CGDBM/crc32_fold.h`).
    static let folds: Bool = {
        #if arch(x86_64)
        return depot_crc32_fold_available() != 0
        #else
        return false
        #endif
    }()

    /// Continues a checksum over `bytes` (start with `0`).
    ///
    /// On x86-64 with PCLMULQDQ, the first `count & ~15` bytes of 64 or more are folded to
    /// 16 bytes four blocks at a time, and the table finishes those 16 bytes and the tail:
    /// about 8x less time than the table alone on a 1 KB record.
    static func update(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress else { return crc }
        #if arch(x86_64)
        if bytes.count >= 64, folds {
            let folded = bytes.count & ~15
            var block: (UInt64, UInt64) = (0, 0)
            withUnsafeMutableBytes(of: &block) { out in
                depot_crc32_fold(base.assumingMemoryBound(to: UInt8.self), folded, ~crc, out.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
            let register = withUnsafeBytes(of: &block) { tableRegister(0, $0) }
            return ~tableRegister(register, UnsafeRawBufferPointer(rebasing: bytes[folded...]))
        }
        #endif
        return ~tableRegister(~crc, bytes)
    }

    /// The table-driven checksum alone (the reference the folded path is tested against).
    static func tableUpdate(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 { ~tableRegister(~crc, bytes) }

    /// Runs the CRC register `c` (pre-inverted) over `bytes`, 8 bytes per step.
    private static func tableRegister(_ register: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var c = register
        guard let base = bytes.baseAddress else { return c }
        let count = bytes.count
        tables.withUnsafeBufferPointer { t in
            var i = 0
            while i + 8 <= count {
                let lo = UInt32(littleEndian: base.loadUnaligned(fromByteOffset: i, as: UInt32.self)) ^ c
                let hi = UInt32(littleEndian: base.loadUnaligned(fromByteOffset: i + 4, as: UInt32.self))
                c = t[7 * 256 + Int(lo & 0xFF)] ^ t[6 * 256 + Int((lo >> 8) & 0xFF)]
                    ^ t[5 * 256 + Int((lo >> 16) & 0xFF)] ^ t[4 * 256 + Int(lo >> 24)]
                    ^ t[3 * 256 + Int(hi & 0xFF)] ^ t[2 * 256 + Int((hi >> 8) & 0xFF)]
                    ^ t[1 * 256 + Int((hi >> 16) & 0xFF)] ^ t[Int(hi >> 24)]
                i += 8
            }
            while i < count {
                c = t[Int((c ^ UInt32(base.load(fromByteOffset: i, as: UInt8.self))) & 0xFF)] ^ (c >> 8)
                i += 1
            }
        }
        return c
    }

    static func checksum(_ bytes: [UInt8]) -> UInt32 { bytes.withUnsafeBytes { update(0, $0) } }
}

/// Appends the binary forms Depot's GDBM files use. Little-endian fixed-width numbers,
/// LEB128 varints for lengths and counts.
struct ByteWriter {
    var bytes: [UInt8] = []

    init(capacity: Int = 64) { bytes.reserveCapacity(capacity) }

    mutating func u8(_ v: UInt8) { bytes.append(v) }

    mutating func u32(_ v: UInt32) {
        withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func u64(_ v: UInt64) {
        withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func varint(_ v: Int) {
        var x = UInt64(v)
        while x >= 0x80 {
            bytes.append(UInt8(x & 0x7F) | 0x80)
            x >>= 7
        }
        bytes.append(UInt8(x))
    }

    mutating func blob<C: Swift.Collection<UInt8>>(_ b: C) {
        varint(b.count)
        bytes.append(contentsOf: b)
    }

    mutating func string(_ s: String) {
        var s = s
        s.withUTF8 { blob($0) }
    }
}

/// Writes ``ByteWriter``'s forms through a pointer into a buffer of a size computed in
/// advance. Every write is checked against that size: a miscount sets ``overflowed`` (the
/// caller then discards the buffer), it never writes past the end.
struct PointerWriter {
    let base: UnsafeMutablePointer<UInt8>
    let capacity: Int
    private(set) var at = 0
    var overflowed = false

    init(base: UnsafeMutablePointer<UInt8>, capacity: Int) {
        self.base = base
        self.capacity = capacity
    }

    private mutating func fits(_ n: Int) -> Bool {
        if at + n <= capacity { return true }
        overflowed = true
        return false
    }

    mutating func byte(_ b: UInt8) {
        guard fits(1) else { return }
        base[at] = b
        at += 1
    }

    mutating func varint(_ v: Int) {
        var x = UInt64(v)
        while x >= 0x80 {
            byte(UInt8(x & 0x7F) | 0x80)
            x >>= 7
        }
        byte(UInt8(x))
    }

    mutating func u64(_ v: UInt64) {
        guard fits(8) else { return }
        UnsafeMutableRawPointer(base + at).storeBytes(of: v.littleEndian, as: UInt64.self)
        at += 8
    }

    /// A varint length, then the bytes.
    mutating func blob(_ bytes: UnsafeRawBufferPointer) {
        varint(bytes.count)
        guard let src = bytes.baseAddress, bytes.count > 0, fits(bytes.count) else { return }
        UnsafeMutableRawPointer(base + at).copyMemory(from: src, byteCount: bytes.count)
        at += bytes.count
    }

    mutating func text(_ s: String) {
        // Native strings hand out their UTF-8 without a copy of the string value.
        if s.utf8.withContiguousStorageIfAvailable({ blob(UnsafeRawBufferPointer($0)) }) != nil { return }
        var s = s
        s.withUTF8 { blob(UnsafeRawBufferPointer($0)) }
    }
}

/// Reads what ``ByteWriter`` wrote; every read is bounds-checked and throws
/// ``ByteReader/Malformed`` on short or impossible input, never traps.
struct ByteReader {
    struct Malformed: Error {}

    let base: UnsafeRawBufferPointer
    var position = 0

    init(_ base: UnsafeRawBufferPointer, from position: Int = 0) {
        self.base = base
        self.position = position
    }

    var isAtEnd: Bool { position >= base.count }
    var remaining: Int { base.count - position }

    mutating func u8() throws -> UInt8 {
        guard position < base.count else { throw Malformed() }
        defer { position += 1 }
        return base[position]
    }

    mutating func u32() throws -> UInt32 {
        guard remaining >= 4 else { throw Malformed() }
        var v: UInt32 = 0
        withUnsafeMutableBytes(of: &v) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: base[position..<position + 4])) }
        position += 4
        return UInt32(littleEndian: v)
    }

    mutating func u64() throws -> UInt64 {
        guard remaining >= 8 else { throw Malformed() }
        var v: UInt64 = 0
        withUnsafeMutableBytes(of: &v) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: base[position..<position + 8])) }
        position += 8
        return UInt64(littleEndian: v)
    }

    mutating func varint() throws -> Int {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try u8()
            guard shift < 63 else { throw Malformed() }
            result |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 { break }
            shift += 7
        }
        guard result <= UInt64(Int.max) else { throw Malformed() }
        return Int(result)
    }

    mutating func slice(_ count: Int) throws -> UnsafeRawBufferPointer {
        guard count >= 0, count <= remaining else { throw Malformed() }
        defer { position += count }
        return UnsafeRawBufferPointer(rebasing: base[position..<position + count])
    }

    mutating func blob() throws -> [UInt8] { Array(try slice(try varint())) }

    mutating func string() throws -> String {
        let s = try slice(try varint())
        guard let text = String(exactUTF8: s) else { throw Malformed() }
        return text
    }
}

/// The binary forms of ids, field values and records in the GDBM files.
///
/// - A record key is the encoded id: `0x01` + 8 bytes big-endian with the sign bit flipped
///   (integers), or `0x02` + the UTF-8 bytes (strings).
/// - A record value is `version (1 byte) | CRC-32 (4 bytes LE) | payload`, the CRC covering
///   the key and the payload, so a value moved under another key fails too. The payload is a
///   varint field count, then per field its name (varint length + UTF-8) and its value.
/// - A value is a tag byte then its body: `0` null, `1` false, `2` true, `3` int (8 bytes LE),
///   `4` double (IEEE bit pattern, 8 bytes LE: `-0.0` keeps its sign), `5` string and `6`
///   bytes (varint length + bytes, NUL allowed), `7` array (varint count + values),
///   `8` object (varint count + name/value pairs; sorted by name bytes when canonical).
enum BinaryCodec {
    static let recordVersion: UInt8 = 1

    // MARK: Ids

    static func key(for id: RecordID) -> [UInt8] {
        var out: [UInt8] = []
        switch id {
        case .int: out.reserveCapacity(9)
        case .string(let s): out.reserveCapacity(1 + s.utf8.count)
        }
        appendKey(for: id, to: &out)
        return out
    }

    /// Appends `id`'s key (see ``key(for:)``) to `out`.
    static func appendKey(for id: RecordID, to out: inout [UInt8]) {
        switch id {
        case .int(let i):
            out.append(1)
            let u = UInt64(bitPattern: i) ^ (1 << 63)
            for n in 0..<8 { out.append(UInt8(truncatingIfNeeded: u >> (56 - 8 * UInt64(n)))) }
        case .string(let s):
            out.append(2)
            out.append(contentsOf: s.utf8)
        }
    }

    static func id(fromKey key: UnsafeRawBufferPointer) throws -> RecordID {
        guard let tag = key.first else { throw ByteReader.Malformed() }
        switch tag {
        case 1:
            guard key.count == 9 else { throw ByteReader.Malformed() }
            var u: UInt64 = 0
            for n in 0..<8 { u = (u << 8) | UInt64(key[1 + n]) }
            return .int(Int64(bitPattern: u ^ (1 << 63)))
        case 2:
            guard key.count >= 2, let s = String(exactUTF8: UnsafeRawBufferPointer(rebasing: key[1...])) else {
                throw ByteReader.Malformed()
            }
            return .string(s)
        default:
            throw ByteReader.Malformed()
        }
    }

    static func id(fromKey key: [UInt8]) throws -> RecordID { try key.withUnsafeBytes { try id(fromKey: $0) } }

    // MARK: Values

    static func write(_ value: FieldValue, to w: inout ByteWriter, canonical: Bool) {
        switch value {
        case .null: w.u8(0)
        case .bool(let b): w.u8(b ? 2 : 1)
        case .int(let i): w.u8(3); w.u64(UInt64(bitPattern: i))
        case .double(let d): w.u8(4); w.u64(d.bitPattern)
        case .string(let s): w.u8(5); w.string(s)
        case .bytes(let d): w.u8(6); w.blob(d)
        case .array(let items):
            w.u8(7)
            w.varint(items.count)
            for item in items { write(item, to: &w, canonical: canonical) }
        case .object(let members):
            w.u8(8)
            w.varint(members.count)
            if canonical {
                for (k, v) in members.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
                    w.string(k)
                    write(v, to: &w, canonical: true)
                }
            } else {
                for (k, v) in members {
                    w.string(k)
                    write(v, to: &w, canonical: false)
                }
            }
        }
    }

    /// At least the number of bytes ``write(_:to:canonical:)`` appends for `value` (varints
    /// counted at their longest): a buffer capacity.
    static func sizeBound(_ value: FieldValue) -> Int {
        switch value {
        case .null, .bool: return 1
        case .int, .double: return 9
        case .string(let s): return 11 + s.utf8.count
        case .bytes(let d): return 11 + d.count
        case .array(let items): return items.reduce(11) { $0 + sizeBound($1) }
        case .object(let members): return members.reduce(11) { $0 + 10 + $1.key.utf8.count + sizeBound($1.value) }
        }
    }

    /// Reads one value written by ``write(_:to:canonical:)``. What no Depot writer stores is
    /// malformed: NaN, and nesting deeper than `FieldValue.maximumDepth` (a value decoded
    /// from a file is as storable as one a program writes; the gdbm-record fuzz target
    /// checks it, Docs/Fuzzing.md).
    static func readValue(_ r: inout ByteReader, depth: Int = 0) throws -> FieldValue {
        guard depth <= FieldValue.maximumDepth else { throw ByteReader.Malformed() }
        switch try r.u8() {
        case 0: return .null
        case 1: return .bool(false)
        case 2: return .bool(true)
        case 3: return .int(Int64(bitPattern: try r.u64()))
        case 4:
            let double = Double(bitPattern: try r.u64())
            guard !double.isNaN else { throw ByteReader.Malformed() }
            return .double(double)
        case 5: return .string(try r.string())
        case 6: return .bytes(Data(try r.slice(try r.varint())))
        case 7:
            let n = try r.varint()
            guard n <= r.remaining else { throw ByteReader.Malformed() }
            var items: [FieldValue] = []
            items.reserveCapacity(n)
            for _ in 0..<n { items.append(try readValue(&r, depth: depth + 1)) }
            return .array(items)
        case 8:
            let n = try r.varint()
            guard n <= r.remaining else { throw ByteReader.Malformed() }
            // minimumCapacity: reserveCapacity on an empty dictionary took an unspecialized path (~0.6 µs per 10-field record).
            var members = [String: FieldValue](minimumCapacity: n)
            for _ in 0..<n {
                let k = try r.string()
                members[k] = try readValue(&r, depth: depth + 1)
            }
            return .object(members)
        default:
            throw ByteReader.Malformed()
        }
    }

    /// The canonical bytes of a normalized index key (object members sorted).
    static func indexKeyBytes(_ values: [FieldValue]) -> [UInt8] {
        var w = ByteWriter()
        for v in values { write(v, to: &w, canonical: true) }
        return w.bytes
    }

    // MARK: Records

    /// Encodes a record's fields under its key (see the type's description).
    static func encodeRecord(key: [UInt8], fields: [String: FieldValue]) -> [UInt8] {
        encodeFlatRecord(key: key, fields: fields) ?? encodeAnyRecord(key: key, fields: fields)
    }

    /// ``encodeRecord(key:fields:)`` through ``ByteWriter``: any values, nested ones too.
    static func encodeAnyRecord(key: [UInt8], fields: [String: FieldValue]) -> [UInt8] {
        // Sized up front: one allocation, no regrowth while a kilobyte record is written.
        var capacity = 16
        for (name, value) in fields { capacity += 10 + name.utf8.count + sizeBound(value) }
        var w = ByteWriter(capacity: capacity)
        w.u8(recordVersion)
        w.u32(0)
        w.varint(fields.count)
        for (name, value) in fields {
            w.string(name)
            write(value, to: &w, canonical: false)
        }
        var crc = key.withUnsafeBytes { CRC32.update(0, $0) }
        w.bytes.withUnsafeBytes { crc = CRC32.update(crc, UnsafeRawBufferPointer(rebasing: $0[5...])) }
        withUnsafeBytes(of: crc.littleEndian) { src in
            for n in 0..<4 { w.bytes[1 + n] = src[n] }
        }
        return w.bytes
    }

    /// The bytes of a varint.
    static func varintLength(_ v: Int) -> Int {
        var x = UInt64(v)
        var n = 1
        while x >= 0x80 {
            x >>= 7
            n += 1
        }
        return n
    }

    /// The exact encoded length of a value without nested values; `nil` for an array or object.
    private static func flatLength(_ value: FieldValue) -> Int? {
        switch value {
        case .null, .bool: return 1
        case .int, .double: return 9
        case .string(let s):
            let n = s.utf8.count
            return 1 + varintLength(n) + n
        case .bytes(let d): return 1 + varintLength(d.count) + d.count
        case .array, .object: return nil
        }
    }

    /// ``encodeRecord(key:fields:)`` for a record whose values are all flat (no array or
    /// object: the common case), written through a pointer into a buffer of the exact size:
    /// the same bytes, one allocation, no per-byte capacity checks. `nil` when a value nests.
    static func encodeFlatRecord(key: [UInt8], fields: [String: FieldValue]) -> [UInt8]? {
        var total = 5 + varintLength(fields.count)
        for (name, value) in fields {
            guard let length = flatLength(value) else { return nil }
            let n = name.utf8.count
            total += varintLength(n) + n + length
        }
        var out = [UInt8](unsafeUninitializedCapacity: total) { buffer, initialized in
            guard let base = buffer.baseAddress else { return }
            var w = PointerWriter(base: base, capacity: total)
            w.byte(recordVersion)
            for _ in 0..<4 { w.byte(0) }
            w.varint(fields.count)
            // Walked by index, reading keys and values in place: `for (name, value) in fields`
            // copies each pair out (a retain and a release of each string value, ~0.2 µs of a
            // 10-field record here).
            var index = fields.startIndex
            while index != fields.endIndex {
                w.text(fields.keys[index])
                switch fields.values[index] {
                case .null: w.byte(0)
                case .bool(let b): w.byte(b ? 2 : 1)
                case .int(let i): w.byte(3); w.u64(UInt64(bitPattern: i))
                case .double(let d): w.byte(4); w.u64(d.bitPattern)
                case .string(let s): w.byte(5); w.text(s)
                case .bytes(let d): w.byte(6); d.withUnsafeBytes { w.blob($0) }
                case .array, .object: w.overflowed = true  // excluded above
                }
                fields.formIndex(after: &index)
            }
            // A miscount leaves the buffer short of `total`: the caller's general encoder runs.
            initialized = w.overflowed ? 0 : w.at
        }
        guard out.count == total else { return nil }
        var crc = key.withUnsafeBytes { CRC32.update(0, $0) }
        out.withUnsafeBytes { crc = CRC32.update(crc, UnsafeRawBufferPointer(rebasing: $0[5...])) }
        withUnsafeBytes(of: crc.littleEndian) { src in
            for n in 0..<4 { out[1 + n] = src[n] }
        }
        return out
    }

    /// Why a stored record could not be decoded.
    enum RecordProblem: Error { case checksum, version, malformed }

    /// Decodes a record's fields, verifying version and checksum first.
    ///
    /// With `layouts`, a record whose field names are exactly those of a known layout (in any
    /// order) is decoded into a copy of the layout's template, and the names of a record that
    /// matches none are offered to the cache to learn. The result is the same either way.
    /// `known`, when given, are the layouts to try instead of `layouts`' current ones: a
    /// reader slot's own copies (``ReaderHandles``); `layouts` still learns.
    static func decodeFields(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, layouts: FieldLayoutCache? = nil, known: [FieldLayout]? = nil) throws(RecordProblem) -> [String: FieldValue] {
        try verify(key: key, value: value)
        return try decodeVerifiedFields(value, layouts: layouts, known: known)
    }

    /// ``decodeFields(key:value:layouts:)`` of a record whose version and checksum were
    /// already verified (``decodeFieldValues(key:value:layouts:known:into:)`` found no layout).
    static func decodeVerifiedFields(_ value: UnsafeRawBufferPointer, layouts: FieldLayoutCache?, known: [FieldLayout]? = nil) throws(RecordProblem) -> [String: FieldValue] {
        do {
            var r = ByteReader(value, from: 5)
            let n = try r.varint()
            guard n <= r.remaining else { throw ByteReader.Malformed() }
            let fieldsStart = r.position
            if let layouts, n >= 2, n <= FieldLayoutCache.maximumFields {
                for layout in known ?? layouts.current() where layout.count == n {
                    if let fields = try decode(&r, as: layout) { return fields }
                    r.position = fieldsStart
                }
            }
            // minimumCapacity: reserveCapacity on an empty dictionary took an unspecialized path (~0.6 µs per 10-field record).
            var fields = [String: FieldValue](minimumCapacity: n)
            var names: [String] = []
            let learning = layouts != nil && n >= 2 && n <= FieldLayoutCache.maximumFields
            if learning { names.reserveCapacity(n) }
            for _ in 0..<n {
                let name = try r.string()
                fields[name] = try readValue(&r)
                if learning { names.append(name) }
            }
            guard r.isAtEnd else { throw ByteReader.Malformed() }
            if learning { layouts?.learn(names) }
            return fields
        } catch {
            throw .malformed
        }
    }

    /// Checks a stored record's version and checksum (the bytes after them are the fields).
    static func verify(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) throws(RecordProblem) {
        guard value.count >= 6 else { throw .malformed }
        guard value[0] == recordVersion else { throw .version }
        var stored: UInt32 = 0
        withUnsafeMutableBytes(of: &stored) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: value[1..<5])) }
        var crc = CRC32.update(0, key)
        crc = CRC32.update(crc, UnsafeRawBufferPointer(rebasing: value[5...]))
        guard crc == UInt32(littleEndian: stored) else { throw .checksum }
    }

    /// Decodes a record's field values by the positions of the known layout its names match
    /// (in any order), verifying version and checksum first: `values[i]` is the value of the
    /// layout's field `i`. `known` are the layouts to try (a reader slot's copies), `nil` for
    /// `layouts`' own. `nil` when no layout matches; ``decodeVerifiedFields(_:layouts:known:)``
    /// then reads the record (and learns its layout) without checking it again. No name becomes a `String` and no
    /// dictionary is built: what a model read through ``GDBMFieldSource`` needs.
    static func decodeFieldValues(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, layouts: FieldLayoutCache, known: [FieldLayout]? = nil, into values: inout [FieldValue]) throws(RecordProblem) -> FieldLayout? {
        try verify(key: key, value: value)
        do {
            var r = ByteReader(value, from: 5)
            let n = try r.varint()
            guard n <= r.remaining else { throw ByteReader.Malformed() }
            guard n >= 2, n <= FieldLayoutCache.maximumFields else { return nil }
            let fieldsStart = r.position
            for layout in known ?? layouts.current() where layout.count == n {
                if try decodeValues(&r, as: layout, into: &values) { return layout }
                r.position = fieldsStart
            }
            return nil
        } catch {
            throw .malformed
        }
    }

    /// ``decode(_:as:)`` into `values` by layout position; `false` when a name is not the
    /// layout's or repeats.
    private static func decodeValues(_ r: inout ByteReader, as layout: FieldLayout, into values: inout [FieldValue]) throws -> Bool {
        if values.count != layout.count { values = [FieldValue](repeating: .null, count: layout.count) }
        var seen: UInt64 = 0
        for i in 0..<layout.count {
            let name = try r.slice(try r.varint())
            guard let j = layout.position(of: name, prefix: FieldLayout.prefix(name), hint: i) else { return false }
            let bit: UInt64 = 1 << UInt64(j)
            guard seen & bit == 0 else { return false }
            seen |= bit
            values[j] = try readValue(&r)
        }
        guard r.isAtEnd else { throw ByteReader.Malformed() }
        return true
    }

    /// The fields of a record whose names are exactly `layout`'s, in any order, read from `r`
    /// (positioned at the first name); `nil`, with `r` somewhere inside, when a name is not
    /// the layout's or repeats (the general path then decides, repeated names included).
    /// - Throws: ``ByteReader/Malformed`` as the general path would.
    private static func decode(_ r: inout ByteReader, as layout: FieldLayout) throws -> [String: FieldValue]? {
        var fields = layout.template
        var seen: UInt64 = 0
        for i in 0..<layout.count {
            let name = try r.slice(try r.varint())
            guard let j = layout.position(of: name, prefix: FieldLayout.prefix(name), hint: i) else { return nil }
            let bit: UInt64 = 1 << UInt64(j)
            guard seen & bit == 0 else { return nil }
            seen |= bit
            fields.values[layout.indices[j]] = try readValue(&r)
        }
        guard r.isAtEnd else { throw ByteReader.Malformed() }
        return fields
    }

    /// Wraps `payload` as `CRC-32 (4 bytes LE) | payload`: the form of catalog entries and
    /// index entries' values.
    static func sealed(_ payload: [UInt8]) -> [UInt8] {
        var w = ByteWriter(capacity: payload.count + 4)
        w.u32(CRC32.checksum(payload))
        w.bytes.append(contentsOf: payload)
        return w.bytes
    }

    /// The payload of a ``sealed(_:)`` value, `nil` when the checksum fails.
    static func unsealed(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard bytes.count >= 4 else { return nil }
        var r = ByteReader(bytes)
        guard let stored = try? r.u32() else { return nil }
        let payload = UnsafeRawBufferPointer(rebasing: bytes[4...])
        return CRC32.update(0, payload) == stored ? payload : nil
    }
}
