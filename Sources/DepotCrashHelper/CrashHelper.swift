// depot-crash-helper STORE SEED [EVERY COUNT]
// depot-crash-helper sync STORE BASE_URL SEED LABEL WRITES [final]   (see SyncClient.swift)
//
// A process for crash tests: opens STORE, then commits multi-collection transactions
// forever, printing "ACK n" on stdout (flushed) after each commit is acknowledged.
// Transaction n saves accounts[n] and ledger[n] and sets meta["last"].n = n; when
// n % 7 == 0 it also deletes accounts[n-5] and ledger[n-5]. With EVERY and COUNT, every
// EVERY-th transaction also saves COUNT records into `bulk` (ids n × 100,000 + i, field
// t = n): a large transaction. A test kills it with SIGKILL and checks the store with
// `CrashTrials.verify`.
import Depot
import DepotPostgres
import Foundation

@main
struct CrashHelper {
    static func main() async {
        let arguments = CommandLine.arguments
        if arguments.count > 1, arguments[1] == "sync" {
            exit(await SyncClient.main(Array(arguments.dropFirst(2))))
        }
        guard arguments.count == 3 || arguments.count == 5, let seed = UInt64(arguments[2]),
            let bulkEvery = arguments.count == 5 ? Int64(arguments[3]) : 0, bulkEvery >= 0,
            let bulkCount = arguments.count == 5 ? Int64(arguments[4]) : 0, (0...99_999).contains(bulkCount)
        else {
            FileHandle.standardError.write(Data(("usage: depot-crash-helper STORE SEED [EVERY COUNT]\n   or: " + SyncClient.usage.dropFirst(7)).utf8))
            exit(2)
        }
        do {
            var registry = DriverRegistry.standard
            PostgresDriver.register(in: &registry)
            let driver = try await registry.makeDriver(arguments[1])
            try await run(driver, seed: seed, bulkEvery: bulkEvery, bulkCount: bulkCount)
        } catch {
            FileHandle.standardError.write(Data("depot-crash-helper: \(String(reflecting: error))\n".utf8))
            exit(1)
        }
    }

    static func run(_ driver: any StorageDriver, seed: UInt64, bulkEvery: Int64, bulkCount: Int64) async throws {
        let accounts = try CollectionName("accounts"), ledger = try CollectionName("ledger"), meta = try CollectionName("meta")
        let bulk = try CollectionName("bulk")
        var last: Int64 = try await driver.read { tx in try tx.get("last", from: meta)?.fields["n"]?.intValue ?? 0 }
        var random = SplitMix64(seed: seed)
        while true {
            last += 1
            let n = last
            let padLength = Int(random.next() % 1500)
            let pad = String(repeating: "x", count: padLength)
            while true {
                do {
                    try await driver.write { tx in
                        try tx.save(Record(id: .int(n), fields: ["n": .int(n), "pad": .string(pad)]), into: accounts)
                        try tx.save(Record(id: .int(n), fields: ["n": .int(n)]), into: ledger)
                        if n % 7 == 0 && n > 5 {
                            try tx.delete(.int(n - 5), from: accounts)
                            try tx.delete(.int(n - 5), from: ledger)
                        }
                        if bulkEvery > 0 && n % bulkEvery == 0 {
                            for i in 0..<bulkCount {
                                try tx.save(Record(id: .int(n * 100_000 + i), fields: ["t": .int(n), "pad": .string(pad)]), into: bulk)
                            }
                        }
                        try tx.save(Record(id: "last", fields: ["n": .int(n)]), into: meta)
                    }
                    break
                } catch let error as DepotError where error.code == .conflict {
                    // PostgreSQL: the driver gave up after its own retries of a serialization
                    // failure (a killed helper's transaction can live on in the server for a
                    // while) and committed nothing (Docs/PostgresDriver.md, "Transactions"):
                    // run it again, as the error says.
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
            FileHandle.standardOutput.write(Data("ACK \(n)\n".utf8))
        }
    }
}
