import Depot
import DepotConformance
import DepotCore
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs `depot bench`: every workload against every selected driver through Depot and,
/// in the same run, against the engine's raw API, rounds interleaved; then the streaming
/// check. Prints progress and the table through `output`, writes `--json` and `--chart`.
///
/// Ratios are taken round by round (Depot's time ÷ the raw time for the same operations
/// in the same round), then the median over rounds is reported; ops/s is the median over
/// rounds too. Within a round the targets alternate order (Depot first in odd rounds, raw
/// first in even ones) so neither side always runs on a warmer or cooler machine.
///
/// - Throws: ``BenchError`` for bad options; a driver's ``DepotError``; file errors
///   writing the JSON or the chart.
public func runBench(_ options: BenchOptions, output: (String) -> Void) async throws -> BenchReport {
    try await runBench(options, external: [:], output: output)
}

/// ``runBench(_:output:)`` with engines whose Depot and raw targets the caller makes
/// (their names also in ``BenchOptions/externalDrivers``): `depot bench --drivers postgres`.
public func runBench(_ options: BenchOptions, external: [String: () throws -> [any BenchTarget]], output: (String) -> Void) async throws -> BenchReport {
    try options.validate()
    let options = options.effective
    let base = try makeBenchDirectory(options.directory)
    defer { try? FileManager.default.removeItem(atPath: base) }

    let recordWorkloads = options.workloads.contains { !$0.isModel }
    let modelWorkloads = options.workloads.contains(where: \.isModel)
    var pairs: [(engine: String, targets: [any BenchTarget])] = []
    // The typed-model targets of each engine (Record, Codable, @Model, raw where there is one).
    var modelGroups: [String: [any ModelBenchTarget]] = [:]
    for engine in options.drivers {
        if let make = external[engine] {
            pairs.append((engine, recordWorkloads ? try make() : []))
            if modelWorkloads { output("skipping the typed-model workloads on \(engine)") }
            continue
        }
        guard let depot = try DepotStoreTarget.standard(engine) else { continue }
        guard DriverRegistry.standard.schemes.contains(engine) else {
            output("skipping \(engine): this build of depot has no \(engine) driver")
            continue
        }
        var targets: [any BenchTarget] = [depot]
        if let raw = rawBaseline(engine) { targets.append(raw) }
        pairs.append((engine, recordWorkloads ? targets : []))
        if modelWorkloads {
            let models = modelTargets(engine)
            if models.isEmpty { output("skipping the typed-model workloads on \(engine)") } else { modelGroups[engine] = models }
        }
    }
    guard pairs.contains(where: { !$0.targets.isEmpty || modelGroups[$0.engine] != nil }) else {
        throw BenchError("None of the drivers \(options.drivers.joined(separator: ", ")) is in this build\(recordWorkloads ? "" : " with the typed-model workloads").")
    }

    let loadAverage = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ") ?? "unknown"
    output("depot bench: \(benchBuildMode) build, \(options.rounds) round(s), \(options.records) records, \(options.operations) operations, durability \(options.durability.rawValue); load average \(loadAverage)")
    if benchBuildMode == "debug" { output("warning: this is a debug build; build with -c release for figures that mean something") }

    // The streaming check runs first. With a streaming command (depot bench), the stream
    // runs in a fresh process, so its peak is that process's whole peak and nothing this
    // process loaded before counts; without one, the peak is reset just before the stream.
    var failures: [String: String] = [:]
    var streaming: [StreamingResult] = []
    if options.streamingRecords > 0 {
        let streamed = pairs.filter { $0.engine == "gdbm" } + pairs.filter { $0.engine == "sqlite" }
        for pair in streamed {
            output("streaming check, \(pair.engine): loading \(options.streamingRecords) records")
            do {
                streaming.append(try await streamingCheck(engine: pair.engine, options: options, base: base))
            } catch {
                failures["streaming check, \(pair.engine)"] = "\(error)"
                output("streaming check, \(pair.engine): FAILED: \(error)")
            }
        }
    }

    // [target display name: [workload: per-round measurements]]
    var measured: [String: [Workload: [Measurement]]] = [:]
    var peaks: [String: Int] = [:]
    var recordsUsed: [String: Int] = [:]
    var operationsUsed: [String: [Workload: Int]] = [:]
    // [target display name: [workload and clients: per-round measurements]] (--clients)
    var concurrentMeasured: [String: [ClientsKey: [Measurement]]] = [:]
    var settings: [String: [String: String]] = [:]
    // [engine: [model target display name: [workload: per-round measurements]]]
    var modelMeasured: [String: [String: [Workload: [Measurement]]]] = [:]
    for round in 1...options.rounds {
        for pair in pairs {
            let ordered = round % 2 == 1 ? pair.targets : pair.targets.reversed()
            for target in ordered where failures[target.displayName] == nil {
                let name = target.displayName
                let directory = base + "/r\(round)-" + name.replacingOccurrences(of: " ", with: "-")
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                trimMalloc()
                ProcessMemory.resetPeak()
                let started = monotonicNanoseconds()
                let result: (records: Int, measurements: [Workload: Measurement], concurrent: [ClientsKey: Measurement])
                do {
                    result = try await measureRound(target, options: options, round: round, directory: directory)
                } catch {
                    // One failing target must not lose the others' figures: report it and go on.
                    failures[name] = "\(error)"
                    output("round \(round)/\(options.rounds) \(name): FAILED: \(error)")
                    try? FileManager.default.removeItem(atPath: directory)
                    continue
                }
                if let peak = ProcessMemory.peakResidentBytes() { peaks[name] = max(peaks[name] ?? 0, peak) }
                try? FileManager.default.removeItem(atPath: directory)
                for (workload, m) in result.measurements { measured[name, default: [:]][workload, default: []].append(m) }
                for (key, m) in result.concurrent { concurrentMeasured[name, default: [:]][key, default: []].append(m) }
                recordsUsed[name] = result.records
                operationsUsed[name] = result.measurements.mapValues(\.operations)
                settings[name] = target.settings
                output("round \(round)/\(options.rounds) \(name): \(String(format: "%.1f", Double(monotonicNanoseconds() - started) / 1e9)) s")
            }
            guard let models = modelGroups[pair.engine] else { continue }
            // The typed-model targets, each round starting one further along the list.
            let shift = (round - 1) % models.count
            let plan = ModelRoundPlan(options: options, round: round)
            for target in Array(models[shift...] + models[..<shift]) {
                let name = target.displayName, key = modelKey(target)
                if failures[key] != nil { continue }
                let directory = base + "/r\(round)-models-" + name.replacingOccurrences(of: " ", with: "-").replacingOccurrences(of: "@", with: "")
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                trimMalloc()
                ProcessMemory.resetPeak()
                let started = monotonicNanoseconds()
                let result: [Workload: Measurement]
                do {
                    result = try await measureModelRound(target, plan: plan, options: options, directory: directory)
                } catch {
                    failures[key] = "\(error)"
                    output("round \(round)/\(options.rounds) \(key): FAILED: \(error)")
                    try? FileManager.default.removeItem(atPath: directory)
                    continue
                }
                if let peak = ProcessMemory.peakResidentBytes() { peaks[key] = max(peaks[key] ?? 0, peak) }
                try? FileManager.default.removeItem(atPath: directory)
                for (workload, m) in result { modelMeasured[pair.engine, default: [:]][name, default: [:]][workload, default: []].append(m) }
                settings[key] = target.settings
                output("round \(round)/\(options.rounds) \(key): \(String(format: "%.1f", Double(monotonicNanoseconds() - started) / 1e9)) s")
            }
        }
    }

    var results: [BenchResult] = []
    for pair in pairs {
        for target in pair.targets {
            let name = target.displayName
            if failures[name] != nil { continue }
            for workload in Workload.runOrder where options.workloads.contains(workload) {
                guard let rounds = measured[name]?[workload], !rounds.isEmpty else { continue }
                var histogram = LatencyHistogram()
                for m in rounds { histogram.merge(m.histogram) }
                var ratio: Double?
                var roundRatios: [Double]?
                if !target.isBaseline, let raw = pair.targets.first(where: \.isBaseline), let rawRounds = measured[raw.displayName]?[workload], rawRounds.count == rounds.count {
                    let ratios = zip(rounds, rawRounds).map { $0.nanoseconds / max($1.nanoseconds, 1) }
                    roundRatios = ratios
                    ratio = median(ratios)
                }
                let rates = rounds.map(\.opsPerSecond)
                results.append(BenchResult(
                    driver: pair.engine, target: name, baseline: target.isBaseline, workload: workload,
                    records: recordsUsed[name] ?? 0, operations: rounds[0].operations,
                    opsPerSecond: median(rates), roundOpsPerSecond: rates,
                    p50Nanoseconds: histogram.count > 0 ? histogram.value(atPercentile: 50) : nil,
                    p99Nanoseconds: histogram.count > 0 ? histogram.value(atPercentile: 99) : nil,
                    p999Nanoseconds: histogram.count > 0 ? histogram.value(atPercentile: 99.9) : nil,
                    maxNanoseconds: histogram.count > 0 ? histogram.max : nil,
                    ratioToRaw: ratio, roundRatios: roundRatios))
            }
        }
        results += concurrentResults(engine: pair.engine, targets: pair.targets.filter { failures[$0.displayName] == nil }, measured: concurrentMeasured, records: recordsUsed)
        if let models = modelGroups[pair.engine] {
            let succeeded = models.filter { failures[modelKey($0)] == nil }
            results += modelResults(engine: pair.engine, targets: succeeded, measured: modelMeasured[pair.engine] ?? [:], options: options)
        }
    }

    var notes: [String] = [
        "ops/s and ratios are medians over rounds; a ratio is Depot's time ÷ the raw time for the same operations in the same round (1.00× = as fast as raw, 2.00× = twice the time); the rounds column gives the lowest and the highest of the rounds' ratios.",
        "p50/p99/p99.9 are per operation over all rounds (a log-linear histogram, ≤ 3% low), max the slowest single operation; bulk insert and bulk fetch have none (one transaction or query).",
        "Through Depot each YCSB operation is its own transaction through Store/Collection, run on the calling task's thread when the driver can take its locks or connection right away (GDBM and SQLite reads, and their writes at durability normal; memory; JSON reads of an unchanged file), else handed to a driver thread (Docs/Architecture.md); a Depot update of one field is a partial update (Collection.update(id, FieldChange)): one UPDATE in place on SQLite and PostgreSQL, the stored bytes changed in place on GDBM (fields copied, no record decoded), read + change + write on memory and JSON; F's read-modify-write is a get, then an update of the whole record. Raw SQLite and PostgreSQL update one column with one UPDATE; raw GDBM fetches, decodes, changes and stores.",
        "Workload E scans are the query id >= key sorted by id with a limit: SQL ORDER BY/LIMIT on SQLite (both sides); the memory and JSON drivers walk their ids in order (the JSON floor sorts the keys at or past the start on each scan); gdbm walks the whole collection per scan on both sides, so E there runs at most \(options.unorderedScanLimit) operations.",
        "The JSON driver rewrites its whole file per commit, so it is measured with at most \(options.jsonRecordLimit) records and \(options.jsonOperationLimit) operations per workload that writes (point reads and YCSB C run their full count), against the floor: JSONText-encoding each changed record (texts of unchanged records kept) and writing the whole file the same atomic way.",
        "Peak RSS: /proc/self/status VmHWM, reset through /proc/self/clear_refs (after malloc_trim) before each of a target's rounds; it includes the process's own baseline.",
        options.streamingCommand == nil
            ? "Streaming check: \(options.streamingRecords) records of 3 fields loaded, then streamed through the query n >= 0 in this process; its peak is VmHWM reset just before the stream."
            : "Streaming check: \(options.streamingRecords) records of 3 fields loaded, then streamed through the query n >= 0 by a fresh process that opens the store; its peak is that process's whole VmHWM, from its start.",
    ]
    if results.contains(where: { $0.clients != nil }) {
        notes.append("Concurrent reads (--clients \(options.clientCounts.map(String.init).joined(separator: ","))): after the YCSB workloads, point reads and YCSB C run again with the same reads split round-robin among N clients: Depot's are N tasks sharing the open store, a raw baseline's N threads with one connection (GDBM: one GDBM_READER handle) each. ops/s = all reads ÷ the wall time until the last client finishes; × 1 client: that throughput ÷ the same target's with 1 client in the same round, median over rounds. Client counts run ascending in odd rounds, descending in even ones. \(ProcessInfo.processInfo.activeProcessorCount) CPUs.")
    }
    if !modelGroups.isEmpty {
        notes.append("Typed models (model insert, model fetch, model point reads): an integer id and 10 integer fields a … j. Record: Depot with untyped records (Store.write { tx.insert }, Collection.query, Collection.get); Codable: IntegerRecord, a Codable Model, through TransactionRepository.insert, Repository.all, Repository.find(id:); @Model: GeneratedIntegerRecord through the same calls, its StoredModel conformance the hand-written expansion of @Model (FieldSink/FieldSource, no Codable); raw: the engine's C API into a plain struct. Each point read is its own transaction on every side. ÷ Record: the side's time ÷ the Record side's time for the same operations in the same round, median over rounds.")
    }
    for pair in pairs {
        for target in pair.targets where failures[target.displayName] == nil {
            let name = target.displayName
            guard let perWorkload = measured[name] else { continue }
            var parts: [String] = []
            var longest = 0.0
            for workload in Workload.runOrder {
                let waits = (perWorkload[workload] ?? []).compactMap(\.waits)
                guard !waits.isEmpty else { continue }
                let count = waits.reduce(0) { $0 + $1.count }
                let total = waits.reduce(0) { $0 + $1.nanoseconds }
                longest = max(longest, waits.map(\.longestNanoseconds).max() ?? 0)
                parts.append(count == 0 ? "\(workload.label) 0" : "\(workload.label) \(count) (\(BenchReport.duration(UInt64(max(0, total)))) in all)")
            }
            guard !parts.isEmpty else { continue }
            notes.append("\(name): commits that waited for the store's background work (GDBM: journal folds past their bound, Docs/GDBMDriver.md \"Bounds\"), over all rounds: " + parts.joined(separator: ", ") + "; the longest wait \(BenchReport.duration(UInt64(longest))).")
        }
    }
    if benchBuildMode == "debug" { notes.append("DEBUG BUILD: these figures are not representative.") }
    for (name, error) in failures.sorted(by: { $0.key < $1.key }) { notes.append("FAILED: \(name): \(error); its figures are left out.") }
    var memory = pairs.flatMap(\.targets).map { MemoryResult(target: $0.displayName, peakRSSBytes: peaks[$0.displayName], method: "VmHWM after clear_refs, per target, max over rounds") }
    for pair in pairs {
        for target in modelGroups[pair.engine] ?? [] {
            memory.append(MemoryResult(target: modelKey(target), peakRSSBytes: peaks[modelKey(target)], method: "VmHWM after clear_refs, per target, max over rounds"))
        }
    }

    let formatter = ISO8601DateFormatter()
    let report = BenchReport(
        settings: BenchSettings(
            date: formatter.string(from: Date()), buildMode: benchBuildMode, durability: options.durability.rawValue, durableCommitDurability: "full",
            rounds: options.rounds, records: options.records, operations: options.operations, fieldsPerRecord: YCSB.fieldCount, bytesPerField: YCSB.fieldLength,
            zipfianConstant: YCSB.zipfianConstant, maxScanLength: YCSB.maxScanLength, quick: options.quick,
            processors: ProcessInfo.processInfo.activeProcessorCount, loadAverageAtStart: loadAverage, targets: settings,
            modelInserts: modelGroups.isEmpty ? nil : options.modelInserts,
            modelRecords: modelGroups.isEmpty ? nil : options.modelRecords,
            modelReads: modelGroups.isEmpty || !options.workloads.contains(.modelPointReads) ? nil : options.modelReads),
        results: results, memory: memory, streaming: streaming, notes: notes)
    output("")
    output(report.table())
    if let path = options.jsonPath {
        try report.jsonData().write(to: URL(fileURLWithPath: path))
        output("wrote \(path)")
    }
    if let path = options.chartPath {
        try Data(BenchChart(report: report).svg().utf8).write(to: URL(fileURLWithPath: path))
        output("wrote \(path)")
    }
    return report
}

