import Depot
import DepotBench
import Foundation
import Testing

@Suite struct YCSBGeneratorTests {
    @Test func keysAreDistinctAndPrefixed() {
        var seen = Set<String>()
        for n in 0..<100_000 { seen.insert(YCSB.key(n)) }
        #expect(seen.count == 100_000)
        #expect(YCSB.key(0).hasPrefix("user"))
    }

    @Test func valuesAreHundredBytesAndDeterministic() {
        let a = YCSB.fields(record: 7)
        #expect(a.count == 10)
        #expect(a.allSatisfy { $0.utf8.count == 100 })
        #expect(a == YCSB.fields(record: 7))
        #expect(a != YCSB.fields(record: 8))
    }

    @Test func zipfianIsInRangeAndSkewed() {
        var random = SplitMix64(seed: 1)
        var zipf = ZipfianGenerator(items: 1_000)
        var counts = [Int](repeating: 0, count: 1_000)
        for _ in 0..<100_000 {
            let v = zipf.next(&random)
            #expect(v >= 0 && v < 1_000)
            counts[v] += 1
        }
        // With theta 0.99 over 1,000 items item 0 gets about 13% of requests, far above uniform's 0.1%.
        #expect(counts[0] > 8_000)
        #expect(counts[0] > counts[10] * 5)
    }

    @Test func workloadProportionsFollowYCSB() {
        let plan = OperationPlan(records: 10_000)
        func share(_ workload: Workload, _ isKind: (BenchOperation) -> Bool) -> Double {
            let ops = plan.operations(workload, count: 20_000, seed: 3).ops
            return Double(ops.filter(isKind).count) / Double(ops.count)
        }
        let readA = share(.ycsbA) { if case .read = $0 { true } else { false } }
        #expect(abs(readA - 0.5) < 0.02)
        let readB = share(.ycsbB) { if case .read = $0 { true } else { false } }
        #expect(abs(readB - 0.95) < 0.01)
        #expect(share(.ycsbC) { if case .read = $0 { true } else { false } } == 1.0)
        let insertD = share(.ycsbD) { if case .insert = $0 { true } else { false } }
        #expect(abs(insertD - 0.05) < 0.01)
        let scanE = plan.operations(.ycsbE, count: 20_000, seed: 3).ops
        #expect(scanE.allSatisfy { op in
            if case .scan(let n, let count) = op { return n >= 0 && count >= 1 && count <= 100 }
            if case .insert(let n) = op { return n >= 10_000 }
            return false
        })
        let rmwF = share(.ycsbF) { if case .readModifyWrite = $0 { true } else { false } }
        #expect(abs(rmwF - 0.5) < 0.02)
    }

    @Test func latestReadsRecentRecords() {
        let ops = OperationPlan(records: 10_000).operations(.ycsbD, count: 10_000, seed: 5).ops
        var reads: [Int] = []
        for op in ops { if case .read(let n) = op { reads.append(n) } }
        let recent = reads.filter { $0 >= 9_000 }.count
        #expect(Double(recent) / Double(reads.count) > 0.5)
    }
}

@Suite struct LatencyHistogramTests {
    @Test func percentilesAreWithinThreePercent() {
        var h = LatencyHistogram()
        for v in 1...10_000 { h.record(UInt64(v) * 1_000) }
        let p50 = Double(h.value(atPercentile: 50) ?? 0)
        let p99 = Double(h.value(atPercentile: 99) ?? 0)
        #expect(abs(p50 - 5_000_000) / 5_000_000 < 0.035)
        #expect(abs(p99 - 9_900_000) / 9_900_000 < 0.035)
        #expect(h.count == 10_000)
    }

    @Test func emptyHasNoPercentile() {
        #expect(LatencyHistogram().value(atPercentile: 50) == nil)
    }

    @Test func mergeAddsCounts() throws {
        var a = LatencyHistogram(), b = LatencyHistogram()
        a.record(10); b.record(1_000_000)
        a.merge(b)
        #expect(a.count == 2)
        let top = try #require(a.value(atPercentile: 100))
        #expect(top <= 1_000_000 && top > 960_000)
        #expect(a.value(atPercentile: 50) == 10)
    }
}

