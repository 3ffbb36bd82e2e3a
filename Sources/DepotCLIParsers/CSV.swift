import DepotCore
import Foundation

/// CSV for `depot load --format csv` and `depot dump --format csv` (Docs/CLI.md, "CSV"):
/// RFC 4180 quoting (fields in double quotes may hold commas, line breaks and doubled quotes),
/// UTF-8, a header row of field names.
package enum CSV {
    /// The column types `--types` can name.
    package enum ColumnType: String, CaseIterable, Sendable {
        case int, double, bool, string
    }

    /// Splits one CSV record into its fields; `nil` when a quoted field is still open at the
    /// end of `bytes` (the record continues on the next line).
    /// - Throws: a message for a quote inside an unquoted field, text after a closing quote,
    ///   or bytes that are not UTF-8.
    package static func fields(_ bytes: [UInt8]) throws -> [String]? {
        var splitter = CSVRecordSplitter()
        try splitter.feed(bytes)
        return splitter.isOpen ? nil : try splitter.finish()
    }

    /// The value of one field's text, inferred when `type` is `nil` (never lossy): empty is
    /// missing (`nil`); `true`/`false` a bool; an integer whose text is exactly how Depot
    /// writes that Int64 an int; a finite number whose text is exactly how Depot writes that
    /// Double a double; anything else the string itself. With a `type`, the text must be one.
    /// - Throws: a message when the text is not of `type`.
    package static func value(_ text: String, type: ColumnType?) throws -> FieldValue? {
        switch type {
        case nil:
            if text.isEmpty { return nil }
            if text == "true" { return .bool(true) }
            if text == "false" { return .bool(false) }
            if let int = Int64(text), String(int) == text { return .int(int) }
            if let double = Double(text), double.isFinite, String(double) == text { return .double(double) }
            return .string(text)
        case .string?:
            return .string(text)
        case .int?:
            if text.isEmpty { return nil }
            guard let int = Int64(text) else { throw CSVError("\(WhereParser.quoted(text)) is not an integer") }
            return .int(int)
        case .double?:
            if text.isEmpty { return nil }
            guard let double = Double(text), double.isFinite else { throw CSVError("\(WhereParser.quoted(text)) is not a finite number") }
            return .double(double)
        case .bool?:
            if text.isEmpty { return nil }
            guard text == "true" || text == "false" else { throw CSVError("\(WhereParser.quoted(text)) is not true or false") }
            return .bool(text == "true")
        }
    }

    /// Parses `--types col:int,col2:string`.
    /// - Throws: a usage ``CLIFailure``.
    package static func types(_ text: String?) throws -> [String: ColumnType] {
        guard let text else { return [:] }
        var types: [String: ColumnType] = [:]
        for pair in OptionText.split(text, on: ",", omittingEmpty: true) {
            let parts = OptionText.split(pair, on: ":", maxSplits: 1, omittingEmpty: true).map(OptionText.trimmed)
            guard parts.count == 2, let type = ColumnType(rawValue: parts[1]), !parts[0].isEmpty else {
                throw CLIFailure.usage(
                    "--types \(WhereParser.quoted(pair)) is not COLUMN:TYPE",
                    "write --types col:int,col2:string; types are \(ColumnType.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            types[parts[0]] = type
        }
        return types
    }

    /// The text of one field for `dump --format csv`: missing and null empty, strings as
    /// they are, numbers and bools as Depot writes them, anything else (arrays, objects,
    /// bytes, infinite doubles) as its JSON text; quoted when needed.
    package static func text(_ value: FieldValue?) -> String {
        let plain: String
        switch value {
        case nil, .null?: plain = ""
        case .string(let string)?: plain = string
        case .int(let int)?: plain = String(int)
        case .bool(let bool)?: plain = bool ? "true" : "false"
        case .double(let double)? where double.isFinite: plain = String(double)
        case let other?: plain = JSONText.serialize(other)
        }
        return quotedIfNeeded(plain)
    }

    /// `text` in double quotes (its quotes doubled) when it holds a comma, quote or line
    /// break, or begins or ends with a space; otherwise as it is.
    package static func quotedIfNeeded(_ text: String) -> String {
        let needs = text.contains { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" || $0 == "\r\n" }
            || text.first == " " || text.last == " "
        return needs ? "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : text
    }
}

/// Splits one CSV record fed a line at a time, so a record whose quoted field spans many
/// lines is read in one pass. (Splitting the whole record again for each line was quadratic:
/// an input with an unclosed quote took seconds for a few thousand lines, and a large file
/// would never finish. Found by the cli-csv fuzz target, Docs/Fuzzing.md.)
package struct CSVRecordSplitter {
    /// The fields finished so far.
    package private(set) var fields: [String] = []
    private var current: [UInt8] = []
    private var quoted = false
    private var fieldStart = true
    private var afterClosingQuote = false

    /// A splitter at the start of a record.
    package init() {}

    /// `true` when a quoted field is open at the end of what was fed.
    package var isOpen: Bool { quoted }

    /// Reads more of the record. A quote at the end of `bytes` closes a quoted field: feed
    /// whole lines (and the line break between them on its own).
    /// - Throws: ``CSVError`` for a quote inside an unquoted field, text after a closing
    ///   quote, or a field that is not UTF-8.
    package mutating func feed(_ bytes: some Swift.Collection<UInt8>) throws {
        var index = bytes.startIndex
        while index != bytes.endIndex {
            let byte = bytes[index]
            let next = bytes.index(after: index)
            if quoted {
                if byte == 0x22 {
                    if next != bytes.endIndex, bytes[next] == 0x22 {
                        current.append(0x22)
                        index = next
                    } else {
                        quoted = false
                        afterClosingQuote = true
                    }
                } else {
                    current.append(byte)
                }
            } else if byte == 0x2C {
                try finishField()
                fieldStart = true
                afterClosingQuote = false
                index = next
                continue
            } else if afterClosingQuote {
                throw CSVError("field \(fields.count + 1) has text after its closing quote")
            } else if byte == 0x22 {
                guard fieldStart else { throw CSVError("field \(fields.count + 1) has a quote but does not start with one; quote the whole field and double the quotes in it") }
                quoted = true
            } else {
                current.append(byte)
            }
            fieldStart = false
            index = bytes.index(after: index)
        }
    }

    /// The record's fields, once no quoted field is open.
    /// - Throws: ``CSVError`` when the last field is not UTF-8.
    package mutating func finish() throws -> [String] {
        try finishField()
        return fields
    }

    private mutating func finishField() throws {
        guard let text = String(validating: current, as: UTF8.self) else {
            throw CSVError("field \(fields.count + 1) is not valid UTF-8")
        }
        fields.append(text)
        current.removeAll(keepingCapacity: true)
    }
}

/// A CSV syntax or type problem, described for the line it is on.
package struct CSVError: Error {
    /// The problem, as a sentence without its line.
    package let message: String
    /// An error saying `message`.
    package init(_ message: String) { self.message = message }
}

/// Reads `depot load --format csv` input: a header row, then one record per CSV row
/// (a row may span lines inside quotes).
package struct CSVRecordReader {
    /// Where the lines come from.
    package let reader: LineReader
    /// `--types`: the type of each named column; the others are inferred.
    package let types: [String: CSV.ColumnType]
    /// The header's field names, once the header row is read.
    package private(set) var header: [String]?

    /// A reader of `reader`'s lines, with the column `types` of `--types`.
    package init(reader: LineReader, types: [String: CSV.ColumnType]) {
        self.reader = reader
        self.types = types
    }

    /// The next row as a load item with the line it starts on; `nil` at the end.
    /// - Throws: ``LoadLineError`` naming the line.
    package mutating func next() throws -> (line: Int, item: LoadItem)? {
        while let (line, fields) = try nextRow() {
            guard let header else {
                try readHeader(fields, line: line)
                continue
            }
            if fields == [""] { continue }
            guard fields.count == header.count else {
                throw LoadLineError(line: line, error: DepotError(.decoding, "the row has \(fields.count) fields, the header \(header.count)."))
            }
            var id: RecordID?
            var values: [String: FieldValue] = [:]
            for (column, text) in zip(header, fields) {
                let value: FieldValue?
                do {
                    value = try CSV.value(text, type: types[column])
                } catch let error as CSVError {
                    throw LoadLineError(line: line, error: DepotError(.decoding, "column \(column): \(error.message)"))
                }
                guard let value else { continue }
                if column == "id" {
                    switch value {
                    case .int(let int): id = .int(int)
                    case .string(let string): id = .string(string)
                    default: throw LoadLineError(line: line, error: DepotError(.decoding, "column id: an id is an integer or a string."))
                    }
                } else {
                    values[column] = value
                }
            }
            return (line, id.map { .record(Record(id: $0, fields: values)) } ?? .fields(values))
        }
        return nil
    }

    private mutating func readHeader(_ row: [String], line: Int) throws {
        var fields = row
        // A byte order mark some programs write before the header is not part of the name.
        if let first = fields.first, first.hasPrefix("\u{FEFF}") { fields[0] = String(first.dropFirst()) }
        var seen = Set<String>()
        for name in fields {
            guard name == "id" || FieldName.isValid(name) else {
                throw LoadLineError(line: line, error: DepotError(.invalidName, "the header's \(WhereParser.quoted(name)) is not a valid field name."))
            }
            guard seen.insert(name).inserted else {
                throw LoadLineError(line: line, error: DepotError(.decoding, "the header names \(WhereParser.quoted(name)) twice."))
            }
        }
        for column in types.keys.sorted() where !seen.contains(column) {
            throw LoadLineError(line: line, error: DepotError(.decoding, "--types names \(WhereParser.quoted(column)), which the header does not have."))
        }
        header = fields
    }

    /// The next CSV row's fields and the line it starts on, joining lines while a quoted
    /// field is open (a line break inside quotes is read as "\n").
    private mutating func nextRow() throws -> (Int, [String])? {
        guard let first = try reader.next() else { return nil }
        let start = reader.lineNumber
        var splitter = CSVRecordSplitter()
        do {
            try splitter.feed(first)
            while splitter.isOpen {
                guard let more = try reader.next() else {
                    throw LoadLineError(line: start, error: DepotError(.decoding, "malformed CSV: a quoted field is not closed before the end of the input."))
                }
                try splitter.feed(CollectionOfOne(0x0A))
                try splitter.feed(more)
            }
            return (start, try splitter.finish())
        } catch let error as CSVError {
            throw LoadLineError(line: start, error: DepotError(.decoding, "malformed CSV: \(error.message)."))
        }
    }
}
