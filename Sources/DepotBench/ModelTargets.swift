import Depot
import DepotCore

/// How a typed-model target stores and reads the model of the typed-model workloads (an
/// integer id and ten integer fields; Docs/Benchmarks.md, "Typed models").
public enum ModelSide: String, Sendable, Hashable, Codable, CaseIterable {
    /// Depot with untyped ``Record``s through `Store.write`/`Collection`.
    case record = "Record"
    /// Depot with ``IntegerRecord``, a `Codable` ``Model``, through `Repository`.
    case codable = "Codable"
    /// Depot with ``GeneratedIntegerRecord``, the `@Model` expansion, through `Repository`.
    case generated = "@Model"
    /// The engine's C API doing the same work.
    case raw = "raw"
}

/// Something the typed-model workloads measure: Depot with one kind of model, or the
/// engine's raw API. Record `n` has id `n + 1` and the values of `IntegerRecord(n)`.
///
/// Used by one task at a time: `open`, the workloads, `close`. Only `insertStaged`,
/// `fetchAll` and `read` are timed; `stage` makes the values beforehand and the checksums
/// check what was read afterwards.
public protocol ModelBenchTarget: AnyObject {
    /// The engine, as in `--drivers`.
    var engine: String { get }
    /// Which way it stores and reads the model.
    var side: ModelSide { get }
    /// Engine settings printed beside the numbers.
    var settings: [String: String] { get }

    /// Creates an empty store in `directory` (which exists and is empty) with `durability`.
    /// - Throws: the engine's error.
    func open(directory: String, durability: Durability) async throws
    /// Makes the values of records `rows` for the next ``insertStaged()`` (not timed).
    func stage(_ rows: Range<Int>)
    /// Inserts the staged records in one transaction.
    /// - Throws: the engine's error.
    func insertStaged() async throws
    /// Reads every record into models (or the side's own values) with one query, in id
    /// order, and keeps them for ``fetchedChecksum()``; returns how many.
    /// - Throws: the engine's error.
    func fetchAll() async throws -> Int
    /// The sum of ``IntegerRows/checksum(id:values:)`` over what the last ``fetchAll()``
    /// read, `nil` when a record did not have the model's shape; forgets them.
    func fetchedChecksum() -> Int64?
    /// Reads record `n` by id in its own transaction and keeps it for ``lastReadChecksum()``.
    /// - Throws: the engine's error, or ``BenchError`` when the record is missing.
    func read(_ n: Int) async throws
    /// ``IntegerRows/checksum(id:values:)`` of what the last ``read(_:)`` read, `nil` when
    /// it did not have the model's shape.
    func lastReadChecksum() -> Int64?
    /// Closes the store.
    /// - Throws: the engine's error.
    func close() async throws
    /// Waits until the background work that the writes so far left behind is done (GDBM:
    /// the journal folds), as ``BenchTarget/settle()``: the timed insert's time includes it,
    /// and the fetch and the point reads start on a store with none running.
    /// - Throws: the engine's error.
    func settle() async throws
}

extension ModelBenchTarget {
    /// No background work to wait for: every write is done when its call returns.
    public func settle() async throws {}

    /// The name in tables: `sqlite @Model`, `sqlite Codable`, `sqlite Record`, `sqlite raw`.
    public var displayName: String { side == .raw ? "\(engine) raw" : "\(engine) \(side.rawValue)" }
}

/// The values and checksums of the typed-model workloads' records.
public enum IntegerRows {
    /// The names of the ten fields, in declaration and column order.
    public static let fieldNames = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]

    /// An order-sensitive fingerprint of one record, so that a swapped, lost or wrong field
    /// changes it.
    @inline(__always)
    public static func checksum(id: Int64, values: [Int64]) -> Int64 {
        var sum = id &* 0x1000_0001
        for value in values { sum = sum &* 1_000_003 &+ value }
        return sum
    }

    /// The checksum of record `n` as every side must read it.
    public static func expectedChecksum(_ n: Int) -> Int64 {
        let model = IntegerRecord(n)
        return checksum(id: model.id, values: model.values)
    }

    /// The checksum of a ``Record`` with the model's fields, `nil` when one is missing or
    /// not an integer.
    static func checksum(_ record: Record) -> Int64? {
        guard case .int(let id) = record.id else { return nil }
        var values: [Int64] = []
        values.reserveCapacity(fieldNames.count)
        for name in fieldNames {
            guard case .int(let value)? = record.fields[name] else { return nil }
            values.append(value)
        }
        return checksum(id: id, values: values)
    }

    /// `IntegerRecord(n)` as a ``Record``.
    static func record(_ n: Int) -> Record {
        let model = IntegerRecord(n)
        var fields: [String: FieldValue] = [:]
        fields.reserveCapacity(fieldNames.count)
        for (name, value) in zip(fieldNames, model.values) { fields[name] = .int(value) }
        return Record(id: .int(model.id), fields: fields)
    }
}

