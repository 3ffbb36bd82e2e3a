import Foundation

/// Splitting an option's text (`--sort`, `--types`, `--unique`, `--index`) at ASCII
/// separators.
///
/// The text is split on Unicode scalars, not Characters: a combining mark or a prepended
/// concatenation mark (U+0600…U+0605) next to a separator would otherwise join it into one
/// Character and hide it, and grapheme breaking made these parsers the slowest of the fuzz
/// targets (Docs/Fuzzing.md). The store-URL and query-string parsers split the same way.
enum OptionText {
    /// The pieces of `text` between `separator`s, at most `maxSplits + 1` of them; empty
    /// pieces are kept unless `omittingEmpty` (then they are dropped and do not count as
    /// splits). `separator` is ASCII, so it is found among the UTF-8 bytes: an ASCII byte is
    /// never part of a longer scalar, which makes this the split on scalars without decoding.
    static func split(_ text: some StringProtocol, on separator: Unicode.Scalar, maxSplits: Int = .max, omittingEmpty: Bool = false) -> [String] {
        precondition(separator.isASCII, "option separators are ASCII")
        let text = Substring(text)
        let byte = UInt8(separator.value)
        var pieces: [String] = []
        var start = text.utf8.startIndex
        var index = start
        var splits = 0
        while index < text.utf8.endIndex, splits < maxSplits {
            if text.utf8[index] == byte {
                if !(omittingEmpty && start == index) {
                    pieces.append(String(text[start..<index]))
                    splits += 1
                }
                start = text.utf8.index(after: index)
            }
            index = text.utf8.index(after: index)
        }
        if !(omittingEmpty && start == text.utf8.endIndex) { pieces.append(String(text[start...])) }
        return pieces
    }

    /// `text` without the horizontal white space (`CharacterSet.whitespaces`: space, tab and
    /// the Unicode space separators) at either end.
    static func trimmed(_ text: String) -> String {
        let scalars = text.unicodeScalars
        let isBlank: (Unicode.Scalar) -> Bool = { CharacterSet.whitespaces.contains($0) }
        guard let first = scalars.firstIndex(where: { !isBlank($0) }), let last = scalars.lastIndex(where: { !isBlank($0) }) else { return "" }
        return String(scalars[first...last])
    }
}
