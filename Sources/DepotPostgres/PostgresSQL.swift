import DepotCore
import NIOCore
import PostgresNIO

/// SQL text helpers: identifiers are validated, then quoted; values are never spliced into
/// SQL but bound (``SQLBuilder``).
enum PostgresSQL {
    /// The column that records which numbers of a row are doubles (``ValueKey``).
    static let doublesColumn = "_depotsys_doubles"
    /// Depot's catalog of collections, in the store's schema.
    static let catalogTable = "_depotsys_collections"

    /// `true` for `[A-Za-z_][A-Za-z0-9_]{0,62}`: what every name the driver puts in SQL is
    /// (collection and field names are validated to a subset of this by DepotCore).
    static func isPlainIdentifier(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard let first = bytes.first, bytes.count <= 63 else { return false }
        func letter(_ b: UInt8) -> Bool { (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x5F }
        guard letter(first) else { return false }
        return bytes.allSatisfy { letter($0) || ($0 >= 0x30 && $0 <= 0x39) }
    }

    /// The identifier in double quotes. Only called with names that passed
    /// ``isPlainIdentifier(_:)`` or DepotCore's name rules, which contain no quote; any quote
    /// would still be doubled.
    static func quote(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// The name of the SQL index behind a unique constraint or index: `_depotsys_u_` or
    /// `_depotsys_i_` and a hash of the collection, the name and the fields, so that index
    /// names never collide with tables (they share a namespace in PostgreSQL) and a changed
    /// definition gets a new index.
    static func indexName(collection: CollectionName, unique: Bool, name: String, fields: [String]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in ([collection.rawValue, name] + fields).joined(separator: "\u{1}").utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return (unique ? "_depotsys_u_" : "_depotsys_i_") + String(repeating: "0", count: 16 - hex.count) + hex
    }
}

/// SQL text and its bound values, built together so that `$n` always matches. A class, so
/// that `sql.query("… \(sql.text(x)) …")` sees the values bound while its text was built.
final class SQLBuilder {
    var bindings = PostgresBindings()

    init() {}

    /// Binds `bytes` as `bytea` and returns its placeholder.
    func bytes(_ bytes: [UInt8]) -> String {
        var buffer = ByteBuffer()
        buffer.writeBytes(bytes)
        bindings.append(buffer)
        return "$\(bindings.count)"
    }

    /// Binds an integer as `bigint`.
    func int(_ value: Int64) -> String {
        bindings.append(value)
        return "$\(bindings.count)"
    }

    /// Binds text.
    func text(_ value: String) -> String {
        bindings.append(value)
        return "$\(bindings.count)"
    }

    /// Binds text or `NULL`.
    func optionalText(_ value: String?) -> String {
        if let value { bindings.append(value) } else { bindings.appendNull() }
        return "$\(bindings.count)"
    }

    /// Binds a record id as `bigint` or `text`.
    func id(_ id: RecordID) -> String {
        switch id {
        case .int(let i): int(i)
        case .string(let s): text(s)
        }
    }

    func query(_ sql: String) -> PostgresQuery { PostgresQuery(unsafeSQL: sql, binds: bindings) }
}
