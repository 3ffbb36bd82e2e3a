@testable import DepotCore
import Testing

@Suite("BinaryText: memcmp order of UTF-8")
struct BinaryTextTests {
    private static let samples: [String] = [
        "", "a", "ab", "abc", "b", "B", "user1", "user10", "user2", "é", "e\u{301}", "\u{0}", "a\u{0}",
        "😀", "\u{FFFF}", "z", "zz", "Ω", String(repeating: "x", count: 40), String(repeating: "x", count: 41),
    ]

    @Test("compare and equal agree with the byte-wise definitions on every pair")
    func agreesWithByteWiseOrder() {
        for a in Self.samples {
            for b in Self.samples {
                let expected = a.utf8.lexicographicallyPrecedes(b.utf8) ? -1 : (a.utf8.elementsEqual(b.utf8) ? 0 : 1)
                #expect(BinaryText.compare(a, b) == expected, "\(a.debugDescription) vs \(b.debugDescription)")
                #expect(BinaryText.equal(a, b) == a.utf8.elementsEqual(b.utf8))
            }
        }
    }

    @Test("canonically equivalent strings stay different ids, values and set members")
    func noUnicodeNormalization() {
        let composed = "\u{E9}", decomposed = "e\u{301}"
        #expect(composed == decomposed)  // String's own equality normalizes...
        #expect(RecordID.string(composed) != RecordID.string(decomposed))  // ...Depot's does not
        #expect(FieldValue.string(composed) != FieldValue.string(decomposed))
        #expect(Set([RecordID.string(composed), .string(decomposed), .string(composed)]).count == 2)
        #expect(Set([FieldValue.string(decomposed), .string(composed), .string(decomposed)]).count == 2)
    }

    @Test("equal ids hash equally, whatever the string's storage")
    func hashing() {
        let native = "user" + String(12345)
        let literal = "user12345"
        let fromBytes = String(decoding: Array("user12345".utf8), as: UTF8.self)
        let substringBased = String("xxuser12345".dropFirst(2))
        var set = Set<RecordID>()
        for s in [native, literal, fromBytes, substringBased] { set.insert(.string(s)) }
        #expect(set.count == 1)
        #expect(RecordID.string(native).hashValue == RecordID.string(substringBased).hashValue)
        #expect(FieldValue.string(native).hashValue == FieldValue.string(fromBytes).hashValue)
        let sorted = Self.samples.map { RecordID.string($0) }.sorted()
        #expect(sorted.map { if case .string(let s) = $0 { return s } else { return "" } } == Self.samples.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
    }
}