@Suite struct RunBenchTests {
    @Test func quickMemoryRunReportsEveryWorkloadAndWritesFiles() async throws {
        let dir = NSTemporaryDirectory() + "depot-bench-test-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var options = BenchOptions()
        options.drivers = ["memory"]
        options.quick = true
        options.records = 500
        options.operations = 100
        options.modelInserts = 200
        options.modelRecords = 400
        options.modelReads = 300
        options.streamingRecords = 0
        options.directory = dir
        options.jsonPath = dir + "/report.json"
        options.chartPath = dir + "/chart.svg"
        var lines: [String] = []
        let report = try await runBench(options) { lines.append($0) }
        for workload in Workload.runOrder where !workload.isModel {
            let result = try #require(report.result("memory", workload))
            #expect(result.opsPerSecond > 0)
        }
        let modelWorkloads = Workload.runOrder.filter(\.isModel)
        for side in ["Record", "Codable", "@Model"] {
            for workload in modelWorkloads {
                let result = try #require(report.result("memory \(side)", workload))
                #expect(result.opsPerSecond > 0)
                #expect(result.ratioToRaw == nil)  // memory has no raw engine
                #expect((result.ratioToRecord != nil) == (side != "Record"))
            }
        }
        #expect(report.result("memory @Model", .modelPointReads)?.operations == 300)
        #expect(report.result("memory", .ycsbA)?.p99Nanoseconds != nil)
        #expect(report.result("memory", .bulkInsert)?.records == 500)
        let json = try JSONSerialization.jsonObject(with: (FileHandle(forReadingFrom: URL(fileURLWithPath: dir + "/report.json")).readToEnd() ?? Data())) as? [String: Any]
        // The default --clients 1,2,4: point reads and YCSB C at each count (memory has no raw side).
        for workload in [Workload.pointReads, .ycsbC] {
            for clients in [1, 2, 4] {
                let result = try #require(report.result("memory", workload, clients: clients))
                #expect(result.operations == 100 && result.opsPerSecond > 0 && result.scalingToOneClient != nil)
            }
        }
        #expect((json?["results"] as? [Any])?.count == Workload.runOrder.count - modelWorkloads.count + 3 * modelWorkloads.count + 2 * 3)
        let svg = try String(contentsOfFile: dir + "/chart.svg", encoding: .utf8)
        #expect(svg.hasPrefix("<svg") && svg.hasSuffix("</svg>\n"))
        #expect(svg.contains("YCSB E"))
        #expect(svg.contains("YCSB C, 4 clients"))
        #expect(lines.joined(separator: "\n").contains("durability normal"))
        #expect(lines.joined(separator: "\n").contains("concurrent reads (--clients)"))
    }

    @Test func theTableShowsTheSpreadOfTheRoundsRatios() async throws {
        #expect(BenchReport.range([1.26, 1.03, 1.1]) == "1.03–1.26")
        #expect(BenchReport.range([1.2]) == "")
        #expect(BenchReport.range(nil) == "")
        var options = BenchOptions()
        options.drivers = ["sqlite"]
        options.workloads = [.bulkInsert, .pointReads]
        options.rounds = 3
        options.records = 300
        options.operations = 200
        options.clients = [1]
        options.streamingRecords = 0
        let report = try await runBench(options) { _ in }
        let depot = try #require(report.result("sqlite", .pointReads))
        let ratios = try #require(depot.roundRatios)
        #expect(ratios.count == 3)
        let lines = report.table().split(separator: "\n").map(String.init)
        let depotLine = try #require(lines.first { $0.hasPrefix("point reads") && $0.contains(" sqlite ") && !$0.contains("sqlite raw") })
        let rawLine = try #require(lines.first { $0.hasPrefix("point reads") && $0.contains("sqlite raw") })
        #expect(depotLine.hasSuffix(" " + BenchReport.range(ratios)), "\(depotLine)")
        #expect(!rawLine.contains("–"), "\(rawLine)")
        #expect(lines.contains { $0.contains("÷ raw") && $0.contains("rounds") })
    }

    @Test func jsonFloorRoundTripsThroughARound() async throws {
        let floor = JSONFloorTarget()
        let dir = NSTemporaryDirectory() + "depot-bench-floor-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await floor.open(directory: dir, durability: .normal)
        try await floor.insertBatch(0..<3, values: (0..<3).map(YCSB.fields(record:)))
        let text = try String(contentsOfFile: dir + "/floor.json", encoding: .utf8)
        #expect(text.contains(YCSB.key(2)))
        #expect(try await floor.fetchAll() == 3)
        try await floor.close()
    }

