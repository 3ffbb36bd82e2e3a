import CSQLite
import Foundation
import Logging

/// The statement log of one connection: every statement the connection runs, logged at
/// debug level through swift-log (Docs/SQLiteDriver.md, "Statement log").
///
/// SQLite reports each statement as it starts (`sqlite3_trace_v2`, `SQLITE_TRACE_STMT`),
/// so the driver's own statements, `sqlite3_exec` scripts, raw SQL and trigger bodies are
/// all seen in one place. The trace is registered only while the logger's level lets debug
/// messages through, checked when a transaction starts (``refresh(_:)``): with debug off,
/// a transaction costs one read of the level and no text is ever built.
///
/// Bound values are shown as `?N=<redacted>` unless the store was opened asking for them
/// (`log_values=true`), because a record's values may hold secrets.
final class SQLiteStatementLog: @unchecked Sendable {
    // @unchecked: the properties are constants except `tracing`, which only the thread
    // holding the connection reads and writes (Docs/SQLiteDriver.md, "Concurrency and locking").
    let logger: Logger
    /// Whether bound values are shown (SQLite's expanded SQL) instead of redacted.
    let showsValues: Bool
    /// The connection's role in messages: `writer` or `reader`.
    let role: String
    /// Whether the trace is registered on the connection now.
    private var tracing = false

    /// The longest message logged; longer ones (a statement with large bound values shown)
    /// are cut, marked with `…`.
    static let messageLimit = 4096

    init(logger: Logger, showsValues: Bool, role: String) {
        self.logger = logger
        self.showsValues = showsValues
        self.role = role
    }

    /// Registers or removes the trace on `db` so that it matches the logger's level now.
    @inline(__always)
    func refresh(_ db: OpaquePointer) {
        let wanted = logger.logLevel <= .debug
        if wanted != tracing { setTrace(wanted, db) }
    }

    /// Removes the trace (the connection is closing).
    func stop(_ db: OpaquePointer) {
        if tracing { setTrace(false, db) }
    }

    private func setTrace(_ on: Bool, _ db: OpaquePointer) {
        tracing = on
        guard on else {
            sqlite3_trace_v2(db, 0, nil, nil)
            return
        }
        sqlite3_trace_v2(db, UInt32(SQLITE_TRACE_STMT), { mask, context, statement, text in
            guard mask == UInt32(SQLITE_TRACE_STMT), let context, let statement else { return 0 }
            let log = Unmanaged<SQLiteStatementLog>.fromOpaque(context).takeUnretainedValue()
            log.started(OpaquePointer(statement), text: text.map { UnsafePointer($0.assumingMemoryBound(to: CChar.self)) })
            return 0
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Logs a statement that is starting. `text` is its SQL as written (with placeholders),
    /// or `-- …` for a statement of a trigger.
    private func started(_ statement: OpaquePointer, text: UnsafePointer<CChar>?) {
        let sql = text.map { String(cString: $0) } ?? ""
        var message: String
        if sql.hasPrefix("--") {
            message = sql
        } else if showsValues, let expanded = sqlite3_expanded_sql(statement) {
            message = String(cString: expanded)
            sqlite3_free(expanded)
        } else {
            message = sql
            let count = sqlite3_bind_parameter_count(statement)
            if count > 0 {
                let names = (1...count).map { index in
                    sqlite3_bind_parameter_name(statement, index).map { String(cString: $0) } ?? "?\(index)"
                }
                message += " [" + names.map { "\($0)=<redacted>" }.joined(separator: ", ") + "]"
            }
        }
        if message.utf8.count > Self.messageLimit {
            message = String(decoding: message.utf8.prefix(Self.messageLimit), as: UTF8.self) + "…"
        }
        logger.debug("\(message)", metadata: ["connection": .string(role)])
    }
}
