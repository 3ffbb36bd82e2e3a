import Depot
import Foundation
import Testing

@testable import DepotBench

/// `depot bench --clients`: the reads are split without loss, every target's concurrent
/// readers read what is there (a missing record fails the run), and a target is usable for
/// writes again after its readers close.
@Suite struct ConcurrentReadTests {
    @Test func sharesSplitTheReadsRoundRobinWithoutLoss() {
        let reads = Array(0..<10).map { $0 * 7 }
        let split = shares(of: reads, clients: 3)
        #expect(split.count == 3)
        #expect(split[0] == [0, 21, 42, 63])
        #expect(split[1] == [7, 28, 49])
        #expect(split[2] == [14, 35, 56])
        #expect(split.flatMap { $0 }.sorted() == reads)
        #expect(shares(of: [5], clients: 4) == [[5], [], [], []])
    }

    @Test func clientCountsIncludeOneAndAreCheckedByValidate() throws {
        var options = BenchOptions()
        options.clients = [4]
        #expect(options.clientCounts == [1, 4])
        options.clients = [2, 1, 2]
        #expect(options.clientCounts == [1, 2])
        options.clients = [1]
        #expect(options.clientCounts.isEmpty)
        options.clients = []
        #expect(options.clientCounts.isEmpty)
        for bad in [0, -1, 65] {
            options.clients = [2, bad]
            #expect(throws: BenchError.self) { try options.validate() }
        }
    }

    /// Each concurrent-read target of this build (Depot over every driver, the raw SQLite and
    /// GDBM baselines) reads 200 records with 1, 2 and 4 clients, each client's count of reads
    /// as split; a read of a record that is not there throws; after the readers close the
    /// target inserts and its fetch sees the insert.
    @Test func everyTargetReadsConcurrentlyAndWritesAfterwards() async throws {
        var targets: [any ConcurrentReadTarget] = []
        for engine in ["memory", "sqlite", "gdbm", "json"] where DriverRegistry.standard.schemes.contains(engine) {
            if let depot = try DepotStoreTarget.standard(engine) { targets.append(depot) }
            if let raw = rawBaseline(engine) as? any ConcurrentReadTarget { targets.append(raw) }
        }
        let reads = (0..<200).map { ($0 * 37) % 100 }
        for target in targets {
            let dir = NSTemporaryDirectory() + "depot-bench-clients-\(UInt32.random(in: 0...UInt32.max))"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: dir) }
            try await target.open(directory: dir, durability: .normal)
            try await target.insertBatch(0..<100, values: (0..<100).map(YCSB.fields(record:)))
            for clients in [1, 2, 4] {
                try await target.openReaders(clients)
                let runs = try await target.readConcurrently(shares(of: reads, clients: clients))
                try await target.closeReaders()
                #expect(runs.map(\.histogram.count) == shares(of: reads, clients: clients).map { UInt64($0.count) }, "\(target.displayName), \(clients) clients")
                #expect(runs.allSatisfy { $0.end >= $0.start }, "\(target.displayName)")
            }
            try await target.openReaders(2)
            await #expect(throws: BenchError.self, "\(target.displayName) must fail on a missing record") {
                _ = try await target.readConcurrently([[1, 2], [3, 100_000]])
            }
            try await target.closeReaders()
            try await target.run(.insert(100))
            #expect(try await target.fetchAll() == 101, "\(target.displayName) writes after its readers close")
            try await target.close()
        }
    }
}
