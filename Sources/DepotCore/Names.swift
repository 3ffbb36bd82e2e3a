/// A validated collection name.
///
/// User collections match `[A-Za-z][A-Za-z0-9_]{0,62}`: safe as a SQL identifier (still
/// quoted), as a file name on every file system, and in a URL path. Names beginning with
/// `_depot_` are Depot's own (metadata, the sync outbox) and are made with
/// ``init(reserved:)``; drivers keep their private tables and files under `_depotsys`.
///
/// ```swift
/// let users = try CollectionName("users")      // ok
/// _ = try CollectionName("users; DROP TABLE x") // throws .invalidName
/// ```
public struct CollectionName: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The name as text.
    public let rawValue: String

    /// Validates a user collection name.
    /// - Throws: ``DepotError`` `.invalidName` naming the rule that failed.
    public init(_ name: String) throws {
        guard CollectionName.isValidUserName(name) else {
            throw DepotError(
                .invalidName,
                "Collection name \(CollectionName.quotedForMessage(name)) is not allowed: use 1 to 63 ASCII letters, digits or '_', starting with a letter."
            )
        }
        self.rawValue = name
    }

    /// Makes a name in Depot's reserved space: `_depot_` followed by `[a-z0-9_]{1,56}`.
    /// - Throws: ``DepotError`` `.invalidName` for anything else.
    public init(reserved name: String) throws {
        let suffix = name.utf8.dropFirst(7)
        guard name.hasPrefix("_depot_"), !suffix.isEmpty, suffix.count <= 56,
            suffix.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F })
        else {
            throw DepotError(.invalidName, "Reserved collection name \(CollectionName.quotedForMessage(name)) is not allowed.")
        }
        self.rawValue = name
    }

    /// Accepts either a user name or a reserved name (what a driver reads back from disk).
    public init(validating name: String) throws {
        if name.hasPrefix("_depot_") { try self.init(reserved: name) } else { try self.init(name) }
    }

    /// `true` for Depot's own collections (`_depot_...`).
    public var isReserved: Bool { rawValue.utf8.first == UInt8(ascii: "_") }

    /// The name as text.
    public var description: String { rawValue }
    /// Orders names by their text (ASCII order, so upper-case letters sort first).
    public static func < (lhs: CollectionName, rhs: CollectionName) -> Bool { lhs.rawValue < rhs.rawValue }

    static func isValidUserName(_ name: String) -> Bool {
        let bytes = name.utf8
        guard let first = bytes.first, bytes.count <= 63, isLetter(first) else { return false }
        return bytes.allSatisfy { isLetter($0) || isDigit($0) || $0 == 0x5F }
    }

    /// Quotes untrusted text for an error message: at most 40 characters, control characters escaped.
    static func quotedForMessage(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(40) {
            if scalar.value < 0x20 || scalar.value == 0x7F { out += "\\u{\(String(scalar.value, radix: 16))}" } else { out.unicodeScalars.append(scalar) }
        }
        if text.unicodeScalars.count > 40 { out += "…" }
        return "'" + out + "'"
    }
}

@inline(__always) func isLetter(_ b: UInt8) -> Bool { (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) }
@inline(__always) func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

/// Rules for the top-level field names of a record.
///
/// A top-level field name matches `[A-Za-z_][A-Za-z0-9_]{0,62}`, is not `id` (the record id
/// has its own place) and does not begin with `_depot`. SQL drivers turn each top-level field
/// into a column, so the rule keeps every name a safe identifier. Keys inside nested objects
/// are free-form text.
public enum FieldName {
    /// `true` when `name` may be a top-level field name.
    public static func isValid(_ name: String) -> Bool {
        // Every write checks each field's name: read the bytes in place where the string
        // has them (native and small strings), through a copy otherwise.
        if let answer = name.utf8.withContiguousStorageIfAvailable(isValid(utf8:)) { return answer }
        return Array(name.utf8).withUnsafeBufferPointer(isValid(utf8:))
    }

    /// ``isValid(_:)`` of a name's UTF-8 bytes.
    private static func isValid(utf8 b: UnsafeBufferPointer<UInt8>) -> Bool {
        let n = b.count
        guard n >= 1, n <= 63 else { return false }
        let first = b[0]
        guard isLetter(first) || first == 0x5F else { return false }
        var i = 1
        while i < n {
            let c = b[i]
            guard isLetter(c) || isDigit(c) || c == 0x5F else { return false }
            i += 1
        }
        if n == 2 && first == 0x69 && b[1] == 0x64 { return false }  // "id"
        if first == 0x5F && n >= 6 && b[1] == 0x64 && b[2] == 0x65 && b[3] == 0x70 && b[4] == 0x6F && b[5] == 0x74 { return false }  // "_depot…"
        return true
    }

    /// - Throws: ``DepotError`` `.invalidName` when `name` is not a valid top-level field name.
    public static func validate(_ name: String, collection: String? = nil) throws {
        guard isValid(name) else {
            throw DepotError(
                .invalidName,
                "Field name \(CollectionName.quotedForMessage(name)) is not allowed: use 1 to 63 ASCII letters, digits or '_', not starting with a digit, not 'id', not starting with '_depot'.",
                collection: collection
            )
        }
    }
}
