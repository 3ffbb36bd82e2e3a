import DepotCore
import DepotJSONFile
import DepotServer

extension FuzzTarget {
    // MARK: DepotJSONFile

    /// The JSON-file driver's store-file reader: a state or `.corrupted`/`.decoding`/
    /// `.schemaMismatch`; the file it writes for that state reads back to the same file.
    public static let jsonFileDocument = FuzzTarget(
        name: "json-file", summary: "JSONDocument.decode (DepotJSONFile): a whole store file, round trip through the driver's writer",
        seeds: [
            #"{"_depot":{"collections":{"users":{"idKind":"int","indexes":[],"lastAssignedID":2,"unique":[]}},"format":1},"users":[{"id":1,"name":"Ada"},{"id":2,"name":"Grace"}]}"#,
            #"{"books":[{"id":"a","t":[1,{"$bytes":"AA=="}]}]}"#, "", "\u{FEFF}{}",
            #"{"_depot":{"collections":{"b":{"idKind":"string","indexes":[{"fields":["x"],"name":"ix"}],"lastAssignedID":0,"unique":[{"fields":["y"],"name":"uy"}]}},"format":1},"b":[{"id":"k","x":1,"y":2}]}"#,
        ].map { Array(utf8: $0) },
        dictionary: jsonTokens + ["\"idKind\"", "\"int\"", "\"string\"", "\"indexes\"", "\"unique\"", "\"lastAssignedID\"", "\"format\"", "\"collections\"", "\"fields\"", "\"name\""].map { Array(utf8: $0) },
        nesting: ([0x5B], [0x5D])
    ) { bytes throws(FuzzViolation) in
        let typed: (any Error) -> Bool = { [.corrupted, .decoding, .schemaMismatch].contains(($0 as? DepotError)?.code) }
        guard let compact = try FuzzContract.expecting(typed, { try _JSONFileFuzzEntryPoints.decodeAndEncode(bytes, pretty: false) }) else { return false }
        let again = try FuzzContract.expecting(typed) { try _JSONFileFuzzEntryPoints.decodeAndEncode(compact, pretty: false) }
        try FuzzContract.require(again == compact, "the store file changed in a round trip: \(String(decoding: compact.prefix(200), as: UTF8.self))")
        let pretty = try FuzzContract.expecting(typed) { try _JSONFileFuzzEntryPoints.decodeAndEncode(bytes, pretty: true) }
        let fromPretty = try FuzzContract.expecting(typed) { try _JSONFileFuzzEntryPoints.decodeAndEncode(pretty ?? [], pretty: false) }
        try FuzzContract.require(fromPretty == compact, "the pretty file reads back to another state")
        return true
    }

    // MARK: DepotServer

    /// A refusal by the server must be a 4xx answer: bad input is never a 500.
    static func clientError(_ error: any Error) -> Bool {
        guard let rejected = error as? _ServerFuzzEntryPoints.Rejected else { return false }
        return (400..<500).contains(rejected.status)
    }

    /// The list request's query string: a valid query or a 4xx.
    public static let serverQuery = FuzzTarget(
        name: "server-query", summary: "QueryParameters.init and .query (DepotServer): a list request's query string",
        seeds: ["_page=2&_per_page=5&_sort=-year,title", "title=Dune&year_gte=1960&year_lt=1970", "_start=3&_end=9", "a=1&a=2&b=%22x%22", "_limit=4&x_ne=null", ""].map { Array(utf8: $0) },
        dictionary: ["&", "=", "_page=", "_per_page=", "_limit=", "_start=", "_end=", "_sort=", "_order=", "desc", "-", ",", "_lte=", "_gte=", "_ne=", "_lt=", "_gt=",
                     "%", "%2", "%zz", "+", "id=", "9223372036854775807", "-1", "0"].map { Array(utf8: $0) }
    ) { bytes throws(FuzzViolation) in
        let text = String(decoding: bytes, as: UTF8.self)
        guard let query = try FuzzContract.expecting(clientError, { try _ServerFuzzEntryPoints.query(text, maxPageSize: 1000) }) else { return false }
        try FuzzContract.require(query.offset >= 0 && (query.limit ?? 0) >= 0, "offset \(query.offset) or limit \(String(describing: query.limit)) is negative")
        return true
    }

