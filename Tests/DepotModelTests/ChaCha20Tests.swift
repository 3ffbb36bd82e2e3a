import DepotModel
import Foundation
import Testing

/// The cipher the sealed-field test uses, against RFC 8439's published vectors.
@Suite struct ChaCha20Tests {
    static func bytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.filter { !$0.isWhitespace })
        return stride(from: 0, to: digits.count, by: 2).compactMap { UInt8(String(digits[$0...$0 + 1]), radix: 16) }
    }

    /// RFC 8439, 2.3.2: the block function.
    @Test func blockFunctionVector() {
        let cipher = ChaCha20(key: testKey)
        let block = cipher.block(counter: 1, nonce: Self.bytes("000000090000004a00000000"))
        #expect(block == Self.bytes("""
            10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e
            d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e
            """))
    }

    /// RFC 8439, 2.4.2: encrypting the sunscreen sentence, and decrypting it back.
    @Test func encryptionVector() throws {
        let cipher = ChaCha20(key: testKey)
        let nonce = Self.bytes("000000000000004a00000000")
        let plain = Array("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.".utf8)
        let expected = Self.bytes("""
            6e2e359a2568f98041ba0728dd0d6981e97e7aec1d4360c20a27afccfd9fae0b
            f91b65c5524733ab8f593dabcd62b3571639d624e65152ab8f530c359f0861d8
            07ca0dbf500d6a6156a38e088a22b65e52bc514d16ccf806818ce91ab7793736
            5af90bbf74a35be6b40b8eedf2785e42874d
            """)
        #expect(try cipher.apply(plain, nonce: nonce) == expected)
        #expect(try cipher.apply(expected, nonce: nonce) == plain)
        #expect(throws: DepotError.self) { try cipher.apply(plain, nonce: [0]) }
    }

    @Test func sealedTransformerRoundTripsAndRejectsWhatItDidNotWrite() throws {
        let sealed = Sealed.sealed
        let first = try sealed.encode("héllo")
        let second = try sealed.encode("héllo")
        #expect(first != second, "a fresh nonce per value")
        #expect(try sealed.decode(first) == "héllo" && sealed.decode(second) == "héllo")
        #expect(throws: DepotError.self) { try sealed.decode("héllo") }
        #expect(throws: DepotError.self) { try sealed.decode(.bytes(Data([1, 2, 3]))) }
    }
}
