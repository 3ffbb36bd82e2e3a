import Testing

@testable import DepotCLIParsers

/// ``OptionText/split(_:on:maxSplits:omittingEmpty:)`` finds ASCII separators among UTF-8
/// bytes; it must cut exactly where a split of the Unicode scalars does.
@Suite struct OptionTextTests {
    @Test func splitsAsTheScalarsDo() {
        let alphabet: [String] = [",", ":", " ", "a", "é", "e\u{301}", "\u{0603}", "😀", "\t", "\u{A0}"]
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 33
        }
        var compared = 0
        for _ in 0..<3000 {
            let text = (0..<Int(next() % 12)).map { _ in alphabet[Int(next() % UInt64(alphabet.count))] }.joined()
            for separator: Unicode.Scalar in [",", ":"] {
                for maxSplits in [0, 1, 2, Int.max] {
                    for omitting in [false, true] {
                        let expected = text.unicodeScalars.split(separator: separator, maxSplits: maxSplits, omittingEmptySubsequences: omitting)
                            .map { String(String.UnicodeScalarView($0)) }
                        let got = OptionText.split(text, on: separator, maxSplits: maxSplits, omittingEmpty: omitting)
                        #expect(got == expected, "\(Array(text.unicodeScalars)) on \(separator), maxSplits \(maxSplits), omitting \(omitting)")
                        compared += 1
                    }
                }
            }
        }
        #expect(compared == 48_000)
        #expect(OptionText.trimmed("\u{A0} a b\t") == "a b")
        #expect(OptionText.trimmed(" \t ") == "")
    }
}
