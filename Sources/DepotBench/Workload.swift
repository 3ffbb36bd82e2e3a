import DepotCore

/// One workload of `depot bench`.
///
/// The YCSB core workloads follow YCSB's `workloads/workloada` … `workloadf` files:
///
/// | workload | operations | request distribution |
/// | --- | --- | --- |
/// | A | 50% read, 50% update | scrambled zipfian |
/// | B | 95% read, 5% update | scrambled zipfian |
/// | C | 100% read | scrambled zipfian |
/// | D | 95% read, 5% insert | latest |
/// | E | 95% scan (1–100 records), 5% insert | scrambled zipfian start |
/// | F | 50% read, 50% read-modify-write | scrambled zipfian |
///
/// An update writes one field (YCSB's default `writeallfields=false`); every operation is
/// its own transaction. A scan is the query `id >= key` sorted by id with a limit.
///
/// The typed-model workloads (`model-insert`, `model-fetch`, `model-point-reads`) store a
/// model of ten integer fields through Depot as untyped records, as a `Codable` model and as
/// an `@Model` model, and through the raw engine (``ModelBenchTarget``).
public enum Workload: String, Sendable, Hashable, CaseIterable, Codable {
    case bulkInsert = "bulk-insert"
    case bulkFetch = "bulk-fetch"
    case pointReads = "point-reads"
    case ycsbA = "ycsb-a"
    case ycsbB = "ycsb-b"
    case ycsbC = "ycsb-c"
    case ycsbF = "ycsb-f"
    case ycsbD = "ycsb-d"
    case ycsbE = "ycsb-e"
    case durableCommit = "durable-commit"
    /// Typed models inserted in one transaction (it also loads the typed-model collection).
    case modelInsert = "model-insert"
    /// Every typed model read by one query over the whole collection.
    case modelFetch = "model-fetch"
    /// Typed models read by uniformly random id, one transaction each.
    case modelPointReads = "model-point-reads"

    /// The order a round runs them in: loading first, then YCSB's recommended A, B, C, F,
    /// D, E (D and E insert records), then single durable commits; then the typed-model
    /// workloads (their insert loads their collection).
    public static let runOrder: [Workload] = [.bulkInsert, .bulkFetch, .pointReads, .ycsbA, .ycsbB, .ycsbC, .ycsbF, .ycsbD, .ycsbE, .durableCommit, .modelInsert, .modelFetch, .modelPointReads]

    /// The workload only reads (point reads, YCSB C): it changes nothing in the store.
    public var isReadOnly: Bool { self == .pointReads || self == .ycsbC }

    /// The workload's place in ``runOrder``, for sorting.
    var order: Int { Workload.runOrder.firstIndex(of: self) ?? Workload.runOrder.count }

    /// A short label for tables and charts.
    public var label: String {
        switch self {
        case .bulkInsert: "bulk insert"
        case .bulkFetch: "bulk fetch"
        case .pointReads: "point reads"
        case .ycsbA: "YCSB A"
        case .ycsbB: "YCSB B"
        case .ycsbC: "YCSB C"
        case .ycsbD: "YCSB D"
        case .ycsbE: "YCSB E"
        case .ycsbF: "YCSB F"
        case .durableCommit: "durable commit"
        case .modelInsert: "model insert"
        case .modelFetch: "model fetch"
        case .modelPointReads: "model point reads"
        }
    }

    /// What one operation of the workload is.
    public var unit: String {
        switch self {
        case .bulkInsert: "records inserted (batches of 10,000 per transaction)"
        case .bulkFetch: "records fetched by one query over the whole collection"
        case .pointReads: "gets by id, uniformly random, one transaction each"
        case .ycsbA, .ycsbB, .ycsbC, .ycsbD, .ycsbE, .ycsbF: "YCSB operations, one transaction each"
        case .durableCommit: "single-record insert transactions at durability full"
        case .modelInsert: "models of 10 integer fields inserted in one transaction"
        case .modelFetch: "models fetched by one query over the whole collection"
        case .modelPointReads: "gets of one model by id, uniformly random, one transaction each"
        }
    }

    /// The workloads named in a comma-separated `list` (`"point-reads,ycsb-c"`), in run order,
    /// with the load of what they read always included: the bulk insert when a record
    /// workload is named, the model insert when a typed-model workload is.
    /// - Throws: ``BenchError`` for a name that is not a workload's, or an empty list.
    public static func parseList(_ list: String) throws -> [Workload] {
        var chosen: Set<Workload> = []
        var named = 0
        for part in list.split(separator: ",") {
            let name = part.filter { !$0.isWhitespace }.lowercased()
            guard !name.isEmpty else { continue }
            guard let workload = Workload(rawValue: name) else {
                throw BenchError("Unknown workload '\(name)' in --workloads; known: \(runOrder.map(\.rawValue).joined(separator: ", ")).")
            }
            chosen.insert(workload)
            named += 1
        }
        guard named > 0 else { throw BenchError("--workloads names no workload.") }
        if chosen.contains(where: { !$0.isModel }) { chosen.insert(.bulkInsert) }
        if chosen.contains(where: \.isModel) { chosen.insert(.modelInsert) }
        return runOrder.filter(chosen.contains)
    }

