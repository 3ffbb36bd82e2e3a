import DepotCore
import Foundation

/// The canonical JSON text of nested arrays and objects stored in SQLite columns.
///
/// Canonical, so that equal values have equal text and SQL can compare them with `=`:
/// object keys sorted by UTF-8 bytes, no spaces, ints without a decimal point, finite
/// doubles in Swift's shortest round-trip form, which always has a `.` or an `e` (`1.0`,
/// `-0.0`, `1e+300`), so a double never reads back as an int. Values JSON cannot hold:
/// infinities are `{"$d":"inf"}` / `{"$d":"-inf"}`, bytes are `{"$b":"BASE64"}`. An object
/// that has a key starting with `$` is wrapped as `{"$o":{...}}`, so these forms are never
/// ambiguous.
enum NestedJSON {
    static func encode(_ value: FieldValue) -> String {
        var out = ""
        write(value, into: &out)
        return out
    }

    static func write(_ value: FieldValue, into out: inout String) {
        switch value {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .double(let d):
            if d.isFinite {
                out += d.description
            } else {
                out += d > 0 ? #"{"$d":"inf"}"# : #"{"$d":"-inf"}"#
            }
        case .string(let s): writeString(s, into: &out)
        case .bytes(let data): out += #"{"$b":""# + data.base64EncodedString() + #""}"#
        case .array(let items):
            out += "["
            for (index, item) in items.enumerated() {
                if index > 0 { out += "," }
                write(item, into: &out)
            }
            out += "]"
        case .object(let members):
            let sorted = members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
            let wrap = sorted.contains { $0.key.hasPrefix("$") }
            if wrap { out += #"{"$o":"# }
            out += "{"
            for (index, member) in sorted.enumerated() {
                if index > 0 { out += "," }
                writeString(member.key, into: &out)
                out += ":"
                write(member.value, into: &out)
            }
            out += "}"
            if wrap { out += "}" }
        }
    }

    static func writeString(_ s: String, into out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }

    /// Parses text written by ``encode(_:)``.
    /// - Throws: `.corrupted` for anything else (the file was damaged or edited badly).
    static func decode(_ text: String) throws -> FieldValue {
        var parser = Parser(bytes: Array(text.utf8))
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.index == parser.bytes.count else { throw Parser.failure }
        return value
    }

    struct Parser {
        let bytes: [UInt8]
        var index = 0

        static let failure = DepotError(.corrupted, "A nested value in the SQLite store is not valid Depot JSON.")

        mutating func skipSpace() {
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 { index += 1 }
        }

        mutating func expect(_ literal: String) throws {
            for byte in literal.utf8 {
                guard index < bytes.count, bytes[index] == byte else { throw Parser.failure }
                index += 1
            }
        }

        /// `raw`: the object right after a `$o` key, taken as written (not unwrapped).
        mutating func value(depth: Int, raw: Bool = false) throws -> FieldValue {
            guard depth <= FieldValue.maximumDepth + 2 else { throw Parser.failure }
            skipSpace()
            guard index < bytes.count else { throw Parser.failure }
            switch bytes[index] {
            case UInt8(ascii: "n"): try expect("null"); return .null
            case UInt8(ascii: "t"): try expect("true"); return .bool(true)
            case UInt8(ascii: "f"): try expect("false"); return .bool(false)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "["):
                index += 1
                var items: [FieldValue] = []
                skipSpace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
                while true {
                    items.append(try value(depth: depth + 1))
                    skipSpace()
                    guard index < bytes.count else { throw Parser.failure }
                    if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                    if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
                    throw Parser.failure
                }
            case UInt8(ascii: "{"):
                index += 1
                var members: [String: FieldValue] = [:]
                skipSpace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
                while true {
                    skipSpace()
                    let key = try string()
                    skipSpace()
                    try expect(":")
                    members[key] = try value(depth: depth + 1, raw: !raw && key == "$o")
                    skipSpace()
                    guard index < bytes.count else { throw Parser.failure }
                    if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                    if bytes[index] == UInt8(ascii: "}") { index += 1; break }
                    throw Parser.failure
                }
                return raw ? .object(members) : try unwrap(members)
            default:
                return try number()
            }
        }

        func unwrap(_ members: [String: FieldValue]) throws -> FieldValue {
            guard members.count == 1, let (key, inner) = members.first, key.hasPrefix("$") else { return .object(members) }
            switch (key, inner) {
            case ("$o", .object): return inner
            case ("$d", .string("inf")): return .double(.infinity)
            case ("$d", .string("-inf")): return .double(-.infinity)
            case ("$b", .string(let text)):
                guard let data = Data(base64Encoded: text) else { throw Parser.failure }
                return .bytes(data)
            default: throw Parser.failure
            }
        }

        mutating func number() throws -> FieldValue {
            let start = index
            var isDouble = false
            while index < bytes.count {
                let b = bytes[index]
                if (b >= 0x30 && b <= 0x39) || b == UInt8(ascii: "-") || b == UInt8(ascii: "+") {
                    index += 1
                } else if b == UInt8(ascii: ".") || b == UInt8(ascii: "e") || b == UInt8(ascii: "E") {
                    isDouble = true
                    index += 1
                } else {
                    break
                }
            }
            guard index > start, let text = String(validating: bytes[start..<index], as: UTF8.self) else { throw Parser.failure }
            if isDouble {
                guard let d = Double(text), !d.isNaN else { throw Parser.failure }
                return .double(d)
            }
            guard let i = Int64(text) else { throw Parser.failure }
            return .int(i)
        }

        mutating func string() throws -> String {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw Parser.failure }
            index += 1
            var out: [UInt8] = []
            while index < bytes.count {
                let b = bytes[index]
                index += 1
                if b == UInt8(ascii: "\"") {
                    guard let s = String(validating: out, as: UTF8.self) else { throw Parser.failure }
                    return s
                }
                if b != UInt8(ascii: "\\") { out.append(b); continue }
                guard index < bytes.count else { throw Parser.failure }
                let e = bytes[index]
                index += 1
                switch e {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "u"):
                    var code = try hex4()
                    if code >= 0xD800 && code < 0xDC00 {
                        try expect("\\u")
                        let low = try hex4()
                        guard low >= 0xDC00 && low < 0xE000 else { throw Parser.failure }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw Parser.failure }
                    out.append(contentsOf: Array(String(Character(scalar)).utf8))
                default: throw Parser.failure
                }
            }
            throw Parser.failure
        }

        mutating func hex4() throws -> UInt32 {
            guard index + 4 <= bytes.count else { throw Parser.failure }
            var code: UInt32 = 0
            for _ in 0..<4 {
                let b = bytes[index]
                index += 1
                let digit: UInt32
                switch b {
                case 0x30...0x39: digit = UInt32(b - 0x30)
                case 0x41...0x46: digit = UInt32(b - 0x41 + 10)
                case 0x61...0x66: digit = UInt32(b - 0x61 + 10)
                default: throw Parser.failure
                }
                code = code << 4 | digit
            }
            return code
        }
    }
}
