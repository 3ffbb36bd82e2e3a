import DepotCore
import PostgresNIO

/// The one place where PostgreSQL and postgres-nio errors become ``DepotError``s
/// (Docs/PostgresDriver.md, "Errors"). Messages carry the SQLSTATE and the server's message
/// text, never the store string or the password (postgres-nio's own error text hides
/// everything, so the server's fields are read one by one).
enum PostgresErrors {
    /// `true` for a failure worth running the transaction again for: its SQLSTATE, or a
    /// unique violation in PostgreSQL's own catalogs (two processes created the same table
    /// at once: `pg_type_typname_nsp_index`).
    static func isRetryable(_ error: DepotError) -> Bool {
        guard let state = state(of: error) else { return false }
        if state == "23505", constraintName(of: error)?.hasPrefix("pg_") == true { return true }
        // A prepared statement whose table another process changed ("cached plan must not
        // change result type"): the statement is retired; run again, it is prepared anew.
        if state == "0A000", error.code == .conflict { return true }
        return isRetryable(state)
    }

    /// `true` for SQLSTATEs worth running the transaction again for.
    static func isRetryable(_ state: String) -> Bool {
        switch state {
        case "40001", "40P01": return true
        // undefined_table / undefined_column: this process's catalog cache is older than
        // a change another process committed; duplicate_table / unique violation in the
        // system catalogs: two processes created the same collection at once.
        case "42P01", "42703", "42P07": return true
        default: return false
        }
    }

    /// Maps any error from postgres-nio. A ``DepotError`` passes through.
    static func map(_ error: any Error) -> DepotError {
        if let error = error as? DepotError { return error }
        // postgres-nio's prepared-statement calls (`PreparedQuery`) report errors as the
        // older `PostgresError`.
        if let legacy = error as? PostgresError {
            switch legacy {
            case .server(let message):
                return server(state: message.fields[.sqlState] ?? "?????", message: message.fields[.message], constraint: message.fields[.constraintName], cause: DepotError(.remote, "postgres-nio: server error"))
            case .connectionClosed:
                return DepotError(.remote, "The connection to the PostgreSQL server was lost (connection closed).", cause: DepotError(.remote, "postgres-nio: connection closed"))
            case .protocol:
                return DepotError(.remote, "The PostgreSQL connection failed (protocol error).", cause: DepotError(.remote, "postgres-nio: protocol error"))
            }
        }
        guard let psql = error as? PSQLError else {
            return DepotError(.remote, "The PostgreSQL connection failed (\(type(of: error))).", cause: DepotError.wrap(error))
        }
        let cause = DepotError(.remote, "postgres-nio: \(psql.code)")
        if let info = psql.serverInfo {
            return server(state: info[.sqlState] ?? "?????", message: info[.message], constraint: info[.constraintName], cause: cause)
        }
        switch psql.code {
        case .serverClosedConnection, .connectionError, .uncleanShutdown, .clientClosedConnection:
            return DepotError(.remote, "The connection to the PostgreSQL server was lost (\(psql.code)).", cause: cause)
        case .sslUnsupported, .failedToAddSSLHandler:
            return DepotError(.remote, "The PostgreSQL server does not accept TLS, which the store string asks for (\(psql.code)).", cause: cause)
        default:
            return DepotError(.remote, "The PostgreSQL connection failed (\(psql.code)).", cause: cause)
        }
    }

    /// A server error, by its SQLSTATE.
    private static func server(state: String, message: String?, constraint: String?, cause: DepotError) -> DepotError {
        let message = message ?? "no message"
        let text = "PostgreSQL error \(state): \(message)"
        let code: DepotError.Code
        switch state {
        case "40001", "40P01": code = .conflict
        case "23505": code = .uniqueViolation
        case "55P03", "57014": code = .locked
        case "28000", "28P01": code = .remote
        case "3D000": code = .invalidStore
        case "42P01", "42703", "42P07": code = .conflict
        case "0A000" where message == "cached plan must not change result type": code = .conflict
        case "53100": code = .io
        case "XX001", "XX002": code = .corrupted
        default:
            code = state.hasPrefix("08") || state.hasPrefix("57") || state.hasPrefix("53") ? .remote : .internal
        }
        return DepotError(code, text, cause: PSQLErrorBox(state: state, constraint: constraint, underlying: cause))
    }

    /// `true` when the connection can no longer be used.
    static func isConnectionLost(_ error: DepotError) -> Bool {
        error.code == .remote && state(of: error) == nil
    }
}

/// A server error's SQLSTATE and constraint, kept as the cause of the ``DepotError`` made
/// from it (the server's whole error is not kept: its detail may quote record values).
struct PSQLErrorBox: Error, Sendable, CustomStringConvertible {
    let state: String
    let constraint: String?
    let underlying: DepotError
    var description: String { "SQLSTATE \(state)" }
}

extension PostgresErrors {
    /// The SQLSTATE of an error this file made.
    static func state(of error: any Error) -> String? {
        if let box = error as? PSQLErrorBox { return box.state }
        if let error = error as? DepotError, let cause = error.cause { return state(of: cause) }
        return nil
    }

    /// The constraint named by an error this file made.
    static func constraintName(of error: any Error) -> String? {
        if let box = error as? PSQLErrorBox { return box.constraint }
        if let error = error as? DepotError, let cause = error.cause { return constraintName(of: cause) }
        return nil
    }
}
