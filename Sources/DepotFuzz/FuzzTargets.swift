import DepotCore

/// Byte helpers for writing targets.
extension Array where Element == UInt8 {
    /// The UTF-8 bytes of `text`.
    public init(utf8 text: String) { self = Array(text.utf8) }
}

extension FuzzTarget {
    /// Every target of this module.
    public static let all: [FuzzTarget] = [
        jsonText, storeLocation, gdbmRecord, gdbmJournal, gdbmCatalog, jsonFileDocument,
        serverQuery, serverBody, serverRange, serverFileName,
        cliWhere, cliJSONLines, cliCSV, cliOptions,
    ]

    /// The target named `name`, or `nil`.
    public static func named(_ name: String) -> FuzzTarget? { all.first { $0.name == name } }

    /// Tokens of Depot's JSON dialect, shared by every target that reads JSON.
    public static let jsonTokens: [[UInt8]] = [
        "{", "}", "[", "]", ",", ":", "\"", "true", "false", "null", "-", ".", "e", "E+", "e-",
        "{\"$bytes\":\"", "{\"$double\":\"Infinity\"}", "{\"$double\":\"-inf\"}", "{\"$object\":", "{\"$base64\":\"AAEC\"}",
        "\"$bytes\"", "\"$double\"", "\"$object\"", "\"$base64\"", "\"id\"", "\\\"", "\\\\", "\\n", "\\u00e9", "\\ud83d\\ude00",
        "{\"a\":1,\"a\":2}", "[[[[", "]]]]", "\"_depot\"",
    ].map { Array($0.utf8) }

    // MARK: DepotCore

    /// `JSONText.parse` (with and without the legacy `$base64`): a value or `.decoding`;
    /// serialized compact and pretty, the value parses back equal and serializes the same.
    public static let jsonText = FuzzTarget(
        name: "json-text", summary: "JSONText.parse (DepotCore): JSON text to a field value, round trip through JSONText.serialize",
        seeds: [#"{"a":[1,2.0,"x"]}"#, #"{"$bytes":"AAEC"}"#, "-0.0", "[]", #"{"$object":{"$bytes":"x"}}"#].map { Array(utf8: $0) },
        dictionary: jsonTokens, nesting: ([0x5B], [0x5D])
    ) { bytes throws(FuzzViolation) in
        var accepted = false
        // Plain (files, the CLI); the wire's legacy $base64 (the server's bodies); and the
        // sync client's envelope depth (DepotSync reads change feeds four levels deeper).
        for (legacy, depth) in [(false, JSONText.maximumDepth), (true, JSONText.maximumDepth), (true, JSONText.maximumDepth + 4)] {
            let decoding: (any Error) -> Bool = { ($0 as? DepotError)?.code == .decoding }
            guard let value = try FuzzContract.expecting(decoding, { try JSONText.parse(bytes, acceptingLegacyBase64: legacy, maximumDepth: depth) }) else { continue }
            accepted = true
            for pretty in [false, true] {
                let text = JSONText.serialize(value, pretty: pretty)
                guard let again = try FuzzContract.expecting(decoding, { try JSONText.parse(Array(text.utf8), acceptingLegacyBase64: legacy, maximumDepth: depth) }) else {
                    throw FuzzViolation(.contract, "the serialized value does not parse: \(text.prefix(200))")
                }
                try FuzzContract.require(again == value, "the value changed in a round trip through \(text.prefix(200))")
                try FuzzContract.require(JSONText.serialize(again, pretty: pretty) == text, "serializing again gave other text than \(text.prefix(200))")
            }
            if case .object = value {
                _ = try FuzzContract.expecting(decoding) { try Record(jsonObject: value) }
            }
        }
        return accepted
    }

    /// `StoreLocation.init` and its option readers: a location or `.invalidStore`.
    public static let storeLocation = FuzzTarget(
        name: "store-location", summary: "StoreLocation.init, durability(), rejectUnknownOptions (DepotCore): store strings",
        seeds: ["sqlite:app.db", "sqlite::memory:", "json:/tmp/db.json?durability=full", "gdbm:dir?durability=normal&x=%41",
                "postgres://user:pw@host:5432/db?password=x", "memory:"].map { Array(utf8: $0) },
        dictionary: ["sqlite:", "json:", "gdbm:", "memory:", "postgres://", "?", "&", "=", "%", "%2", "%zz", "durability=", "full", "normal", "@", "//", ":***"].map { Array(utf8: $0) }
    ) { bytes throws(FuzzViolation) in
        let text = String(decoding: bytes, as: UTF8.self)
        let invalidStore: (any Error) -> Bool = { ($0 as? DepotError)?.code == .invalidStore }
        guard let location = try FuzzContract.expecting(invalidStore, { try StoreLocation(text) }) else { return false }
        try FuzzContract.require(!location.scheme.isEmpty && location.scheme == location.scheme.lowercased(), "the scheme \(location.scheme) is empty or not lower-case")
        try FuzzContract.require(!location.path.utf8.contains(0x3F), "the path \(location.path.prefix(100)) holds the options' '?'")
        _ = try FuzzContract.expecting(invalidStore) { try location.durability() }
        _ = try FuzzContract.expecting(invalidStore) { try location.rejectUnknownOptions(["durability"]) }
        // The description hides a password (`//user:secret@`) and secret options.
        let description = location.description
        let path = Array(location.path.utf8)
        if path.starts(with: [0x2F, 0x2F]), let at = path.firstIndex(of: 0x40), let colon = path[2..<at].firstIndex(of: 0x3A) {
            let masked = String(decoding: path[..<colon], as: UTF8.self) + ":***@"
            try FuzzContract.require(description.utf8.starts(with: Array((location.scheme + ":" + masked).utf8)), "the description does not hide the password: \(description.prefix(200))")
        }
        for key in location.options.keys where ["password", "token", "secret", "key"].contains(key.lowercased()) {
            try FuzzContract.require(description.contains("\(key)=***"), "the description does not hide the option \(key)")
        }
        return true
    }
}

/// Checks shared by the targets that decode records.
enum RecordChecks {
    /// Throws a `.contract` violation when a decoded record holds what Depot never stores:
    /// NaN, nesting deeper than `FieldValue.maximumDepth`.
    static func storable(_ fields: [String: FieldValue], _ what: String) throws(FuzzViolation) {
        for (name, value) in fields {
            do { try value.validate(field: name) } catch {
                throw FuzzViolation(.contract, "\(what) returned a value Depot refuses to store: \(error)")
            }
        }
    }
}