    /// `true` for the typed-model workloads (run by ``ModelBenchTarget``s, not ``BenchTarget``s).
    public var isModel: Bool {
        switch self {
        case .modelInsert, .modelFetch, .modelPointReads: true
        default: false
        }
    }

    /// `true` for the YCSB core workloads.
    public var isYCSB: Bool {
        switch self {
        case .ycsbA, .ycsbB, .ycsbC, .ycsbD, .ycsbE, .ycsbF: true
        default: false
        }
    }
}

/// One operation of a generated workload, replayed identically on both sides of a ratio.
public enum BenchOperation: Sendable {
    /// Reads the record with number `n`.
    case read(Int)
    /// Sets one field of record `n` to `value`.
    case update(Int, field: Int, value: String)
    /// Inserts record number `n` (its fields come from ``YCSB/fields(record:)``).
    case insert(Int)
    /// Reads up to `count` records with ids `>= key(n)` in id order.
    case scan(Int, count: Int)
    /// Reads record `n`, then sets one of its fields (two transactions, as YCSB does).
    case readModifyWrite(Int, field: Int, value: String)
}

/// Makes the operation list of one workload for one round.
public struct OperationPlan: Sendable {
    /// The records loaded before the workload starts (record numbers `0..<records`).
    public var records: Int
    /// The records inserted by earlier workloads of the round (D and E insert).
    public var inserted: Int

    /// A plan over a collection of `records` loaded records, `inserted` more added since.
    public init(records: Int, inserted: Int = 0) {
        self.records = records
        self.inserted = inserted
    }

    /// The operations of `workload`, `count` of them, from `seed`. Returns them and how
    /// many records they insert.
    public func operations(_ workload: Workload, count: Int, seed: UInt64) -> (ops: [BenchOperation], inserts: Int) {
        var random = SplitMix64(seed: seed &* 0x2545_F491_4F6C_DD1D &+ UInt64(Workload.runOrder.firstIndex(of: workload) ?? 0))
        let existing = records + inserted
        var ops: [BenchOperation] = []
        ops.reserveCapacity(count)
        var next = existing
        var version: UInt64 = seed &* 1_000_003
        func newValue(_ n: Int, _ field: Int) -> String {
            version &+= 1
            return YCSB.value(record: n, field: field, version: version)
        }
        switch workload {
        case .pointReads:
            for _ in 0..<count { ops.append(.read(random.uniform(0...(existing - 1)))) }
        case .ycsbA, .ycsbB, .ycsbC, .ycsbF:
            var zipf = ScrambledZipfianGenerator(items: existing)
            let readShare: Double = workload == .ycsbA ? 0.5 : workload == .ycsbB ? 0.95 : workload == .ycsbC ? 1.0 : 0.5
            for _ in 0..<count {
                let n = zipf.next(&random)
                if random.nextUnit() < readShare {
                    ops.append(.read(n))
                } else {
                    let field = random.uniform(0...(YCSB.fieldCount - 1))
                    ops.append(workload == .ycsbF ? .readModifyWrite(n, field: field, value: newValue(n, field)) : .update(n, field: field, value: newValue(n, field)))
                }
            }
        case .ycsbD:
            var latest = SkewedLatestGenerator(items: existing)
            for _ in 0..<count {
                if random.nextUnit() < 0.95 {
                    ops.append(.read(latest.next(&random, items: next)))
                } else {
                    ops.append(.insert(next))
                    next += 1
                }
            }
        case .ycsbE:
            // YCSB sizes E's key chooser for the records expected after the inserts; keys
            // chosen past the current end simply start the scan near the end.
            var zipf = ScrambledZipfianGenerator(items: existing + count / 20 + 1)
            for _ in 0..<count {
                if random.nextUnit() < 0.95 {
                    ops.append(.scan(min(zipf.next(&random), next - 1), count: random.uniform(1...YCSB.maxScanLength)))
                } else {
                    ops.append(.insert(next))
                    next += 1
                }
            }
        case .bulkInsert, .bulkFetch, .durableCommit, .modelInsert, .modelFetch, .modelPointReads:
            break
        }
        return (ops, next - existing)
    }
}
