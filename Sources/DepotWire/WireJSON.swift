import DepotCore
import Foundation

/// The exact JSON form of field values that DepotServer and DepotSync exchange.
///
/// JSON has no separate integer type, so the text decides: a number written without a
/// fraction or exponent is an `.int` (when it fits in Int64), any other number is a
/// `.double`. The encoder writes every double with a fraction or exponent (`1.0`, `1e-05`),
/// so values round-trip exactly: `.int(1)` and `.double(1.0)` stay apart, `-0.0` keeps its
/// sign. JSON has no bytes: `.bytes` travels as the object `{"$base64": "..."}`, and that
/// one-key object is read back as bytes. Infinite doubles have no JSON form and are an
/// encoding error.
///
/// ```swift
/// let text = try WireJSON.encode(["a": 1, "b": 1.5])   // {"a":1,"b":1.5}
/// let value = try WireJSON.decode(Array(text.utf8))
/// ```
public enum WireJSON {
    /// The key of the one-key object that carries bytes.
    public static let bytesKey = "$base64"

    /// Encodes a value as compact JSON with object keys sorted by their UTF-8 bytes (canonical:
    /// equal values give equal text).
    /// - Throws: ``DepotError`` `.encoding` for an infinite double or NaN.
    public static func encode(_ value: FieldValue) throws -> String {
        var out = ""
        try write(value, into: &out)
        return out
    }

    /// Encodes a record as one JSON object: `id` first, then its fields.
    /// - Throws: ``DepotError`` `.encoding` for values JSON cannot hold.
    public static func encode(_ record: Record, idField: String = "id") throws -> String {
        var fields = record.fields
        fields[idField] = record.id.fieldValue
        return try encode(.object(fields))
    }

    /// Parses JSON text into a value.
    /// - Throws: ``DepotError`` `.decoding` naming the byte offset of the first problem.
    public static func decode(_ bytes: [UInt8]) throws -> FieldValue {
        var parser = Parser(bytes: bytes)
        parser.skipSpace()
        let value = try parser.parseValue(depth: 0)
        parser.skipSpace()
        guard parser.index == bytes.count else { throw parser.failure("unexpected text after the value") }
        return value
    }

    /// Parses JSON text into a value.
    /// - Throws: ``DepotError`` `.decoding`.
    public static func decode(_ text: String) throws -> FieldValue { try decode(Array(text.utf8)) }

    /// Parses JSON text into a value.
    /// - Throws: ``DepotError`` `.decoding`.
    public static func decode(_ data: Data) throws -> FieldValue { try decode([UInt8](data)) }

    /// Reads a query-string value as json-server does: a JSON literal when it is one
    /// (`12`, `1.5`, `true`, `false`, `null`, `"quoted"`), otherwise the text itself.
    public static func literal(_ text: String) -> FieldValue {
        if let value = try? decode(text) {
            switch value {
            case .array, .object: return .string(text)
            default: return value
            }
        }
        return .string(text)
    }

