import Foundation
import Testing

@testable import DepotCore

/// `URLText.isUnreserved` lets the server's `Location` paths and the sync client's item
/// URLs skip Foundation's percent-encoding: it must accept only text that encoding leaves
/// as it is, under both allowed sets Depot uses.
struct URLTextTests {
    /// The sync client's set (ASCII letters and digits and `-._~`) and the server's
    /// (`urlPathAllowed` without `/`).
    static let clientSet = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))
    static let serverSet = CharacterSet.urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))

    /// Every ASCII character alone: unreserved exactly when the client's encoding keeps it,
    /// and then the server's keeps it too.
    @Test func asciiCharactersAgreeWithFoundation() {
        for byte in UInt8(0)...UInt8(127) {
            let text = String(decoding: [byte], as: UTF8.self)
            let unreserved = URLText.isUnreserved(text)
            #expect(unreserved == (text.addingPercentEncoding(withAllowedCharacters: Self.clientSet) == text), "byte \(byte)")
            if unreserved { #expect(text.addingPercentEncoding(withAllowedCharacters: Self.serverSet) == text, "byte \(byte)") }
        }
    }

    /// Ids as they come: integers' and UUIDs' texts pass; spaces, slashes, percent signs,
    /// other scripts and a character in the middle of otherwise plain text do not.
    @Test func idsAsTheyCome() {
        for text in ["", "42", "-7", "9b2f5c8e-1d3a-4c6b-8e2f-0a1b2c3d4e5f", "A.b_c~d"] {
            #expect(URLText.isUnreserved(text), "\(text)")
            #expect(text.addingPercentEncoding(withAllowedCharacters: Self.serverSet) == text)
        }
        for text in ["a b", "a/b", "100%", "é", "日本", "ab\u{0}", "x?y", "a#b"] {
            #expect(!URLText.isUnreserved(text), "\(text)")
        }
    }
}
