#if PostgreSQL
import Depot
import DepotBench
import DepotPostgres
import Foundation
import Logging
import NIOPosix
import PostgresNIO

/// `depot bench --drivers postgres --postgres URL`: Depot's PostgreSQL driver against
/// postgres-nio used directly (Docs/Benchmarks.md, "PostgreSQL"), both in schemas of their
/// own in the database the URL names, dropped when the round ends.
enum PostgresBench {
    /// The two targets of one round.
    static func targets(server: PostgresSettings) throws -> [any BenchTarget] {
        let depot = PostgresDepotTarget(server: server)
        return [depot, RawPostgresTarget(server: server)]
    }

    /// A schema for a round's directory.
    static func schema(_ prefix: String, _ directory: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in directory.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return prefix + String(hash, radix: 16)
    }
}

/// Depot over the PostgreSQL driver: ``DepotStoreTarget`` on a schema of the round's own,
/// dropped at the end.
final class PostgresDepotTarget: BenchTarget {
    let engine = "postgres"
    let isBaseline = false
    var settings: [String: String] {
        ["layout": "one table, id text COLLATE \"C\", one bytea column per field (Docs/PostgresDriver.md)",
         "synchronous_commit": "on if durability full, off if normal", "isolation": "writes SERIALIZABLE, reads REPEATABLE READ READ ONLY",
         "api": "Store and Collection, each operation its own transaction"]
    }
    private let server: PostgresSettings
    private var inner: DepotStoreTarget?
    private var schema = ""

    init(server: PostgresSettings) { self.server = server }

    private func target() throws -> DepotStoreTarget {
        guard let inner else { throw BenchError("postgres: not open") }
        return inner
    }

    func open(directory: String, durability: Durability) async throws {
        let schema = PostgresBench.schema("bench_depot_", directory)
        self.schema = schema
        let server = server
        inner = try DepotStoreTarget(engine: engine, registry: .cli, settings: settings) { _, durability in
            var settings = server
            settings.schema = schema
            settings.durability = durability
            return settings.secretStoreString
        }
        try await target().open(directory: directory, durability: durability)
    }

    func reopen(durability: Durability) async throws { try await target().reopen(durability: durability) }
    func insertBatch(_ range: Range<Int>, values: [[String]]) async throws { try await target().insertBatch(range, values: values) }
    func fetchAll() async throws -> Int { try await target().fetchAll() }
    func run(_ operation: BenchOperation) async throws { try await target().run(operation) }
    func durableInsert(_ n: Int, values: [String]) async throws { try await target().durableInsert(n, values: values) }
    func delete(_ n: Int) async throws { try await target().delete(n) }

    func close() async throws {
        try await inner?.close()
        inner = nil
        if !schema.isEmpty { try PostgresAdmin.dropSchema(schema, on: server) }
    }
}

/// postgres-nio used directly, as a careful program would: one connection, prepared
/// statements, the driver's table layout (id `text COLLATE "C"` primary key, `field0` …
/// `field9` as `bytea` holding the string kind byte and the UTF-8 text), the same
/// `synchronous_commit`. Each operation is one statement in its own implicit transaction;
/// a batch is one explicit transaction.
final class RawPostgresTarget: BenchTarget {
    let engine = "postgres"
    let isBaseline = true
    var settings: [String: String] {
        ["api": "postgres-nio PostgresConnection, prepared statements, implicit transactions per operation",
         "layout": "same as the driver", "synchronous_commit": "on if durability full, off if normal"]
    }
    private let server: PostgresSettings
    private var connection: PostgresConnection?
    private var schema = ""
    private let logger = Logger(label: "depot.bench.postgres", factory: { _ in SwiftLogNoOpLogHandler() })

    init(server: PostgresSettings) { self.server = server }

    private func connect(durability: Durability) async throws {
        var configuration = PostgresConnection.Configuration(
            host: server.host, port: server.port, username: server.user, password: server.password, database: server.database, tls: .disable)
        configuration.options.additionalStartupParameters = [
            ("synchronous_commit", durability == .full ? "on" : "off"), ("search_path", schema),
        ]
        connection = try await PostgresConnection.connect(on: MultiThreadedEventLoopGroup.singleton.any(), configuration: configuration, id: 1, logger: logger)
    }

