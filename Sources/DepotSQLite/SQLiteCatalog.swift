import DepotCore
import Foundation

/// Quotes a SQL identifier: wraps it in double quotes and doubles embedded quotes.
func quoteIdentifier(_ name: String) -> String {
    // The usual name has no quote: no Foundation search-and-replace (a query's translation
    // quotes each field it names).
    guard name.utf8.contains(UInt8(ascii: "\"")) else { return "\"" + name + "\"" }
    return "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
}

/// Quotes a SQL string literal (used only for identifier-derived constants in DDL, such as
/// the tag patterns of expression indexes; record values are always bound).
func quoteLiteral(_ text: String) -> String {
    guard text.utf8.contains(UInt8(ascii: "'")) else { return "'" + text + "'" }
    return "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
}

/// Names of the driver's own tables and columns.
enum SQLiteLayout {
    /// One row per collection: name, table, id kind and the JSON described by ``CollectionInfo``.
    static let collectionsTable = "_depotsys_collections"
    /// Key/value rows: `format` (the layout version) and `generation` (bumped on every change
    /// of the catalog, so connections know when to reload it).
    static let metaTable = "_depotsys_meta"
    /// The per-row type tags column of every collection table.
    static let tagColumn = "_depot_t"
    /// The layout version this driver writes and reads: 2 since integer-id tables are created
    /// without `AUTOINCREMENT` and keep their id mark in ``idMarksTable`` (Docs/SQLiteDriver.md,
    /// "On-disk layout"). A store of layout 1 is read as it is and moves to 2 when it gets such a table.
    static let format: Int64 = 2
    /// One row per integer-id table that has lost its largest id: `(tbl, mark)`, the largest
    /// id deleted while it was the table's largest. Triggers on the table keep it.
    static let idMarksTable = "_depotsys_idmarks"
    static let createIDMarksSQL = #"CREATE TABLE IF NOT EXISTS "_depotsys_idmarks"(tbl TEXT PRIMARY KEY NOT NULL, mark INTEGER NOT NULL) WITHOUT ROWID"#

    static let bootstrapSQL = """
        CREATE TABLE IF NOT EXISTS "_depotsys_meta"(key TEXT PRIMARY KEY NOT NULL, value) WITHOUT ROWID;
        INSERT OR IGNORE INTO "_depotsys_meta"(key, value) VALUES ('format', 2), ('generation', 0);
        CREATE TABLE IF NOT EXISTS "_depotsys_collections"(name TEXT PRIMARY KEY NOT NULL, tbl TEXT NOT NULL, id_kind TEXT NOT NULL, info TEXT NOT NULL) WITHOUT ROWID;
        """
    static let generationSQL = #"SELECT value FROM "_depotsys_meta" WHERE key = 'generation'"#
    /// Takes a read transaction's snapshot and says whether another connection committed
    /// since the connection's last transaction (Docs/SQLiteDriver.md, "Where transactions run").
    static let dataVersionSQL = "PRAGMA data_version"
    static let bumpGenerationSQL = #"UPDATE "_depotsys_meta" SET value = value + 1 WHERE key = 'generation'"#
}

/// What Depot stores about a collection beyond its table (as JSON in `_depotsys_collections.info`).
struct CollectionInfo: Codable, Sendable {
    var uniqueConstraints: [UniqueConstraint]
    var indexes: [IndexDefinition]
    /// Constraint or index name → the SQL index that implements it.
    var sqlIndexes: [String: String]
    /// Field name → column name (the same unless names collide ignoring case).
    var columns: [String: String]
    /// `true` for an integer-id table without `AUTOINCREMENT` whose assigned ids come from
    /// its largest id and its row in ``SQLiteLayout/idMarksTable``; absent for the tables of
    /// layout 1, which have `AUTOINCREMENT`.
    var idMarks: Bool? = nil
}

