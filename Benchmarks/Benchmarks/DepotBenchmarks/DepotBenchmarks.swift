import Benchmark
import Depot
import DepotBench
import Foundation

// Every benchmark here measures one operation per scaled iteration unless its name says
// otherwise ("… 50,000 …" measures the whole batch), so `throughput` is operations/s.
// Stores live in a fresh temporary directory per benchmark, at durability normal unless
// the name says "durable" (full). Docs/Benchmarks.md lists what each one compares.

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.throughput, .wallClock, .mallocCountTotal, .instructions, .peakMemoryResident],
        warmupIterations: 3,
        maxDuration: .seconds(2),
        maxIterations: 100_000
    )
    codecBenchmarks()
    for engine in ["memory", "sqlite", "gdbm", "json"] where DriverRegistry.standard.schemes.contains(engine) {
        pathBenchmarks(engine: engine)
        repositoryFindBenchmark(engine: engine)
    }
    sqliteTargetBenchmarks()
    jsonCommitBenchmarks()
    ycsbBenchmarks()
}

// MARK: Fixtures

/// Holds what a benchmark's setup made until its teardown.
/// @unchecked Sendable: the benchmark runner calls setup, the closure and teardown one
/// after another on one task, never at the same time.
final class Fixture<T>: @unchecked Sendable {
    var value: T?
    var directory: String?
    var close: (() async throws -> Void)?

    func make(_ body: (String) async throws -> (T, () async throws -> Void)) async throws {
        let dir = NSTemporaryDirectory() + "depot-benchmarks-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        directory = dir
        let (made, closer) = try await body(dir)
        value = made
        close = closer
    }

    func tearDown() async throws {
        try await close?()
        close = nil
        value = nil
        if let directory { try? FileManager.default.removeItem(atPath: directory) }
        directory = nil
    }
}

/// A target loaded with records, plus counters for the next insert and delete.
final class Loaded {
    let target: any BenchTarget
    let records: Int
    var nextInsert: Int
    var nextDelete = 0
    /// The next operation of a pre-generated list.
    var cursor = 0
    var random = SplitMix64(seed: 7)

    init(_ target: any BenchTarget, records: Int) {
        self.target = target
        self.records = records
        nextInsert = records
    }
}

func load(_ target: any BenchTarget, records: Int, directory: String, durability: Durability = .normal) async throws -> Loaded {
    try await target.open(directory: directory, durability: durability)
    var start = 0
    while start < records {
        let end = min(start + 10_000, records)
        try await target.insertBatch(start..<end, values: (start..<end).map(YCSB.fields(record:)))
        start = end
    }
    return Loaded(target, records: records)
}

// MARK: Codec

struct TenFieldModel: Model, Hashable {
    var id: Int64
    var name: String
    var email: String
    var age: Int64
    var score: Double
    var active: Bool
    var tags: [String]
    var created: Date
    var note: String?
    var balance: Int64
}

func codecBenchmarks() {
    let model = TenFieldModel(id: 42, name: "Ada Lovelace", email: "ada@example.com", age: 36, score: 99.5, active: true,
                              tags: ["math", "engines"], created: Date(timeIntervalSince1970: 1_700_000_000.123), note: nil, balance: 1_815)
    let config = Benchmark.Configuration(scalingFactor: .kilo)
    Benchmark("codec encode 10-field model", configuration: config) { benchmark in
        let encoder = RecordEncoder()
        for _ in benchmark.scaledIterations { blackHole(try? encoder.encodeRecord(model)) }
    }
    let record: Record
    do {
        let (_, fields) = try RecordEncoder().encodeRecord(model)
        record = Record(id: 42, fields: fields)
    } catch {
        record = Record(id: 42)
    }
    Benchmark("codec decode 10-field model", configuration: config) { benchmark in
        let decoder = RecordDecoder()
        for _ in benchmark.scaledIterations { blackHole(try? decoder.decode(TenFieldModel.self, from: record)) }
    }
}

// MARK: Driver paths: Depot (Store/Collection) and raw, one operation per iteration

