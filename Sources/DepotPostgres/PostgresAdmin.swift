import DepotCore
import Foundation

/// Creating and dropping whole databases on a server: what test runs use for a throwaway
/// database each (Docs/PostgresDriver.md, "Tests").
///
/// Every function opens a connection of its own and **blocks the calling thread** until the
/// server answers: call them from a plain thread or a test, not from an event loop.
public enum PostgresAdmin {
    /// Creates database `name` on the server `settings` names (logging in to its database).
    /// - Throws: `.invalidName` for a name that is not a plain identifier, `.remote` and the
    ///   server's errors.
    public static func createDatabase(_ name: String, on settings: PostgresSettings) throws {
        guard PostgresSQL.isPlainIdentifier(name) else { throw DepotError(.invalidName, "A database name must be a plain identifier.") }
        _ = try withSession(settings) { session in try session.run("CREATE DATABASE \(PostgresSQL.quote(name)) ENCODING 'UTF8' TEMPLATE template0") }
    }

    /// Drops database `name` if it exists, ending its sessions first.
    public static func dropDatabase(_ name: String, on settings: PostgresSettings) throws {
        guard PostgresSQL.isPlainIdentifier(name) else { throw DepotError(.invalidName, "A database name must be a plain identifier.") }
        _ = try withSession(settings) { session in try session.run("DROP DATABASE IF EXISTS \(PostgresSQL.quote(name)) WITH (FORCE)") }
    }

    /// The names of the server's databases that start with `prefix`.
    public static func databases(prefixed prefix: String, on settings: PostgresSettings) throws -> [String] {
        try withSession(settings) { session in
            let sql = SQLBuilder()
            let result = try session.run(sql.query("SELECT datname::text FROM pg_database WHERE starts_with(datname::text, \(sql.text(prefix))) ORDER BY 1"))
            return try result.rows.map { try $0.decode(String.self) }
        }
    }

    private static func withSession<T>(_ settings: PostgresSettings, _ body: (PGSession) throws -> T) throws -> T {
        let pool = try PGPool(settings: settings)
        defer { pool.close() }
        let session = try pool.acquire()
        do {
            let value = try body(session)
            pool.release(session)
            return value
        } catch {
            pool.release(session, broken: true)
            throw error
        }
    }
}

extension PostgresAdmin {
    /// Ends every other session connected to `database` (`pg_terminate_backend`): how the
    /// fault tests drop a driver's connections in the middle of a transaction.
    /// - Returns: how many sessions were ended.
    @discardableResult
    public static func terminateSessions(of database: String, on settings: PostgresSettings) throws -> Int {
        try withSession(settings) { session in
            let sql = SQLBuilder()
            let result = try session.run(sql.query(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = \(sql.text(database)) AND pid <> pg_backend_pid()"
            ))
            guard let row = result.rows.first else { return 0 }
            return Int(try row.decode(Int64.self))
        }
    }
}

extension PostgresAdmin {
    /// Drops schema `name` and everything in it, if it exists (benchmark and test stores).
    public static func dropSchema(_ name: String, on settings: PostgresSettings) throws {
        guard PostgresSQL.isPlainIdentifier(name) else { throw DepotError(.invalidName, "A schema name must be a plain identifier.") }
        _ = try withSession(settings) { session in try session.run("DROP SCHEMA IF EXISTS \(PostgresSQL.quote(name)) CASCADE") }
    }
}

extension PostgresSettings {
    /// The store string of these settings **with the password**, percent-encoded: for
    /// handing the store to another process or driver. Never log or show it; ``description``
    /// is the form to show.
    public var secretStoreString: String {
        func encode(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "" }
        let auth = encode(user) + (password.map { ":" + encode($0) } ?? "")
        let hostText = host.contains(":") ? "[" + host + "]" : host
        var text = "postgres://\(auth)@\(hostText):\(port)/\(encode(database))?schema=\(schema)&durability=\(durability.rawValue)&sslmode=\(tls.rawValue)"
        text += "&pool=\(poolSize)&retries=\(attempts - 1)"
        return text
    }
}