    static func write(_ value: FieldValue, into out: inout String) throws {
        switch value {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .double(let d):
            guard d.isFinite else { throw DepotError(.encoding, "JSON cannot hold an infinite or NaN number.") }
            out += d.description  // shortest round-trip form, always with '.' or 'e'
        case .string(let s): writeString(s, into: &out)
        case .bytes(let data):
            out += "{"
            writeString(bytesKey, into: &out)
            out += ":"
            writeString(data.base64EncodedString(), into: &out)
            out += "}"
        case .array(let items):
            out += "["
            for (n, item) in items.enumerated() {
                if n > 0 { out += "," }
                try write(item, into: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            let keys = members.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            for (n, key) in keys.enumerated() {
                if n > 0 { out += "," }
                writeString(key, into: &out)
                out += ":"
                try write(members[key] ?? .null, into: &out)
            }
            out += "}"
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
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }

    struct Parser {
        let bytes: [UInt8]
        var index = 0

        func failure(_ what: String) -> DepotError {
            DepotError(.decoding, "Invalid JSON at byte \(index): \(what).")
        }

        mutating func skipSpace() {
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 {
                index += 1
            }
        }

        mutating func expect(_ word: String) throws {
            for b in word.utf8 {
                guard index < bytes.count, bytes[index] == b else { throw failure("expected '\(word)'") }
                index += 1
            }
        }

        mutating func parseValue(depth: Int) throws -> FieldValue {
            guard depth <= FieldValue.maximumDepth + 1 else { throw failure("nested too deeply") }
            guard index < bytes.count else { throw failure("unexpected end") }
            switch bytes[index] {
            case UInt8(ascii: "n"): try expect("null"); return .null
            case UInt8(ascii: "t"): try expect("true"); return .bool(true)
            case UInt8(ascii: "f"): try expect("false"); return .bool(false)
            case UInt8(ascii: "\""): return .string(try parseString())
            case UInt8(ascii: "["):
                index += 1
                var items: [FieldValue] = []
                skipSpace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
                while true {
                    skipSpace()
                    items.append(try parseValue(depth: depth + 1))
                    skipSpace()
                    guard index < bytes.count else { throw failure("unterminated array") }
                    if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                    if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
                    throw failure("expected ',' or ']'")
                }
            case UInt8(ascii: "{"):
                index += 1
                var members: [String: FieldValue] = [:]
                skipSpace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
                while true {
                    skipSpace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw failure("expected a key") }
                    let key = try parseString()
                    skipSpace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw failure("expected ':'") }
                    index += 1
                    skipSpace()
                    members[key] = try parseValue(depth: depth + 1)
                    skipSpace()
                    guard index < bytes.count else { throw failure("unterminated object") }
                    if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                    if bytes[index] == UInt8(ascii: "}") {
                        index += 1
                        if members.count == 1, case .string(let b64)? = members[WireJSON.bytesKey], let data = Data(base64Encoded: b64) {
                            return .bytes(data)
                        }
                        return .object(members)
                    }
                    throw failure("expected ',' or '}'")
                }
            default:
                return try parseNumber()
            }
        }

        mutating func parseNumber() throws -> FieldValue {
            let start = index
            var isInteger = true
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
            let digitsStart = index
            while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 { index += 1 }
            guard index > digitsStart else { throw failure("expected a value") }
            if bytes[digitsStart] == 0x30, index - digitsStart > 1 { throw failure("leading zero") }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                isInteger = false
                index += 1
                let fracStart = index
                while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 { index += 1 }
                guard index > fracStart else { throw failure("expected digits after '.'") }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                isInteger = false
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
                let expStart = index
                while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 { index += 1 }
                guard index > expStart else { throw failure("expected exponent digits") }
            }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            if isInteger, let i = Int64(text) { return .int(i) }
            guard let d = Double(text), d.isFinite else { throw failure("number out of range") }
            return .double(d)
        }

        mutating func parseHex4() throws -> UInt32 {
            guard index + 4 <= bytes.count else { throw failure("short \\u escape") }
            var v: UInt32 = 0
            for _ in 0..<4 {
                let b = bytes[index]
                let digit: UInt32
                switch b {
                case 0x30...0x39: digit = UInt32(b - 0x30)
                case 0x41...0x46: digit = UInt32(b - 0x41 + 10)
                case 0x61...0x66: digit = UInt32(b - 0x61 + 10)
                default: throw failure("bad \\u escape")
                }
                v = v * 16 + digit
                index += 1
            }
            return v
        }

        mutating func parseString() throws -> String {
            index += 1  // opening quote
            var buffer: [UInt8] = []
            while true {
                guard index < bytes.count else { throw failure("unterminated string") }
                let b = bytes[index]
                if b == UInt8(ascii: "\"") { index += 1; break }
                if b < 0x20 { throw failure("control character in string") }
                if b != UInt8(ascii: "\\") { buffer.append(b); index += 1; continue }
                index += 1
                guard index < bytes.count else { throw failure("unterminated escape") }
                let e = bytes[index]
                index += 1
                switch e {
                case UInt8(ascii: "\""): buffer.append(0x22)
                case UInt8(ascii: "\\"): buffer.append(0x5C)
                case UInt8(ascii: "/"): buffer.append(0x2F)
                case UInt8(ascii: "b"): buffer.append(0x08)
                case UInt8(ascii: "f"): buffer.append(0x0C)
                case UInt8(ascii: "n"): buffer.append(0x0A)
                case UInt8(ascii: "r"): buffer.append(0x0D)
                case UInt8(ascii: "t"): buffer.append(0x09)
                case UInt8(ascii: "u"):
                    var code = try parseHex4()
                    if code >= 0xD800, code < 0xDC00 {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                            throw failure("lone surrogate")
                        }
                        index += 2
                        let low = try parseHex4()
                        guard low >= 0xDC00, low < 0xE000 else { throw failure("bad surrogate pair") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    } else if code >= 0xDC00, code < 0xE000 {
                        throw failure("lone surrogate")
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw failure("bad code point") }
                    buffer.append(contentsOf: Array(String(Character(scalar)).utf8))
                default: throw failure("unknown escape")
                }
            }
            guard let s = buffer.withUnsafeBytes({ String(exactUTF8: $0) }) else { throw failure("invalid UTF-8") }
            return s
        }
    }
}
