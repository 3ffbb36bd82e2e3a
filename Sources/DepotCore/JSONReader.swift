import Foundation

/// Depot's one JSON reader: JSON text straight into field values, the exact inverse of
/// ``JSONWriter``. ``JSONText`` parses through it, and so does the JSON-file driver, which
/// walks a store file with ``readObject(_:)`` and ``readArray(_:)`` and reads each field with
/// ``readValue(depth:)``.
///
/// The dialect (see Docs/TypeMapping.md):
///
/// - A number without `.` or exponent is an int and must fit in Int64: one outside is a
///   `.decoding` error, never silently rounded to a double (write it as `1e20` or as a
///   string). A number with `.` or an exponent is a double and must be finite. `-0` is the
///   int 0; `-0.0` is the double.
/// - A one-key object `{"$bytes":"BASE64"}` is bytes, `{"$double":"Infinity"}` or
///   `{"$double":"-Infinity"}` (also `"inf"`, `"-inf"`) an infinity, and
///   `{"$object":{...}}` the object inside taken as it is (its own one-key tag, if any, is
///   not interpreted; the wrapper is not a level of nesting). With
///   ``acceptsLegacyBase64``, `{"$base64":"BASE64"}` is bytes too. A one-key tag object
///   holding anything else is an error; a tag key beside other keys is an ordinary key.
/// - Keys may appear once per object. Strings must be valid UTF-8 without raw control
///   characters; `\u` escapes, surrogate pairs included, are decoded; a lone surrogate is
///   an error.
/// - Nesting deeper than ``maximumDepth`` is an error, found before the stack is at risk.
///
/// Every error names the line, the column (bytes from 1) and the byte offset, and, when set,
/// the collection (``context``); how it is worded and coded depends on ``reporting``.
package struct JSONReader {
    /// How errors are worded and coded.
    package enum Reporting: Sendable {
        /// JSON text handed over as a value (``JSONText``): every error is `.decoding`,
        /// worded `Malformed JSON at line L, column C: what.`, with the byte offset in the
        /// error's detail.
        case text
        /// A store file: text that is not JSON is `.corrupted` (`the file is not valid
        /// JSON: what at line L, column C (byte B).`), JSON that Depot cannot store is
        /// `.decoding`; both start with the collection when ``JSONReader/context`` is set.
        case file
    }

    /// The text being read.
    package let input: UnsafeBufferPointer<UInt8>
    /// The offset of the next byte to read.
    package var position = 0
    /// The collection being read, for error messages.
    package var context: String?
    /// The deepest nesting ``readValue(depth:)`` accepts.
    package let maximumDepth: Int
    /// How errors are worded and coded.
    package let reporting: Reporting
    /// Whether `{"$base64":"..."}` (the bytes tag of Depot's first HTTP wire format) is
    /// read as bytes; otherwise it is an ordinary object.
    package let acceptsLegacyBase64: Bool
    /// The members read so far of the objects being read, innermost last: an object puts
    /// its members in a table sized for them once it has read them all
    /// (``readObjectValue(depth:)``), and this one buffer serves every object.
    private var pendingMembers: [(key: String, value: FieldValue, offset: Int)] = []

    /// A reader at the start of `input`.
    package init(_ input: UnsafeBufferPointer<UInt8>, maximumDepth: Int = FieldValue.maximumDepth,
                 reporting: Reporting, acceptsLegacyBase64: Bool = false) {
        self.input = input
        self.maximumDepth = maximumDepth
        self.reporting = reporting
        self.acceptsLegacyBase64 = acceptsLegacyBase64
    }

    // MARK: Errors

    /// Line and column (bytes from 1) of a byte offset.
    package static func lineAndColumn(in input: UnsafeBufferPointer<UInt8>, offset: Int) -> (line: Int, column: Int) {
        let end = min(max(offset, 0), input.count)
        var line = 1
        var lineStart = 0
        for i in 0..<end where input[i] == 0x0A {
            line += 1
            lineStart = i + 1
        }
        return (line, end - lineStart + 1)
    }

    /// "line L, column C (byte B)" for a byte offset; columns count bytes from 1.
    package static func location(in input: UnsafeBufferPointer<UInt8>, offset: Int) -> String {
        let (line, column) = lineAndColumn(in: input, offset: offset)
        return "line \(line), column \(column) (byte \(offset))"
    }

    /// An error about the text at `offset`. `code` is what a store file gets; with
    /// ``Reporting/text`` every error is `.decoding`.
    package func failure(_ code: DepotError.Code, _ message: String, at offset: Int) -> DepotError {
        switch reporting {
        case .text:
            let (line, column) = JSONReader.lineAndColumn(in: input, offset: offset)
            return DepotError(.decoding, "Malformed JSON at line \(line), column \(column): \(message).", collection: context, detail: "byte offset \(offset)")
        case .file:
            let place = JSONReader.location(in: input, offset: offset)
            let prefix = context.map { "In collection '\($0)', " } ?? ""
            return DepotError(code, "\(prefix)\(message) at \(place).", collection: context, detail: "byte offset \(offset)")
        }
    }

    /// An error for text that is not JSON at `offset` (the current position by default).
    package func syntax(_ message: String, at offset: Int? = nil) -> DepotError {
        switch reporting {
        case .text: failure(.decoding, message, at: offset ?? position)
        case .file: failure(.corrupted, "the file is not valid JSON: \(message)", at: offset ?? position)
        }
    }

    /// `text` in single quotes for a message, control characters shown as `\u{..}`, cut
    /// after 40 scalars.
    package static func quoted(_ text: String) -> String {
        var shown = ""
        for scalar in text.unicodeScalars.prefix(40) {
            if scalar.value < 0x20 || scalar.value == 0x7F { shown += "\\u{\(String(scalar.value, radix: 16))}" } else { shown.unicodeScalars.append(scalar) }
        }
        return "'" + shown + (text.unicodeScalars.count > 40 ? "…'" : "'")
    }

    // MARK: Tokens

    /// Moves past spaces, tabs, line feeds and carriage returns.
    package mutating func skipWhitespace() {
        while position < input.count {
            switch input[position] {
            case 0x20, 0x0A, 0x0D, 0x09: position += 1
            default: return
            }
        }
    }

    /// The next non-whitespace byte, not consumed; `nil` at the end.
    package mutating func peek() -> UInt8? {
        skipWhitespace()
        return position < input.count ? input[position] : nil
    }

    /// Consumes `byte` (after white space), or throws a syntax error naming `what`.
    mutating func expect(_ byte: UInt8, _ what: String) throws {
        guard peek() == byte else { throw syntax(peek() == nil ? "the text ends where \(what) was expected" : "expected \(what)") }
        position += 1
    }

    /// `true` at the end of the input (after whitespace).
    package mutating func atEnd() -> Bool { peek() == nil }

    /// Reads `{ "key": ... , ... }`, calling `member` with each key and its offset; `member`
    /// must read the value. A key that appears twice is `.decoding` (see ``duplicateKey(_:at:)``);
    /// with `checkingDuplicates: false` the caller finds repeats itself (a dictionary it fills
    /// tells it for free).
    package mutating func readObject(checkingDuplicates: Bool = true, _ member: (inout JSONReader, String, Int) throws -> Void) throws {
        try expect(0x7B, "'{'")
        if peek() == 0x7D { position += 1; return }
        var seen = Set<String>()
        while true {
            guard peek() == 0x22 else { throw syntax("expected a quoted key") }
            let keyOffset = position
            let key = try readString()
            if checkingDuplicates, !seen.insert(key).inserted { throw duplicateKey(key, at: keyOffset) }
            try expect(0x3A, "':' after a key")
            try member(&self, key, keyOffset)
            switch peek() {
            case 0x2C: position += 1
            case 0x7D: position += 1; return
            case nil: throw syntax("the text ends before an object is closed")
            default: throw syntax("expected ',' or '}'")
            }
        }
    }

    /// The error for `key` appearing a second time, at `offset`.
    package func duplicateKey(_ key: String, at offset: Int) -> DepotError {
        failure(.decoding, "key \(JSONReader.quoted(key)) appears twice in one object", at: offset)
    }

    /// Reads `[ ..., ... ]`, calling `element` with each element's offset; `element` must read it.
    package mutating func readArray(_ element: (inout JSONReader, Int) throws -> Void) throws {
        try expect(0x5B, "'['")
        if peek() == 0x5D { position += 1; return }
        while true {
            skipWhitespace()
            try element(&self, position)
            switch peek() {
            case 0x2C: position += 1
            case 0x5D: position += 1; return
            case nil: throw syntax("the text ends before an array is closed")
            default: throw syntax("expected ',' or ']'")
            }
        }
    }

    // MARK: Values

    /// Reads the whole input as one value (white space around it allowed).
    package mutating func readDocument() throws -> FieldValue {
        let value = try readValue(depth: 0)
        guard atEnd() else { throw syntax("unexpected text after the value") }
        return value
    }

    /// Reads any value at nesting `depth` (arrays and objects read their members at
    /// `depth + 1`).
    package mutating func readValue(depth: Int) throws -> FieldValue {
        guard depth <= maximumDepth else {
            throw failure(.decoding, "values nest deeper than \(maximumDepth) levels", at: position)
        }
        guard let byte = peek() else { throw syntax("the text ends where a value was expected") }
        switch byte {
        case 0x22: return .string(try readString())
        case 0x7B: return try readObjectValue(depth: depth)
        case 0x5B:
            var items: [FieldValue] = []
            try readArray { reader, _ in items.append(try reader.readValue(depth: depth + 1)) }
            return .array(items)
        case 0x74: try literal("true"); return .bool(true)
        case 0x66: try literal("false"); return .bool(false)
        case 0x6E: try literal("null"); return .null
        case 0x2D, 0x30...0x39: return try readNumber()
        default: throw syntax("unexpected character")
        }
    }

    private mutating func literal(_ word: StaticString) throws {
        let count = word.utf8CodeUnitCount
        let matches = position + count <= input.count && word.withUTF8Buffer { w in
            (0..<count).allSatisfy { input[position + $0] == w[$0] }
        }
        guard matches else { throw syntax("unexpected word") }
        position += count
    }

    /// An object or a tagged value.
    ///
    /// Whether `$object` is the only key of its object is found by skipping its value
    /// first, so only objects whose first key is `$object` pay for the look ahead.
    private mutating func readObjectValue(depth: Int) throws -> FieldValue {
        let start = position
        // The members are gathered first and put in a table made for their number at the
        // end: a table grown member by member hashes every key again at each growth. A key
        // that appears twice is reported then, at its second place.
        let base = pendingMembers.count
        var escaped: [String: FieldValue]?
        try readObject(checkingDuplicates: false) { reader, key, keyOffset in
            if key == "$object", reader.pendingMembers.count == base, reader.peek() == 0x7B, reader.isOnlyMember() {
                let innerBase = reader.pendingMembers.count
                try reader.readObject(checkingDuplicates: false) { r, k, kOffset in
                    let value = try r.readValue(depth: depth + 1)
                    r.pendingMembers.append((k, value, kOffset))
                }
                escaped = try reader.takeMembers(from: innerBase)
                reader.pendingMembers.append((key, .null, keyOffset))
            } else {
                let value = try reader.readValue(depth: depth + 1)
                reader.pendingMembers.append((key, value, keyOffset))
            }
        }
        let members = try takeMembers(from: base)
        if let escaped { return .object(escaped) }
        if members.count == 1, let (key, value) = members.first, key.utf8.first == 0x24 {
            return try decodeTag(key, value, at: start) ?? .object(members)
        }
        return .object(members)
    }

    /// The members of ``pendingMembers`` from `base` on (one object's), as its table; they
    /// leave the buffer.
    /// - Throws: `.decoding` (`.corrupted` for a file) naming the first key read twice.
    private mutating func takeMembers(from base: Int) throws -> [String: FieldValue] {
        defer { pendingMembers.removeSubrange(base...) }
        var table = [String: FieldValue](minimumCapacity: pendingMembers.count - base)
        for member in pendingMembers[base...] {
            guard table.updateValue(member.value, forKey: member.key) == nil else { throw duplicateKey(member.key, at: member.offset) }
        }
        return table
    }

    /// `true` when the value at the current position is followed by the closing `}`.
    /// Does not move the position; does not validate (the value is read properly after).
    private mutating func isOnlyMember() -> Bool {
        let saved = position
        defer { position = saved }
        var level = 0
        while position < input.count {
            let b = input[position]
            position += 1
            switch b {
            case 0x22:
                while position < input.count, input[position] != 0x22 {
                    position += input[position] == 0x5C ? 2 : 1
                }
                position += 1
            case 0x7B, 0x5B: level += 1
            case 0x7D, 0x5D:
                level -= 1
                if level == 0 { return peek() == 0x7D }
            default: break
            }
        }
        return false
    }

    /// The value a one-key object stands for when its key is a tag; `nil` when the key is
    /// not a tag (the object is an ordinary object).
    private func decodeTag(_ key: String, _ value: FieldValue, at offset: Int) throws -> FieldValue? {
        switch key {
        case "$bytes":
            guard case .string(let text) = value, let data = Data(base64Encoded: text) else {
                throw failure(.decoding, "a {\"$bytes\": ...} value must hold a base64 string", at: offset)
            }
            return .bytes(data)
        case "$base64" where acceptsLegacyBase64:
            guard case .string(let text) = value, let data = Data(base64Encoded: text) else {
                throw failure(.decoding, "a {\"$base64\": ...} value must hold a base64 string", at: offset)
            }
            return .bytes(data)
        case "$double":
            switch value {
            case .string("Infinity"), .string("inf"): return .double(.infinity)
            case .string("-Infinity"), .string("-inf"): return .double(-.infinity)
            default: throw failure(.decoding, "a {\"$double\": ...} value must be \"Infinity\" or \"-Infinity\" (NaN is not stored)", at: offset)
            }
        case "$object":
            // An `$object` holding an object was read as the escape already.
            throw failure(.decoding, "a {\"$object\": ...} value must hold an object", at: offset)
        default:
            return nil
        }
    }

    private mutating func readNumber() throws -> FieldValue {
        let start = position
        var isDouble = false
        if input[position] == 0x2D { position += 1 }
        guard position < input.count, isDigit(input[position]) else { throw syntax("a number needs digits", at: start) }
        if input[position] == 0x30 {
            position += 1
            if position < input.count, isDigit(input[position]) { throw syntax("numbers do not start with 0", at: start) }
        } else {
            while position < input.count, isDigit(input[position]) { position += 1 }
        }
        if position < input.count, input[position] == 0x2E {
            isDouble = true
            position += 1
            guard position < input.count, isDigit(input[position]) else { throw syntax("a '.' needs digits after it", at: start) }
            while position < input.count, isDigit(input[position]) { position += 1 }
        }
        if position < input.count, input[position] == 0x65 || input[position] == 0x45 {
            isDouble = true
            position += 1
            if position < input.count, input[position] == 0x2B || input[position] == 0x2D { position += 1 }
            guard position < input.count, isDigit(input[position]) else { throw syntax("an exponent needs digits", at: start) }
            while position < input.count, isDigit(input[position]) { position += 1 }
        }
        let text = UnsafeBufferPointer(rebasing: input[start..<position])
        if !isDouble {
            guard let value = JSONReader.int64(text) else {
                throw failure(.decoding, "the integer \(String(decoding: text.prefix(40), as: UTF8.self)) does not fit in 64 bits (write it with an exponent, or as a string, to keep it)", at: start)
            }
            return .int(value)
        }
        guard let value = Double(String(decoding: text, as: UTF8.self)), value.isFinite else {
            throw failure(.decoding, "a number is too large for a double", at: start)
        }
        return .double(value)
    }

    /// The integer an optional `-` and ASCII digits spell, or `nil` outside Int64.
    private static func int64(_ text: UnsafeBufferPointer<UInt8>) -> Int64? {
        var negative = false
        var i = 0
        if text[0] == 0x2D { negative = true; i = 1 }
        var value: Int64 = 0
        while i < text.count {
            let digit = Int64(text[i] &- 0x30)
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (s, o2) = negative ? m.subtractingReportingOverflow(digit) : m.addingReportingOverflow(digit)
            if o1 || o2 { return nil }
            value = s
            i += 1
        }
        return value
    }

    @inline(__always) private func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

    /// Reads a quoted string at the current position.
    package mutating func readString() throws -> String {
        guard peek() == 0x22 else { throw syntax("expected a string") }
        let start = position
        position += 1
        let contentStart = position
        // Fast path: no escapes.
        while position < input.count {
            let b = input[position]
            if b == 0x22 {
                let raw = UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: input[contentStart..<position]))
                position += 1
                guard let text = String(exactUTF8: raw) else { throw syntax("a string is not valid UTF-8", at: start) }
                return text
            }
            if b == 0x5C { break }
            if b < 0x20 { throw syntax("a string holds a raw control character (write it as \\u00XX)", at: position) }
            position += 1
        }
        var bytes = Array(UnsafeBufferPointer(rebasing: input[contentStart..<position]))
        while position < input.count {
            let b = input[position]
            switch b {
            case 0x22:
                position += 1
                guard let text = bytes.withUnsafeBytes({ String(exactUTF8: $0) }) else { throw syntax("a string is not valid UTF-8", at: start) }
                return text
            case 0x5C:
                let escapeStart = position
                position += 1
                guard position < input.count else { break }
                let e = input[position]
                position += 1
                switch e {
                case 0x22: bytes.append(0x22)
                case 0x5C: bytes.append(0x5C)
                case 0x2F: bytes.append(0x2F)
                case 0x62: bytes.append(0x08)
                case 0x66: bytes.append(0x0C)
                case 0x6E: bytes.append(0x0A)
                case 0x72: bytes.append(0x0D)
                case 0x74: bytes.append(0x09)
                case 0x75:
                    var scalar = try readHex4(escapeStart)
                    if scalar >= 0xD800 && scalar <= 0xDBFF {
                        guard position + 1 < input.count, input[position] == 0x5C, input[position + 1] == 0x75 else {
                            throw syntax("a \\u escape holds a lone surrogate", at: escapeStart)
                        }
                        position += 2
                        let low = try readHex4(escapeStart)
                        guard low >= 0xDC00 && low <= 0xDFFF else { throw syntax("a \\u escape holds a lone surrogate", at: escapeStart) }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if scalar >= 0xDC00 && scalar <= 0xDFFF {
                        throw syntax("a \\u escape holds a lone surrogate", at: escapeStart)
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw syntax("a \\u escape is not a Unicode scalar", at: escapeStart) }
                    bytes.append(contentsOf: String(Character(unicode)).utf8)
                default:
                    throw syntax("unknown escape in a string", at: escapeStart)
                }
            default:
                if b < 0x20 { throw syntax("a string holds a raw control character (write it as \\u00XX)", at: position) }
                bytes.append(b)
                position += 1
            }
        }
        throw syntax("a string is not closed", at: start)
    }

    private mutating func readHex4(_ escapeStart: Int) throws -> UInt32 {
        guard position + 4 <= input.count else { throw syntax("a \\u escape needs four hex digits", at: escapeStart) }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let b = input[position]
            let digit: UInt32
            switch b {
            case 0x30...0x39: digit = UInt32(b - 0x30)
            case 0x41...0x46: digit = UInt32(b - 0x41 + 10)
            case 0x61...0x66: digit = UInt32(b - 0x61 + 10)
            default: throw syntax("a \\u escape needs four hex digits", at: escapeStart)
            }
            value = value << 4 | digit
            position += 1
        }
        return value
    }
}
