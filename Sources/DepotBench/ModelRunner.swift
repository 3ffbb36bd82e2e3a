import DepotCore

/// What the typed-model workloads of one round read, made once per round so that every
/// target of the round does exactly the same work.
struct ModelRoundPlan: Sendable {
    /// Records loaded before the fetch and the point reads.
    var records: Int
    /// Records inserted by the timed insert (the first of them).
    var inserts: Int
    /// The record numbers the point reads get, in order.
    var reads: [Int]
    /// The checksum of each point read's record, in the same order.
    var expectedReads: [Int64]
    /// The sum of the checksums of all `records` records.
    var expectedFetch: Int64

    /// The plan of round `round`: uniformly random record numbers from a seeded generator.
    init(options: BenchOptions, round: Int) {
        records = options.modelRecords
        inserts = options.modelInserts
        var random = SplitMix64(seed: (options.seed &+ UInt64(round)) &* 0x9E37_79B9_7F4A_7C15 &+ 0x6D6F_6465_6C73)
        let count = options.workloads.contains(.modelPointReads) ? options.modelReads : 0
        let last = options.modelRecords - 1
        reads = (0..<count).map { _ in random.uniform(0...last) }
        var checksums: [Int64] = []
        checksums.reserveCapacity(options.modelRecords)
        for n in 0..<options.modelRecords { checksums.append(IntegerRows.expectedChecksum(n)) }
        expectedReads = reads.map { checksums[$0] }
        expectedFetch = checksums.reduce(0, &+)
    }
}

/// Runs the typed-model workloads once on `target`: the timed insert of `plan.inserts`
/// models in one transaction (with the store's background work for it,
/// ``ModelBenchTarget/settle()``), the untimed top-up to `plan.records` (transactions of
/// 50,000, then settled), the fetch, the point reads. Checks that the fetch read every
/// record with its values and that each point read read the right one.
/// - Throws: the target's errors; ``BenchError`` when a count or a value is wrong.
func measureModelRound(_ target: any ModelBenchTarget, plan: ModelRoundPlan, options: BenchOptions, directory: String) async throws -> [Workload: Measurement] {
    var out: [Workload: Measurement] = [:]
    let name = target.displayName
    try await target.open(directory: directory, durability: options.durability)
    do {
        target.stage(0..<plan.inserts)
        let t0 = monotonicNanoseconds()
        try await target.insertStaged()
        try await target.settle()
        out[.modelInsert] = Measurement(operations: plan.inserts, nanoseconds: Double(monotonicNanoseconds() - t0), histogram: LatencyHistogram())

        let fetches = options.workloads.contains(.modelFetch)
        let reads = !plan.reads.isEmpty
        if fetches || reads {
            var start = plan.inserts
            while start < plan.records {
                let end = min(start + 50_000, plan.records)
                target.stage(start..<end)
                try await target.insertStaged()
                start = end
            }
            target.stage(0..<0)
            try await target.settle()
        }

        if fetches {
            let t1 = monotonicNanoseconds()
            let count = try await target.fetchAll()
            let ns = monotonicNanoseconds() - t1
            guard count == plan.records else { throw BenchError("\(name): model fetch read \(count) of \(plan.records) records") }
            guard target.fetchedChecksum() == plan.expectedFetch else { throw BenchError("\(name): model fetch read wrong values") }
            out[.modelFetch] = Measurement(operations: count, nanoseconds: Double(ns), histogram: LatencyHistogram())
        }

        if reads {
            var histogram = LatencyHistogram()
            var total: UInt64 = 0
            for (n, expected) in zip(plan.reads, plan.expectedReads) {
                let t = monotonicNanoseconds()
                try await target.read(n)
                let ns = monotonicNanoseconds() - t
                histogram.record(ns)
                total += ns
                guard target.lastReadChecksum() == expected else { throw BenchError("\(name): the point read of record \(n) read wrong values") }
            }
            out[.modelPointReads] = Measurement(operations: plan.reads.count, nanoseconds: Double(total), histogram: histogram)
        }
    } catch {
        try? await target.close()
        throw error
    }
    try await target.close()
    return out
}

/// The typed-model results of one engine's targets: ops/s per target and workload, the
/// ratio to the raw target (where the engine has one) and, for the Codable and `@Model`
/// sides, the ratio to the Record side; each ratio taken round by round, then the median.
func modelResults(engine: String, targets: [any ModelBenchTarget], measured: [String: [Workload: [Measurement]]], options: BenchOptions) -> [BenchResult] {
    var results: [BenchResult] = []
    let raw = targets.first { $0.side == .raw }
    let record = targets.first { $0.side == .record }
    func ratios(_ rounds: [Measurement], _ other: (any ModelBenchTarget)?, _ workload: Workload) -> [Double]? {
        guard let other, let otherRounds = measured[other.displayName]?[workload], otherRounds.count == rounds.count else { return nil }
        return zip(rounds, otherRounds).map { $0.nanoseconds / max($1.nanoseconds, 1) }
    }
    for target in targets {
        for workload in Workload.runOrder where workload.isModel && options.workloads.contains(workload) {
            guard let rounds = measured[target.displayName]?[workload], !rounds.isEmpty else { continue }
            var histogram = LatencyHistogram()
            for m in rounds { histogram.merge(m.histogram) }
            let toRaw = target.side == .raw ? nil : ratios(rounds, raw, workload)
            let toRecord = target.side == .codable || target.side == .generated ? ratios(rounds, record, workload) : nil
            let rates = rounds.map(\.opsPerSecond)
            var result = BenchResult(
                driver: engine, target: target.displayName, baseline: target.side == .raw, workload: workload,
                records: options.modelRecords, operations: rounds[0].operations,
                opsPerSecond: median(rates), roundOpsPerSecond: rates,
                p50Nanoseconds: histogram.count > 0 ? histogram.value(atPercentile: 50) : nil,
                p99Nanoseconds: histogram.count > 0 ? histogram.value(atPercentile: 99) : nil,
                ratioToRaw: toRaw.map(median), roundRatios: toRaw)
            result.side = target.side.rawValue
            result.ratioToRecord = toRecord.map(median)
            result.roundRatiosToRecord = toRecord
            results.append(result)
        }
    }
    return results
}
