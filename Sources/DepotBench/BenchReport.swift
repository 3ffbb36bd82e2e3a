import Foundation

/// Everything one `depot bench` run measured, with the settings beside the numbers.
/// Encodes to the `--json` file.
public struct BenchReport: Codable, Sendable, Hashable {
    /// The run's settings: the same for every figure.
    public var settings: BenchSettings
    /// One entry per target and workload.
    public var results: [BenchResult]
    /// Peak RSS per target.
    public var memory: [MemoryResult]
    /// The streaming checks.
    public var streaming: [StreamingResult]
    /// Anything a reader must know to judge the figures.
    public var notes: [String]

    /// The result of `target` (`"sqlite"`, `"sqlite raw"`) for `workload`; with `clients`,
    /// its concurrent-read result at that many clients (`--clients`).
    public func result(_ target: String, _ workload: Workload, clients: Int? = nil) -> BenchResult? {
        results.first { $0.target == target && $0.workload == workload && $0.clients == clients }
    }
}

/// The settings of a run, printed beside its numbers.
public struct BenchSettings: Codable, Sendable, Hashable {
    public var date: String
    public var buildMode: String
    public var durability: String
    public var durableCommitDurability: String
    public var rounds: Int
    public var records: Int
    public var operations: Int
    public var fieldsPerRecord: Int
    public var bytesPerField: Int
    public var zipfianConstant: Double
    public var maxScanLength: Int
    public var quick: Bool
    public var processors: Int
    public var loadAverageAtStart: String
    /// Engine settings per target (journal mode, synchronous, API, …).
    public var targets: [String: [String: String]]
    /// Models the typed-model insert wrote in one transaction; `nil` when it did not run.
    public var modelInserts: Int? = nil
    /// Models in the collection of the typed-model fetch and point reads.
    public var modelRecords: Int? = nil
    /// Typed-model point reads per round.
    public var modelReads: Int? = nil
}

/// One target's figures for one workload.
public struct BenchResult: Codable, Sendable, Hashable {
    /// The engine (`sqlite`, `gdbm`, `json`, `memory`).
    public var driver: String
    /// `"sqlite"` for Depot over the driver, `"sqlite raw"` for the baseline.
    public var target: String
    /// `true` for the raw baseline.
    public var baseline: Bool
    public var workload: Workload
    /// Records loaded before the workloads.
    public var records: Int
    /// Operations per round.
    public var operations: Int
    /// Median over rounds of operations per second.
    public var opsPerSecond: Double
    /// Each round's operations per second.
    public var roundOpsPerSecond: [Double]
    /// Median latency of one operation, nanoseconds, over all rounds (`nil` for bulk workloads).
    public var p50Nanoseconds: UInt64?
    /// 99th percentile latency, nanoseconds.
    public var p99Nanoseconds: UInt64?
    /// 99.9th percentile latency, nanoseconds (the record workloads; `nil` elsewhere).
    public var p999Nanoseconds: UInt64? = nil
    /// The slowest single operation over all rounds, nanoseconds (the record workloads).
    public var maxNanoseconds: UInt64? = nil
    /// For Depot: the median over rounds of (Depot's time ÷ raw time) for the same
    /// operations; `2.0` means Depot took twice as long. `nil` without a baseline.
    public var ratioToRaw: Double?
    /// Each round's ratio.
    public var roundRatios: [Double]?
    /// For the typed-model workloads: `"Record"`, `"Codable"`, `"@Model"` or `"raw"`
    /// (``ModelSide``); `nil` for the record workloads.
    public var side: String? = nil
    /// For the Codable and `@Model` sides of the typed-model workloads: the median over
    /// rounds of (their time ÷ the Record side's time) for the same operations.
    public var ratioToRecord: Double? = nil
    /// Each round's ratio to the Record side.
    public var roundRatiosToRecord: [Double]? = nil
    /// For the concurrent reads (`--clients`): how many clients shared the operations;
    /// `nil` for the single-client workloads.
    public var clients: Int? = nil
    /// For the concurrent reads: the median over rounds of (this throughput ÷ the same
    /// target's throughput with 1 client); `2.0` means twice as many reads per second.
    public var scalingToOneClient: Double? = nil
    /// Each round's scaling.
    public var roundScalingToOneClient: [Double]? = nil
}