func pathBenchmarks(engine: String) {
    let records = engine == "json" ? 1_000 : 10_000
    var sides: [(label: String, make: () -> (any BenchTarget)?)] = [("\(engine)", { try? DepotStoreTarget.standard(engine) })]
    if rawBaseline(engine) != nil { sides.append((engine == "json" ? "json floor" : "\(engine) raw", { rawBaseline(engine) })) }
    for side in sides {
        let operations: [(String, Int, (Loaded) -> BenchOperation?)] = [
            ("get", 100_000, { l in .read(l.random.uniform(0...(l.records - 1))) }),
            ("insert", 100_000, { l in defer { l.nextInsert += 1 }; return .insert(l.nextInsert) }),
            ("update one field", 100_000, { l in
                let n = l.random.uniform(0...(l.records - 1))
                return .update(n, field: n % 10, value: YCSB.value(record: n, field: n % 10, version: l.random.next()))
            }),
            ("delete", records - 10, { _ in nil }),
            ("query id >= key limit 10", engine == "sqlite" ? 100_000 : 200, { l in .scan(l.random.uniform(0...(l.records - 1)), count: 10) }),
        ]
        for (name, maxIterations, next) in operations {
            let fixture = Fixture<Loaded>()
            let isDelete = name == "delete"
            Benchmark("\(side.label) \(name)", configuration: .init(warmupIterations: isDelete ? 0 : 3, maxIterations: engine == "json" ? min(maxIterations, 200) : maxIterations)) { benchmark in
                guard let loaded = fixture.value else { return }
                do {
                    for _ in benchmark.scaledIterations {
                        if isDelete {
                            guard loaded.nextDelete < loaded.records else { return }
                            try await loaded.target.delete(loaded.nextDelete)
                            loaded.nextDelete += 1
                        } else if let op = next(loaded) {
                            try await loaded.target.run(op)
                        }
                    }
                } catch {
                    benchmark.error("\(side.label) \(name): \(error)")
                }
            } setup: {
                try await fixture.make { dir in
                    guard let target = side.make() else { throw BenchError("no \(side.label)") }
                    let loaded = try await load(target, records: records, directory: dir)
                    return (loaded, { try await target.close() })
                }
            } teardown: {
                try await fixture.tearDown()
            }
        }
    }
}

/// Point reads through the typed repository API (`Repository.find(id:)` into a 1 KB model),
/// to set beside `<engine> raw get` (fetch plus decoding the same ten 100-byte strings).
func repositoryFindBenchmark(engine: String) {
    let records = engine == "json" ? 1_000 : 10_000
    let fixture = Fixture<Repository<KilobyteRecord>>()
    final class Ids: @unchecked Sendable { var random = SplitMix64(seed: 5) } // one benchmark task at a time
    let ids = Ids()
    Benchmark("\(engine) repository find 1 KB model") { benchmark in
        guard let repository = fixture.value else { return }
        do {
            for _ in benchmark.scaledIterations {
                let id = Int64(ids.random.uniform(1...records))
                guard let model = try await repository.find(id: id) else { return benchmark.error("missing \(id)") }
                blackHole(model)
            }
        } catch { benchmark.error("\(error)") }
    } setup: {
        try await fixture.make { dir in
            let path = engine == "sqlite" ? "sqlite:\(dir)/depot.sqlite" : engine == "gdbm" ? "gdbm:\(dir)/depot-gdbm" : engine == "json" ? "json:\(dir)/depot.json" : "memory:"
            let store = try await Store.open(path + (engine == "memory" ? "" : "?durability=normal"))
            let repository = try await store.repository(KilobyteRecord.self)
            let models = (0..<records).map(KilobyteRecord.init)
            try await store.write { tx in
                let r = try tx.repository(KilobyteRecord.self)
                for model in models { _ = try r.insert(model) }
            }
            return (repository, { try await store.close() })
        }
    } teardown: { try await fixture.tearDown() }
}

// MARK: The SQLite driver's targets (issue "SQLite driver", Performance)

