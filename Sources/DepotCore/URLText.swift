/// Percent-encoding's common case, decided without Foundation.
///
/// Text made only of RFC 3986's unreserved characters (ASCII letters and digits, `-`, `.`,
/// `_`, `~`) is its own percent-encoding under every allowed set Depot encodes path segments
/// with, so callers return it as it is and leave the rest to
/// `addingPercentEncoding(withAllowedCharacters:)`. Integer ids and UUID texts are such text.
package enum URLText {
    /// `true` when every byte of `text` is an unreserved character (also for empty text).
    @inlinable
    package static func isUnreserved(_ text: String) -> Bool {
        for byte in text.utf8 {
            switch byte {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, 0x2D, 0x2E, 0x5F, 0x7E: continue
            default: return false
            }
        }
        return true
    }
}
