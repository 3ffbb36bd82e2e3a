import ArgumentParser
import Depot
import DepotCLIParsers
import DepotCore
import DepotHTTPClient
import DepotServer
import DepotSync
import Foundation

/// `depot bench-sync`: the sync benchmark of Docs/Sync.md — a pull of N records from a
/// DepotServer on loopback into a fresh local store, and a push of M outbox entries.
///
/// Everything runs in this process: a DepotServer on 127.0.0.1 (an ephemeral port) over a
/// temporary SQLite store, and for each round a fresh temporary SQLite store on the client
/// side with a ``SyncCoordinator`` over the transport `--transport` names (NIO or URLSession).
/// The temporary directory is removed at the end.
struct BenchSyncCommand: DepotSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-sync",
        abstract: "Benchmark sync over loopback: pull N records from a DepotServer, push M outbox entries.",
        usage: "depot bench-sync [--records N] [--entries N] [--page-size N] [--batch-size N] [--push-fields N] [--pull-fields N] [--rounds N] [--durability full|normal] [--transport nio|urlsession] [--clients N --shared N]",
        discussion: """
            Starts a DepotServer on 127.0.0.1 (ephemeral port) over a temporary SQLite store \
            holding --records records, then per round: pulls them all into a new SQLite store \
            (records/s), and pushes --entries outbox entries written to another new store \
            (entries/s), in batches of --batch-size entries (1: one request per entry). Prints \
            each round, the median, the requests made and the settings. Not a test: it checks \
            only that everything arrived. See Docs/Sync.md.

            Example:
              depot bench-sync --records 10000 --entries 1000
            """
    )

    @Option(help: "Records on the server, pulled each round.")
    var records = 10_000

    @Option(help: "Outbox entries pushed each round.")
    var entries = 1_000

    @Option(help: "Records per page of the pull.")
    var pageSize = 1_000

    @Option(help: "Outbox entries per POST /_batch of the push (1: one request per entry).")
    var batchSize = SyncCoordinator.defaultPushBatchSize

    @Option(help: "Fields of each pushed record (2 to 20; 2 is the first version's workload). With --clients, a client's inserts have 3 fields (n, text, by) and the extra ones from 4 on.")
    var pushFields = 2

    @Option(help: "Fields of each record on the server, pulled (4 to 20; 4 is the first version's workload).")
    var pullFields = 4

    @Option(help: ArgumentHelp("Many clients instead: N clients (tasks, each with its own SQLite store) pull --shared records from a 'depot serve' process, each inserts --entries records and updates --entries/10 shared ones offline, all push at once, all pull at once; checks 0 lost, 0 duplicated, converged; reports throughput and the server's peak RSS. 1: the pull and push of one client.", valueName: "N"))
    var clients = 1

    @Option(help: ArgumentHelp("With --clients: records on the server that every client pulls first and some update.", valueName: "N"))
    var shared = 1_000

    @Option(help: "Rounds (the median is reported).")
    var rounds = 3

    @Option(help: ArgumentHelp("full or normal, for the server's and the clients' SQLite stores.", valueName: "full|normal"))
    var durability = "normal"

    @Option(help: ArgumentHelp("The clients' HTTP transport: nio (NIOHTTPTransport, what depot sync uses for http://) or urlsession (URLSessionTransport, the library's default).", valueName: "nio|urlsession"))
    var transport = "nio"

    @OptionGroup var global: GlobalOptions

    func execute(_ context: CommandContext) async throws -> Int32 {
        guard durability == "full" || durability == "normal" else {
            throw CLIFailure.usage("--durability must be full or normal", "write --durability full or --durability normal")
        }
        guard transport == "nio" || transport == "urlsession" else {
            throw CLIFailure.usage("--transport must be nio or urlsession", "write --transport nio or --transport urlsession")
        }
        guard records >= 1, entries >= 1, rounds >= 1, batchSize >= 1, (1...10_000).contains(pageSize), (2...20).contains(pushFields), (4...20).contains(pullFields) else {
            throw CLIFailure.usage(
                "--records, --entries, --batch-size and --rounds must be 1 or more, --page-size 1 to 10000, --push-fields 2 to 20, --pull-fields 4 to 20",
                "for example --records 10000 --entries 1000")
        }
        guard (1...500).contains(clients), shared >= 0 else {
            throw CLIFailure.usage("--clients must be 1 to 500 and --shared 0 or more", "for example --clients 50 --entries 200")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("depot-bench-sync-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        if clients > 1 { return try await runManyClients(directory: directory) }

        let serverStore = try await Store.open("sqlite:\(directory)/server.sqlite?durability=\(durability)")
        let items = try CollectionName("items")
        let count = records
        let pullFieldCount = pullFields
        try await serverStore.write { tx in
            for i in 0..<count {
                var fields: [String: FieldValue] = ["title": .string("item \(i)"), "n": .int(Int64(i)), "ok": .bool(i % 2 == 0), "score": .double(Double(i) / 7)]
                for extra in 4..<pullFieldCount {
                    // Beyond the first four: alternating numbers, text and flags, as for the push.
                    switch extra % 3 {
                    case 0: fields["f\(extra)"] = .int(Int64(i &* extra))
                    case 1: fields["f\(extra)"] = .string("value \(extra) of \(i)")
                    default: fields["f\(extra)"] = .bool(i % extra == 0)
                    }
                }
                try tx.insert(Record(id: .int(Int64(i + 1)), fields: fields), into: items)
            }
        }
        let server = DepotServer(store: serverStore, configuration: .init(host: "127.0.0.1", port: 0))
        let port: Int
        do { port = try await server.start() } catch {
            try? await serverStore.close()
            throw error
        }
        let transport = CountingTransport(inner: Self.transport(transport, timeout: 30))
        var pulls: [Double] = [], pushes: [Double] = []
        var pullRequests = 0, pushRequests = 0
        do {
            guard let base = URL(string: "http://127.0.0.1:\(port)") else { throw CLIFailure.failed("no URL for port \(port)", "retry") }
            for round in 1...rounds {
                // Pull: a fresh store, its first sync of the collection.
                let pullStore = try await Store.open("sqlite:\(directory)/pull-\(round).sqlite?durability=\(durability)")
                let (pullSeconds, pulled, pullCount) = try await StoreArguments.using(pullStore) { store in
                    let sync = SyncCoordinator(store: store, transport: transport)
                    var endpoint = SyncEndpoint(baseURL: base, path: "/items")
                    endpoint.pageSize = pageSize
                    try await sync.attach(items, to: endpoint)
                    let before = transport.requests
                    let start = ContinuousClock.now
                    let report = try await sync.sync(items, pull: true, push: false)
                    let seconds = Self.seconds(ContinuousClock.now - start)
                    guard report.succeeded else { throw CLIFailure.failed("the pull failed: \(report.failures.first ?? "")", "retry") }
                    let local = try await store.read { tx in try tx.count(.all, in: items) }
                    return (seconds, local, transport.requests - before)
                }
                guard pulled == count else { throw CLIFailure.failed("the pull stored \(pulled) of \(count) records", "this is a bug; report it") }
                pulls.append(Double(count) / pullSeconds)
                pullRequests = pullCount

                // Push: a fresh store whose outbox holds `entries` inserts of client-id notes.
                let pushStore = try await Store.open("sqlite:\(directory)/push-\(round).sqlite?durability=\(durability)")
                let notes = try CollectionName("notes")
                let total = entries
                let batch = batchSize
                let fieldCount = pushFields
                let (pushSeconds, pushed, pushCount) = try await StoreArguments.using(pushStore) { store in
                    let sync = SyncCoordinator(store: store, transport: transport, pushBatchSize: batch)
                    try await sync.attach(notes, to: SyncEndpoint(baseURL: base, path: "/notes"))
                    try await store.write { tx in
                        for i in 0..<total {
                            var fields: [String: FieldValue] = ["n": .int(Int64(i)), "text": .string("note \(i) of round \(round)")]
                            for extra in 2..<fieldCount { fields["f\(extra)"] = Self.extraField(extra, of: i) }
                            try tx.save(Record(id: .string("r\(round)-\(i)"), fields: fields), into: notes)
                        }
                    }
                    let before = transport.requests
                    let start = ContinuousClock.now
                    let report = try await sync.sync(notes, pull: false, push: true)
                    let seconds = Self.seconds(ContinuousClock.now - start)
                    guard report.succeeded else { throw CLIFailure.failed("the push failed: \(report.failures.first ?? "")", "retry") }
                    return (seconds, report.pushed, transport.requests - before)
                }
                guard pushed == total else { throw CLIFailure.failed("the push sent \(pushed) of \(total) entries", "this is a bug; report it") }
                pushes.append(Double(total) / pushSeconds)
                pushRequests = pushCount
                if !global.quiet {
                    Console.stderr("depot: round \(round): pull \(Int(pulls[round - 1])) records/s, push \(Int(pushes[round - 1])) entries/s\n")
                }
            }
        } catch {
            await server.stop()
            try? await serverStore.close()
            throw error
        }
        await server.stop()
        try await serverStore.close()

        Console.print("depot bench-sync: DepotServer on 127.0.0.1 (loopback, in-process), \(self.transport == "nio" ? "NIO" : "URLSession") transport, SQLite stores on both sides")
        Console.print("settings: records=\(records) entries=\(entries) pageSize=\(pageSize) batchSize=\(batchSize) pushFields=\(pushFields) durability=\(durability) rounds=\(rounds) pullFields=\(pullFields)")
        Console.print("pull: \(Int(Self.median(pulls))) records/s (median; rounds: \(pulls.map { String(Int($0)) }.joined(separator: ", "))), \(pullRequests) requests per pull (listing pages + change feed)")
        Console.print("push: \(Int(Self.median(pushes))) entries/s (median; rounds: \(pushes.map { String(Int($0)) }.joined(separator: ", "))), \(pushRequests) requests per push (\(batchSize == 1 ? "one request per entry" : "batches of up to \(batchSize) entries, and one GET /_batch"))")
        return ExitStatus.success
    }

    /// The value of extra field number `extra` of pushed record `i`: beyond a record's first
    /// fields, alternating numbers, text and flags.
    static func extraField(_ extra: Int, of i: Int) -> FieldValue {
        switch extra % 3 {
        case 0: return .int(Int64(i &* extra))
        case 1: return .string("value \(extra) of \(i)")
        default: return .bool(i % extra == 0)
        }
    }

    /// `--clients N`: the many-clients scenario, `rounds` times, then its figures.
    /// - Throws: ``CLIFailure`` when a check fails.
    private func runManyClients(directory: String) async throws -> Int32 {
        guard let executable = Bundle.main.executablePath else {
            throw CLIFailure.failed("cannot find this program's path to start 'depot serve'", "run depot by its path")
        }
        let scenario = ManyClientsScenario(clients: clients, shared: shared, entries: entries, batchSize: batchSize, pageSize: pageSize, durability: durability, directory: directory, executable: executable, transport: transport, pushFields: pushFields)
        var rounds: [ManyClientsScenario.Round] = []
        for round in 1...self.rounds {
            let measured = try await scenario.run(round: round)
            rounds.append(measured)
            if !global.quiet {
                Console.stderr("depot: round \(round): push \(Int(Double(measured.pushed) / measured.pushSeconds)) entries/s, pull \(Int(Double(measured.pulled) / measured.pullSeconds)) records/s, server peak RSS \(measured.serverPeakRSS.map { "\($0 >> 20) MB" } ?? "unknown")\n")
            }
        }
        let pushRates = rounds.map { Double($0.pushed) / $0.pushSeconds }
        let pullRates = rounds.map { Double($0.pulled) / $0.pullSeconds }
        let firstRates = rounds.map { Double(clients * shared) / $0.initialPullSeconds }
        Console.print("depot bench-sync --clients \(clients): a 'depot serve' process on 127.0.0.1 over SQLite; \(clients) clients (tasks of this process, one SQLite store and \(transport == "nio" ? "NIO" : "URLSession") transport each)")
        Console.print("settings: clients=\(clients) shared=\(shared) entries=\(entries) (per client; plus \(entries / 10) updates of shared records) insertFields=\(max(3, pushFields)) pageSize=\(pageSize) batchSize=\(batchSize) durability=\(durability) rounds=\(self.rounds)")
        Console.print("first pull: \(Int(Self.median(firstRates))) records/s over all clients (median; \(clients) × \(shared) records)")
        Console.print("push: \(Int(Self.median(pushRates))) entries/s over all clients (median; rounds: \(pushRates.map { String(Int($0)) }.joined(separator: ", "))); entries pushed per round: \(rounds.map { String($0.pushed) }.joined(separator: ", ")); conflicts: \(rounds.map { String($0.conflicts) }.joined(separator: ", "))")
        Console.print("pull after the push: \(Int(Self.median(pullRates))) records/s over all clients (median; rounds: \(pullRates.map { String(Int($0)) }.joined(separator: ", ")))")
        Console.print("checks: server holds \(rounds.map { String($0.serverRecords) }.joined(separator: ", ")) records = \(shared) shared + \(clients) × \(entries): 0 lost, 0 duplicated; every client equal to the server, outboxes empty: converged")
        Console.print("server peak RSS (VmHWM of the depot serve process): \(rounds.map { $0.serverPeakRSS.map { String(format: "%.1f MB", Double($0) / 1_048_576) } ?? "unknown" }.joined(separator: ", "))")
        return ExitStatus.success
    }

    static func seconds(_ duration: Duration) -> Double {
        let (s, atto) = duration.components
        return max(1e-9, Double(s) + Double(atto) / 1e18)
    }

    /// The transport `name` (`nio` or `urlsession`) names.
    static func transport(_ name: String, timeout: TimeInterval) -> any HTTPTransport {
        name == "urlsession" ? URLSessionTransport(timeout: timeout) : NIOHTTPTransport(timeout: timeout)
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }
}

/// A transport counting the requests it sends.
final class CountingTransport: HTTPTransport {
    let inner: any HTTPTransport
    let count = Locked(0)

    init(inner: any HTTPTransport) { self.inner = inner }

    var requests: Int { count.withLock { $0 } }

    func send(_ request: HTTPRequestSpec) async throws -> HTTPAnswer {
        count.withLock { $0 += 1 }
        return try await inner.send(request)
    }
}