func sqliteTargetBenchmarks() {
    guard DriverRegistry.standard.schemes.contains("sqlite") else { return }
    let batch = Benchmark.Configuration(warmupIterations: 1, maxDuration: .seconds(20), maxIterations: 5)
    let integers = (0..<50_000).map(IntegerRecord.init)

    let depotInsert = Fixture<Store>()
    Benchmark("sqlite insert 50,000 × 10 ints, one transaction", configuration: batch) { benchmark in
        guard let store = depotInsert.value else { return }
        do {
            try await store.write { tx in _ = try tx.delete(matching: .all, from: IntegerRecord.collection()) }
            benchmark.startMeasurement()
            try await store.write { tx in
                let repository = try tx.repository(IntegerRecord.self)
                for model in integers { _ = try repository.insert(model) }
            }
            benchmark.stopMeasurement()
        } catch { benchmark.error("\(error)") }
    } setup: {
        try await depotInsert.make { dir in
            let store = try await Store.open("sqlite:\(dir)/depot.sqlite?durability=normal")
            _ = try await store.repository(IntegerRecord.self)
            return (store, { try await store.close() })
        }
    } teardown: { try await depotInsert.tearDown() }

    let rawInsert = Fixture<RawSQLiteModels>()
    Benchmark("sqlite raw insert 50,000 × 10 ints, one transaction", configuration: batch) { benchmark in
        guard let raw = rawInsert.value else { return }
        do {
            try raw.deleteIntegers()
            benchmark.startMeasurement()
            try raw.insertIntegers(integers)
            benchmark.stopMeasurement()
        } catch { benchmark.error("\(error)") }
    } setup: {
        try await rawInsert.make { dir in
            let raw = try RawSQLiteModels(path: dir + "/raw.sqlite", durability: .normal)
            return (raw, { raw.close() })
        }
    } teardown: { try await rawInsert.tearDown() }

    let fetched = (0..<200_000).map(IntegerRecord.init)
    let depotFetch = Fixture<Repository<IntegerRecord>>()
    Benchmark("sqlite fetch 200,000 × 10 ints into models", configuration: batch) { benchmark in
        guard let repository = depotFetch.value else { return }
        do {
            let all = try await repository.all()
            guard all.count == 200_000 else { return benchmark.error("fetched \(all.count)") }
            blackHole(all)
        } catch { benchmark.error("\(error)") }
    } setup: {
        try await depotFetch.make { dir in
            let store = try await Store.open("sqlite:\(dir)/depot.sqlite?durability=normal")
            let repository = try await store.repository(IntegerRecord.self)
            try await store.write { tx in
                let r = try tx.repository(IntegerRecord.self)
                for model in fetched { _ = try r.insert(model) }
            }
            return (repository, { try await store.close() })
        }
    } teardown: { try await depotFetch.tearDown() }

    let rawFetch = Fixture<RawSQLiteModels>()
    Benchmark("sqlite raw fetch 200,000 × 10 ints into models", configuration: batch) { benchmark in
        guard let raw = rawFetch.value else { return }
        do {
            let all = try raw.fetchIntegers()
            guard all.count == 200_000 else { return benchmark.error("fetched \(all.count)") }
            blackHole(all)
        } catch { benchmark.error("\(error)") }
    } setup: {
        try await rawFetch.make { dir in
            let raw = try RawSQLiteModels(path: dir + "/raw.sqlite", durability: .normal)
            try raw.insertIntegers(fetched)
            return (raw, { raw.close() })
        }
    } teardown: { try await rawFetch.tearDown() }

    let reads = Benchmark.Configuration(warmupIterations: 0, maxDuration: .seconds(20), maxIterations: 3)
    var idRandom = SplitMix64(seed: 11)
    let ids = (0..<300_000).map { _ in Int64(idRandom.uniform(1...100_000)) }
    let depotReads = Fixture<Repository<KilobyteRecord>>()
    Benchmark("sqlite 300,000 point reads by id of 100,000 × 1 KB models", configuration: reads) { benchmark in
        guard let repository = depotReads.value else { return }
        do {
            for id in ids {
                guard let model = try await repository.find(id: id) else { return benchmark.error("missing \(id)") }
                blackHole(model)
            }
        } catch { benchmark.error("\(error)") }
    } setup: {
        try await depotReads.make { dir in
            let store = try await Store.open("sqlite:\(dir)/depot.sqlite?durability=normal")
            let repository = try await store.repository(KilobyteRecord.self)
            var start = 0
            while start < 100_000 {
                let models = (start..<min(start + 10_000, 100_000)).map(KilobyteRecord.init)
                try await store.write { tx in
                    let r = try tx.repository(KilobyteRecord.self)
                    for model in models { _ = try r.insert(model) }
                }
                start += 10_000
            }
            return (repository, { try await store.close() })
        }
    } teardown: { try await depotReads.tearDown() }

    let rawReads = Fixture<RawSQLiteModels>()
    Benchmark("sqlite raw 300,000 point reads by id of 100,000 × 1 KB models", configuration: reads) { benchmark in
        guard let raw = rawReads.value else { return }
        do {
            for id in ids {
                guard let model = try raw.kilobyte(id: id) else { return benchmark.error("missing \(id)") }
                blackHole(model)
            }
        } catch { benchmark.error("\(error)") }
    } setup: {
        try await rawReads.make { dir in
            let raw = try RawSQLiteModels(path: dir + "/raw.sqlite", durability: .normal)
            try raw.insertKilobytes((0..<100_000).map(KilobyteRecord.init))
            return (raw, { raw.close() })
        }
    } teardown: { try await rawReads.tearDown() }

    let durable = Benchmark.Configuration(warmupIterations: 2, maxDuration: .seconds(5), maxIterations: 300)
    let depotDurable = Fixture<Repository<IntegerRecord>>()
    final class Counter: @unchecked Sendable { var next = 1_000_000 } // one benchmark's task at a time
    let depotCounter = Counter(), rawCounter = Counter()
    Benchmark("sqlite durable single-record commit", configuration: durable) { benchmark in
        guard let repository = depotDurable.value else { return }
        do {
            for _ in benchmark.scaledIterations {
                _ = try await repository.insert(IntegerRecord(depotCounter.next))
                depotCounter.next += 1
            }
        } catch { benchmark.error("\(error)") }
    } setup: {
        try await depotDurable.make { dir in
            let store = try await Store.open("sqlite:\(dir)/depot.sqlite?durability=full")
            return (try await store.repository(IntegerRecord.self), { try await store.close() })
        }
    } teardown: { try await depotDurable.tearDown() }

    let rawDurable = Fixture<RawSQLiteModels>()
    Benchmark("sqlite raw durable single-record commit", configuration: durable) { benchmark in
        guard let raw = rawDurable.value else { return }
        do {
            for _ in benchmark.scaledIterations {
                try raw.insertDurably(IntegerRecord(rawCounter.next))
                rawCounter.next += 1
            }
        } catch { benchmark.error("\(error)") }
    } setup: {
        try await rawDurable.make { dir in
            let raw = try RawSQLiteModels(path: dir + "/raw.sqlite", durability: .full)
            return (raw, { raw.close() })
        }
    } teardown: { try await rawDurable.tearDown() }
}