/// The raw baseline of an engine in this build (`RawSQLiteTarget`, `RawGDBMTarget`,
/// `JSONFloorTarget`), `nil` when it has none.
public func rawBaseline(_ engine: String) -> (any BenchTarget)? {
    switch engine {
    #if canImport(CSQLite)
    case "sqlite": return RawSQLiteTarget()
    #endif
    #if canImport(CGDBM)
    case "gdbm": return RawGDBMTarget()
    #endif
    case "json": return JSONFloorTarget()
    default: return nil
    }
}

/// The name a typed-model target's failures, peak RSS and settings are kept under
/// (`"sqlite @Model (models)"`), apart from the record targets' (`"sqlite raw"` is both an
/// engine's record baseline and its typed-model one).
func modelKey(_ target: any ModelBenchTarget) -> String { target.displayName + " (models)" }

/// One workload's figures from one round of one target.
struct Measurement: Sendable {
    var operations: Int
    var nanoseconds: Double
    var histogram: LatencyHistogram
    /// Commits that waited for the store's background work during the workload (count and
    /// total; the longest is the target's, over the round).
    var waits: WriterWaits? = nil
    var opsPerSecond: Double { nanoseconds > 0 ? Double(operations) / (nanoseconds / 1e9) : 0 }
}

/// Loads the records, runs every workload once, returns what each took.
func measureRound(_ target: any BenchTarget, options: BenchOptions, round: Int, directory: String) async throws -> (records: Int, measurements: [Workload: Measurement], concurrent: [ClientsKey: Measurement]) {
    let engine = target.engine
    let records = options.records(for: engine)
    var out: [Workload: Measurement] = [:]
    var concurrent: [ClientsKey: Measurement] = [:]
    try await target.open(directory: directory, durability: options.durability)
    // The writer waits between `earlier` (a snapshot, nil: since open) and now.
    func waitsSince(_ earlier: WriterWaits?) -> WriterWaits? {
        guard let now = target.writerWaits else { return nil }
        return WriterWaits(count: now.count - (earlier?.count ?? 0), nanoseconds: now.nanoseconds - (earlier?.nanoseconds ?? 0), longestNanoseconds: now.longestNanoseconds)
    }
    do {
        // Bulk insert: batches of 10,000 records per transaction, values made before the clock
        // starts, then the store's background work for them (BenchTarget.settle) on the clock.
        var elapsed: UInt64 = 0
        var start = 0
        while start < records {
            let end = min(start + 10_000, records)
            let values = (start..<end).map(YCSB.fields(record:))
            let t0 = monotonicNanoseconds()
            try await target.insertBatch(start..<end, values: values)
            if end == records { try await target.settle() }
            elapsed += monotonicNanoseconds() - t0
            start = end
        }
        out[.bulkInsert] = Measurement(operations: records, nanoseconds: Double(elapsed), histogram: LatencyHistogram(), waits: waitsSince(nil))

        if options.workloads.contains(.bulkFetch) {
            let t0 = monotonicNanoseconds()
            let count = try await target.fetchAll()
            let ns = monotonicNanoseconds() - t0
            guard count == records else { throw BenchError("\(target.displayName): bulk fetch read \(count) of \(records) records") }
            out[.bulkFetch] = Measurement(operations: count, nanoseconds: Double(ns), histogram: LatencyHistogram())
        }

        var inserted = 0
        for workload in Workload.runOrder where workload == .pointReads || workload.isYCSB {
            guard options.workloads.contains(workload) else { continue }
            let plan = OperationPlan(records: records, inserted: inserted)
            let (ops, inserts) = plan.operations(workload, count: options.operations(workload, for: engine), seed: options.seed &+ UInt64(round))
            var histogram = LatencyHistogram()
            var total: UInt64 = 0
            let waitsBefore = target.writerWaits
            for op in ops {
                let t0 = monotonicNanoseconds()
                try await target.run(op)
                let ns = monotonicNanoseconds() - t0
                histogram.record(ns)
                total += ns
            }
            inserted += inserts
            out[workload] = Measurement(operations: ops.count, nanoseconds: Double(total), histogram: histogram, waits: waitsSince(waitsBefore))
        }

        if !options.clientCounts.isEmpty, let readers = target as? any ConcurrentReadTarget {
            concurrent = try await measureConcurrentReads(readers, options: options, round: round, records: records, inserted: inserted)
        }

        if options.workloads.contains(.durableCommit) {
            try await target.reopen(durability: .full)
            var histogram = LatencyHistogram()
            var total: UInt64 = 0
            let first = records + inserted + 1_000_000
            for i in 0..<options.durableCommits {
                let values = YCSB.fields(record: first + i)
                let t0 = monotonicNanoseconds()
                try await target.durableInsert(first + i, values: values)
                let ns = monotonicNanoseconds() - t0
                histogram.record(ns)
                total += ns
            }
            out[.durableCommit] = Measurement(operations: options.durableCommits, nanoseconds: Double(total), histogram: histogram, waits: waitsSince(nil))
        }
    } catch {
        try? await target.close()
        throw error
    }
    try await target.close()
    return (records, out, concurrent)
}