    private func opened() throws -> PostgresConnection {
        guard let connection else { throw BenchError("postgres raw: not open") }
        return connection
    }

    func open(directory: String, durability: Durability) async throws {
        schema = PostgresBench.schema("bench_raw_", directory)
        try await connect(durability: durability)
        let c = try opened()
        _ = try await c.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA IF NOT EXISTS \"\(schema)\""), logger: logger)
        let columns = YCSB.fieldNames.map { "\($0) bytea" }.joined(separator: ", ")
        _ = try await c.query(PostgresQuery(unsafeSQL: "CREATE TABLE usertable (id text COLLATE \"C\" PRIMARY KEY, _depotsys_doubles text, \(columns))"), logger: logger)
    }

    func reopen(durability: Durability) async throws {
        try await opened().close()
        try await connect(durability: durability)
    }

    func insertBatch(_ range: Range<Int>, values: [[String]]) async throws {
        let c = try opened()
        _ = try await c.query("BEGIN", logger: logger)
        for (n, v) in zip(range, values) { _ = try await exec(Insert(id: YCSB.key(n), values: v)) }
        _ = try await c.query("COMMIT", logger: logger)
    }

    /// Reads every row into memory, as the other engines' raw targets do (the SQLite and
    /// GDBM ones keep `RawRow`s): a bulk fetch hands the app the rows, not only their count.
    func fetchAll() async throws -> Int {
        var rows: [[String]] = []
        for try await row in try await opened().execute(FetchAll(), logger: logger) { rows.append(row) }
        return rows.count
    }

    private func read(_ n: Int) async throws -> [String] {
        var found: [String]?
        for try await row in try await opened().execute(Read(id: YCSB.key(n)), logger: logger) { found = row }
        guard let found else { throw BenchError("postgres raw: record \(n) is missing") }
        return found
    }

    private func update(_ n: Int, field: Int, value: String) async throws {
        let id = YCSB.key(n)
        switch field {
        case 0: _ = try await exec(Update0(id: id, value: value))
        case 1: _ = try await exec(Update1(id: id, value: value))
        case 2: _ = try await exec(Update2(id: id, value: value))
        case 3: _ = try await exec(Update3(id: id, value: value))
        case 4: _ = try await exec(Update4(id: id, value: value))
        case 5: _ = try await exec(Update5(id: id, value: value))
        case 6: _ = try await exec(Update6(id: id, value: value))
        case 7: _ = try await exec(Update7(id: id, value: value))
        case 8: _ = try await exec(Update8(id: id, value: value))
        default: _ = try await exec(Update9(id: id, value: value))
        }
    }

    func run(_ operation: BenchOperation) async throws {
        switch operation {
        case .read(let n):
            _ = try await read(n)
        case .update(let n, let field, let value):
            try await update(n, field: field, value: value)
        case .insert(let n):
            _ = try await exec(Insert(id: YCSB.key(n), values: YCSB.fields(record: n)))
        case .scan(let n, let count):
            var rows: [[String]] = []
            for try await row in try await opened().execute(Scan(id: YCSB.key(n), limit: Int64(count)), logger: logger) { rows.append(row) }
            _ = rows.count
        case .readModifyWrite(let n, let field, let value):
            var found = try await read(n)
            found[field + 1] = value
            try await update(n, field: field, value: found[field + 1])
        }
    }

    func durableInsert(_ n: Int, values: [String]) async throws {
        _ = try await exec(Insert(id: YCSB.key(n), values: values))
    }

    func delete(_ n: Int) async throws {
        guard try await exec(Delete(id: YCSB.key(n))) == 1 else { throw BenchError("postgres raw: record \(n) is missing") }
    }

    /// Runs a statement and reads its rows to the end (postgres-nio's command-tag variant
    /// of `execute` asks for the tag before the rows are read); returns how many.
    private func exec<S: PostgresPreparedStatement>(_ statement: S) async throws -> Int {
        var count = 0
        for try await _ in try await opened().execute(statement, logger: logger) { count += 1 }
        return count
    }

    func close() async throws {
        if let connection {
            _ = try await connection.query(PostgresQuery(unsafeSQL: "DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE"), logger: logger)
            try await connection.close()
        }
        connection = nil
    }

    // MARK: Statements

    static let columns = YCSB.fieldNames.joined(separator: ", ")

    /// A string as the driver stores it: the string kind byte, then the UTF-8 bytes.
    static func key(_ text: String) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt8(0x30))
        buffer.writeString(text)
        return buffer
    }

    static func text(_ cell: PostgresCell) throws -> String {
        guard var bytes = cell.bytes, bytes.readInteger(as: UInt8.self) == 0x30, let text = bytes.readString(length: bytes.readableBytes) else {
            throw BenchError("postgres raw: a field is not a stored string")
        }
        return text
    }

    static func row(_ row: PostgresRow) throws -> [String] {
        var out: [String] = []
        out.reserveCapacity(YCSB.fieldCount + 1)
        for (i, cell) in row.enumerated() { out.append(i == 0 ? try cell.decode(String.self) : try text(cell)) }
        return out
    }

    struct Insert: PostgresPreparedStatement {
        static let sql = "INSERT INTO usertable (id, \(columns)) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
        typealias Row = ()
        let id: String
        let values: [String]
        func makeBindings() throws -> PostgresBindings {
            var b = PostgresBindings(capacity: 11)
            b.append(id)
            for v in values { b.append(RawPostgresTarget.key(v)) }
            return b
        }
        func decodeRow(_ row: PostgresRow) throws {}
    }

    struct Read: PostgresPreparedStatement {
        static let sql = "SELECT id, \(columns) FROM usertable WHERE id = $1"
        let id: String
        func makeBindings() throws -> PostgresBindings {
            var b = PostgresBindings(capacity: 1)
            b.append(id)
            return b
        }
        func decodeRow(_ row: PostgresRow) throws -> [String] { try RawPostgresTarget.row(row) }
    }

    struct Scan: PostgresPreparedStatement {
        static let sql = "SELECT id, \(columns) FROM usertable WHERE id >= $1 COLLATE \"C\" ORDER BY id COLLATE \"C\" LIMIT $2"
        let id: String
        let limit: Int64
        func makeBindings() throws -> PostgresBindings {
            var b = PostgresBindings(capacity: 2)
            b.append(id)
            b.append(limit)
            return b
        }
        func decodeRow(_ row: PostgresRow) throws -> [String] { try RawPostgresTarget.row(row) }
    }

    struct FetchAll: PostgresPreparedStatement {
        static let sql = "SELECT id, \(columns) FROM usertable ORDER BY id COLLATE \"C\""
        func makeBindings() throws -> PostgresBindings { PostgresBindings() }
        func decodeRow(_ row: PostgresRow) throws -> [String] { try RawPostgresTarget.row(row) }
    }

    struct Delete: PostgresPreparedStatement {
        static let sql = "DELETE FROM usertable WHERE id = $1 RETURNING 1"
        typealias Row = ()
        let id: String
        func makeBindings() throws -> PostgresBindings {
            var b = PostgresBindings(capacity: 1)
            b.append(id)
            return b
        }
        func decodeRow(_ row: PostgresRow) throws {}
    }
}

