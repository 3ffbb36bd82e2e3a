@testable import DepotCore
import Testing

@Suite("String(exactUTF8:)")
struct ExactUTF8Tests {
    private func exact(_ bytes: [UInt8]) -> String? { bytes.withUnsafeBytes { String(exactUTF8: $0) } }
    private func reference(_ bytes: [UInt8]) -> String? { String(validating: bytes, as: UTF8.self) }

    @Test("valid text comes back byte for byte")
    func valid() {
        for text in ["", "a", "field3", String(repeating: "0123456789", count: 10), "héllo wörld ✓", "😀 emoji and \u{0} nul", "\u{FFFD} is valid itself"] {
            let bytes = Array(text.utf8)
            #expect(exact(bytes) == text)
            #expect(exact(bytes).map { Array($0.utf8) } == bytes)
        }
    }

    @Test("ill-formed sequences give nil, never a repaired string")
    func invalid() {
        let cases: [[UInt8]] = [
            [0xFF], [0xC3], [0xE1, 0x80], [0xF0, 0x90, 0x80],        // stray byte, truncated sequences
            [0xF0, 0x90, 0x80, 0x41],                                   // 3-byte maximal subpart: same length once repaired
            [0x41, 0xED, 0xA0, 0x80],                                   // an encoded surrogate
            [0xC0, 0xAF], [0xE0, 0x80, 0xAF],                           // overlong forms
            [0xF4, 0x90, 0x80, 0x80],                                   // above U+10FFFF
            [0x80, 0x41], Array("ok".utf8) + [0xBF],
        ]
        for bytes in cases { #expect(exact(bytes) == nil, "\(bytes)") }
    }

    @Test("agrees with String(validating:as:) on 20,000 random byte strings")
    func agreesWithTheStandardLibrary() {
        var rng = SplitMix(seed: 0x5EED)
        var invalidSeen = 0
        for _ in 0..<20_000 {
            let count = Int(rng.next() % 12)
            // Mostly bytes that form or break multi-byte sequences, so both outcomes occur.
            let alphabet: [UInt8] = [0x41, 0x7F, 0x80, 0xBF, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xA0, 0x90]
            let bytes = (0..<count).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }
            let expected = reference(bytes)
            if expected == nil { invalidSeen += 1 }
            #expect(exact(bytes) == expected, "\(bytes)")
        }
        #expect(invalidSeen > 1_000 && invalidSeen < 19_000)
    }
}

/// A small deterministic generator (SplitMix64) so failures reproduce.
private struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
