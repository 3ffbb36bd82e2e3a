import DepotModel
import Foundation

/// The ChaCha20 stream cipher of RFC 8439 (section 2.4), written here for the transformer
/// test: a 256-bit key, a 96-bit nonce, a 32-bit block counter. Not authenticated: it
/// shows a transformer that changes a value on its way in and out, nothing more.
struct ChaCha20 {
    let key: [UInt8]


    private static func rotate(_ value: UInt32, _ count: UInt32) -> UInt32 { (value << count) | (value >> (32 - count)) }

    private static func quarterRound(_ s: inout [UInt32], _ a: Int, _ b: Int, _ c: Int, _ d: Int) {
        s[a] = s[a] &+ s[b]; s[d] = rotate(s[d] ^ s[a], 16)
        s[c] = s[c] &+ s[d]; s[b] = rotate(s[b] ^ s[c], 12)
        s[a] = s[a] &+ s[b]; s[d] = rotate(s[d] ^ s[a], 8)
        s[c] = s[c] &+ s[d]; s[b] = rotate(s[b] ^ s[c], 7)
    }

    private static func littleEndianWords(_ bytes: [UInt8]) -> [UInt32] {
        stride(from: 0, to: bytes.count, by: 4).map { i in
            UInt32(bytes[i]) | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2]) << 16 | UInt32(bytes[i + 3]) << 24
        }
    }

    /// One 64-byte block of key stream (RFC 8439, 2.3).
    func block(counter: UInt32, nonce: [UInt8]) -> [UInt8] {
        let initial: [UInt32] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574]
            + Self.littleEndianWords(key) + [counter] + Self.littleEndianWords(nonce)
        var state = initial
        for _ in 0..<10 {
            Self.quarterRound(&state, 0, 4, 8, 12)
            Self.quarterRound(&state, 1, 5, 9, 13)
            Self.quarterRound(&state, 2, 6, 10, 14)
            Self.quarterRound(&state, 3, 7, 11, 15)
            Self.quarterRound(&state, 0, 5, 10, 15)
            Self.quarterRound(&state, 1, 6, 11, 12)
            Self.quarterRound(&state, 2, 7, 8, 13)
            Self.quarterRound(&state, 3, 4, 9, 14)
        }
        var out: [UInt8] = []
        out.reserveCapacity(64)
        for (word, start) in zip(state, initial) {
            let sum = word &+ start
            out += [UInt8(truncatingIfNeeded: sum), UInt8(truncatingIfNeeded: sum >> 8), UInt8(truncatingIfNeeded: sum >> 16), UInt8(truncatingIfNeeded: sum >> 24)]
        }
        return out
    }

    /// Encrypts or decrypts (the same operation) `text` (RFC 8439, 2.4).
    func apply(_ text: [UInt8], nonce: [UInt8], counter: UInt32 = 1) throws -> [UInt8] {
        guard key.count == 32, nonce.count == 12 else { throw DepotError(.invalidValue, "ChaCha20 takes a 32-byte key and a 12-byte nonce.") }
        var out = [UInt8]()
        out.reserveCapacity(text.count)
        var blockCounter = counter
        for start in stride(from: 0, to: text.count, by: 64) {
            let stream = block(counter: blockCounter, nonce: nonce)
            for i in start..<min(start + 64, text.count) { out.append(text[i] ^ stream[i - start]) }
            blockCounter &+= 1
        }
        return out
    }
}

/// A `String` stored encrypted: a fresh random 12-byte nonce, then the ChaCha20 cipher
/// text of its UTF-8 bytes, as one `.bytes` value.
struct Sealed: FieldTransformer {
    let cipher: ChaCha20

    func encode(_ value: String) throws -> FieldValue {
        var generator = SystemRandomNumberGenerator()
        let nonce = (0..<12).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return .bytes(Data(nonce + (try cipher.apply(Array(value.utf8), nonce: nonce))))
    }

    func decode(_ fieldValue: FieldValue) throws -> String {
        guard case .bytes(let data) = fieldValue, data.count >= 12 else {
            throw DepotError(.decoding, "Expected a nonce and cipher text, found \(fieldValue.kind).")
        }
        let bytes = Array(data)
        let plain = try cipher.apply(Array(bytes[12...]), nonce: Array(bytes[..<12]))
        guard let text = String(validating: plain, as: UTF8.self) else {
            throw DepotError(.decoding, "The decrypted bytes are not UTF-8.")
        }
        return text
    }
}

/// The test key: the bytes 0 to 31, as in RFC 8439's examples.
let testKey: [UInt8] = Array(0..<32)

extension FieldTransformer where Self == Sealed {
    /// A ``Sealed`` transformer with the test key.
    static var sealed: Sealed { Sealed(cipher: ChaCha20(key: testKey)) }
}