    @Test func workloadListsParseInRunOrderWithTheLoad() throws {
        #expect(try Workload.parseList("ycsb-c, point-reads") == [.bulkInsert, .pointReads, .ycsbC])
        #expect(try Workload.parseList("bulk-insert") == [.bulkInsert])
        #expect(try Workload.parseList("model-point-reads") == [.modelInsert, .modelPointReads])
        #expect(try Workload.parseList("model-fetch,ycsb-a") == [.bulkInsert, .ycsbA, .modelInsert, .modelFetch])
        #expect(throws: BenchError.self) { try Workload.parseList("ycsb-g") }
        #expect(throws: BenchError.self) { try Workload.parseList(" , ") }
    }

    @Test func badOptionsAreRejected() async {
        var options = BenchOptions()
        options.drivers = ["oracle"]
        await #expect(throws: BenchError.self) { _ = try await runBench(options) { _ in } }
    }
}

@Suite struct BenchTargetAgreementTests {
    /// Every target available in this build does the same work: after the same load, the
    /// same operations of every workload and the same deletes, each holds the same number
    /// of records, and the scans and reads find what they look for (a missing record throws).
    @Test func depotAndRawTargetsDoTheSameWork() async throws {
        var targets: [any BenchTarget] = [JSONFloorTarget()]
        for engine in ["memory", "sqlite", "gdbm", "json"] where DriverRegistry.standard.schemes.contains(engine) {
            if let depot = try DepotStoreTarget.standard(engine) { targets.append(depot) }
            if engine != "json", let raw = rawBaseline(engine) { targets.append(raw) }
        }
        var counts: [String: Int] = [:]
        for target in targets {
            let dir = NSTemporaryDirectory() + "depot-bench-agree-\(UInt32.random(in: 0...UInt32.max))"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: dir) }
            try await target.open(directory: dir, durability: .normal)
            try await target.insertBatch(0..<100, values: (0..<100).map(YCSB.fields(record:)))
            var inserted = 0
            for workload in Workload.runOrder where workload.isYCSB || workload == .pointReads {
                let (ops, inserts) = OperationPlan(records: 100, inserted: inserted).operations(workload, count: 30, seed: 9)
                for op in ops { try await target.run(op) }
                inserted += inserts
            }
            for n in 0..<10 { try await target.delete(n) }
            try await target.reopen(durability: .full)
            try await target.durableInsert(1_000_000, values: YCSB.fields(record: 1_000_000))
            counts[target.displayName] = try await target.fetchAll()
            // Only Depot's GDBM store has background work its commits may wait for.
            #expect((target.writerWaits != nil) == (target.displayName == "gdbm"), "\(target.displayName)")
            try await target.close()
        }
        let expected = try #require(counts["json floor"])
        #expect(expected > 91)
        for (name, count) in counts { #expect(count == expected, "\(name) holds \(count) records, the JSON floor \(expected)") }
    }
}

@Suite struct BenchOptionsTests {
    /// The JSON driver's operation cap applies to workloads that write (each write rewrites
    /// its file), not to the read-only ones, which then run as many operations as on the
    /// memory driver they are compared with.
    @Test func theJSONCapAppliesOnlyToWorkloadsThatWrite() {
        var options = BenchOptions()
        options.operations = 10_000
        for workload in [Workload.pointReads, .ycsbC] {
            #expect(workload.isReadOnly)
            #expect(options.operations(workload, for: "json") == 10_000)
            #expect(options.operations(workload, for: "memory") == 10_000)
        }
        for workload in [Workload.ycsbA, .ycsbB, .ycsbD, .ycsbF] {
            #expect(!workload.isReadOnly)
            #expect(options.operations(workload, for: "json") == options.jsonOperationLimit)
            #expect(options.operations(workload, for: "sqlite") == 10_000)
        }
        // Scans in id order: E is capped as a workload that writes, not as a whole walk.
        #expect(options.operations(.ycsbE, for: "json") == options.jsonOperationLimit)
        #expect(options.operations(.ycsbE, for: "gdbm") == options.unorderedScanLimit)
    }
}