/// A model type of the typed-model workloads: ``IntegerRecord`` (Codable) and
/// ``GeneratedIntegerRecord`` (the `@Model` expansion) store the same records.
public protocol BenchIntegerModel: StoredModel, Hashable where ID == Int64 {
    /// Record `n` (id `n + 1`).
    init(_ n: Int)
    /// The record id.
    var id: Int64 { get }
    /// The ten values in column order.
    var values: [Int64] { get }
}

extension IntegerRecord: BenchIntegerModel {}
extension GeneratedIntegerRecord: BenchIntegerModel {}

/// The store string of Depot's standard target for `engine` (as ``DepotStoreTarget/standard(_:)``
/// opens it), `nil` for an engine without one.
func standardStoreString(_ engine: String) -> (@Sendable (String, Durability) -> String)? {
    switch engine {
    case "memory": return { _, _ in "memory:" }
    case "sqlite": return { dir, durability in "sqlite:\(dir)/depot.sqlite?durability=\(durability.rawValue)" }
    case "gdbm": return { dir, durability in "gdbm:\(dir)/depot-gdbm?durability=\(durability.rawValue)" }
    case "json": return { dir, durability in "json:\(dir)/depot.json?durability=\(durability.rawValue)" }
    default: return nil
    }
}

/// Depot with a typed model `M` through ``Repository`` and ``TransactionRepository``: the
/// insert is `store.write { tx.repository(M.self).insert(model) … }`, the fetch
/// `Repository.all()`, a point read `Repository.find(id:)` (its own read transaction).
public final class DepotModelTarget<M: BenchIntegerModel>: ModelBenchTarget {
    /// The engine, as in `--drivers`.
    public let engine: String
    /// Which way the target stores and reads the model.
    public let side: ModelSide
    /// Engine settings printed beside the numbers.
    public let settings: [String: String]
    private let storeString: @Sendable (String, Durability) -> String
    private var store: Store?
    private var repository: Repository<M>?
    private var staged: [M] = []
    private var fetched: [M] = []
    private var last: M?

    /// A target for `engine` whose store string for a directory and durability is `storeString`;
    /// `side` says which of ``ModelSide/codable`` and ``ModelSide/generated`` `M` is.
    public init(engine: String, side: ModelSide, settings: [String: String] = [:], storeString: @escaping @Sendable (String, Durability) -> String) {
        self.engine = engine
        self.side = side
        self.settings = settings
        self.storeString = storeString
    }

    private func opened() throws -> (Store, Repository<M>) {
        guard let store, let repository else { throw BenchError("\(engine) \(side.rawValue): the store is not open.") }
        return (store, repository)
    }

    /// Opens the store and prepares the models' collection (not timed).
    public func open(directory: String, durability: Durability) async throws {
        let store = try await Store.open(storeString(directory, durability), registry: .standard)
        self.store = store
        repository = try await store.repository(M.self)
    }

    /// Makes records `rows` for the next insert (not timed).
    public func stage(_ rows: Range<Int>) { staged = rows.map(M.init) }

    /// Inserts the staged records in one write transaction.
    ///
    /// Specialized for the two model types, as ``read(_:)`` is.
    @_specialize(exported: false, where M == GeneratedIntegerRecord)
    @_specialize(exported: false, where M == IntegerRecord)
    public func insertStaged() async throws {
        let (store, _) = try opened()
        let models = staged
        try await store.write { tx in
            let repository = try tx.repository(M.self)
            for model in models { try repository.insert(model) }
        }
    }

    /// Reads every record with one query and keeps them; returns how many.
    ///
    /// Specialized for the two model types, as ``read(_:)`` is.
    @_specialize(exported: false, where M == GeneratedIntegerRecord)
    @_specialize(exported: false, where M == IntegerRecord)
    public func fetchAll() async throws -> Int {
        let (_, repository) = try opened()
        fetched = try await repository.all()
        return fetched.count
    }

    /// The checksum over the last fetch; forgets it.
    public func fetchedChecksum() -> Int64? {
        defer { fetched = [] }
        return fetched.reduce(0) { $0 &+ IntegerRows.checksum(id: $1.id, values: $1.values) }
    }

    /// Reads record `n` by id in its own read transaction.
    ///
    /// Specialized for the two model types: the runner calls it through the target protocol,
    /// which would leave this code generic, looking up the metadata of `Repository<M>` at
    /// every call. An app calls `find(id:)` from code where the model type is known.
    @_specialize(exported: false, where M == GeneratedIntegerRecord)
    @_specialize(exported: false, where M == IntegerRecord)
    public func read(_ n: Int) async throws {
        guard let repository else { throw BenchError("\(engine) \(side.rawValue): the store is not open.") }
        guard let model = try await repository.find(id: Int64(n) + 1) else { throw BenchError("\(displayName): record \(n) is missing.") }
        last = model
    }

    /// The checksum of the last point read.
    public func lastReadChecksum() -> Int64? { last.map { IntegerRows.checksum(id: $0.id, values: $0.values) } }

    /// GDBM: waits for the journal folds (``GDBMDriver/waitForFolds()``); the other drivers
    /// leave no background work behind an insert this large.
    public func settle() async throws {
        if let gdbm = store?.driver as? GDBMDriver { await gdbm.waitForFolds() }
    }

