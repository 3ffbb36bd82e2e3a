import DepotCore

/// Parses the `--where 'FIELD OP VALUE'` and `--sort FIELD[:desc]` options of `depot query`
/// and `depot count` into a ``Filter`` and ``SortKey``s.
///
/// FIELD is a top-level field name or `id`. OP is one of `=`, `!=`, `<`, `<=`, `>`, `>=`,
/// `in`, `not-in`, `prefix`, `contains`, `is-null`, `is-not-null`. VALUE is a JSON literal
/// read with ``JSONText`` (`"text"`, `42`, `1.5`, `true`, `null`, `[1,2]`); `in` and `not-in`
/// take an array, `prefix` and `contains` a string, `is-null` and `is-not-null` nothing.
/// Spaces around a symbolic OP are optional (`age>=18`).
package enum WhereParser {
    /// The operators, in the order they are listed in messages.
    package static let operators = ["=", "!=", "<", "<=", ">", ">=", "in", "not-in", "prefix", "contains", "is-null", "is-not-null"]

    /// Parses one `--where` text.
    /// - Throws: a usage ``CLIFailure`` saying what is wrong and how to write it.
    package static func parse(_ text: String) throws -> Filter {
        let bytes = Array(text.utf8)
        var index = 0
        func skipSpace() { while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x09 { index += 1 } }
        func fail(_ message: String, _ hint: String = "write --where 'FIELD OP VALUE', e.g. --where 'year >= 1950' or --where 'name = \"Ada\"'") -> CLIFailure {
            CLIFailure.usage("--where \(quoted(text)): \(message)", hint)
        }

        skipSpace()
        let fieldStart = index
        while index < bytes.count, isNameByte(bytes[index]) { index += 1 }
        let field = String(decoding: bytes[fieldStart..<index], as: UTF8.self)
        guard !field.isEmpty else { throw fail("expected a field name first") }
        guard field == "id" || FieldName.isValid(field) else {
            throw fail("\(quoted(field)) is not a valid field name", "field names are letters, digits and '_', not starting with a digit")
        }
        skipSpace()
        let opStart = index
        if index < bytes.count, isSymbolByte(bytes[index]) {
            while index < bytes.count, isSymbolByte(bytes[index]) { index += 1 }
        } else {
            while index < bytes.count, isWordByte(bytes[index]) { index += 1 }
        }
        let op = String(decoding: bytes[opStart..<index], as: UTF8.self)
        guard !op.isEmpty else { throw fail("expected an operator after \(quoted(field))", "use one of: \(operators.joined(separator: " "))") }
        let normalized = op == "==" ? "=" : op
        guard operators.contains(normalized) else {
            throw fail("unknown operator \(quoted(op))", "use one of: \(operators.joined(separator: " "))")
        }
        if !isSymbolByte(bytes[opStart]), index < bytes.count, bytes[index] != 0x20, bytes[index] != 0x09 {
            throw fail("put a space after the operator \(quoted(op))")
        }
        skipSpace()
        let valueText = String(decoding: bytes[index...], as: UTF8.self)

        if normalized == "is-null" || normalized == "is-not-null" {
            guard valueText.isEmpty else { throw fail("\(op) takes no value", "write --where '\(field) \(op)'") }
            return normalized == "is-null" ? .isNull(field) : .isNotNull(field)
        }
        guard !valueText.isEmpty else { throw fail("\(op) needs a value (a JSON literal)") }
        let value: FieldValue
        do {
            value = try JSONText.parse(valueText)
        } catch let error as DepotError {
            let reason = error.message.replacingOccurrences(of: "Malformed JSON at line 1, ", with: "")
            if let first = valueText.unicodeScalars.first, first.properties.isAlphabetic, !["true", "false", "null"].contains(valueText) {
                throw fail("VALUE must be a JSON literal", "quote text as JSON: --where '\(field) \(op) \"\(valueText)\"'")
            }
            throw fail("VALUE is not a JSON literal (\(reason))")
        }
        switch normalized {
        case "=": return .equal(field, value)
        case "!=": return .notEqual(field, value)
        case "<": return .less(field, value)
        case "<=": return .lessOrEqual(field, value)
        case ">": return .greater(field, value)
        case ">=": return .greaterOrEqual(field, value)
        case "in", "not-in":
            guard case .array(let items) = value else {
                throw fail("\(op) needs a JSON array", "write --where '\(field) \(op) [1, 2]'")
            }
            return normalized == "in" ? .isIn(field, items) : .notIn(field, items)
        default:
            guard case .string(let text) = value else {
                throw fail("\(op) needs a JSON string", "write --where '\(field) \(op) \"text\"'")
            }
            return normalized == "prefix" ? .hasPrefix(field, text) : .contains(field, text)
        }
    }

    /// Parses every `--where` and joins them with AND (`.all` when there are none).
    package static func filter(_ texts: [String]) throws -> Filter {
        try texts.reduce(Filter.all) { filter, text in
            let next = try parse(text)
            return filter && next
        }
    }

    /// Parses one `--sort FIELD[:asc|:desc]`.
    /// - Throws: a usage ``CLIFailure``.
    package static func sortKey(_ text: String) throws -> SortKey {
        let parts = OptionText.split(text, on: ":", maxSplits: 1)
        let field = parts[0]
        guard field == "id" || FieldName.isValid(field) else {
            throw CLIFailure.usage("--sort \(quoted(text)): \(quoted(field)) is not a valid field name", "write --sort FIELD or --sort FIELD:desc")
        }
        guard parts.count == 2 else { return SortKey(field) }
        switch parts[1] {
        case "asc": return SortKey(field)
        case "desc": return SortKey(field, descending: true)
        default: throw CLIFailure.usage("--sort \(quoted(text)): unknown direction \(quoted(parts[1]))", "write --sort FIELD:asc or --sort FIELD:desc")
        }
    }

    /// Quotes user text for a message: at most 60 characters, control characters escaped.
    package static func quoted(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(60) {
            if scalar.value < 0x20 || scalar.value == 0x7F { out += "\\u{\(String(scalar.value, radix: 16))}" } else { out.unicodeScalars.append(scalar) }
        }
        if text.unicodeScalars.count > 60 { out += "…" }
        return "'" + out + "'"
    }

    private static func isNameByte(_ b: UInt8) -> Bool {
        (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == 0x5F
    }
    private static func isWordByte(_ b: UInt8) -> Bool { (b >= 0x61 && b <= 0x7A) || (b >= 0x41 && b <= 0x5A) || b == 0x2D }
    private static func isSymbolByte(_ b: UInt8) -> Bool { b == 0x3D || b == 0x21 || b == 0x3C || b == 0x3E }
}
