import Depot
import DepotBench
import Foundation
import Testing

/// The typed-model workloads: the hand-written @Model expansion stores what the Codable
/// model stores, and every target of every engine writes, fetches and reads the right records.
@Suite struct TypedModelTests {
    @Test func generatedExpansionWritesWhatCodableWrites() throws {
        for n in [0, 1, 17, 99_999] {
            let codable = DictionaryFieldSink(), generated = DictionaryFieldSink()
            let codableID = try IntegerRecord(n).encodeRecord(into: codable)
            let generatedID = try GeneratedIntegerRecord(n).encodeRecord(into: generated)
            #expect(codableID == generatedID)
            #expect(codable.fields == generated.fields)
            #expect(generated.fields.count == 10)
            // Each reads what the other wrote.
            let record = Record(id: try #require(codableID), fields: codable.fields)
            let decoded = try GeneratedIntegerRecord(record: RecordFieldSource(record))
            #expect(decoded == GeneratedIntegerRecord(n))
            #expect(decoded.values == IntegerRecord(n).values)
            #expect(try IntegerRecord(record: RecordFieldSource(Record(id: record.id, fields: generated.fields))) == IntegerRecord(n))
        }
        #expect(try GeneratedIntegerRecord(3).assigningID(.int(42)).id == 42)
    }

    @Test func generatedExpansionNamesTheFieldThatDoesNotFit() throws {
        let sink = DictionaryFieldSink()
        _ = try GeneratedIntegerRecord(5).encodeRecord(into: sink)
        var missing = sink.fields
        missing["g"] = nil
        var mistyped = sink.fields
        mistyped["c"] = .string("seven")
        for (fields, name) in [(missing, "'g'"), (mistyped, "'c'")] {
            do {
                _ = try GeneratedIntegerRecord(record: RecordFieldSource(Record(id: .int(6), fields: fields)))
                Issue.record("decoding \(name) did not throw")
            } catch let error as DepotError {
                #expect(error.code == .decoding)
                #expect(error.message.contains(name), "\(error.message)")
            }
        }
        #expect(throws: DepotError.self) { _ = try GeneratedIntegerRecord(record: RecordFieldSource(Record(id: .string("x"), fields: sink.fields))) }
    }

    @Test func modelsStoredByOneTypeReadBackAsTheOther() async throws {
        let store = try await Store.open("memory:", registry: .standard)
        let generated = try await store.repository(GeneratedIntegerRecord.self)
        let codable = try await store.repository(IntegerRecord.self)
        try await store.write { tx in
            let repository = try tx.repository(GeneratedIntegerRecord.self)
            for n in 0..<20 { try repository.insert(GeneratedIntegerRecord(n)) }
        }
        try await codable.save((20..<40).map(IntegerRecord.init))
        #expect(try await codable.all() == (0..<40).map(IntegerRecord.init))
        #expect(try await generated.all() == (0..<40).map(GeneratedIntegerRecord.init))
        #expect(try await generated.find(id: 31) == GeneratedIntegerRecord(30))
        try await store.close()
    }

    /// Every typed-model target of every engine in this build, at a tiny size: the insert
    /// and the top-up hold every record, the fetch reads each with its values, point reads
    /// read the record asked for, and a missing one throws.
    @Test func everyTargetWritesFetchesAndReadsTheRightRecords() async throws {
        var checked: [String] = []
        for engine in ["memory", "sqlite", "gdbm"] where DriverRegistry.standard.schemes.contains(engine) {
            let targets = modelTargets(engine)
            #expect(targets.map(\.side) == (engine == "memory" ? [.record, .codable, .generated] : [.record, .codable, .generated, .raw]))
            for target in targets {
                let dir = NSTemporaryDirectory() + "depot-bench-models-\(UInt32.random(in: 0...UInt32.max))"
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
                defer { try? FileManager.default.removeItem(atPath: dir) }
                try await target.open(directory: dir, durability: .normal)
                target.stage(0..<30)
                try await target.insertStaged()
                target.stage(30..<75)
                try await target.insertStaged()
                #expect(try await target.fetchAll() == 75, "\(target.displayName)")
                #expect(target.fetchedChecksum() == (0..<75).map(IntegerRows.expectedChecksum).reduce(0, &+), "\(target.displayName)")
                for n in [0, 29, 30, 74, 41] {
                    try await target.read(n)
                    #expect(target.lastReadChecksum() == IntegerRows.expectedChecksum(n), "\(target.displayName) record \(n)")
                }
                await #expect(throws: (any Error).self, "\(target.displayName)") { try await target.read(75) }
                try await target.close()
                checked.append(target.displayName)
            }
        }
        #expect(checked.contains("memory @Model"))
    }

    /// The workloads through `runBench`: counts as asked, every side reported with its ratios,
    /// and no failure (the runner checks every fetched and read record against its checksum).
    @Test func runBenchReportsTheTypedWorkloadsOfEveryEngine() async throws {
        var options = BenchOptions()
        options.drivers = ["memory", "sqlite", "gdbm"].filter { DriverRegistry.standard.schemes.contains($0) }
        options.workloads = try Workload.parseList("model-fetch,model-point-reads")
        options.rounds = 2
        options.modelInserts = 40
        options.modelRecords = 100
        options.modelReads = 150
        options.streamingRecords = 0
        let report = try await runBench(options) { _ in }
        #expect(!report.notes.contains { $0.hasPrefix("FAILED") }, "\(report.notes)")
        let onlyModels = report.results.allSatisfy { $0.workload.isModel }
        #expect(onlyModels)
        #expect(report.settings.modelReads == 150)
        for engine in options.drivers {
            let hasRaw = engine != "memory"
            for workload in [Workload.modelInsert, .modelFetch, .modelPointReads] {
                let expected = workload == .modelInsert ? 40 : workload == .modelFetch ? 100 : 150
                for side in ModelSide.allCases where side != .raw || hasRaw {
                    let name = side == .raw ? "\(engine) raw" : "\(engine) \(side.rawValue)"
                    let result = try #require(report.result(name, workload), "\(name) \(workload)")
                    #expect(result.operations == expected, "\(name) \(workload)")
                    #expect(result.roundOpsPerSecond.count == 2)
                    #expect((result.ratioToRaw != nil) == (hasRaw && side != .raw), "\(name) \(workload)")
                    #expect((result.ratioToRecord != nil) == (side == .codable || side == .generated), "\(name) \(workload)")
                    #expect(result.side == side.rawValue)
                }
            }
        }
        #expect(report.table().contains("÷ Record"))
        #expect(BenchChart(report: report).svg().contains("model point reads"))
    }
}