    /// A write request's body: an id and storable fields with valid names, or a 4xx.
    public static let serverBody = FuzzTarget(
        name: "server-body", summary: "RequestHandler.parseBody (DepotServer): the JSON body of POST, PUT and PATCH",
        seeds: [#"{"id":3,"title":"Dune","year":1965}"#, #"{"b":{"$base64":"AAEC"},"n":null}"#, #"{"id":"x","a":[{"$double":"Infinity"}]}"#].map { Array(utf8: $0) },
        dictionary: jsonTokens, nesting: ([0x5B], [0x5D])
    ) { bytes throws(FuzzViolation) in
        var accepted = false
        for keepNulls in [false, true] {
            guard let (_, fields) = try FuzzContract.expecting(clientError, { try _ServerFuzzEntryPoints.body(bytes, keepNulls: keepNulls) }) else { continue }
            accepted = true
            try RecordChecks.storable(fields, "the body reader")
            try FuzzContract.require(fields.keys.allSatisfy(FieldName.isValid), "the body reader returned an invalid field name")
            try FuzzContract.require(keepNulls || !fields.values.contains(.null), "a null was kept without keepNulls")
        }
        return accepted
    }

    /// A `Range` header: a span inside the file, a 416, or the whole file. Input: eight bytes
    /// of file size (little-endian, sign dropped), then the header text.
    public static let serverRange = FuzzTarget(
        name: "server-range", summary: "ByteRange.parse (DepotServer): the Range header of file downloads",
        seeds: [[100, 0, 0, 0, 0, 0, 0, 0] + Array(utf8: "bytes=0-9"), [100, 0, 0, 0, 0, 0, 0, 0] + Array(utf8: "bytes=-5"),
                [0, 0, 0, 0, 0, 0, 0, 0] + Array(utf8: "bytes=3-"), [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F] + Array(utf8: "BYTES = 1 - 2")],
        dictionary: ["bytes=", "-", ",", " ", "9223372036854775807", "-9223372036854775808", "0"].map { Array(utf8: $0) }
    ) { bytes throws(FuzzViolation) in
        guard bytes.count >= 8 else { return false }
        let raw = (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[$1]) << (8 * UInt64($1)) }
        let size = Int64(bitPattern: raw & UInt64(Int64.max))
        let header = String(decoding: bytes[8...], as: UTF8.self)
        let (span, _) = _ServerFuzzEntryPoints.byteRange(header, size: size)
        guard let (start, end) = span else { return true }
        try FuzzContract.require(start >= 0 && start <= end && end < size, "the span \(start)-\(end) is not inside a file of \(size) bytes")
        return true
    }

    /// A file name from the files routes: a safe name or a 4xx.
    public static let serverFileName = FuzzTarget(
        name: "server-file-name", summary: "FileRoot.validate (DepotServer): the NAME of /_files/NAME",
        seeds: ["report.pdf", "a b", "..", ".hidden", "x/y"].map { Array(utf8: $0) },
        dictionary: ["/", "\\", ".", "..", "%2F"].map { Array(utf8: $0) }
    ) { bytes throws(FuzzViolation) in
        let text = String(decoding: bytes, as: UTF8.self)
        guard let name = try FuzzContract.expecting(clientError, { try _ServerFuzzEntryPoints.fileName(text) }) else { return false }
        try FuzzContract.require(!name.isEmpty && !name.hasPrefix(".") && !name.utf8.contains(0x2F) && !name.utf8.contains(0) && name.utf8.count <= 200,
                                 "an unsafe file name was accepted")
        return true
    }
}
