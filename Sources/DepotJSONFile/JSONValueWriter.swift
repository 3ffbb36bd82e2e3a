import DepotCore
import Foundation

/// Writes field values as JSON text, exactly (see Docs/JSONFileDriver.md):
///
/// - ints as plain integers (`42`), doubles always with a `.` or an exponent (`1.0`,
///   `-0.0`, `1e-05`) in the shortest form that reads back to the same bits;
/// - infinities as `{"$double":"Infinity"}` / `{"$double":"-Infinity"}` (as DepotCore's `JSONText`), bytes as `{"$bytes":"BASE64"}`;
/// - a user object whose only key is one of the tags (`$bytes`, `$double`, `$object`) as
///   `{"$object":{...}}`, so it cannot be mistaken for a tagged value;
/// - object keys sorted by their UTF-8 bytes, strings as UTF-8 with `"`, `\` and control
///   characters escaped (`\u0000` for NUL).
struct JSONValueWriter {
    var bytes: [UInt8] = []
    /// Indentation per level when pretty; `nil` writes no whitespace.
    let indent: Int?

    init(pretty: Bool, capacity: Int = 1 << 16) {
        indent = pretty ? 2 : nil
        bytes.reserveCapacity(capacity)
    }

    /// The tags a one-key object may carry; a user object with one of them as its only key is escaped.
    static let tags: Set<String> = ["$bytes", "$double", "$object"]

    mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    mutating func byte(_ b: UInt8) { bytes.append(b) }

    mutating func newline(level: Int) {
        guard let indent else { return }
        bytes.append(0x0A)
        let count = indent * level
        if count > 0 { bytes.append(contentsOf: repeatElement(0x20, count: count)) }
    }

    /// `": "` when pretty, `":"` otherwise.
    mutating func colon() {
        bytes.append(0x3A)
        if indent != nil { bytes.append(0x20) }
    }

    mutating func int(_ value: Int64) {
        if value < 0 { bytes.append(0x2D) }
        var magnitude = value.magnitude
        let start = bytes.count
        repeat {
            bytes.append(0x30 + UInt8(magnitude % 10))
            magnitude /= 10
        } while magnitude > 0
        bytes[start...].reverse()
    }

    mutating func string(_ text: String) {
        bytes.append(0x22)
        var text = text
        text.withUTF8 { utf8 in
            var start = 0
            for i in 0..<utf8.count {
                let b = utf8[i]
                guard b < 0x20 || b == 0x22 || b == 0x5C else { continue }
                if start < i { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<i])) }
                start = i + 1
                switch b {
                case 0x22: raw("\\\"")
                case 0x5C: raw("\\\\")
                case 0x0A: raw("\\n")
                case 0x0D: raw("\\r")
                case 0x09: raw("\\t")
                case 0x08: raw("\\b")
                case 0x0C: raw("\\f")
                default:
                    raw("\\u00")
                    bytes.append(JSONValueWriter.hex[Int(b >> 4)])
                    bytes.append(JSONValueWriter.hex[Int(b & 0xF)])
                }
            }
            if start < utf8.count { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...])) }
        }
        bytes.append(0x22)
    }

    static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    mutating func double(_ value: Double) {
        if value.isInfinite {
            // Tagged: JSON has no infinity.
            byte(0x7B)
            string("$double")
            colon()
            string(value < 0 ? "-Infinity" : "Infinity")
            byte(0x7D)
            return
        }
        // Swift's description is the shortest text that reads back to the same bits, and
        // always has a '.' or an exponent ("1.0", "-0.0", "1e-05", "1e+16"), so it re-reads
        // as a double, never an int.
        bytes.append(contentsOf: value.description.utf8)
    }

    /// Writes `value` at nesting `level` (the level of the line it starts on).
    mutating func value(_ value: FieldValue, level: Int) {
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
            if members.count == 1, let key = members.keys.first, JSONValueWriter.tags.contains(key) {
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

    /// An object's members in UTF-8 byte order of their keys.
    mutating func object(_ members: [String: FieldValue], level: Int) {
        if members.isEmpty { raw("{}"); return }
        byte(0x7B)
        var first = true
        for key in JSONValueWriter.sortedKeys(members) {
            if !first { byte(0x2C) }
            first = false
            newline(level: level + 1)
            string(key)
            colon()
            // Force-unwrap-free: the key came from the dictionary itself.
            value(members[key] ?? .null, level: level + 1)
        }
        newline(level: level)
        byte(0x7D)
    }

    static func sortedKeys(_ members: [String: FieldValue]) -> [String] {
        members.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }
}
