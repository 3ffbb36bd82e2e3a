import Foundation

/// Exact conversion between ``FieldValue`` and JSON text, used wherever Depot speaks JSON
/// (JSON Lines in the CLI, HTTP bodies).
///
/// Plain JSON says most values as they are; the rest get a tagged object, so every value
/// round-trips exactly:
///
/// | value | JSON |
/// | --- | --- |
/// | `.int(5)` | `5` |
/// | `.double(5)` | `5.0` (a double always has `.` or `e`) |
/// | `.double(-0.0)` | `-0.0` |
/// | `.double(.infinity)` | `{"$double":"Infinity"}` (and `-Infinity`) |
/// | `.bytes(d)` | `{"$bytes":"<base64>"}` |
/// | an object whose only key is `$bytes`, `$double`, `$object` or `$base64` | `{"$object":{...}}` |
///
/// `$base64` is the bytes tag of Depot's first HTTP wire format. It is never written as a
/// tag; an object whose only key it is gets wrapped like the others, so that readers of the
/// HTTP wire can still take `{"$base64":"..."}` from an older client as bytes
/// (``parse(_:acceptingLegacyBase64:)``) without mistaking a user's object for it.
///
/// An integer literal outside Int64 reads as a double. Keys are written sorted by their
/// UTF-8 bytes so output is stable.
///
/// ```swift
/// let value = try JSONText.parse(Array(#"{"a":[1,2.0,"x"]}"#.utf8))
/// JSONText.serialize(value)   // {"a":[1,2.0,"x"]}
/// ```
public enum JSONText {
    /// The deepest nesting accepted when parsing.
    public static let maximumDepth = FieldValue.maximumDepth + 2

    /// Parses one JSON value (surrounding white space allowed).
    /// - Throws: ``DepotError`` `.decoding` naming the line and column.
    public static func parse(_ bytes: [UInt8]) throws -> FieldValue {
        try parse(bytes, acceptingLegacyBase64: false)
    }

    /// Parses one JSON value; with `acceptingLegacyBase64`, an object whose only key is
    /// `$base64` holding a base64 string is also read as bytes (the HTTP wire's older form,
    /// see Docs/Server.md). `maximumDepth` is the deepest nesting accepted: an envelope
    /// around records (a list, a change feed) needs a few levels more than ``maximumDepth``.
    /// Everything else as ``parse(_:)``.
    /// - Throws: ``DepotError`` `.decoding` naming the line and column.
    public static func parse(_ bytes: [UInt8], acceptingLegacyBase64: Bool, maximumDepth: Int = JSONText.maximumDepth) throws -> FieldValue {
        var parser = JSONParser(bytes: bytes)
        parser.maximumDepth = maximumDepth
        parser.skipSpace()
        let raw = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.index == bytes.count else { throw parser.error("unexpected text after the value") }
        return try interpretTags(raw, legacyBase64: acceptingLegacyBase64)
    }

    /// Turns the tagged objects of a raw parse into the values they stand for.
    static func interpretTags(_ value: FieldValue, legacyBase64: Bool) throws -> FieldValue {
        switch value {
        case .array(let items):
            return .array(try items.map { try interpretTags($0, legacyBase64: legacyBase64) })
        case .object(let members):
            if members.count == 1, let (key, inner) = members.first {
                switch (key, inner) {
                case ("$base64", .string(let b64)) where legacyBase64:
                    guard let data = Data(base64Encoded: b64) else { throw DepotError(.decoding, "Malformed JSON: a $base64 value is not base64.") }
                    return .bytes(data)
                case ("$bytes", .string(let b64)):
                    guard let data = Data(base64Encoded: b64) else { throw DepotError(.decoding, "Malformed JSON: a $bytes value is not base64.") }
                    return .bytes(data)
                case ("$double", .string(let text)):
                    if text == "Infinity" { return .double(.infinity) }
                    if text == "-Infinity" { return .double(-.infinity) }
                    throw DepotError(.decoding, "Malformed JSON: a $double value is not Infinity or -Infinity.")
                case ("$object", .object(let wrapped)):
                    return .object(try wrapped.mapValues { try interpretTags($0, legacyBase64: legacyBase64) })
                default: break
                }
            }
            return .object(try members.mapValues { try interpretTags($0, legacyBase64: legacyBase64) })
        default:
            return value
        }
    }

    /// Parses JSON text.
    public static func parse(_ text: String) throws -> FieldValue { try parse(Array(text.utf8)) }

