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
    /// The drivers listening for other drivers' changes, in the store's schema
    /// (``PostgresChangeFeed``).
    static let listenersTable = "_depotsys_listeners"

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
        // Foundation's replacement bridges the string on every call: skipped when there is
        // nothing to double (every write quotes each of its field names).
        guard name.utf8.contains(0x22) else { return "\"" + name + "\"" }
        return "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
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
///
/// Every placeholder carries its type (`$1::bytea`, `$2::bigint`, `$3::text`), so that the
/// statement means the same whether it is sent unnamed (postgres-nio declares the types of
/// the values) or prepared once and run many times (the server infers the parameter types
/// from the text, ``PGSession/runPrepared(_:)``).
final class SQLBuilder {
    private(set) var values: [PostgresData] = []

    init() {}

    private func placeholder(_ value: PostgresData, _ type: String) -> String {
        values.append(value)
        return "$\(values.count)::\(type)"
    }

    /// Binds `bytes` as `bytea` and returns its placeholder.
    func bytes(_ bytes: [UInt8]) -> String {
        var buffer = ByteBuffer()
        buffer.writeBytes(bytes)
        return placeholder(PostgresData(type: .bytea, formatCode: .binary, value: buffer), "bytea")
    }

    /// Binds an integer as `bigint`.
    func int(_ value: Int64) -> String {
        var buffer = ByteBuffer()
        buffer.writeInteger(value)
        return placeholder(PostgresData(type: .int8, formatCode: .binary, value: buffer), "bigint")
    }

    /// Binds text.
    func text(_ value: String) -> String {
        var buffer = ByteBuffer()
        buffer.writeString(value)
        return placeholder(PostgresData(type: .text, formatCode: .binary, value: buffer), "text")
    }

    /// Binds text or `NULL`.
    func optionalText(_ value: String?) -> String {
        guard let value else { return placeholder(PostgresData(type: .text, formatCode: .binary, value: nil), "text") }
        return text(value)
    }

    /// Binds a record id as `bigint` or `text`.
    func id(_ id: RecordID) -> String {
        switch id {
        case .int(let i): int(i)
        case .string(let s): text(s)
        }
    }

    /// The statement with its values, to run prepared (``PGSession/runPrepared(_:)``).
    /// A statement whose text does not use its last value is sent unnamed: the server counts
    /// a prepared statement's parameters from the placeholders in its text.
    func statement(_ sql: String) -> BoundStatement {
        let preparable = values.isEmpty || SQLBuilder.uses(sql, placeholder: values.count)
        return BoundStatement(sql: sql, values: values, preparable: preparable)
    }

    /// `true` when `sql` holds `$n::` (a byte scan: Foundation's `contains` showed in
    /// profiles of bulk inserts).
    static func uses(_ sql: String, placeholder n: Int) -> Bool {
        let wanted = Array("$\(n)::".utf8)
        var utf8 = sql.utf8.makeIterator()
        var matched = 0
        while let byte = utf8.next() {
            if byte == wanted[matched] {
                matched += 1
                if matched == wanted.count { return true }
            } else {
                matched = byte == wanted[0] ? 1 : 0
            }
        }
        return false
    }

    /// The statement with its values, to send unnamed (parsed by the server on each call).
    func query(_ sql: String) -> PostgresQuery { BoundStatement(sql: sql, values: values).query }
}

/// A statement's text and its values: what ``PGSession/runPrepared(_:)`` runs. The values
/// are never part of the text, so the text alone keys the connection's prepared statements.
struct BoundStatement {
    var sql: String
    var values: [PostgresData]
    /// `false`: sent unnamed (``SQLBuilder/statement(_:)``).
    var preparable = true

    /// The statement as an unnamed query.
    var query: PostgresQuery {
        var bindings = PostgresBindings(capacity: values.count)
        for value in values { bindings.append(value) }
        return PostgresQuery(unsafeSQL: sql, binds: bindings)
    }
}

extension PostgresCell {
    /// The cell's value, read as PostgreSQL's binary format. The driver asks for every
    /// result in binary (postgres-nio always does), but postgres-nio 1.33 labels the rows of
    /// a `PreparedQuery` with the text format its `Describe` reported; this reads them as
    /// what they are.
    /// - Throws: `.corrupted` for a `NULL` or a value of another type.
    func binary<T: PostgresDecodable>(_ type: T.Type) throws -> T {
        guard var buffer = bytes else { throw DepotError(.corrupted, "PostgreSQL returned NULL where Depot stores a value (column \(columnName)).") }
        do {
            return try T(from: &buffer, type: dataType, format: .binary, context: .default)
        } catch {
            throw DepotError(.corrupted, "PostgreSQL returned a value Depot cannot read (column \(columnName)).", cause: DepotError.wrap(error))
        }
    }
}

extension PostgresRow {
    /// Column `index` read as binary (``PostgresCell/binary(_:)``).
    func binary<T: PostgresDecodable>(_ index: Int, as type: T.Type) throws -> T {
        try cell(index).binary(type)
    }

    /// Column `index` read as binary, `nil` for `NULL`.
    func binaryUnlessNull<T: PostgresDecodable>(_ index: Int, as type: T.Type) throws -> T? {
        let cell = try cell(index)
        return cell.bytes == nil ? nil : try cell.binary(type)
    }

    private func cell(_ index: Int) throws -> PostgresCell {
        var cells = makeIterator()
        for _ in 0..<index { _ = cells.next() }
        guard let cell = cells.next() else { throw DepotError(.internal, "A PostgreSQL row has no column \(index).") }
        return cell
    }
}
