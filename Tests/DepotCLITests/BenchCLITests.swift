import Foundation
import Testing

/// `depot bench --clients`: bad counts are usage errors that say what to write.
@Suite struct BenchCLITests {
    @Test("bench --clients rejects counts outside 1…64 and text, with status 2")
    func badClientCounts() async throws {
        for bad in ["0", "2,x", "65", "1,,2", " "] {
            let run = try await CLI.run(["bench", "--quick", "--clients", bad])
            #expect(run.status == 2, "--clients \(bad): \(run)")
            #expect(run.stderr.contains("--clients takes counts from 1 to 64"), "--clients \(bad): \(run)")
        }
    }

    @Test("bench --drivers postgres takes its server from --postgres or DEPOT_BENCH_POSTGRES; a bad one is a usage error that names where it came from and not its password")
    func postgresServerSources() async throws {
        let none = try await CLI.run(["bench", "--quick", "--drivers", "postgres"], environment: ["DEPOT_BENCH_POSTGRES": ""])
        #expect(none.status == 2 && none.stderr.contains("--drivers postgres needs a server") && none.stderr.contains("DEPOT_BENCH_POSTGRES"), "\(none)")
        let badEnvironment = try await CLI.run(["bench", "--quick", "--drivers", "postgres"], environment: ["DEPOT_BENCH_POSTGRES": "postgres://u:s3cret@h:99999/db"])
        #expect(badEnvironment.status == 2 && badEnvironment.stderr.contains("DEPOT_BENCH_POSTGRES: The port"), "\(badEnvironment)")
        #expect(!badEnvironment.stderr.contains("s3cret") && !badEnvironment.stdout.contains("s3cret"), "\(badEnvironment)")
        // --postgres wins over the environment: the option's own mistake is reported.
        let badOption = try await CLI.run(["bench", "--quick", "--drivers", "postgres", "--postgres", "mysql://u:s3cret@h/db"], environment: ["DEPOT_BENCH_POSTGRES": "postgres://u@h:99999/db"])
        #expect(badOption.status == 2 && badOption.stderr.contains("--postgres: A PostgreSQL store string starts with postgres:"), "\(badOption)")
        #expect(!badOption.stderr.contains("s3cret"), "\(badOption)")
    }

    @Test("bench --json-records sets the JSON driver's record cap on both sides; 0 is a usage error")
    func jsonRecordCap() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let run = try await CLI.run(["bench", "--quick", "--drivers", "json", "--workloads", "point-reads", "--clients", "1", "--streaming", "0", "--json-records", "300"], environment: ["TMPDIR": directory.path])
        #expect(run.status == 0, "\(run)")
        let rows = run.stdout.split(separator: "\n").filter { $0.hasPrefix("point reads") }
        #expect(rows.count == 2, "\(run)")
        // The records column is the row's first number: json and json floor both loaded 300.
        for row in rows { #expect(row.split(separator: " ").first { Int($0) != nil } == "300", "\(row)") }
        let bad = try await CLI.run(["bench", "--quick", "--json-records", "0"])
        #expect(bad.status == 2 && bad.stderr.contains("--json-records must be at least 1"), "\(bad)")
    }
}

/// `depot bench-sync --clients`: many clients against a `depot serve` process.
@Suite struct BenchSyncClientsTests {
    @Test("bench-sync --clients 6: every client converges with the server, nothing lost or duplicated, the server's peak RSS reported")
    func manyClients() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let run = try await CLI.run(["bench-sync", "--clients", "6", "--shared", "30", "--entries", "20", "--batch-size", "7", "--page-size", "8", "--rounds", "1"], environment: ["TMPDIR": directory.path])
        #expect(run.status == 0, "\(run)")
        // 6 × 20 inserted, 6 × 2 updates of shared records; the command checks what it prints.
        #expect(run.stdout.contains("entries pushed per round: 132"), "\(run)")
        #expect(run.stdout.contains("server holds 150 records = 30 shared + 6 × 20: 0 lost, 0 duplicated"), "\(run)")
        #expect(run.stdout.contains("converged"), "\(run)")
        #expect(run.stdout.contains("server peak RSS (VmHWM of the depot serve process): "), "\(run)")
        #if os(Linux)
        #expect(!run.stdout.contains("unknown"), "/proc gives the server's VmHWM: \(run)")
        #endif
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty, "the command removes its stores")
        let bad = try await CLI.run(["bench-sync", "--clients", "0"])
        #expect(bad.status == 2 && bad.stderr.contains("--clients must be 1 to 500"), "\(bad)")
    }
}