/// `UPDATE usertable SET fieldN = $1 WHERE id = $2`, one prepared statement per field.
protocol RawUpdate: PostgresPreparedStatement where Row == () {
    static var field: Int { get }
    var id: String { get }
    var value: String { get }
}

extension RawUpdate {
    static var sql: String { "UPDATE usertable SET field\(field) = $1 WHERE id = $2" }
    func makeBindings() throws -> PostgresBindings {
        var b = PostgresBindings(capacity: 2)
        b.append(RawPostgresTarget.key(value))
        b.append(id)
        return b
    }
    func decodeRow(_ row: PostgresRow) throws {}
}

struct Update0: RawUpdate { static let field = 0; let id: String; let value: String }
struct Update1: RawUpdate { static let field = 1; let id: String; let value: String }
struct Update2: RawUpdate { static let field = 2; let id: String; let value: String }
struct Update3: RawUpdate { static let field = 3; let id: String; let value: String }
struct Update4: RawUpdate { static let field = 4; let id: String; let value: String }
struct Update5: RawUpdate { static let field = 5; let id: String; let value: String }
struct Update6: RawUpdate { static let field = 6; let id: String; let value: String }
struct Update7: RawUpdate { static let field = 7; let id: String; let value: String }
struct Update8: RawUpdate { static let field = 8; let id: String; let value: String }
struct Update9: RawUpdate { static let field = 9; let id: String; let value: String }
#endif
