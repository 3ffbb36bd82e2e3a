import DepotCore
import NIOCore
import PostgresNIO

/// Turns a collection's rows (`SELECT *`: the id, the doubles column, one `bytea` column per
/// field; Docs/PostgresDriver.md, "Layout") into records.
///
/// Every row of one statement has the same columns. A decoder given several rows (a query's)
/// learns them at the second: which column is the id, which the doubles column, and where
/// each field column's name sits in a template dictionary of all the field names. From then
/// on, a row's fields start as a copy of that template and each value is set in place by
/// position as its column is read, with no name hashed or compared; a field the row lacks
/// (SQL `NULL`) is removed at the end. The first row is read name by name, so a single-row
/// read never pays for the template (Docs/PostgresDriver.md, "Queries").
struct PostgresRowDecoder {
    private let idKind: IDKind
    private let collection: CollectionName
    private var rowsSeen = 0
    private var layout: Layout?
    /// The positions of the fields the row being decoded lacks (kept between rows for its
    /// capacity).
    private var missing: [Int] = []

    private enum Role {
        case id, doubles
        /// A field column: its position in ``Layout/names``.
        case field(Int)
    }

    private struct Layout {
        /// What each column of the row is, in column order.
        var roles: [Role]
        /// The field columns' names, by field position.
        var names: [String]
        /// Every field name mapped to `.null`, and where each of ``names`` sits in it.
        var template: FieldTemplate
    }

    init(idKind: IDKind, collection: CollectionName) {
        self.idKind = idKind
        self.collection = collection
    }

    /// The record `row` holds.
    /// - Throws: `.corrupted` for a row without an id or a value Depot did not write.
    mutating func record(_ row: PostgresRow) throws -> Record {
        rowsSeen += 1
        if rowsSeen == 2 { layout = Self.layout(of: row) }
        guard let layout, row.count == layout.roles.count else { return try byName(row) }
        var id: RecordID?
        var forms: [Substring: ValueKey.NumberForm]?
        var fields = layout.template.fields
        missing.removeAll(keepingCapacity: true)
        var column = 0
        for cell in row {
            switch layout.roles[column] {
            case .id:
                id = try decodeID(cell)
            case .doubles:
                // Before every field column (``layout(of:)``), so a number's form is known
                // when its column comes.
                forms = cell.bytes.map { ValueKey.parseDoubles(String(buffer: $0)) }
            case .field(let k):
                if let bytes = cell.bytes {
                    let form = forms?[Substring(layout.names[k])] ?? .int
                    fields.values[layout.template.indices[k]] = try decode(bytes, form: form)
                } else {
                    missing.append(k)
                }
            }
            column += 1
        }
        guard let id else { throw noID() }
        // Removing a key moves others, so only once every value is in place.
        for k in missing { fields.removeValue(forKey: layout.names[k]) }
        return Record(id: id, fields: fields)
    }

    /// The roles of `row`'s columns; `nil` (every row is then read by name) when there is no
    /// id column (``byName(_:)`` reports it), a column name repeats, or the doubles column
    /// comes after a field column (Depot creates it right after the id).
    private static func layout(of row: PostgresRow) -> Layout? {
        var roles: [Role] = []
        var names: [String] = []
        var sawID = false
        for cell in row {
            switch cell.columnName {
            case "id":
                sawID = true
                roles.append(.id)
            case PostgresSQL.doublesColumn:
                guard names.isEmpty else { return nil }
                roles.append(.doubles)
            default:
                roles.append(.field(names.count))
                names.append(cell.columnName)
            }
        }
        let template = FieldTemplate(names: names)
        guard sawID, template.fields.count == names.count else { return nil }
        return Layout(roles: roles, names: names, template: template)
    }

    private mutating func byName(_ row: PostgresRow) throws -> Record {
        var id: RecordID?
        var doubles: String?
        var cells: [(name: String, bytes: ByteBuffer)] = []
        for cell in row {
            switch cell.columnName {
            case "id":
                id = try decodeID(cell)
            case PostgresSQL.doublesColumn:
                if let bytes = cell.bytes { doubles = String(buffer: bytes) }
            default:
                if let bytes = cell.bytes { cells.append((cell.columnName, bytes)) }
            }
        }
        guard let id else { throw noID() }
        let forms = doubles.map { ValueKey.parseDoubles($0) }
        var fields: [String: FieldValue] = [:]
        fields.reserveCapacity(cells.count)
        for (name, bytes) in cells {
            fields[name] = try decode(bytes, form: forms?[Substring(name)] ?? .int)
        }
        return Record(id: id, fields: fields)
    }

    private func decode(_ bytes: ByteBuffer, form: ValueKey.NumberForm) throws -> FieldValue {
        try bytes.withUnsafeReadableBytes { try ValueKey.decode($0, form: form) }
    }

    private func decodeID(_ cell: PostgresCell) throws -> RecordID {
        do {
            return idKind == .int ? .int(try cell.binary(Int64.self)) : .string(try cell.binary(String.self))
        } catch {
            throw DepotError(.corrupted, "A record id in \(collection) could not be read.", collection: collection.rawValue, cause: DepotError.wrap(error))
        }
    }

    private func noID() -> DepotError {
        DepotError(.corrupted, "A row of \(collection) has no id.", collection: collection.rawValue)
    }
}