    /// Writes a value as compact JSON (or indented with `pretty`).
    public static func serialize(_ value: FieldValue, pretty: Bool = false) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        write(value, into: &out, pretty: pretty, indent: 0)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends a value's JSON to `out`.
    public static func write(_ value: FieldValue, into out: inout [UInt8], pretty: Bool = false, indent: Int = 0) {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .int(let i): out.append(contentsOf: String(i).utf8)
        case .double(let d):
            if d.isInfinite {
                out.append(contentsOf: (d > 0 ? #"{"$double":"Infinity"}"# : #"{"$double":"-Infinity"}"#).utf8)
            } else {
                var text = d.description
                if !text.contains(".") && !text.contains("e") && !text.contains("E") { text += ".0" }
                out.append(contentsOf: text.utf8)
            }
        case .string(let s): writeString(s, into: &out)
        case .bytes(let data):
            out.append(contentsOf: #"{"$bytes":""#.utf8)
            out.append(contentsOf: data.base64EncodedString().utf8)
            out.append(contentsOf: #""}"#.utf8)
        case .array(let items):
            out.append(0x5B)
            for (n, item) in items.enumerated() {
                if n > 0 { out.append(0x2C) }
                newline(&out, pretty, indent + 1)
                write(item, into: &out, pretty: pretty, indent: indent + 1)
            }
            if !items.isEmpty { newline(&out, pretty, indent) }
            out.append(0x5D)
        case .object(let members):
            if members.count == 1, let key = members.keys.first, tags.contains(key) {
                out.append(contentsOf: #"{"$object":"#.utf8)
                writeObject(members, into: &out, pretty: pretty, indent: indent)
                out.append(0x7D)
            } else {
                writeObject(members, into: &out, pretty: pretty, indent: indent)
            }
        }
    }

    /// The keys that make a one-key object a tag on some reader; a user's object with one of
    /// them as its only key is written wrapped in `$object`.
    static let tags: Set<String> = ["$bytes", "$double", "$object", "$base64"]

    private static func writeObject(_ members: [String: FieldValue], into out: inout [UInt8], pretty: Bool, indent: Int) {
        out.append(0x7B)
        let keys = members.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        for (n, key) in keys.enumerated() {
            if n > 0 { out.append(0x2C) }
            newline(&out, pretty, indent + 1)
            writeString(key, into: &out)
            out.append(0x3A)
            if pretty { out.append(0x20) }
            write(members[key] ?? .null, into: &out, pretty: pretty, indent: indent + 1)
        }
        if !keys.isEmpty { newline(&out, pretty, indent) }
        out.append(0x7D)
    }

    private static func newline(_ out: inout [UInt8], _ pretty: Bool, _ indent: Int) {
        guard pretty else { return }
        out.append(0x0A)
        out.append(contentsOf: repeatElement(0x20, count: indent * 2))
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    /// Writes a JSON string literal: `"` and `\` escaped, control characters as `\uXXXX`.
    public static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(0x22)
        for byte in s.utf8 {
            switch byte {
            case 0x22: out.append(contentsOf: [0x5C, 0x22])
            case 0x5C: out.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: out.append(contentsOf: [0x5C, 0x6E])
            case 0x0D: out.append(contentsOf: [0x5C, 0x72])
            case 0x09: out.append(contentsOf: [0x5C, 0x74])
            case 0..<0x20, 0x7F:
                out.append(contentsOf: [0x5C, 0x75, 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: out.append(byte)
            }
        }
        out.append(0x22)
    }
}

struct JSONParser {
    let bytes: [UInt8]
    var index = 0
    var maximumDepth = JSONText.maximumDepth

    init(bytes: [UInt8]) { self.bytes = bytes }

    func error(_ what: String) -> DepotError {
        var line = 1, column = 1
        for byte in bytes[..<min(index, bytes.count)] {
            if byte == 0x0A { line += 1; column = 1 } else { column += 1 }
        }
        return DepotError(.decoding, "Malformed JSON at line \(line), column \(column): \(what).")
    }

    mutating func skipSpace() {
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 { index += 1 }
    }

    mutating func value(depth: Int) throws -> FieldValue {
        guard depth <= maximumDepth else { throw error("nested deeper than \(maximumDepth) levels") }
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case 0x7B: return try object(depth: depth)
        case 0x5B: return try array(depth: depth)
        case 0x22: return .string(try string())
        case 0x74: try literal("true"); return .bool(true)
        case 0x66: try literal("false"); return .bool(false)
        case 0x6E: try literal("null"); return .null
        case 0x2D, 0x30...0x39: return try number()
        default: throw error("unexpected character")
        }
    }

    mutating func literal(_ word: String) throws {
        let w = Array(word.utf8)
        guard index + w.count <= bytes.count, Array(bytes[index..<index + w.count]) == w else { throw error("expected \(word)") }
        index += w.count
    }

    mutating func number() throws -> FieldValue {
        let start = index
        var isDouble = false
        if bytes[index] == 0x2D { index += 1 }
        guard index < bytes.count, bytes[index] >= 0x30 && bytes[index] <= 0x39 else { throw error("expected a digit") }
        if bytes[index] == 0x30 {
            index += 1
        } else {
            while index < bytes.count, bytes[index] >= 0x30 && bytes[index] <= 0x39 { index += 1 }
        }
        if index < bytes.count, bytes[index] == 0x2E {
            isDouble = true
            index += 1
            let digits = index
            while index < bytes.count, bytes[index] >= 0x30 && bytes[index] <= 0x39 { index += 1 }
            guard index > digits else { throw error("expected a digit after the decimal point") }
        }
        if index < bytes.count, bytes[index] == 0x65 || bytes[index] == 0x45 {
            isDouble = true
            index += 1
            if index < bytes.count, bytes[index] == 0x2B || bytes[index] == 0x2D { index += 1 }
            let digits = index
            while index < bytes.count, bytes[index] >= 0x30 && bytes[index] <= 0x39 { index += 1 }
            guard index > digits else { throw error("expected a digit in the exponent") }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if !isDouble, let i = Int64(text) { return .int(i) }
        guard let d = Double(text), d.isFinite else { throw error("number out of range") }
        return .double(d)
    }

    mutating func hex4() throws -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("short \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[index]
            let d: UInt32
            switch b {
            case 0x30...0x39: d = UInt32(b - 0x30)
            case 0x41...0x46: d = UInt32(b - 0x41 + 10)
            case 0x61...0x66: d = UInt32(b - 0x61 + 10)
            default: throw error("bad \\u escape")
            }
            v = v << 4 | d
            index += 1
        }
        return v
    }

    mutating func string() throws -> String {
        index += 1
        var out: [UInt8] = []
        while true {
            guard index < bytes.count else { throw error("unterminated string") }
            let b = bytes[index]
            if b == 0x22 { index += 1; break }
            if b < 0x20 { throw error("control character in a string") }
            if b != 0x5C {
                out.append(b)
                index += 1
                continue
            }
            index += 1
            guard index < bytes.count else { throw error("unterminated escape") }
            let e = bytes[index]
            index += 1
            switch e {
            case 0x22: out.append(0x22)
            case 0x5C: out.append(0x5C)
            case 0x2F: out.append(0x2F)
            case 0x62: out.append(0x08)
            case 0x66: out.append(0x0C)
            case 0x6E: out.append(0x0A)
            case 0x72: out.append(0x0D)
            case 0x74: out.append(0x09)
            case 0x75:
                var scalar = try hex4()
                if scalar >= 0xD800 && scalar < 0xDC00 {
                    guard index + 2 <= bytes.count, bytes[index] == 0x5C, bytes[index + 1] == 0x75 else { throw error("lone surrogate") }
                    index += 2
                    let low = try hex4()
                    guard low >= 0xDC00 && low < 0xE000 else { throw error("bad surrogate pair") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if scalar >= 0xDC00 && scalar < 0xE000 {
                    throw error("lone surrogate")
                }
                guard let u = Unicode.Scalar(scalar) else { throw error("bad \\u escape") }
                out.append(contentsOf: Array(String(Character(u)).utf8))
            default: throw error("bad escape")
            }
        }
        guard let text = out.withUnsafeBytes({ String(exactUTF8: $0) }) else { throw error("invalid UTF-8 in a string") }
        return text
    }

    mutating func array(depth: Int) throws -> FieldValue {
        index += 1
        var items: [FieldValue] = []
        skipSpace()
        if index < bytes.count, bytes[index] == 0x5D { index += 1; return .array(items) }
        while true {
            skipSpace()
            items.append(try value(depth: depth + 1))
            skipSpace()
            guard index < bytes.count else { throw error("unterminated array") }
            if bytes[index] == 0x2C { index += 1; continue }
            if bytes[index] == 0x5D { index += 1; return .array(items) }
            throw error("expected , or ]")
        }
    }

    mutating func object(depth: Int) throws -> FieldValue {
        index += 1
        var members: [String: FieldValue] = [:]
        skipSpace()
        if index < bytes.count, bytes[index] == 0x7D { index += 1; return .object(members) }
        while true {
            skipSpace()
            guard index < bytes.count, bytes[index] == 0x22 else { throw error("expected a key") }
            let key = try string()
            skipSpace()
            guard index < bytes.count, bytes[index] == 0x3A else { throw error("expected :") }
            index += 1
            skipSpace()
            guard members[key] == nil else { throw error("duplicate key \(CollectionName.quotedForMessage(key))") }
            members[key] = try value(depth: depth + 1)
            skipSpace()
            guard index < bytes.count else { throw error("unterminated object") }
            if bytes[index] == 0x2C { index += 1; continue }
            if bytes[index] == 0x7D { index += 1; break }
            throw error("expected , or }")
        }
        return .object(members)
    }
}

extension Record {
    /// The record as one JSON object: `id` first in meaning, then its fields (sorted keys).
    public var jsonText: String {
        var object = fields
        object["id"] = id.fieldValue
        return JSONText.serialize(.object(object))
    }

    /// Reads a record from a JSON object with an `id` (integer or string).
    /// - Throws: `.decoding` when the text is not an object with a valid id.
    public init(jsonObject value: FieldValue) throws {
        guard case .object(var members) = value else { throw DepotError(.decoding, "Expected a JSON object.") }
        guard let idValue = members.removeValue(forKey: "id"), let id = RecordID(idValue) else {
            throw DepotError(.decoding, "A record needs an \"id\" that is an integer or a string.")
        }
        self.init(id: id, fields: members)
    }
}