/// The `--clients` figures of one engine's targets: one result per target, read-only
/// workload and client count, with the ratio to the raw baseline at the same count and the
/// scaling over the same target's 1-client throughput, both medians of per-round ratios.
func concurrentResults(engine: String, targets: [any BenchTarget], measured: [String: [ClientsKey: [Measurement]]], records: [String: Int]) -> [BenchResult] {
    var results: [BenchResult] = []
    let raw = targets.first(where: \.isBaseline)
    for target in targets {
        let name = target.displayName
        guard let figures = measured[name] else { continue }
        let keys = figures.keys.sorted { ($0.workload.order, $0.clients) < ($1.workload.order, $1.clients) }
        for key in keys {
            guard let rounds = figures[key], !rounds.isEmpty else { continue }
            var histogram = LatencyHistogram()
            for m in rounds { histogram.merge(m.histogram) }
            var ratio: Double?, roundRatios: [Double]?
            if !target.isBaseline, let raw, let rawRounds = measured[raw.displayName]?[key], rawRounds.count == rounds.count {
                let ratios = zip(rounds, rawRounds).map { $0.nanoseconds / max($1.nanoseconds, 1) }
                roundRatios = ratios
                ratio = median(ratios)
            }
            var scaling: Double?, roundScaling: [Double]?
            if let single = figures[ClientsKey(workload: key.workload, clients: 1)], single.count == rounds.count {
                let ratios = zip(rounds, single).map { $0.opsPerSecond / max($1.opsPerSecond, 1e-9) }
                roundScaling = ratios
                scaling = median(ratios)
            }
            let rates = rounds.map(\.opsPerSecond)
            results.append(BenchResult(
                driver: engine, target: name, baseline: target.isBaseline, workload: key.workload,
                records: records[name] ?? 0, operations: rounds[0].operations,
                opsPerSecond: median(rates), roundOpsPerSecond: rates,
                p50Nanoseconds: histogram.value(atPercentile: 50), p99Nanoseconds: histogram.value(atPercentile: 99),
                ratioToRaw: ratio, roundRatios: roundRatios,
                clients: key.clients, scalingToOneClient: scaling, roundScalingToOneClient: roundScaling))
        }
    }
    return results
}

