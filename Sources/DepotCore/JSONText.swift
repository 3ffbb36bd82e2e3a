import Foundation

/// Exact conversion between ``FieldValue`` and JSON text: the one JSON dialect of Depot,
/// spoken by the JSON-file driver's store files, the CLI's JSON Lines and HTTP bodies. These
/// functions are thin wrappers over ``JSONReader`` and ``JSONWriter``, which the JSON-file
/// driver uses directly.
///
/// Plain JSON says most values as they are; the rest get a tagged object, so every value
/// round-trips exactly:
///
/// | value | JSON |
/// | --- | --- |
/// | `.int(5)` | `5` |
/// | `.double(5)` | `5.0` (a double always has `.` or `e`) |
/// | `.double(-0.0)` | `-0.0` |
/// | `.double(.infinity)` | `{"$double":"Infinity"}` (and `-Infinity`; `"inf"`, `"-inf"` are read too) |
/// | `.bytes(d)` | `{"$bytes":"<base64>"}` |
/// | an object whose only key is `$bytes`, `$double`, `$object` or `$base64` | `{"$object":{...}}` |
///
/// `$base64` is the bytes tag of Depot's first HTTP wire format. It is never written as a
/// tag; an object whose only key it is gets wrapped like the others, so that readers of the
/// HTTP wire can still take `{"$base64":"..."}` from an older client as bytes
/// (``parse(_:acceptingLegacyBase64:)``) without mistaking a user's object for it. Without
/// that flag `{"$base64":"..."}` is an ordinary object.
///
/// A one-key tag object holding something else (`{"$bytes":5}`, `{"$double":"NaN"}`) is an
/// error, as is a key twice in one object, and so is an integer literal outside Int64 (it is
/// never silently rounded to a double); `-0` is the int 0. Keys are written
/// sorted by their UTF-8 bytes and compact output has no white space, so equal values give
/// equal text.
///
/// ```swift
/// let value = try JSONText.parse(Array(#"{"a":[1,2.0,"x"]}"#.utf8))
/// JSONText.serialize(value)   // {"a":[1,2.0,"x"]}
/// ```
public enum JSONText {
    /// The deepest nesting accepted when parsing (the outermost value is level 0): two more
    /// than ``FieldValue/maximumDepth``, so a record object holding the deepest field value
    /// parses, with a level to spare for an object around the record. A `{"$object":...}`
    /// wrapper is not a level.
    public static let maximumDepth = FieldValue.maximumDepth + 2

    /// Parses one JSON value (surrounding white space allowed).
    /// - Throws: ``DepotError`` `.decoding` naming the line and column (the byte offset is
    ///   in its detail).
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
        try bytes.withUnsafeBufferPointer { try parse($0, acceptingLegacyBase64: acceptingLegacyBase64, maximumDepth: maximumDepth) }
    }

    /// Parses JSON text.
    public static func parse(_ text: String) throws -> FieldValue {
        var text = text
        return try text.withUTF8 { try parse($0, acceptingLegacyBase64: false, maximumDepth: maximumDepth) }
    }

    private static func parse(_ buffer: UnsafeBufferPointer<UInt8>, acceptingLegacyBase64: Bool, maximumDepth: Int) throws -> FieldValue {
        var reader = JSONReader(buffer, maximumDepth: maximumDepth, reporting: .text, acceptsLegacyBase64: acceptingLegacyBase64)
        return try reader.readDocument()
    }

    /// Writes a value as compact JSON (or indented with `pretty`).
    public static func serialize(_ value: FieldValue, pretty: Bool = false) -> String {
        var writer = JSONWriter(pretty: pretty, capacity: 64)
        writer.value(value, level: 0)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// Appends a value's JSON to `out`; `indent` is the nesting level of the line the value
    /// starts on (2 spaces per level when `pretty`).
    public static func write(_ value: FieldValue, into out: inout [UInt8], pretty: Bool = false, indent: Int = 0) {
        var writer = JSONWriter(pretty: pretty, capacity: 0)
        swap(&writer.bytes, &out)
        writer.value(value, level: indent)
        swap(&writer.bytes, &out)
    }

    /// Writes a JSON string literal: `"` and `\` escaped, `\n`, `\r`, `\t` by letter, other
    /// control characters and DEL as `\uXXXX`.
    public static func writeString(_ s: String, into out: inout [UInt8]) {
        var writer = JSONWriter(pretty: false, capacity: 0)
        swap(&writer.bytes, &out)
        writer.string(s)
        swap(&writer.bytes, &out)
    }
}

extension Record {
    /// The record as one JSON object: `id` first in meaning, then its fields (sorted keys).
    public var jsonText: String { String(decoding: JSONText.recordBytes(id: id, fields: fields), as: UTF8.self) }

    /// The record as the JSON object value ``jsonText`` writes: its fields and its `id`.
    /// ``init(jsonObject:)`` reads it back.
    public var jsonObject: FieldValue {
        var object = fields
        object["id"] = id.fieldValue
        return .object(object)
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

extension JSONText {
    /// The compact JSON text of the record object with `id` and `fields` (``Record/jsonText``:
    /// the members of ``Record/jsonObject``, `id` among them, in key order), written from the
    /// fields as they are: no dictionary is copied to add the `id`. `droppingNulls` leaves
    /// out the fields whose value is `null`.
    package static func recordBytes(id: RecordID, fields: [String: FieldValue], droppingNulls: Bool = false) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        appendRecord(id: id, fields: fields, droppingNulls: droppingNulls, to: &out)
        return out
    }

    /// ``recordBytes(id:fields:droppingNulls:)`` appended to `out`: how a list of records
    /// is written into one buffer.
    package static func appendRecord(id: RecordID, fields: [String: FieldValue], droppingNulls: Bool = false, to out: inout [UInt8]) {
        var members: [(prefix: UInt64, key: String, value: FieldValue)] = []
        members.reserveCapacity(fields.count + 1)
        for (key, value) in fields where key != "id" && !(droppingNulls && value.isNull) {
            members.append((BinaryText.prefix(key), key, value))
        }
        members.append((BinaryText.prefix("id"), "id", id.fieldValue))
        members.sort { BinaryText.precedes($0.prefix, $0.key, $1.prefix, $1.key) }
        // Never a one-member object of a tag key: `id` is always a member.
        var writer = JSONWriter(pretty: false, capacity: 0)
        swap(&writer.bytes, &out)
        writer.byte(0x7B)
        for (n, member) in members.enumerated() {
            if n > 0 { writer.byte(0x2C) }
            writer.string(member.key)
            writer.colon()
            writer.value(member.value, level: 1)
        }
        writer.byte(0x7D)
        swap(&writer.bytes, &out)
    }
}