// MARK: The JSON driver's honest cost (issue "JSON file driver")

func jsonCommitBenchmarks() {
    guard DriverRegistry.standard.schemes.contains("json") else { return }
    for size in [1_000, 10_000, 100_000] {
        let label = size >= 1_000 ? "\(size / 1_000)k" : "\(size)"
        let config = Benchmark.Configuration(warmupIterations: 1, maxDuration: .seconds(size >= 100_000 ? 10 : 4), maxIterations: size >= 100_000 ? 5 : 100)
        let sides: [(String, () -> any BenchTarget)] = [
            ("json", { () -> any BenchTarget in
                if let depot = try? DepotStoreTarget.standard("json") { return depot }
                return JSONFloorTarget()
            }),
            ("json floor", { JSONFloorTarget() }),
        ]
        for (side, make) in sides {
            let fixture = Fixture<Loaded>()
            Benchmark("\(side) durable single-record commit @\(label) records", configuration: config) { benchmark in
                guard let loaded = fixture.value else { return }
                do {
                    for _ in benchmark.scaledIterations {
                        try await loaded.target.durableInsert(loaded.nextInsert, values: YCSB.fields(record: loaded.nextInsert))
                        loaded.nextInsert += 1
                    }
                } catch { benchmark.error("\(error)") }
            } setup: {
                try await fixture.make { dir in
                    let target = make()
                    let loaded = try await load(target, records: size, directory: dir)
                    try await target.reopen(durability: .full)
                    return (loaded, { try await target.close() })
                }
            } teardown: { try await fixture.tearDown() }
        }
    }
    // Batching amortizes the rewrite: 100 records per commit at 10k records.
    let fixture = Fixture<Loaded>()
    Benchmark("json durable commit of 100 records @10k records", configuration: .init(warmupIterations: 1, maxDuration: .seconds(4), maxIterations: 100)) { benchmark in
        guard let loaded = fixture.value else { return }
        do {
            let start = loaded.nextInsert
            try await loaded.target.insertBatch(start..<(start + 100), values: (start..<(start + 100)).map(YCSB.fields(record:)))
            loaded.nextInsert += 100
        } catch { benchmark.error("\(error)") }
    } setup: {
        try await fixture.make { dir in
            guard let target = try DepotStoreTarget.standard("json") else { throw BenchError("no json driver") }
            let loaded = try await load(target, records: 10_000, directory: dir)
            try await target.reopen(durability: .full)
            return (loaded, { try await target.close() })
        }
    } teardown: { try await fixture.tearDown() }
}

// MARK: YCSB A–F on SQLite: Depot and raw (GRDB is in GRDBBenchmarks)

func ycsbBenchmarks() {
    guard DriverRegistry.standard.schemes.contains("sqlite") else { return }
    let records = 10_000
    for workload in Workload.runOrder where workload.isYCSB {
        let ops = OperationPlan(records: records).operations(workload, count: 20_000, seed: 1).ops
        let sides: [(String, () -> (any BenchTarget)?)] = [
            ("sqlite", { try? DepotStoreTarget.standard("sqlite") }),
            ("sqlite raw", { rawBaseline("sqlite") }),
        ]
        for (side, make) in sides {
            let fixture = Fixture<Loaded>()
            Benchmark("\(workload.label) \(side) (\(records) records)", configuration: .init(warmupIterations: 0, maxDuration: .seconds(3), maxIterations: ops.count)) { benchmark in
                guard let loaded = fixture.value else { return }
                do {
                    for _ in benchmark.scaledIterations {
                        try await loaded.target.run(ops[loaded.cursor % ops.count])
                        loaded.cursor += 1
                    }
                } catch { benchmark.error("\(error)") }
            } setup: {
                try await fixture.make { dir in
                    guard let target = make() else { throw BenchError("no \(side)") }
                    let loaded = try await load(target, records: records, directory: dir)
                    return (loaded, { try await target.close() })
                }
            } teardown: { try await fixture.tearDown() }
        }
    }
}
