import DepotCore

/// Everything `depot bench` can be told; the defaults are those of a full run.
///
/// ```swift
/// var options = BenchOptions()
/// options.drivers = ["sqlite", "memory"]
/// options.quick = true
/// let report = try await runBench(options) { print($0) }
/// ```
public struct BenchOptions: Sendable, Hashable {
    /// Engines to measure, as in `--drivers`: `sqlite`, `gdbm`, `json`, `memory`.
    public var drivers: [String] = ["sqlite", "gdbm", "json", "memory"]
    /// Engines whose targets the caller supplies (``runBench(_:external:output:)``), for
    /// drivers outside the `Depot` module: `postgres` from `depot bench --postgres URL`.
    public var externalDrivers: Set<String> = []
    /// Rounds; every target runs every workload once per round, targets interleaved.
    public var rounds = 5
    /// Records loaded before the workloads (YCSB's `recordcount`).
    public var records = 100_000
    /// Operations per YCSB workload and for point reads (YCSB's `operationcount`).
    public var operations = 10_000
    /// Durability of every store, on both sides of every ratio. The durable-commit
    /// workload always runs at `full`.
    public var durability: Durability = .normal
    /// Workloads to report (the bulk insert always runs: it loads the data).
    public var workloads: [Workload] = Workload.runOrder
    /// Single-record durable commits per round.
    public var durableCommits = 50
    /// Models the typed-model insert writes in one transaction (`model-insert`).
    public var modelInserts = 50_000
    /// Models in the collection the typed-model fetch reads with one query (`model-fetch`);
    /// the insert's are topped up to this many, untimed. At least ``modelInserts``.
    public var modelRecords = 200_000
    /// Typed-model point reads per round (`model-point-reads`), each its own transaction.
    public var modelReads = 300_000
    /// The JSON driver rewrites its whole file on every commit, so it gets at most this
    /// many records (both sides of its ratio); `--json-records` sets it.
    public var jsonRecordLimit = 1_000
    /// At most this many operations per workload that writes, for the JSON driver (a write
    /// rewrites the file); read-only workloads run their full count, as on every driver.
    public var jsonOperationLimit = 500
    /// At most this many workload E operations on engines without key order (gdbm), whose
    /// every scan walks the whole collection.
    public var unorderedScanLimit = 100
    /// Records streamed by the streaming check; `0` skips it.
    public var streamingRecords = 1_000_000
    /// The streaming check passes when peak RSS stays under this many bytes.
    public var streamingLimitBytes = 64 << 20
    /// The program (and its leading arguments) that measures the streaming check's stream in
    /// a fresh process: it is run with the store string appended, and prints a
    /// ``StreamMeasurement`` as one line of JSON on standard output (`depot bench` runs itself
    /// with `bench --stream-store`). The peak is then the whole process's, from its start.
    /// `nil`: the stream is measured in this process, from a peak reset just before it.
    public var streamingCommand: [String]?
    /// Where stores are made (a new directory inside it); the system's temporary
    /// directory when `nil`. Removed afterwards.
    public var directory: String?
    /// Write the report as JSON here.
    public var jsonPath: String?
    /// Write the bar chart as SVG here.
    public var chartPath: String?
    /// A smoke run that finishes in under a minute (see ``effective``).
    public var quick = false
    /// Seed of every operation sequence (round `r` uses `seed + r`).
    public var seed: UInt64 = 42
    /// Client counts of the concurrent reads (`--clients`): point reads and YCSB C run again
    /// with the same reads split among N concurrent clients, for each N here and for 1 (the
    /// base of the scaling figure). `[1]` or `[]` turns them off. Depot's clients are tasks
    /// sharing one store; a raw baseline's are threads with a connection each.
    public var clients: [Int] = [1, 2, 4]

    /// The default options of a full run.
    public init() {}

    /// The options actually used: with ``quick``, 1 round of 2,000 records, 300 operations,
    /// 5 durable commits and a 100,000-record streaming check; the typed-model sizes are
    /// scaled by the same factors (records ÷ 50: 1,000 inserts and 4,000 fetched; operations
    /// ÷ 33: 9,000 point reads).
    public var effective: BenchOptions {
        guard quick else { return self }
        var copy = self
        copy.rounds = min(rounds, 1)
        copy.records = min(records, 2_000)
        copy.operations = min(operations, 300)
        copy.durableCommits = min(durableCommits, 5)
        copy.modelInserts = min(modelInserts, 1_000)
        copy.modelRecords = min(modelRecords, 4_000)
        copy.modelReads = min(modelReads, 9_000)
        copy.jsonRecordLimit = min(jsonRecordLimit, 500)
        copy.jsonOperationLimit = min(jsonOperationLimit, 100)
        copy.unorderedScanLimit = min(unorderedScanLimit, 30)
        copy.streamingRecords = min(streamingRecords, 100_000)
        return copy
    }

    /// The client counts the concurrent reads run, ascending and with 1 among them; empty
    /// when ``clients`` names no count above 1.
    public var clientCounts: [Int] {
        let counts = Set(clients + [1])
        return counts.count > 1 ? counts.sorted() : []
    }

    /// Records loaded for `engine`.
    public func records(for engine: String) -> Int {
        engine == "json" ? min(records, jsonRecordLimit) : records
    }

    /// Engines whose scans walk the ids in order instead of the whole collection (SQLite's
    /// index, the memory driver's ordered ids, the JSON driver's records in id order): YCSB
    /// E runs its full operation count there (JSON within its cap on workloads that write).
    static let keyOrderedEngines: Set<String> = ["sqlite", "memory", "json"]

    /// Operations of `workload` for `engine`.
    public func operations(_ workload: Workload, for engine: String) -> Int {
        var count = operations
        if engine == "json", !workload.isReadOnly { count = min(count, jsonOperationLimit) }
        if workload == .ycsbE, !Self.keyOrderedEngines.contains(engine) { count = min(count, unorderedScanLimit) }
        return count
    }

    /// Checks the values.
    /// - Throws: ``BenchError`` naming the bad option.
    public func validate() throws {
        let known: Set<String> = Set(["sqlite", "gdbm", "json", "memory"]).union(externalDrivers)
        guard !drivers.isEmpty else { throw BenchError("--drivers names no driver.") }
        for driver in drivers where !known.contains(driver) {
            throw BenchError("Unknown driver '\(driver)' in --drivers; known: \(known.sorted().joined(separator: ", ")).")
        }
        guard rounds >= 1 else { throw BenchError("--rounds must be at least 1.") }
        guard records >= 10 else { throw BenchError("--records must be at least 10.") }
        guard operations >= 1 else { throw BenchError("--operations must be at least 1.") }
        guard durableCommits >= 1 else { throw BenchError("durable commits must be at least 1.") }
        guard modelInserts >= 1, modelReads >= 1 else { throw BenchError("model inserts and model reads must be at least 1.") }
        guard modelRecords >= modelInserts else { throw BenchError("model records must be at least the model inserts.") }
        guard streamingRecords >= 0 else { throw BenchError("streaming records must not be negative.") }
        for count in clients where !(1...64).contains(count) {
            throw BenchError("--clients takes counts from 1 to 64, not \(count).")
        }
    }
}

/// `"debug"` or `"release"`: how this code was compiled. Figures from debug builds mean little.
public var benchBuildMode: String {
    #if DEBUG
    return "debug"
    #else
    return "release"
    #endif
}
