import Foundation

/// Binary collation of strings: their UTF-8 bytes compared as unsigned bytes, a prefix
/// first (memcmp order), which is the order of every id and string value in Depot.
///
/// `String`'s own `<` and `==` follow Unicode canonical equivalence, which Depot must not
/// (two differently normalized strings are different ids); `utf8.lexicographicallyPrecedes`
/// gives the right answer one byte at a time through generic iterators. These do it with
/// `memcmp` on the strings' contiguous UTF-8 (native strings already are; others are made so).
package enum BinaryText {
    /// `-1`, `0` or `1` as `a`'s UTF-8 bytes order before, equal to or after `b`'s.
    @inlinable
    package static func compare(_ a: String, _ b: String) -> Int {
        var a = a, b = b
        return a.withUTF8 { x in
            b.withUTF8 { y in
                let common = Swift.min(x.count, y.count)
                if common > 0, let p = x.baseAddress, let q = y.baseAddress {
                    let order = memcmp(p, q, common)
                    if order != 0 { return order < 0 ? -1 : 1 }
                }
                return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
            }
        }
    }

    /// The first eight UTF-8 bytes of `s` as a big-endian integer, zeros past its end: two
    /// strings whose prefixes differ order as these integers do (``compare(_:_:)``'s
    /// order); strings with equal prefixes must be compared in full.
    @inlinable
    package static func prefix(_ s: String) -> UInt64 {
        var key: UInt64 = 0
        var shift: UInt64 = 56
        for byte in s.utf8 {
            key |= UInt64(byte) &<< shift
            if shift == 0 { break }
            shift &-= 8
        }
        return key
    }

    /// `true` when the string with prefix `pa` (``prefix(_:)``) and text `a` orders before
    /// the one with `pb` and `b`: the prefixes decide, the texts only when they are equal.
    @inlinable
    package static func precedes(_ pa: UInt64, _ a: String, _ pb: UInt64, _ b: String) -> Bool {
        pa != pb ? pa < pb : compare(a, b) < 0
    }

    /// The same UTF-8 bytes (no Unicode normalization).
    @inlinable
    package static func equal(_ a: String, _ b: String) -> Bool {
        guard a.utf8.count == b.utf8.count else { return false }
        return compare(a, b) == 0
    }

    /// Feeds `s`'s UTF-8 bytes to `hasher` in one call (consistent with ``equal(_:_:)``).
    @inlinable
    package static func hash(_ s: String, into hasher: inout Hasher) {
        var s = s
        s.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}
