import Foundation

/// Depot's one JSON writer: field values as JSON text, exactly, the form ``JSONReader`` reads
/// back. ``JSONText`` writes through it, and so does the JSON-file driver, which lays out the
/// store file itself with ``byte(_:)``, ``string(_:)`` and ``colon()`` and writes each field
/// with ``value(_:level:)``.
///
/// - Ints are plain integers (`42`); doubles always have a `.` or an exponent (`1.0`,
///   `-0.0`, `1e-05`), in the shortest form that reads back to the same bits; infinities are
///   `{"$double":"Infinity"}` and `{"$double":"-Infinity"}`; bytes are
///   `{"$bytes":"BASE64"}`.
/// - A user object whose only key is `$bytes`, `$double`, `$object` or `$base64` is written
///   `{"$object":{...}}`, so no reader takes it for a tagged value (`$base64` is never
///   written as a tag; it is wrapped because the HTTP side reads it as bytes from older
///   clients).
/// - Object keys are sorted by their UTF-8 bytes. Strings are UTF-8 as they are, with `"`,
///   `\`, `\n`, `\r` and `\t` escaped by letter and every other control character and DEL
///   (0x7F) as `\u00XX`.
/// - Compact output has no white space at all, so equal values give equal bytes (the SQLite
///   driver compares nested values as this text). Pretty output puts each array element and
///   object member on its own line, indented by 2 spaces per level, with `": "` after keys.
package struct JSONWriter {
    /// The text written so far.
    package var bytes: [UInt8] = []
    /// Spaces per level when pretty; `nil` writes no white space.
    package let indent: Int?

    /// An empty writer with room for `capacity` bytes.
    package init(pretty: Bool, capacity: Int = 1 << 16) {
        indent = pretty ? 2 : nil
        bytes.reserveCapacity(capacity)
    }

    /// Appends a fixed piece of text as it is.
    package mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// Appends one byte.
    package mutating func byte(_ b: UInt8) { bytes.append(b) }

    /// When pretty, a line feed and the indentation of `level`; nothing otherwise.
    package mutating func newline(level: Int) {
        guard let indent else { return }
        bytes.append(0x0A)
        let count = indent * level
        if count > 0 { bytes.append(contentsOf: repeatElement(0x20, count: count)) }
    }

    /// `": "` when pretty, `":"` otherwise.
    package mutating func colon() {
        bytes.append(0x3A)
        if indent != nil { bytes.append(0x20) }
    }

    /// An integer in decimal.
    package mutating func int(_ value: Int64) {
        if value < 0 { bytes.append(0x2D) }
        var magnitude = value.magnitude
        let start = bytes.count
        repeat {
            bytes.append(0x30 + UInt8(magnitude % 10))
            magnitude /= 10
        } while magnitude > 0
        bytes[start...].reverse()
    }

    /// A string literal (see the type's description for what is escaped).
    package mutating func string(_ text: String) {
        bytes.append(0x22)
        var text = text
        text.withUTF8 { utf8 in
            var start = 0
            for i in 0..<utf8.count {
                let b = utf8[i]
                guard b < 0x20 || b == 0x22 || b == 0x5C || b == 0x7F else { continue }
                if start < i { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<i])) }
                start = i + 1
                switch b {
                case 0x22: raw("\\\"")
                case 0x5C: raw("\\\\")
                case 0x0A: raw("\\n")
                case 0x0D: raw("\\r")
                case 0x09: raw("\\t")
                default:
                    raw("\\u00")
                    bytes.append(JSONWriter.hex[Int(b >> 4)])
                    bytes.append(JSONWriter.hex[Int(b & 0xF)])
                }
            }
            if start < utf8.count { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...])) }
        }
        bytes.append(0x22)
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    /// A double: finite ones as numbers, infinities tagged.
    package mutating func double(_ value: Double) {
        if value.isInfinite {
            // Tagged: JSON has no infinity.
            byte(0x7B)
            string("$double")
            colon()
            string(value < 0 ? "-Infinity" : "Infinity")
            byte(0x7D)
            return
        }
        // Swift's description is the shortest text that reads back to the same bits and has
        // a '.' or an exponent ("1.0", "-0.0", "1e-05", "1e+16"), so it re-reads as a
        // double; the check only guards that promise.
        let text = value.description
        bytes.append(contentsOf: text.utf8)
        if !text.utf8.contains(where: { $0 == 0x2E || $0 == 0x65 || $0 == 0x45 }) { raw(".0") }
    }

    /// Writes `value` at nesting `level` (the level of the line it starts on).
    package mutating func value(_ value: FieldValue, level: Int) {
        switch value {
        case .null: raw("null")
        case .bool(let b): if b { raw("true") } else { raw("false") }
        case .int(let i): int(i)
        case .double(let d): double(d)
        case .string(let s): string(s)
        case .bytes(let data):
            byte(0x7B)
            string("$bytes")
            colon()
            string(data.base64EncodedString())
            byte(0x7D)
        case .array(let items):
            if items.isEmpty { raw("[]"); return }
            byte(0x5B)
            for (n, item) in items.enumerated() {
                if n > 0 { byte(0x2C) }
                newline(level: level + 1)
                self.value(item, level: level + 1)
            }
            newline(level: level)
            byte(0x5D)
        case .object(let members):
            if members.count == 1, let key = members.keys.first, JSONWriter.isTag(key) {
                byte(0x7B)
                string("$object")
                colon()
                object(members, level: level)
                byte(0x7D)
            } else {
                object(members, level: level)
            }
        }
    }

    /// Whether a one-key object with this key would be taken for a tag by some reader
    /// (`$base64` by the HTTP side's legacy reading).
    package static func isTag(_ key: String) -> Bool {
        switch key {
        case "$bytes", "$double", "$object", "$base64": true
        default: false
        }
    }

    /// An object's members in UTF-8 byte order of their keys, never wrapped.
    package mutating func object(_ members: [String: FieldValue], level: Int) {
        if members.isEmpty { raw("{}"); return }
        byte(0x7B)
        var first = true
        for (_, key, member) in JSONWriter.sortedMembers(members) {
            if !first { byte(0x2C) }
            first = false
            newline(level: level + 1)
            string(key)
            colon()
            value(member, level: level + 1)
        }
        newline(level: level)
        byte(0x7D)
    }

    /// The members of `members` in UTF-8 byte order of their keys (``BinaryText``): sorted
    /// as pairs, so writing them looks no key up again.
    /// Each key's first bytes are read once (``BinaryText/prefix(_:)``), so most comparisons
    /// are of two integers.
    package static func sortedMembers(_ members: [String: FieldValue]) -> [(prefix: UInt64, key: String, value: FieldValue)] {
        var sorted: [(prefix: UInt64, key: String, value: FieldValue)] = []
        sorted.reserveCapacity(members.count)
        for (key, value) in members { sorted.append((BinaryText.prefix(key), key, value)) }
        sorted.sort { BinaryText.precedes($0.prefix, $0.key, $1.prefix, $1.key) }
        return sorted
    }
}
