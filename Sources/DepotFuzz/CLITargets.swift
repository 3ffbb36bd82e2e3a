import DepotCLIParsers
import DepotCore

extension FuzzTarget {
    // MARK: DepotCLIParsers (the `depot` command's parsers, Docs/Fuzzing.md)

    /// `--where`: a filter or a usage failure; the filter's value is storable.
    public static let cliWhere = FuzzTarget(
        name: "cli-where", summary: "WhereParser.parse (DepotCLIParsers): the --where option",
        seeds: ["year >= 1950", #"name = "Ada""#, "tags in [1, 2]", "x is-null", #"title prefix "Du""#, "age>=18", "a not-in []"].map { Array(utf8: $0) },
        dictionary: (WhereParser.operators + [" ", "id", "==", "\"", "[", "]", "true", "null", "1.5"]).map { Array(utf8: $0) } + jsonTokens,
        nesting: ([0x5B], [0x5D])
    ) { bytes throws(FuzzViolation) in
        let text = String(decoding: bytes, as: UTF8.self)
        return try FuzzContract.expecting(CLIFailure.self) { try WhereParser.parse(text) } != nil
    }

    /// `depot load` JSON Lines through `LineReader`: each line a load item or a
    /// `.decoding` error; accepted items' fields are storable.
    public static let cliJSONLines = FuzzTarget(
        name: "cli-jsonl", summary: "LineReader + JSONText.parse + LoadItem(json:) (DepotCLIParsers): depot load's JSON Lines",
        seeds: ["{\"id\":1,\"name\":\"Ada\"}\n{\"name\":\"Grace\"}\r\n", "{\"id\":\"k\",\"b\":{\"$bytes\":\"AA==\"}}", "\n\n{}\n"].map { Array(utf8: $0) },
        dictionary: jsonTokens + [[0x0A], [0x0D, 0x0A]], nesting: ([0x7B, 0x22, 0x61, 0x22, 0x3A], [0x7D])
    ) { bytes throws(FuzzViolation) in
        let reader = LineReader(bytes: bytes)
        var accepted = false
        while true {
            guard let line = try FuzzContract.expecting(CLIFailure.self, { try reader.next() }) else { return accepted }
            guard let line else { return accepted }
            if line.isEmpty { continue }
            // One trailing "\r" is removed (a CRLF line end); a CR before it is the line's own.
            try FuzzContract.require(!line.contains(0x0A), "a line holds a line feed")
            let decoding: (any Error) -> Bool = { ($0 as? DepotError)?.code == .decoding }
            guard let item = try FuzzContract.expecting(decoding, { try LoadItem(json: try JSONText.parse(Array(line))) }) else { continue }
            accepted = true
            if case .record(let record) = item {
                for (name, value) in record.fields {
                    do { try value.validate(field: name, depth: -2) } catch { throw FuzzViolation(.contract, "a loaded value nests deeper than JSON allows: \(error)") }
                }
            }
        }
    }

    /// `depot load --format csv`: rows as load items or a `LoadLineError`, with and without
    /// `--types`; an accepted row has as many fields as the header.
    public static let cliCSV = FuzzTarget(
        name: "cli-csv", summary: "CSVRecordReader, CSV.fields, CSV.value (DepotCLIParsers): depot load --format csv",
        seeds: ["id,a,b,c\n1,2,1.5,true\n2,\"x,\"\"y\"\"\",,false\n", "a,b\n\"multi\nline\",3\n", "\u{FEFF}id,name\nk,Ada\r\n"].map { Array(utf8: $0) },
        dictionary: [",", "\"", "\"\"", "\n", "\r\n", "id", "a", "b", "c", "true", "false", "1.5", "-0", "1e5"].map { Array(utf8: $0) }
    ) { bytes throws(FuzzViolation) in
        var accepted = false
        for types: [String: CSV.ColumnType] in [[:], ["a": .int, "b": .double, "c": .bool]] {
            var reader = CSVRecordReader(reader: LineReader(bytes: bytes), types: types)
            let typed: (any Error) -> Bool = { $0 is LoadLineError || $0 is CLIFailure }
            while let row = try FuzzContract.expecting(typed, { try reader.next() }) {
                guard let row else { break }
                accepted = true
                let fields: [String: FieldValue]
                switch row.item {
                case .record(let record): fields = record.fields
                case .fields(let values): fields = values
                }
                try FuzzContract.require(fields.count < (reader.header?.count ?? 0) + 1, "a row has more fields than the header")
                for (name, value) in fields {
                    do { try value.validate(field: name) } catch { throw FuzzViolation(.contract, "a CSV value is not storable: \(error)") }
                }
            }
        }
        return accepted
    }

    /// The small option parsers: `--sort`, `--types`, `--unique`/`--index` field lists,
    /// `--retention`/`--retention-sweep` durations (between 1 s and 100 years, or `forever`).
    public static let cliOptions = FuzzTarget(
        name: "cli-options", summary: "WhereParser.sortKey, CSV.types, FieldListOption.fields, DurationOption (DepotCLIParsers): --sort, --types, --unique, --retention",
        seeds: ["year:desc", "a:int,b:string", "a,b", "id", "7d", "90s", "forever"].map { Array(utf8: $0) },
        dictionary: [":", ",", "asc", "desc", "int", "double", "bool", "string", " ", "s", "m", "h", "d", "forever", "36500"].map { Array(utf8: $0) }
    ) { bytes throws(FuzzViolation) in
        let text = String(decoding: bytes, as: UTF8.self)
        let sort = try FuzzContract.expecting(CLIFailure.self) { try WhereParser.sortKey(text) }
        let types = try FuzzContract.expecting(CLIFailure.self) { try CSV.types(text) }
        let fields = try FuzzContract.expecting(CLIFailure.self) { try FieldListOption.fields(text, option: "--unique") }
        let retention = try FuzzContract.expecting(CLIFailure.self) { try DurationOption.retention(text) }
        let seconds = try FuzzContract.expecting(CLIFailure.self) { try DurationOption.seconds(text, option: "--retention-sweep", forever: false) }
        if let seconds { try FuzzContract.require((1...DurationOption.maxSeconds).contains(seconds), "a duration outside 1 s ... 100 years was accepted") }
        if let window = retention, let window {
            try FuzzContract.require(window >= .seconds(1) && window <= .seconds(DurationOption.maxSeconds), "a retention outside 1 s ... 100 years was accepted")
        }
        return sort != nil || types != nil || fields != nil || retention != nil || seconds != nil
    }
}
