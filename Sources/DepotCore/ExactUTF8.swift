import Foundation

extension String {
    /// The string whose UTF-8 is exactly `bytes`, or `nil` when `bytes` is not valid UTF-8.
    ///
    /// Unlike `String(decoding:as:)` nothing is repaired: a string read back from a file is
    /// either exactly what was written or an error. It is the same answer as
    /// `String(validating:as:)` at a fraction of its cost (that initializer goes through an
    /// unspecialized generic path that looks up type metadata on every call; decoding a
    /// 10-field record spent a third of its time there): the bytes are decoded with the
    /// standard library's fast repairing decoder and compared with the result, which equals
    /// them exactly when, and only when, they were valid (a repair always changes bytes,
    /// since U+FFFD's own encoding is valid).
    package init?(exactUTF8 bytes: UnsafeRawBufferPointer) {
        let decoded = String(decoding: bytes, as: UTF8.self)
        let same = decoded.utf8.withContiguousStorageIfAvailable { utf8 -> Bool in
            guard utf8.count == bytes.count else { return false }
            guard let a = utf8.baseAddress, let b = bytes.baseAddress else { return true }
            return memcmp(a, b, bytes.count) == 0
        } ?? decoded.utf8.elementsEqual(bytes)
        guard same else { return nil }
        self = decoded
    }
}
