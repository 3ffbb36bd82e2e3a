import DepotCore
import Foundation

/// Sorting records by id through their GDBM key bytes.
///
/// A record's key (``BinaryCodec/key(for:)``: tag 1 and the big-endian integer with its sign
/// bit flipped, or tag 2 and the string's UTF-8 bytes) sorts, byte by byte, exactly as
/// ``RecordID``'s `<` does: integers before strings, integers by value, strings by binary
/// collation. So records can be put in id order by packing their keys into one buffer and
/// sorting small entries with `memcmp`, instead of moving whole records through a
/// comparator that copies each id's string (a retain and a release per comparison: most
/// of a GDBM bulk fetch's sorting time).
enum KeyOrder {
    /// `records` in id order (descending when `descending`), their page at
    /// `offset ..< offset + limit`; ids must be distinct (a collection's are).
    static func page(_ records: [Record], descending: Bool, offset: Int, limit: Int?) -> [Record] {
        guard offset < records.count else { return [] }
        let wanted = limit.map { min(records.count - offset, max(0, $0)) } ?? (records.count - offset)
        guard wanted > 0 else { return [] }
        let k = offset + wanted
        // A small page of many records is selected without sorting them all.
        if k <= QueryEvaluator.selectionLimit && k * 4 <= records.count {
            return QueryEvaluator.sortedPage(records, offset: offset, limit: limit) { descending ? $1.id < $0.id : $0.id < $1.id }
        }
        let order = sortedIndices(records.map(\.id), descending: descending)
        var out: [Record] = []
        out.reserveCapacity(wanted)
        for index in order[offset..<k] { out.append(records[index]) }
        return out
    }

    /// The positions of `ids` in id order (descending when `descending`); ids must be distinct.
    static func sortedIndices(_ ids: [RecordID], descending: Bool) -> [Int] {
        var arena: [UInt8] = []
        arena.reserveCapacity(ids.count * 16)
        var entries: [Entry] = []
        entries.reserveCapacity(ids.count)
        for (index, id) in ids.enumerated() {
            let start = arena.count
            BinaryCodec.appendKey(for: id, to: &arena)
            entries.append(Entry(start: start, count: arena.count - start, index: index))
        }
        arena.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            entries.sort { a, b in
                let c = memcmp(base + a.start, base + b.start, min(a.count, b.count))
                // Negative: a's key sorts first (a prefix sorts before what extends it).
                let order = c != 0 ? Int(c) : a.count - b.count
                return descending ? order > 0 : order < 0
            }
        }
        return entries.map(\.index)
    }

    /// One id's key in the arena, and where its record is.
    struct Entry {
        var start: Int
        var count: Int
        var index: Int
    }
}