/// Loads `options.streamingRecords` small records into a fresh store, then streams them
/// through a query and watches the peak RSS: in a fresh process when
/// ``BenchOptions/streamingCommand`` is set, else in this one.
func streamingCheck(engine: String, options: BenchOptions, base: String) async throws -> StreamingResult {
    let directory = base + "/streaming-" + engine
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let storeString = engine == "sqlite" ? "sqlite:\(directory)/stream.sqlite?durability=normal" : "gdbm:\(directory)/stream-gdbm?durability=normal"
    let name = try CollectionName(streamingCollection)
    do {
        let store = try await Store.open(storeString, registry: .standard)
        var start = 0
        while start < options.streamingRecords {
            let end = min(start + 20_000, options.streamingRecords)
            let batch = start..<end
            try await store.write { tx in
                for n in batch {
                    try tx.insert(Record(id: .int(Int64(n)), fields: ["n": .int(Int64(n)), "name": .string("item \(n)"), "score": .double(Double(n) / 7)]), into: name)
                }
            }
            start = end
        }
        try await store.close()
    }
    let measured: StreamMeasurement
    let place: String
    if let command = options.streamingCommand, let program = command.first {
        let result = try await ChildProcess.run(program, Array(command.dropFirst()) + [storeString])
        guard result.status == .exited(0) else {
            throw BenchError("the streaming check's process ended with \(result.status): \(result.errorText.suffix(500))")
        }
        let line = result.outputText.split(separator: "\n").last.map(String.init) ?? ""
        do {
            measured = try JSONDecoder().decode(StreamMeasurement.self, from: Data(line.utf8))
        } catch {
            throw BenchError("the streaming check's process printed no measurement: \(line.prefix(200))")
        }
        place = "fresh process"
    } else {
        trimMalloc()
        measured = try await measureStream(storeString: storeString, resetPeak: true)
        place = "this process"
    }
    let passed = measured.recordsRead == options.streamingRecords && (measured.peakRSSBytes.map { $0 < options.streamingLimitBytes } ?? false)
    return StreamingResult(driver: engine, records: options.streamingRecords, recordsRead: measured.recordsRead, seconds: measured.seconds, startRSSBytes: measured.startRSSBytes, peakRSSBytes: measured.peakRSSBytes, measuredIn: place, limitBytes: options.streamingLimitBytes, passed: passed)
}

