import Depot
import DepotCore

/// Depot over any registered driver, through ``Store`` and ``Collection``: the public API
/// people use, each call its own transaction.
///
/// An update is what a Depot user writes to change one field: a write transaction that
/// gets the record, sets the field and updates it.
public final class DepotStoreTarget: BenchTarget {
    public let engine: String
    public let isBaseline = false
    public private(set) var settings: [String: String] = [:]

    private let registry: DriverRegistry
    private let storeString: @Sendable (String, Durability) -> String
    private var directory = ""
    private var store: Store?
    private var collection: Collection?
    private let collectionName: CollectionName

    /// A target for `engine` whose store string for a directory and durability is
    /// `storeString` (for example `{ "sqlite:\($0)/bench.sqlite?durability=\($1)" }`).
    /// - Throws: `.invalidName` never in practice (the collection name is fixed).
    public init(engine: String, registry: DriverRegistry = .standard, settings: [String: String] = [:], storeString: @escaping @Sendable (String, Durability) -> String) throws {
        self.engine = engine
        self.registry = registry
        self.storeString = storeString
        self.settings = settings
        collectionName = try CollectionName("usertable")
    }

    /// The standard target for a built-in driver name, `nil` for an unknown one.
    public static func standard(_ engine: String) throws -> DepotStoreTarget? {
        switch engine {
        case "memory":
            return try DepotStoreTarget(engine: engine, settings: ["storage": "in process memory"]) { _, _ in "memory:" }
        case "sqlite":
            return try DepotStoreTarget(engine: engine, settings: ["page_size": "8192 (new files)", "journal_mode": "WAL", "synchronous": "FULL if durability full, NORMAL if normal", "layout": "one table, one column per field, WITHOUT ROWID (string ids)"]) { dir, durability in
                "sqlite:\(dir)/depot.sqlite?durability=\(durability.rawValue)"
            }
        case "gdbm":
            return try DepotStoreTarget(engine: engine, settings: ["journal": "redo journal, fsynced per commit if durability full", "layout": "one GDBM file per collection, binary records with CRC-32"]) { dir, durability in
                "gdbm:\(dir)/depot-gdbm?durability=\(durability.rawValue)"
            }
        case "json":
            return try DepotStoreTarget(engine: engine, settings: ["commit": "whole file rewritten: temp file, fsync, rename, fsync directory (fsyncs only if durability full)"]) { dir, durability in
                "json:\(dir)/depot.json?durability=\(durability.rawValue)"
            }
        default:
            return nil
        }
    }

    public func open(directory: String, durability: Durability) async throws {
        self.directory = directory
        let store = try await Store.open(storeString(directory, durability), registry: registry)
        self.store = store
        collection = store.collection(collectionName)
        try await store.collection(collectionName).prepare(idKind: .string)
    }

    public func reopen(durability: Durability) async throws {
        if engine == "memory" { return }
        try await close()
        let store = try await Store.open(storeString(directory, durability), registry: registry)
        self.store = store
        collection = store.collection(collectionName)
    }

    func opened() throws -> (Store, Collection) {
        guard let store, let collection else { throw BenchError("The \(engine) store is not open.") }
        return (store, collection)
    }

    static func record(_ n: Int, _ values: [String]) -> Record {
        var fields: [String: FieldValue] = [:]
        fields.reserveCapacity(values.count)
        for (i, v) in values.enumerated() { fields[YCSB.fieldNames[i]] = .string(v) }
        return Record(id: .string(YCSB.key(n)), fields: fields)
    }

    public func insertBatch(_ range: Range<Int>, values: [[String]]) async throws {
        let (store, _) = try opened()
        let records = zip(range, values).map { DepotStoreTarget.record($0, $1) }
        let name = collectionName
        try await store.write { tx in
            for record in records { try tx.insert(record, into: name) }
        }
    }

    public func fetchAll() async throws -> Int {
        let (_, collection) = try opened()
        return try await collection.query(Query()).count
    }

    public func run(_ operation: BenchOperation) async throws {
        let (_, collection) = try opened()
        switch operation {
        case .read(let n):
            guard try await collection.get(.string(YCSB.key(n))) != nil else { throw BenchError("\(engine): record \(n) is missing.") }
        case .update(let n, let field, let value):
            // One field written in place, as raw's UPDATE does (Docs/Benchmarks.md, "YCSB").
            let change = FieldChange(set: [YCSB.fieldNames[field]: .string(value)])
            guard try await collection.update(.string(YCSB.key(n)), change) else { throw BenchError("\(engine): record \(n) is missing.") }
        case .insert(let n):
            try await collection.insert(DepotStoreTarget.record(n, YCSB.fields(record: n)))
        case .scan(let n, let count):
            let query = Query(filter: Field.id >= YCSB.key(n), sort: [SortKey("id")], limit: count)
            _ = try await collection.query(query)
        case .readModifyWrite(let n, let field, let value):
            guard var record = try await collection.get(.string(YCSB.key(n))) else { throw BenchError("\(engine): record \(n) is missing.") }
            record.fields[YCSB.fieldNames[field]] = .string(value)
            try await collection.update(record)
        }
    }

    public func durableInsert(_ n: Int, values: [String]) async throws {
        let (_, collection) = try opened()
        try await collection.insert(DepotStoreTarget.record(n, values))
    }

    public func delete(_ n: Int) async throws {
        let (_, collection) = try opened()
        guard try await collection.delete(.string(YCSB.key(n))) else { throw BenchError("\(engine): record \(n) is missing.") }
    }

    /// GDBM: waits for the journal folds (``GDBMDriver/waitForFolds()``); the other drivers
    /// leave no background work behind a load (SQLite checkpoints the log on the writer's
    /// thread before a large commit returns).
    public func settle() async throws {
        if let gdbm = store?.driver as? GDBMDriver { await gdbm.waitForFolds() }
    }

    public var writerWaits: WriterWaits? {
        guard let gdbm = store?.driver as? GDBMDriver else { return nil }
        let waits = gdbm.foldWaits
        return WriterWaits(count: waits.count, nanoseconds: Self.nanoseconds(waits.total), longestNanoseconds: Self.nanoseconds(waits.longest))
    }

    private static func nanoseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1e9 + Double(duration.components.attoseconds) / 1e9
    }

    public func close() async throws {
        let store = self.store
        self.store = nil
        collection = nil
        try await store?.close()
    }
}