/// A collection as the driver sees it: immutable, with the SQL it needs prepared as text.
final class CollectionMeta: Sendable {
    let name: CollectionName
    let table: String
    let idKind: IDKind
    let info: CollectionInfo
    /// Fields in column order, matching the column positions of ``selectSQL`` from 2 on.
    let fields: [String]
    let columns: [String]
    /// Field → position in ``fields``.
    let position: [String: Int]
    /// Column → field, for type tags.
    let fieldOfColumn: [String: String]
    let quotedTable: String
    /// `SELECT "id", "_depot_t", columns... FROM "table"`
    let selectSQL: String
    /// `INSERT INTO "table"("id", "_depot_t", columns...) VALUES (?, ...)`
    let insertSQL: String
    /// `UPDATE "table" SET "_depot_t" = ?2, columns... = ?3… WHERE "id" = ?1`: numbered as
    /// ``insertSQL``, so one binding serves either (``SQLiteFieldSink``).
    let updateSQL: String
    /// ``insertSQL`` with `ON CONFLICT("id") DO UPDATE SET` every other column to the new
    /// value: a save bound before the transaction knows whether the record exists.
    let upsertSQL: String
    /// `SELECT ... WHERE "id" = ?`
    let getSQL: String
    /// `SELECT 1 FROM "table" WHERE "id" = ?`
    let existsSQL: String
    /// Whether an insert looks its id up before the `INSERT`: only for string ids (the
    /// primary key of a `WITHOUT ROWID` table) when a unique constraint may break beside the
    /// id, because SQLite might report that constraint first and an existing id must win
    /// (Docs/Semantics.md, "Errors"). Otherwise the `INSERT`'s own `PRIMARYKEY` error is the
    /// answer: integer ids are the rowid, checked before any unique index, and with no unique
    /// index the primary key is the only constraint an insert can break.
    let checksIDBeforeInsert: Bool
    /// `DELETE FROM "table" WHERE "id" = ?`
    let deleteSQL: String
    /// For a table with id marks: the largest id the table has had (0 when none was
    /// positive), from its largest id and its mark; the next assigned id is one more.
    let assignedBaseSQL: String?
    /// Every field mapped to `.null`, and (``templateIndex``) each field's position in it, in
    /// column order (a ``FieldTemplate``): decoding a row copies it and sets each value
    /// through its index.
    let recordTemplate: [String: FieldValue]
    /// The index of `fields[i]` in ``recordTemplate``.
    let templateIndex: [Dictionary<String, FieldValue>.Index]

    init(name: CollectionName, table: String, idKind: IDKind, info: CollectionInfo) {
        self.name = name
        self.table = table
        self.idKind = idKind
        self.info = info
        let ordered = info.columns.sorted { $0.value.utf8.lexicographicallyPrecedes($1.value.utf8) }
        fields = ordered.map(\.key)
        columns = ordered.map(\.value)
        var position: [String: Int] = [:]
        var fieldOfColumn: [String: String] = [:]
        for (index, pair) in ordered.enumerated() {
            position[pair.key] = index
            fieldOfColumn[pair.value] = pair.key
        }
        self.position = position
        self.fieldOfColumn = fieldOfColumn
        let template = FieldTemplate(names: fields)
        recordTemplate = template.fields
        templateIndex = template.indices
        quotedTable = quoteIdentifier(table)
        let quotedColumns = ["id", SQLiteLayout.tagColumn].map(quoteIdentifier) + columns.map(quoteIdentifier)
        selectSQL = "SELECT " + quotedColumns.joined(separator: ", ") + " FROM " + quotedTable
        insertSQL = "INSERT INTO \(quotedTable)(" + quotedColumns.joined(separator: ", ") + ") VALUES ("
            + Array(repeating: "?", count: quotedColumns.count).joined(separator: ", ") + ")"
        getSQL = selectSQL + " WHERE \"id\" = ?"
        existsSQL = "SELECT 1 FROM \(quotedTable) WHERE \"id\" = ?"
        checksIDBeforeInsert = idKind == .string && !info.uniqueConstraints.isEmpty
        deleteSQL = "DELETE FROM \(quotedTable) WHERE \"id\" = ?"
        updateSQL = "UPDATE \(quotedTable) SET "
            + quotedColumns.enumerated().dropFirst().map { "\($0.element) = ?\($0.offset + 1)" }.joined(separator: ", ")
            + " WHERE \"id\" = ?1"
        upsertSQL = insertSQL + " ON CONFLICT(\"id\") DO UPDATE SET "
            + quotedColumns.dropFirst().map { "\($0) = excluded.\($0)" }.joined(separator: ", ")
        assignedBaseSQL = info.idMarks == true
            ? "SELECT max(coalesce((SELECT max(\"id\") FROM \(quotedTable)), 0), coalesce((SELECT mark FROM \"\(SQLiteLayout.idMarksTable)\" WHERE tbl = \(quoteLiteral(table))), 0))"
            : nil
    }