/// The collection the streaming check loads and streams.
let streamingCollection = "items"

/// What one stream of the streaming check measured (the JSON a streaming process prints).
public struct StreamMeasurement: Codable, Sendable, Hashable {
    /// Records the stream gave.
    public var recordsRead: Int
    /// Wall-clock seconds of the stream.
    public var seconds: Double
    /// RSS with the store open, just before the stream.
    public var startRSSBytes: Int?
    /// Peak RSS (`VmHWM`): since the reset when `resetPeak`, else since the process started.
    public var peakRSSBytes: Int?
}

/// Opens `storeString`, streams the streaming check's collection through its query
/// (`n >= 0`, every record) and measures it in this process.
/// - Parameter resetPeak: reset the RSS high-water mark just before the stream; `false`
///   in a process of its own, whose peak then covers its whole life.
/// - Throws: what opening the store or the stream throws.
public func measureStream(storeString: String, resetPeak: Bool) async throws -> StreamMeasurement {
    let store = try await Store.open(storeString, registry: .standard)
    let collection = store.collection(try CollectionName(streamingCollection))
    if resetPeak {
        trimMalloc()
        ProcessMemory.resetPeak()
    }
    let startRSS = ProcessMemory.residentBytes()
    let t0 = monotonicNanoseconds()
    var count = 0
    do {
        for try await record in try collection.stream(Query(filter: Field("n") >= 0)) {
            if case .int = record.id { count += 1 }
        }
    } catch {
        try? await store.close()
        throw error
    }
    let seconds = Double(monotonicNanoseconds() - t0) / 1e9
    let peak = ProcessMemory.peakResidentBytes()
    try await store.close()
    return StreamMeasurement(recordsRead: count, seconds: seconds, startRSSBytes: startRSS, peakRSSBytes: peak)
}

func makeBenchDirectory(_ parent: String?) throws -> String {
    let root = parent ?? NSTemporaryDirectory()
    let path = (root.hasSuffix("/") ? root : root + "/") + "depot-bench-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// CLOCK_MONOTONIC in nanoseconds.
@inline(__always)
func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

/// Gives freed heap back to the system (glibc), so one target's garbage does not count as
/// the next one's resident memory.
func trimMalloc() {
    #if canImport(Glibc)
    _ = glibcMallocTrim(0)
    #endif
}

#if canImport(Glibc)
// glibc's malloc_trim(3); <malloc.h> is not part of the Glibc module map.
@_silgen_name("malloc_trim")
private func glibcMallocTrim(_ pad: Int) -> Int32
#endif

func median(_ values: [Double]) -> Double {
    guard !values.isEmpty else { return 0 }
    let sorted = values.sorted()
    let mid = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}
