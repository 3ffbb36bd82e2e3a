import DepotCore
import Foundation
import Testing

/// `UUID.random()`: version 4, RFC 9562 variant, and no repeats.
@Suite struct RandomUUIDTests {
    @Test func versionFourVariantTenAndDistinct() {
        var seen = Set<UUID>()
        for _ in 0..<2_000 {
            let id = UUID.random()
            let bytes = id.uuid
            #expect(bytes.6 >> 4 == 4, "\(id)")
            #expect(bytes.8 >> 6 == 0b10, "\(id)")
            #expect(UUID(uuidString: id.canonicalText) == id)
            seen.insert(id)
        }
        #expect(seen.count == 2_000)
        // Every other bit varies: over 2,000 UUIDs each of the 122 random bits was seen both ways.
        var ones = [Int](repeating: 0, count: 128)
        for id in seen {
            withUnsafeBytes(of: id.uuid) { raw in
                for bit in 0..<128 where raw[bit / 8] >> (7 - UInt8(bit % 8)) & 1 == 1 { ones[bit] += 1 }
            }
        }
        let fixed: Set<Int> = [48, 49, 50, 51, 64, 65]
        for bit in 0..<128 where !fixed.contains(bit) { #expect((1..<2_000).contains(ones[bit]), "bit \(bit) set \(ones[bit]) times") }
    }
}