    var schema: CollectionSchema {
        CollectionSchema(name: name, idKind: idKind, uniqueConstraints: info.uniqueConstraints, indexes: info.indexes)
    }

    func replacing(info: CollectionInfo) -> CollectionMeta {
        CollectionMeta(name: name, table: table, idKind: idKind, info: info)
    }

    /// The constraint or index implemented by a SQL index.
    func constraintName(forSQLIndex sqlName: String) -> String? {
        info.sqlIndexes.first { $0.value.lowercased() == sqlName.lowercased() }?.key
    }
}

/// Every collection of a store at one catalog generation.
struct Catalog: Sendable {
    var generation: Int64
    var collections: [CollectionName: CollectionMeta]

    /// Reads the catalog through `connection` (inside its current transaction).
    /// - Throws: `.corrupted` when the metadata is not Depot's; SQLite errors.
    static func load(_ connection: SQLiteConnection, generation: Int64) throws -> Catalog {
        var collections: [CollectionName: CollectionMeta] = [:]
        let decoder = JSONDecoder()
        try connection.query(#"SELECT name, tbl, id_kind, info FROM "_depotsys_collections""#) { row in
            guard case .text(let nameText) = row.value(0), case .text(let table) = row.value(1),
                case .text(let kindText) = row.value(2), case .text(let infoText) = row.value(3),
                let name = try? CollectionName(validating: nameText), let idKind = IDKind(rawValue: kindText),
                !table.isEmpty, !table.utf8.contains(0),
                let info = try? decoder.decode(CollectionInfo.self, from: Data(infoText.utf8)),
                info.columns.allSatisfy({ FieldName.isValid($0.key) && !$0.value.isEmpty && !$0.value.utf8.contains(0) })
            else {
                throw DepotError(.corrupted, "The SQLite store's collection metadata in '\(connection.fileName)' is damaged or not Depot's.")
            }
            collections[name] = CollectionMeta(name: name, table: table, idKind: idKind, info: info)
            return true
        }
        return Catalog(generation: generation, collections: collections)
    }

    /// The catalog generation visible in the connection's current transaction.
    static func currentGeneration(_ connection: SQLiteConnection) throws -> Int64 {
        guard case .int(let generation) = try connection.scalar(SQLiteLayout.generationSQL) else {
            throw DepotError(.corrupted, "The SQLite store's metadata table in '\(connection.fileName)' is damaged or not Depot's.")
        }
        return generation
    }
}

/// Picks SQL names that do not collide, ignoring case, with names already taken.
enum SQLNaming {
    /// `base`, or `base_2`, `base_3`... whichever is free (compared ignoring ASCII case).
    static func fresh(_ base: String, taken: Set<String>) -> String {
        if !taken.contains(base.lowercased()) { return base }
        var n = 2
        while taken.contains("\(base)_\(n)".lowercased()) { n += 1 }
        return "\(base)_\(n)"
    }

    /// Every table, index, view and trigger name in the database, lowercased.
    static func schemaNames(_ connection: SQLiteConnection) throws -> Set<String> {
        var names = Set<String>()
        try connection.query("SELECT name FROM sqlite_schema") { row in
            if case .text(let name) = row.value(0) { names.insert(name.lowercased()) }
            return true
        }
        return names
    }
}
