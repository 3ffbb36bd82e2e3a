import DepotCore
import Foundation

/// What a `postgres://` store string says: where the server is, who logs in, which schema
/// holds the collections and how the driver behaves (Docs/PostgresDriver.md, "Store strings").
///
/// `postgres://user[:password]@host[:port]/database[?schema=NAME&durability=full|normal&sslmode=disable|prefer|require&pool=N&retries=N]`;
/// `postgresql://` is the same. The password is kept only to log in: ``description`` hides it.
public struct PostgresSettings: Sendable, CustomStringConvertible {
    /// How the connection is encrypted.
    public enum TLSMode: String, Sendable, CaseIterable {
        /// Plain TCP (the default; a server on the loopback).
        case disable
        /// TLS when the server offers it, plain otherwise.
        case prefer
        /// TLS or no connection; the server's certificate is verified against the system's roots.
        case require
    }

    /// The server's host name or address.
    public var host: String
    /// The server's port (5432 unless the string says otherwise).
    public var port: Int
    /// The role to log in as.
    public var user: String
    /// The password, if any. Never shown: not in ``description``, errors, logs or plans.
    public var password: String?
    /// The database to use.
    public var database: String
    /// The schema that holds the collections' tables (`public` by default); created if missing.
    public var schema: String
    /// `full`: `synchronous_commit = on`; `normal`: `synchronous_commit = off`.
    public var durability: Durability
    /// Whether the connection uses TLS.
    public var tls: TLSMode
    /// The most connections the driver opens.
    public var poolSize: Int
    /// How many times a write transaction runs before a serialization failure is reported
    /// as `.conflict`.
    public var attempts: Int

    /// The options a store string may carry.
    public static let optionNames: Set<String> = ["schema", "durability", "sslmode", "pool", "retries"]

    /// Settings from their parts.
    public init(
        host: String, port: Int = 5432, user: String, password: String? = nil, database: String, schema: String = "public",
        durability: Durability = .full, tls: TLSMode = .disable, poolSize: Int = 8, attempts: Int = 10
    ) {
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.database = database
        self.schema = schema
        self.durability = durability
        self.tls = tls
        self.poolSize = poolSize
        self.attempts = attempts
    }

    /// Parses a `postgres:` or `postgresql:` store string.
    /// - Throws: `.invalidStore` naming what is wrong (never quoting the password).
    public init(_ location: StoreLocation) throws {
        guard location.scheme == "postgres" || location.scheme == "postgresql" else {
            throw DepotError(.invalidStore, "A PostgreSQL store string starts with postgres: or postgresql:, not \(location.scheme):.")
        }
        try location.rejectUnknownOptions(PostgresSettings.optionNames)
        guard location.path.hasPrefix("//") else {
            throw DepotError(.invalidStore, "A PostgreSQL store string is postgres://user[:password]@host[:port]/database.")
        }
        let rest = location.path.dropFirst(2)
        guard let slash = rest.firstIndex(of: "/") else {
            throw DepotError(.invalidStore, "A PostgreSQL store string names a database: postgres://user@host/database.")
        }
        let authority = rest[..<slash]
        let databaseText = rest[rest.index(after: slash)...]
        var hostPart = authority
        var user = ""
        var password: String?
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            hostPart = authority[authority.index(after: at)...]
            if let colon = userInfo.firstIndex(of: ":") {
                user = try Self.decode(userInfo[..<colon], "user name")
                password = try Self.decode(userInfo[userInfo.index(after: colon)...], "password")
            } else {
                user = try Self.decode(userInfo, "user name")
            }
        }
        guard !user.isEmpty else { throw DepotError(.invalidStore, "A PostgreSQL store string names a user: postgres://user@host/database.") }
        var host = String(hostPart)
        var port = 5432
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { throw DepotError(.invalidStore, "The host's IPv6 address has no closing ']'.") }
            let after = host[host.index(after: close)...]
            if after.hasPrefix(":") { port = try Self.port(after.dropFirst()) } else if !after.isEmpty {
                throw DepotError(.invalidStore, "The host part of the PostgreSQL store string is malformed.")
            }
            host = String(host[host.index(after: host.startIndex)..<close])
        } else if let colon = host.lastIndex(of: ":") {
            port = try Self.port(host[host.index(after: colon)...])
            host = String(host[..<colon])
        }
        guard !host.isEmpty else { throw DepotError(.invalidStore, "A PostgreSQL store string names a host: postgres://user@host/database.") }
        let database = try Self.decode(databaseText, "database name")
        guard !database.isEmpty, !database.utf8.contains(0) else {
            throw DepotError(.invalidStore, "A PostgreSQL store string names a database: postgres://user@host/database.")
        }
        let schema = location.options["schema"] ?? "public"
        guard PostgresSQL.isPlainIdentifier(schema) else {
            throw DepotError(.invalidStore, "Option schema must be 1 to 63 ASCII letters, digits or '_', starting with a letter or '_'.")
        }
        var tls = TLSMode.disable
        if let text = location.options["sslmode"] {
            guard let mode = TLSMode(rawValue: text) else { throw DepotError(.invalidStore, "Option sslmode must be disable, prefer or require.") }
            tls = mode
        }
        var poolSize = 8
        if let text = location.options["pool"] {
            guard let value = Int(text), (2...256).contains(value) else { throw DepotError(.invalidStore, "Option pool must be a number of connections from 2 to 256.") }
            poolSize = value
        }
        var attempts = 10
        if let text = location.options["retries"] {
            guard let value = Int(text), (0...1000).contains(value) else { throw DepotError(.invalidStore, "Option retries must be a number from 0 to 1000.") }
            attempts = value + 1
        }
        self.init(
            host: host, port: port, user: user, password: password, database: database, schema: schema,
            durability: try location.durability(), tls: tls, poolSize: poolSize, attempts: attempts
        )
    }

    private static func decode(_ text: Substring, _ what: String) throws -> String {
        guard let decoded = String(text).removingPercentEncoding ?? (text.contains("%") ? nil : String(text)) else {
            throw DepotError(.invalidStore, "The \(what) in the PostgreSQL store string has a malformed percent escape.")
        }
        return decoded
    }

    private static func port(_ text: Substring) throws -> Int {
        guard let value = Int(text), (1...65535).contains(value) else { throw DepotError(.invalidStore, "The port of a PostgreSQL store string is a number from 1 to 65535.") }
        return value
    }

    /// The store string without the password: `postgres://user:***@host:port/database?...`.
    public var description: String {
        let auth = password == nil ? user : user + ":***"
        let hostText = host.contains(":") ? "[" + host + "]" : host
        var options = ["schema=\(schema)", "durability=\(durability.rawValue)", "sslmode=\(tls.rawValue)"]
        options.append("pool=\(poolSize)")
        return "postgres://\(auth)@\(hostText):\(port)/\(database)?" + options.joined(separator: "&")
    }
}
