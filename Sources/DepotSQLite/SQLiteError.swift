import CSQLite
import DepotCore

/// A SQLite result code kept as the ``DepotError/cause`` of a mapped error.
///
/// `description` shows the result code and SQLite's message (which names tables, columns
/// and indexes, never bound values).
public struct SQLiteResult: Error, Sendable, CustomStringConvertible {
    /// The extended result code (`SQLITE_CONSTRAINT_UNIQUE`, `SQLITE_BUSY_SNAPSHOT`, ...).
    public let extendedCode: Int32
    /// SQLite's error message for the failed call.
    public let message: String

    /// The primary result code (the low byte of the extended code).
    public var primaryCode: Int32 { extendedCode & 0xFF }

    public var description: String { "SQLite result \(extendedCode) (\(String(cString: sqlite3_errstr(extendedCode)))): \(message)" }
}

/// Extended result codes Swift does not import (they are macro expressions in sqlite3.h).
let SQLITE_CONSTRAINT_PRIMARYKEY: Int32 = SQLITE_CONSTRAINT | (6 << 8)
let SQLITE_CONSTRAINT_UNIQUE: Int32 = SQLITE_CONSTRAINT | (8 << 8)

/// The one place where SQLite result codes become Depot error codes.
enum SQLiteErrorMapping {
    /// Maps a failed SQLite call to a ``DepotError``.
    ///
    /// - constraint (unique, primary key) → `.uniqueViolation` (`.alreadyExists` for the id);
    ///   other constraints → `.invalidValue`
    /// - busy, locked → `.locked`
    /// - corrupt, notadb, format → `.corrupted`
    /// - full, ioerr, cantopen, perm, readonly, nolfs, auth → `.io`
    /// - toobig, range, mismatch → `.invalidValue`
    /// - interrupt → `.cancelled`
    /// - error whose message says the schema does not hold what Depot's catalog lists (`no such
    ///   table`, `no such column`) or that the file's schema format is unknown (`unsupported file
    ///   format`) → `.corrupted`: Depot's statements are made from its catalog, so these mean a
    ///   damaged file (raw SQL maps every `SQLITE_ERROR` to `.invalidQuery` itself)
    /// - schema, error, misuse, anything else → `.internal`
    ///
    /// `file`, the database's path, is named in the message of a `.corrupted` error.
    static func error(code: Int32, message: String, sql: String? = nil, collection: String? = nil, file: String? = nil) -> DepotError {
        let cause = SQLiteResult(extendedCode: code, message: message)
        let detail = sql.map { "SQL: \($0)" }
        let primary = code & 0xFF
        func make(_ depotCode: DepotError.Code, _ text: String) -> DepotError {
            DepotError(depotCode, text, collection: collection, cause: cause, detail: detail)
        }
        switch primary {
        case SQLITE_CONSTRAINT:
            if code == SQLITE_CONSTRAINT_PRIMARYKEY {
                return make(.alreadyExists, "A record with that id exists.")
            }
            if code == SQLITE_CONSTRAINT_UNIQUE {
                return make(.uniqueViolation, "A unique constraint was violated.")
            }
            return make(.invalidValue, "SQLite refused the value (a constraint failed).")
        case SQLITE_BUSY, SQLITE_LOCKED:
            return make(.locked, "The SQLite database is locked by another connection or process; try again later.")
        case SQLITE_ERROR where damagedSchemaMessages.contains(where: { message.hasPrefix($0) }):
            return make(.corrupted, "The SQLite file \(file.map { "'\($0)' " } ?? "")does not hold what Depot's catalog lists (\(message)): it is damaged or was changed by another program.")
        case SQLITE_CORRUPT, SQLITE_NOTADB, SQLITE_FORMAT:
            return make(.corrupted, "The file \(file.map { "'\($0)' " } ?? "")is not a sound SQLite database (it is damaged or is not a database).")
        case SQLITE_FULL:
            return make(.io, "The disk or database is full.")
        case SQLITE_IOERR, SQLITE_CANTOPEN, SQLITE_PERM, SQLITE_READONLY, SQLITE_NOLFS, SQLITE_AUTH, SQLITE_PROTOCOL:
            return make(.io, "SQLite could not read or write the database file.")
        case SQLITE_TOOBIG, SQLITE_RANGE, SQLITE_MISMATCH:
            return make(.invalidValue, "The value is too big or of the wrong type for SQLite.")
        case SQLITE_INTERRUPT:
            return make(.cancelled, "The SQLite operation was interrupted.")
        case SQLITE_NOMEM:
            return make(.internal, "SQLite ran out of memory.")
        default:
            return make(.internal, "SQLite failed unexpectedly.")
        }
    }

    /// Beginnings of `SQLITE_ERROR` messages that, for a statement Depot made from its catalog,
    /// mean the file is damaged.
    static let damagedSchemaMessages = ["no such table", "no such column", "unsupported file format"]

    /// The error for a `quick_check` or `integrity_check` result that says a page could not
    /// be read (`unable to get the page. error code=266`): SQLite reports a failed read there
    /// as a line of the result, not as the statement's result code, and a read that failed
    /// with an I/O error or a full disk is not damage (running out of memory there is: a sound
    /// file never asks for more than SQLite allows, Docs/Fuzzing.md, "Damaged stores"). `nil` when no line names
    /// such a code (the problems are damage: `.corrupted`).
    static func readFailure(inCheckLines lines: [String]) -> DepotError? {
        for line in lines {
            guard let marker = line.range(of: "error code=") else { continue }
            let digits = line[marker.upperBound...].prefix { $0.isNumber }
            guard let code = Int32(digits) else { continue }
            switch code & 0xFF {
            case SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_BUSY, SQLITE_LOCKED, SQLITE_PERM:
                return error(code: code, message: line)
            default:
                continue
            }
        }
        return nil
    }

    /// The name of the SQL index a `SQLITE_CONSTRAINT_UNIQUE` message names, if any:
    /// SQLite writes `UNIQUE constraint failed: index 'NAME'` for indexes on expressions.
    static func indexName(inUniqueMessage message: String) -> String? {
        guard let start = message.range(of: "index '") else { return nil }
        let rest = message[start.upperBound...]
        guard let end = rest.lastIndex(of: "'") else { return nil }
        return String(rest[..<end])
    }
}
