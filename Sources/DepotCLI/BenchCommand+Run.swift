import ArgumentParser
import Depot
import DepotBench
import DepotCLIParsers
#if PostgreSQL
import DepotPostgres
#endif
import Foundation

extension BenchCommand {
    /// Turns the command line into ``BenchOptions`` and runs the benchmark engine
    /// (`DepotBench.runBench`): progress goes to standard error, the table to standard output.
    /// - Throws: ``CLIFailure`` for bad options (status 2) or a failed run (status 1).
    func runBench(_ context: CommandContext) async throws -> Int32 {
        var options = BenchOptions()
        if let drivers {
            options.drivers = drivers.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty }
        }
        if let workloads {
            do {
                options.workloads = try Workload.parseList(workloads)
            } catch let error as BenchError {
                throw CLIFailure.usage(error.description, "see 'depot help bench'")
            }
        }
        options.rounds = rounds
        options.records = records
        if let operations { options.operations = operations }
        guard let chosen = Durability(rawValue: durability) else {
            throw CLIFailure.usage("--durability must be full or normal", "write --durability full or --durability normal")
        }
        options.durability = chosen
        options.jsonPath = json
        options.chartPath = chart
        options.quick = quick
        options.streamingRecords = streaming
        guard jsonRecords >= 1 else { throw CLIFailure.usage("--json-records must be at least 1", "write for example --json-records 20000") }
        options.jsonRecordLimit = jsonRecords
        var counts: [Int] = []
        for part in clients.split(separator: ",", omittingEmptySubsequences: false) {
            let text = part.trimmingCharacters(in: .whitespaces)
            guard let count = Int(text), (1...64).contains(count) else {
                throw CLIFailure.usage("--clients takes counts from 1 to 64 separated by commas, not '\(text)'", "write for example --clients 1,2,4, or --clients 1 to leave the concurrent reads out")
            }
            counts.append(count)
        }
        options.clients = counts
        // The streaming check's stream runs in a fresh `depot` process (see --stream-store).
        if let executable = Bundle.main.executablePath {
            options.streamingCommand = [executable, "bench", "--stream-store"]
        }
        var external: [String: () throws -> [any BenchTarget]] = [:]
        options.externalDrivers = ["postgres"]
        if options.drivers.contains("postgres") {
            let fromEnvironment = ProcessInfo.processInfo.environment[Self.postgresEnvironmentKey].flatMap { $0.isEmpty ? nil : $0 }
            guard let postgres = postgres ?? fromEnvironment else {
                throw CLIFailure.usage("--drivers postgres needs a server", "add --postgres postgres://user@host/database, or set \(Self.postgresEnvironmentKey) to that URL")
            }
            let source = self.postgres == nil ? Self.postgresEnvironmentKey : "--postgres"
            #if PostgreSQL
            let server: PostgresSettings
            do {
                server = try PostgresSettings(StoreLocation(postgres))
            } catch let error as DepotError {
                throw CLIFailure.usage("\(source): \(error.message)", "write postgres://user[:password]@host[:port]/database")
            }
            external["postgres"] = { try PostgresBench.targets(server: server) }
            #else
            _ = (postgres, source)
            throw CLIFailure.failed("--drivers postgres is not available in this build", PostgresAvailability.advice)
            #endif
        }
        do {
            try options.validate()
        } catch let error as BenchError {
            throw CLIFailure.usage(error.description, "see 'depot help bench'")
        }
        let quiet = context.quiet
        do {
            let report = try await DepotBench.runBench(options, external: external) { line in
                // The table (and its notes) is data: standard output. Progress: standard error.
                if line.hasPrefix("round ") || line.hasPrefix("streaming check, ") && line.contains("loading") || line.hasPrefix("depot bench:") || line.hasPrefix("skipping ") || line.hasPrefix("warning:") {
                    if !quiet { Console.stderr(line + "\n") }
                } else {
                    Console.print(line)
                }
            }
            let failed = report.notes.contains { $0.hasPrefix("FAILED") } || !report.streaming.allSatisfy(\.passed)
            return failed ? ExitStatus.failure : ExitStatus.success
        } catch let error as BenchError {
            throw CLIFailure.failed(error.description, "run again with --quick to check the setup")
        }
    }
}
