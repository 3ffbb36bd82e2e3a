import CSQLite
import DepotCore

/// The JSON text of nested arrays and objects stored in SQLite columns: Depot's own exact
/// JSON (``JSONText``), which is canonical, so SQL can compare two values with `=`: keys
/// sorted by UTF-8 bytes, no spaces, ints without a decimal point, doubles always with a `.`
/// or an `e`, infinities and bytes as tagged objects (`{"$double":"Infinity"}`,
/// `{"$bytes":"BASE64"}`).
enum NestedJSON {
    static func encode(_ value: FieldValue) -> String { JSONText.serialize(value) }

    /// - Throws: `.corrupted` when the text is not Depot JSON (the file was damaged or edited
    ///   badly), naming the database file of `statement` when given.
    static func decode(_ text: String, statement: OpaquePointer? = nil) throws -> FieldValue {
        do {
            return try JSONText.parse(text)
        } catch {
            let file = statement.map { SQLiteConnection.fileName(of: sqlite3_db_handle($0)) } ?? ""
            throw DepotError(.corrupted, "A nested value in the SQLite store \(file.isEmpty ? "" : "'\(file)' ")is not valid Depot JSON.", cause: DepotError.wrap(error))
        }
    }
}