    /// Closes the store.
    public func close() async throws {
        let store = self.store
        self.store = nil
        repository = nil
        staged = []
        fetched = []
        try await store?.close()
    }
}

/// Depot with untyped ``Record``s holding the same fields: the insert is
/// `store.write { tx.insert(record, into:) … }`, the fetch `Collection.query(Query())`, a
/// point read `Collection.get(_:)` (its own read transaction). The collection is prepared
/// with the models' schema.
public final class DepotRecordModelTarget: ModelBenchTarget {
    /// The engine, as in `--drivers`.
    public let engine: String
    /// Which way the target stores and reads the model.
    public let side = ModelSide.record
    /// Engine settings printed beside the numbers.
    public let settings: [String: String]
    private let storeString: @Sendable (String, Durability) -> String
    private var store: Store?
    private var collection: Collection?
    private var staged: [Record] = []
    private var fetched: [Record] = []
    private var last: Record?

    /// A target for `engine` whose store string for a directory and durability is `storeString`.
    public init(engine: String, settings: [String: String] = [:], storeString: @escaping @Sendable (String, Durability) -> String) {
        self.engine = engine
        self.settings = settings
        self.storeString = storeString
    }

    private func opened() throws -> (Store, Collection) {
        guard let store, let collection else { throw BenchError("\(displayName): the store is not open.") }
        return (store, collection)
    }

    /// Opens the store and prepares the models' collection (not timed).
    public func open(directory: String, durability: Durability) async throws {
        let store = try await Store.open(storeString(directory, durability), registry: .standard)
        self.store = store
        let schema = try IntegerRecord.schema()
        try await store.write { tx in try tx.prepare(schema) }
        collection = store.collection(schema.name)
    }

    /// Makes records `rows` for the next insert (not timed).
    public func stage(_ rows: Range<Int>) { staged = rows.map(IntegerRows.record) }

    /// Inserts the staged records in one write transaction.
    public func insertStaged() async throws {
        let (store, collection) = try opened()
        let records = staged, name = collection.name
        try await store.write { tx in
            for record in records { try tx.insert(record, into: name) }
        }
    }

    /// Reads every record with one query and keeps them; returns how many.
    public func fetchAll() async throws -> Int {
        let (_, collection) = try opened()
        fetched = try await collection.query(Query())
        return fetched.count
    }

    /// The checksum over the last fetch; forgets it.
    public func fetchedChecksum() -> Int64? {
        defer { fetched = [] }
        var sum: Int64 = 0
        for record in fetched {
            guard let checksum = IntegerRows.checksum(record) else { return nil }
            sum &+= checksum
        }
        return sum
    }

    /// Reads record `n` by id in its own read transaction.
    public func read(_ n: Int) async throws {
        let (_, collection) = try opened()
        guard let record = try await collection.get(.int(Int64(n) + 1)) else { throw BenchError("\(displayName): record \(n) is missing.") }
        last = record
    }

    /// The checksum of the last point read.
    public func lastReadChecksum() -> Int64? { last.flatMap(IntegerRows.checksum) }

    /// GDBM: waits for the journal folds (``GDBMDriver/waitForFolds()``); the other drivers
    /// leave no background work behind an insert this large.
    public func settle() async throws {
        if let gdbm = store?.driver as? GDBMDriver { await gdbm.waitForFolds() }
    }

    /// Closes the store.
    public func close() async throws {
        let store = self.store
        self.store = nil
        collection = nil
        staged = []
        fetched = []
        try await store?.close()
    }
}

/// The typed-model targets of `engine`, Depot's first (Record, Codable, @Model), the raw
/// one last where the engine has one; empty for an engine they do not run on (`json`, whose
/// every commit rewrites the whole file, is left out).
public func modelTargets(_ engine: String) -> [any ModelBenchTarget] {
    guard engine != "json", let storeString = standardStoreString(engine) else { return [] }
    let settings: [String: String] = ["model": "id + 10 integer fields a … j", "collection": "integers (IntegerRecord.schema())"]
    var targets: [any ModelBenchTarget] = [
        DepotRecordModelTarget(engine: engine, settings: settings.merging(["api": "Store.write { tx.insert }, Collection.query, Collection.get"]) { $1 }, storeString: storeString),
        DepotModelTarget<IntegerRecord>(engine: engine, side: .codable, settings: settings.merging(["api": "Repository/TransactionRepository, Codable (RecordEncoder/RecordDecoder)"]) { $1 }, storeString: storeString),
        DepotModelTarget<GeneratedIntegerRecord>(engine: engine, side: .generated, settings: settings.merging(["api": "Repository/TransactionRepository, hand-written @Model expansion (FieldSink/FieldSource)"]) { $1 }, storeString: storeString),
    ]
    switch engine {
    #if canImport(CSQLite)
    case "sqlite": targets.append(RawSQLiteModelTarget())
    #endif
    #if canImport(CGDBM)
    case "gdbm": targets.append(RawGDBMModelTarget())
    #endif
    default: break
    }
    return targets
}
