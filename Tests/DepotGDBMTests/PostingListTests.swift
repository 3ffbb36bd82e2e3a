import DepotCore
import Foundation
import Testing

@testable import DepotGDBM

/// An index entry's posting list changed in its stored form holds what a set of the same keys
/// would, in the stored order, and reads what the earlier encoder (a set, sorted, sealed)
/// wrote (Docs/GDBMDriver.md, "Index file entries").
@Suite struct PostingListTests {
    /// The stored form the list had before it was changed in place: the keys of a set,
    /// sorted by bytes, each length-prefixed after the count, sealed with a CRC-32.
    static func setEncoding(_ keys: Set<[UInt8]>) -> [UInt8] {
        var w = ByteWriter()
        w.varint(keys.count)
        for key in keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) { w.blob(key) }
        return BinaryCodec.sealed(w.bytes)
    }

    static func stored(_ bytes: [UInt8]) -> PostingList? {
        bytes.withUnsafeBytes { PostingList(stored: $0) }
    }

    @Test func insertsAndRemovesKeepWhatASetKeeps() throws {
        var random = SplitMix64(seed: 23)
        // Keys that are prefixes of each other, share long prefixes, or differ only in their
        // last byte or in a byte past 127 (an order that signed bytes would get wrong).
        let pool: [[UInt8]] = (0..<40).map { i in
            let length = 1 + Int(random.next() % 12)
            var key = (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next() % 4 == 0 ? 200 + random.next() % 50 : 65 + random.next() % 3) }
            if i % 5 == 0 { key = Array(key.prefix(1)) }
            return key
        }
        var list = PostingList()
        var reference = Set<[UInt8]>()
        var inserted = 0, removed = 0
        for step in 0..<3_000 {
            let key = pool[Int(random.next() % UInt64(pool.count))]
            if random.next() % 3 == 0 {
                if reference.remove(key) != nil { removed += 1 }
                list.remove(key)
            } else {
                if reference.insert(key).inserted { inserted += 1 }
                list.insert(key)
            }
            #expect(list.count == reference.count, "step \(step)")
            if step % 97 == 0 {
                #expect(list.keys == reference.sorted(by: { $0.lexicographicallyPrecedes($1) }), "step \(step)")
                // The stored form is the one the set encoder writes, and reads back.
                #expect(list.sealed() == Self.setEncoding(reference), "step \(step)")
                #expect(Self.stored(list.sealed()) == list, "step \(step)")
            }
        }
        #expect(inserted > 200 && removed > 200, "\(inserted) inserted, \(removed) removed")
        for key in reference { list.remove(key) }
        #expect(list.isEmpty && list.keys.isEmpty)
    }

    @Test func storedListsAreCheckedWhenRead() throws {
        let keys: Set<[UInt8]> = [[1], [1, 2], [2], [255, 0]]
        let good = Self.setEncoding(keys)
        #expect(Self.stored(good)?.keys == [[1], [1, 2], [2], [255, 0]])
        // Out of order or repeated: what no writer leaves.
        for payload: [[UInt8]] in [[[2], [1]], [[1], [1]], [[1, 2], [1]]] {
            var w = ByteWriter()
            w.varint(payload.count)
            for key in payload { w.blob(key) }
            #expect(Self.stored(BinaryCodec.sealed(w.bytes)) == nil, "\(payload)")
        }
        // A flipped bit fails the checksum; a count past the keys, a length past the end and
        // bytes left over are refused.
        var flipped = good
        flipped[flipped.count - 1] ^= 1
        #expect(Self.stored(flipped) == nil)
        for payload: [UInt8] in [[3, 1, 1, 1, 2], [1, 5, 1], [1, 1, 7, 0]] {
            #expect(Self.stored(BinaryCodec.sealed(payload)) == nil, "\(payload)")
        }
        #expect(Self.stored(BinaryCodec.sealed([0])) == PostingList())
    }
}
