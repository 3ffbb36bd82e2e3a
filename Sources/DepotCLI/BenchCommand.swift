import ArgumentParser
import Depot
import DepotBench
import DepotCLIParsers
import Foundation

/// `depot bench`: YCSB A–F and bulk workloads against every driver and the raw engines.
///
/// The engine is `DepotBench.runBench` (BenchCommand+Run.swift).
struct BenchCommand: DepotSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Benchmark drivers on YCSB A–F, bulk insert/fetch, point reads, durable commits and typed models, against the raw engines.",
        usage: "depot bench [--drivers D,D] [--workloads W,W] [--rounds N] [--records N] [--operations N] [--durability full|normal] [--streaming N] [--clients N,N] [--json-records N] [--json FILE] [--chart FILE.svg] [--quick]",
        discussion: """
            Reports medians and ratios taken round by round, with the settings beside the \
            numbers. Durable commits always run at durability full. The typed-model workloads \
            (50,000 inserts, a 200,000-model fetch, 300,000 point reads; scaled down by --quick) \
            compare untyped records, Codable models, @Model models and the raw engine. See \
            Docs/Benchmarks.md.

            Example:
              depot bench --quick --drivers sqlite,gdbm --json bench.json --chart bench.svg
              depot bench --drivers postgres --postgres postgres://me@127.0.0.1/benchdb
              DEPOT_BENCH_POSTGRES=postgres://me:secret@127.0.0.1/benchdb depot bench --drivers postgres
            """
    )

    @Option(help: ArgumentHelp("Comma-separated driver schemes (default: every driver).", valueName: "D,D"))
    var drivers: String?

    @Option(help: ArgumentHelp("Comma-separated workloads: bulk-insert, bulk-fetch, point-reads, ycsb-a … ycsb-f, durable-commit, and the typed-model model-insert, model-fetch, model-point-reads (default: all; the bulk insert runs with any record workload and the model insert with any typed-model one: they load the data).", valueName: "W,W"))
    var workloads: String?

    @Option(help: "Rounds, interleaved across drivers.")
    var rounds = 5

    @Option(help: "Records loaded before the workloads.")
    var records = 100_000

    @Option(help: "Operations per workload (default: 10,000).")
    var operations: Int?

    @Option(help: ArgumentHelp("full or normal, applied to both sides of every ratio.", valueName: "full|normal"))
    var durability = "normal"

    @Option(help: ArgumentHelp("Write every figure as JSON to FILE.", valueName: "FILE"))
    var json: String?

    @Option(help: ArgumentHelp("Write a bar chart (SVG) to FILE.", valueName: "FILE.svg"))
    var chart: String?

    @Option(help: ArgumentHelp("Records in the streaming check (0 skips it).", valueName: "N"))
    var streaming = 1_000_000

    @Option(help: ArgumentHelp("The PostgreSQL server for --drivers postgres: a postgres:// URL whose role may create schemas in its database (default: the DEPOT_BENCH_POSTGRES environment variable, which keeps a password out of the process list).", valueName: "URL"))
    var postgres: String?

    /// The environment variable `--postgres` defaults to.
    static let postgresEnvironmentKey = "DEPOT_BENCH_POSTGRES"

    @Option(help: ArgumentHelp("Client counts for the concurrent reads: point reads and YCSB C again with the same reads split among N concurrent clients (tasks sharing one store; raw: threads with a connection each), for each N and for 1. 1 turns them off.", valueName: "N,N"))
    var clients = "1,2,4"

    @Option(name: .customLong("json-records"), help: ArgumentHelp("The most records the JSON driver and its floor get (each commit rewrites the whole file).", valueName: "N"))
    var jsonRecords = 1_000

    @Flag(help: "A smoke run that finishes in under a minute.")
    var quick = false

    /// The streaming check's measuring process (depot bench runs itself with it): opens
    /// STORE, streams its collection "items" and prints a StreamMeasurement as JSON.
    @Option(name: .customLong("stream-store"), help: .hidden)
    var streamStore: String?

    @OptionGroup var global: GlobalOptions

    func execute(_ context: CommandContext) async throws -> Int32 {
        guard durability == "full" || durability == "normal" else {
            throw CLIFailure.usage("--durability must be full or normal", "write --durability full or --durability normal")
        }
        if let streamStore {
            let measured = try await DepotBench.measureStream(storeString: streamStore, resetPeak: false)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            Console.print(String(decoding: try encoder.encode(measured), as: UTF8.self))
            return ExitStatus.success
        }
        return try await runBench(context)
    }
}
