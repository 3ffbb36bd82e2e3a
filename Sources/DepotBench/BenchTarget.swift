import DepotCore

/// Something `depot bench` measures: Depot over a driver, or an engine's raw API doing the
/// same work (the baseline of a ratio).
///
/// A target is used by one task at a time: `open`, the workloads, then `close`. Every
/// method does exactly one workload step, so timing around the call measures it.
/// Record `n` has id ``YCSB/key(_:)`` and fields `field0` … `field9` with values
/// ``YCSB/fields(record:)``.
public protocol BenchTarget: AnyObject {
    /// The engine, as in `--drivers`: `"sqlite"`, `"gdbm"`, `"json"`, `"memory"`.
    var engine: String { get }
    /// `true` for a raw baseline, `false` for Depot.
    var isBaseline: Bool { get }
    /// Engine settings printed beside the numbers (journal mode, synchronous, …).
    var settings: [String: String] { get }

    /// Creates an empty store in `directory` (which exists and is empty) with `durability`.
    /// - Throws: the engine's error.
    func open(directory: String, durability: Durability) async throws
    /// Closes the store and opens it again with `durability` (for the durable commits).
    /// - Throws: the engine's error.
    func reopen(durability: Durability) async throws
    /// Inserts records `range` in one transaction.
    /// - Throws: the engine's error.
    func insertBatch(_ range: Range<Int>, values: [[String]]) async throws
    /// Reads every record into memory; returns how many.
    /// - Throws: the engine's error.
    func fetchAll() async throws -> Int
    /// Runs one operation (its own transaction, or two for read-modify-write).
    /// - Throws: the engine's error, or ``BenchError`` when a record is missing.
    func run(_ operation: BenchOperation) async throws
    /// Inserts record `n` with `values` as one durable single-record transaction.
    /// - Throws: the engine's error.
    func durableInsert(_ n: Int, values: [String]) async throws
    /// Deletes record `n` in its own transaction.
    /// - Throws: the engine's error, or ``BenchError`` when the record is missing.
    func delete(_ n: Int) async throws
    /// Closes the store.
    /// - Throws: the engine's error.
    func close() async throws
    /// How long the target's writers have waited for its own background work since it was
    /// opened (GDBM: commits that waited for journal folds); `nil` when it has none to report.
    var writerWaits: WriterWaits? { get }
    /// Waits until the background work that the writes so far left behind is done (GDBM:
    /// the journal folds). The bulk insert's time includes it, so that a load's own work
    /// is counted in the load and does not run beside the workloads measured after it.
    /// - Throws: the engine's error.
    func settle() async throws
}

/// Commits that waited for a store's background work, counted since the store was opened.
public struct WriterWaits: Sendable, Hashable, Codable {
    /// How many commits waited.
    public var count: Int
    /// Their waits added up, in nanoseconds.
    public var nanoseconds: Double
    /// The longest one, in nanoseconds.
    public var longestNanoseconds: Double

    /// Waits that `count` commits made, `nanoseconds` in all, the longest `longestNanoseconds`.
    public init(count: Int, nanoseconds: Double, longestNanoseconds: Double) {
        self.count = count
        self.nanoseconds = nanoseconds
        self.longestNanoseconds = longestNanoseconds
    }
}

extension BenchTarget {
    /// No background work to report.
    public var writerWaits: WriterWaits? { nil }

    /// No background work to wait for: every write is done when its call returns.
    public func settle() async throws {}

    /// The name in tables: `sqlite` for Depot, `sqlite raw` for the baseline (`json floor`
    /// for the JSON driver's).
    public var displayName: String { isBaseline ? (engine == "json" ? "json floor" : "\(engine) raw") : engine }
}

/// A benchmark that could not do what it was asked: the data did not look as expected.
public struct BenchError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, safe to print.
    public var description: String

    /// An error saying `description`.
    public init(_ description: String) { self.description = description }
}