/// The peak resident set of one target over all its rounds.
public struct MemoryResult: Codable, Sendable, Hashable {
    public var target: String
    /// Largest `VmHWM` seen after resetting it before each of the target's rounds.
    public var peakRSSBytes: Int?
    /// How it was measured.
    public var method: String
}

/// The streaming check of one driver: a query over many records read as a stream.
public struct StreamingResult: Codable, Sendable, Hashable {
    public var driver: String
    public var records: Int
    public var recordsRead: Int
    public var seconds: Double
    /// RSS when the stream started.
    public var startRSSBytes: Int?
    /// Peak RSS while streaming.
    public var peakRSSBytes: Int?
    /// Where the stream was measured: `"fresh process"` (peak over the whole process, from
    /// its start) or `"this process"` (peak reset just before the stream); `nil` in reports
    /// written before the field existed (this process).
    public var measuredIn: String?
    public var limitBytes: Int
    /// `true` when every record came and the peak stayed under the limit.
    public var passed: Bool
}

extension BenchReport {
    /// The figures as a terminal table: one line per workload and target, then the
    /// ratios, memory and streaming checks, with the settings on top.
    public func table() -> String {
        var lines: [String] = []
        let s = settings
        lines.append("depot bench — \(s.buildMode) build, durability \(s.durability) (durable commits: \(s.durableCommitDurability)), \(s.rounds) round(s), \(s.records) records of \(s.fieldsPerRecord) fields × \(s.bytesPerField) bytes, \(s.operations) operations, zipfian \(s.zipfianConstant), \(s.processors) CPUs, load average at start \(s.loadAverageAtStart)")
        if let inserts = s.modelInserts, let records = s.modelRecords, let reads = s.modelReads {
            lines.append("  typed models (id + 10 integer fields): insert \(BenchReport.grouped(inserts)) in one transaction, fetch \(BenchReport.grouped(records)) with one query, \(BenchReport.grouped(reads)) point reads of one transaction each")
        }
        for (target, values) in s.targets.sorted(by: { $0.key < $1.key }) {
            lines.append("  \(target): " + values.sorted(by: { $0.key < $1.key }).map { "\($0.key)=\($0.value)" }.joined(separator: "; "))
        }
        lines.append("")
        let toRecord = results.contains { $0.ratioToRecord != nil }
        var header = [pad("workload", 17), pad("target", 14), lpad("records", 8), lpad("ops", 7), lpad("ops/s", 12), lpad("p50", 10), lpad("p99", 10), lpad("p99.9", 10), lpad("max", 10), lpad("÷ raw", 8), lpad("rounds", 11)]
        if toRecord { header.append(lpad("÷ Record", 9)) }
        lines.append(header.joined(separator: " "))
        lines.append(String(repeating: "-", count: header.joined(separator: " ").count))
        for workload in Workload.runOrder {
            let rows = results.filter { $0.workload == workload && $0.clients == nil }
            for r in rows {
                var cells = [pad(workload.label, 17), pad(r.target, 14), lpad(String(r.records), 8), lpad(String(r.operations), 7), lpad(BenchReport.rate(r.opsPerSecond), 12),
                             lpad(r.p50Nanoseconds.map(BenchReport.duration) ?? "-", 10), lpad(r.p99Nanoseconds.map(BenchReport.duration) ?? "-", 10),
                             lpad(r.p999Nanoseconds.map(BenchReport.duration) ?? "-", 10), lpad(r.maxNanoseconds.map(BenchReport.duration) ?? "-", 10),
                             lpad(r.ratioToRaw.map { String(format: "%.2f×", $0) } ?? "", 8), lpad(BenchReport.range(r.roundRatios), 11)]
                if toRecord { cells.append(lpad(r.ratioToRecord.map { String(format: "%.2f×", $0) } ?? "", 9)) }
                lines.append(cells.joined(separator: " "))
            }
        }
        let concurrent = results.filter { $0.clients != nil }
        if !concurrent.isEmpty {
            lines.append("")
            lines.append("concurrent reads (--clients): the same reads split among N clients (Depot: N tasks, one store; raw: N threads, one connection each)")
            let head = [pad("workload", 17), pad("target", 14), lpad("clients", 8), lpad("ops", 7), lpad("ops/s", 12), lpad("p50", 10), lpad("p99", 10), lpad("÷ raw", 8), lpad("rounds", 11), lpad("× 1 client", 11)]
            lines.append(head.joined(separator: " "))
            lines.append(String(repeating: "-", count: head.joined(separator: " ").count))
            for r in concurrent {
                lines.append([pad(r.workload.label, 17), pad(r.target, 14), lpad(r.clients.map(String.init) ?? "", 8), lpad(String(r.operations), 7), lpad(BenchReport.rate(r.opsPerSecond), 12),
                              lpad(r.p50Nanoseconds.map(BenchReport.duration) ?? "-", 10), lpad(r.p99Nanoseconds.map(BenchReport.duration) ?? "-", 10),
                              lpad(r.ratioToRaw.map { String(format: "%.2f×", $0) } ?? "", 8), lpad(BenchReport.range(r.roundRatios), 11), lpad(r.scalingToOneClient.map { String(format: "%.2f×", $0) } ?? "", 11)].joined(separator: " "))
            }
        }
        if !memory.isEmpty {
            lines.append("")
            lines.append("peak RSS per target: " + memory.map { "\($0.target) \($0.peakRSSBytes.map(BenchReport.bytes) ?? "?")" }.joined(separator: ", ") + " (\(memory.first?.method ?? ""))")
        }
        for check in streaming {
            lines.append("streaming check, \(check.driver): \(check.recordsRead) of \(check.records) records in \(String(format: "%.1f", check.seconds)) s\(check.measuredIn.map { " (\($0))" } ?? ""), RSS \(check.startRSSBytes.map(BenchReport.bytes) ?? "?") at start, peak \(check.peakRSSBytes.map(BenchReport.bytes) ?? "?") (limit \(BenchReport.bytes(check.limitBytes))): \(check.passed ? "PASS" : "FAIL")")
        }
        for note in notes { lines.append("note: " + note) }
        return lines.joined(separator: "\n")
    }


