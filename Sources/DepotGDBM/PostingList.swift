import DepotCore
import Foundation

/// The record keys of one non-unique index entry, kept in their stored form: a count and the
/// keys as length-prefixed byte strings in ascending byte order, with no duplicate
/// (Docs/GDBMDriver.md, "Index file entries").
///
/// Adding or removing a key walks the stored keys, comparing bytes, and splices the list
/// where the key goes: no key is made into an array, hashed or sorted, so a write that moves
/// a record between entries costs a pass over each entry's bytes, not building a set of all
/// its keys and sorting them again (Docs/GDBMDriver.md, "Limits").
struct PostingList: Equatable {
    /// How many keys the list holds.
    private(set) var count = 0
    /// The keys, each a varint length and its bytes, ascending.
    private var body: [UInt8] = []

    /// An empty list.
    init() {}

    /// The list stored as `bytes` (`CRC-32 | count | keys`); `nil` when the checksum fails,
    /// a length runs past the end, bytes are left over, or the keys are not strictly
    /// ascending (what no Depot writer leaves).
    init?(stored bytes: UnsafeRawBufferPointer) {
        guard let payload = BinaryCodec.unsealed(bytes) else { return nil }
        var r = ByteReader(payload)
        guard let n = try? r.varint(), n <= r.remaining else { return nil }
        let start = r.position
        var previous: UnsafeRawBufferPointer?
        for _ in 0..<n {
            guard let length = try? r.varint(), let key = try? r.slice(length) else { return nil }
            if let previous, PostingList.order(previous, key) >= 0 { return nil }
            previous = key
        }
        guard r.isAtEnd else { return nil }
        count = n
        body = Array(payload[start...])
    }

    /// `true` when the list holds no key (its entry is then deleted, not stored).
    var isEmpty: Bool { count == 0 }

    /// The stored form: `CRC-32 | count | keys`.
    func sealed() -> [UInt8] {
        var w = ByteWriter(capacity: body.count + 10)
        w.varint(count)
        w.bytes.append(contentsOf: body)
        return BinaryCodec.sealed(w.bytes)
    }

    /// The keys, ascending.
    var keys: [[UInt8]] {
        var out: [[UInt8]] = []
        out.reserveCapacity(count)
        body.withUnsafeBytes { raw in
            var r = ByteReader(raw)
            // The body was checked when read or built here: every length is in bounds.
            while !r.isAtEnd, let length = try? r.varint(), let key = try? r.slice(length) { out.append(Array(key)) }
        }
        return out
    }

    /// Adds `key` in its place; nothing when the list holds it.
    mutating func insert(_ key: [UInt8]) {
        let (offset, found) = find(key)
        if found { return }
        var entry = ByteWriter(capacity: key.count + 10)
        entry.blob(key)
        body.insert(contentsOf: entry.bytes, at: offset)
        count += 1
    }

    /// Removes `key`; nothing when the list does not hold it.
    mutating func remove(_ key: [UInt8]) {
        let (offset, found) = find(key)
        guard found else { return }
        let end = body.withUnsafeBytes { raw -> Int in
            var r = ByteReader(raw, from: offset)
            guard let length = try? r.varint() else { return offset }
            return r.position + length
        }
        body.removeSubrange(offset..<end)
        count -= 1
    }

    /// Where `key` is or would go: the offset in ``body`` of the first stored key not below
    /// it, and whether that key is `key`.
    private func find(_ key: [UInt8]) -> (offset: Int, found: Bool) {
        key.withUnsafeBytes { wanted in
            body.withUnsafeBytes { raw in
                var r = ByteReader(raw)
                while !r.isAtEnd {
                    let offset = r.position
                    guard let length = try? r.varint(), let stored = try? r.slice(length) else { return (offset, false) }
                    let order = PostingList.order(stored, wanted)
                    if order >= 0 { return (offset, order == 0) }
                }
                return (raw.count, false)
            }
        }
    }

    /// Byte order (as `[UInt8].lexicographicallyPrecedes`: a prefix comes first): negative
    /// when `a` comes before `b`, zero when equal, positive after.
    static func order(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        let shared = min(a.count, b.count)
        if shared > 0, let x = a.baseAddress, let y = b.baseAddress {
            let c = memcmp(x, y, shared)
            if c != 0 { return Int(c) }
        }
        return a.count - b.count
    }
}
