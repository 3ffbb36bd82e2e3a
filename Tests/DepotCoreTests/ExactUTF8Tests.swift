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

    @Test("agrees with String(validating:as:) on every string of up to 4 bytes over a hostile alphabet")
    func agreesWithTheStandardLibrary() {
        // Bytes that start, continue, overlong-encode, surrogate-encode or exceed multi-byte
        // sequences, plus ASCII: every combination up to 4 bytes (41,371 strings), so both
        // outcomes occur and each classic ill-formed case appears in every position.
        let alphabet: [UInt8] = [0x41, 0x7F, 0x80, 0xBF, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xA0, 0x90]
        var strings: [[UInt8]] = [[]]
        var frontier: [[UInt8]] = [[]]
        for _ in 0..<4 {
            frontier = frontier.flatMap { prefix in alphabet.map { prefix + [$0] } }
            strings += frontier
        }
        var invalid = 0
        for bytes in strings {
            let expected = reference(bytes)
            if expected == nil { invalid += 1 }
            #expect(exact(bytes) == expected, "\(bytes)")
        }
        #expect(strings.count == 41_371)
        #expect(invalid > 1_000 && strings.count - invalid > 300, "\(invalid) invalid of \(strings.count)")
    }
}