    /// The lowest and the highest of a Depot row's per-round ratios to raw (`1.03–1.26`), so
    /// a reader sees how far the rounds spread around the median in the `÷ raw` column;
    /// empty for a raw row and for a single round.
    package static func range(_ ratios: [Double]?) -> String {
        guard let ratios, ratios.count > 1, let low = ratios.min(), let high = ratios.max() else { return "" }
        return String(format: "%.2f–%.2f", low, high)
    }

    /// `12,345` style operations per second.
    static func rate(_ value: Double) -> String {
        if value >= 100 { return grouped(Int(value.rounded())) }
        return String(format: "%.1f", value)
    }

    static func grouped(_ value: Int) -> String {
        let digits = String(value)
        var out = ""
        for (i, c) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return out
    }

    /// A latency in the unit that reads best.
    static func duration(_ ns: UInt64) -> String {
        if ns < 1_000 { return "\(ns) ns" }
        if ns < 1_000_000 { return String(format: "%.1f µs", Double(ns) / 1_000) }
        if ns < 1_000_000_000 { return String(format: "%.2f ms", Double(ns) / 1_000_000) }
        return String(format: "%.2f s", Double(ns) / 1_000_000_000)
    }

    static func bytes(_ n: Int) -> String { String(format: "%.1f MB", Double(n) / 1_048_576) }

    /// The report as pretty JSON.
    /// - Throws: an encoding error (not expected: every figure is finite).
    public func jsonData() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return try encoder.encode(self)
    }
}

private func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
private func lpad(_ s: String, _ n: Int) -> String { s.count >= n ? s : String(repeating: " ", count: n - s.count) + s }
