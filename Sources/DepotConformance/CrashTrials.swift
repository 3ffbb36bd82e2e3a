import DepotCore
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a series of kill trials found.
public struct CrashTrialReport: Sendable, CustomStringConvertible {
    /// Trials run (each: start the helper, SIGKILL it, reopen, verify).
    public var trials = 0
    /// Trials in which the helper had acknowledged at least one commit before the kill.
    public var trialsWithCommits = 0
    /// Commits acknowledged over all trials.
    public var acknowledgedCommits = 0
    /// Trials in which the commit in flight at the kill turned out to be durable too.
    public var inFlightCommitsKept = 0
    /// The last transaction number found after the final trial.
    public var finalTransaction: Int64 = 0
    /// How many kills left the store in each state the caller's `classify` named (what the
    /// kills exercised, for drivers whose on-disk states differ, like GDBM's folds).
    public var killStates: [String: Int] = [:]

    /// A one-line summary of the trials, for test output.
    public var description: String {
        let states = killStates.isEmpty ? "" : "; store states at the kills: " + killStates.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        return "\(trials) kill trials, \(trialsWithCommits) with acknowledged commits, \(acknowledgedCommits) commits acknowledged, every one found after reopening; \(inFlightCommitsKept) in-flight commits kept whole, none partial; last transaction \(finalTransaction)" + states
    }
}

/// Crash safety tested by killing: runs `depot-crash-helper` against a store, kills it with
/// SIGKILL at a random moment, reopens the store and checks that it passes its integrity
/// check, holds every acknowledged commit, and shows no partial transaction.
///
/// ```swift
/// let report = try await CrashTrials.run(store: "sqlite:\(dir)/s.db", factory: factory, directory: dir, trials: 200, seed: 1)
/// ```
public enum CrashTrials {
    /// The number of kill trials a configuration of a driver runs: `defaultTrials`, or, when
    /// the environment sets `DEPOT_CRASH_TRIALS=N` (the long mode, Docs/Testing.md), the
    /// configuration's even share of N trials for the whole driver.
    /// - Parameters:
    ///   - defaultTrials: the configuration's trials in the normal suite.
    ///   - configurations: how many configurations of the driver share the long mode's N
    ///     (for example 2 when it runs at durability full and normal).
    public static func trialCount(default defaultTrials: Int, configurations: Int = 1) -> Int {
        guard let text = ProcessInfo.processInfo.environment["DEPOT_CRASH_TRIALS"], let total = Int(text), total > 0 else {
            return defaultTrials
        }
        return max(1, total / max(1, configurations))
    }

    /// How many times later than nominal the kills may land: the `DEPOT_TEST_KILL_DELAY_SCALE`
    /// environment variable (a whole number ≥ 1; 1 when unset). `scripts/sanitize` sets it,
    /// since a sanitizer build starts the helper several times slower and kills at the
    /// nominal delays would land before the helper commits anything (Docs/Testing.md,
    /// "Sanitizers").
    public static let killDelayScale: Int = {
        guard let text = ProcessInfo.processInfo.environment["DEPOT_TEST_KILL_DELAY_SCALE"], let scale = Int(text), scale >= 1, scale <= 1000 else { return 1 }
        return scale
    }()

    /// Runs `trials` kill trials against one store that grows from trial to trial.
    /// - Parameters:
    ///   - store: the store string the helper opens.
    ///   - factory: opens the same store in `directory` for verification.
    ///   - maxDelayMilliseconds: kills land uniformly between 0 and this after launch, times
    ///     ``killDelayScale``.
    ///   - classify: names the state the kill left in `directory`, looked at before the
    ///     store is reopened; counted in ``CrashTrialReport/killStates``.
    ///   - bulkEvery: when above 0, every `bulkEvery`-th transaction of the helper also
    ///     inserts ``bulkRecords`` records into a `bulk` collection (a large transaction), and
    ///     the check finds each such transaction's records all there or all absent.
    /// - Throws: ``ConformanceFailure`` on a lost commit, a partial transaction, an integrity
    ///   problem, or a helper that failed by itself.
    public static func run(
        store: String, factory: DriverFactory, directory: String, trials: Int, seed: UInt64,
        maxDelayMilliseconds: Int = 120, classify: (@Sendable (String) -> String)? = nil, bulkEvery: Int = 0
    ) async throws -> CrashTrialReport {
        let helper = try helperPath()
        var report = CrashTrialReport()
        var random = SplitMix64(seed: seed)
        var lastVerified: Int64 = 0
        for trial in 0..<trials {
            let delay = Int(random.next() % UInt64(max(1, maxDelayMilliseconds) * killDelayScale * 1000))
            let output = try await runAndKill(helper: helper, store: store, seed: random.next(), delayMicroseconds: delay, trial: trial, bulkEvery: bulkEvery)
            let acked = output.acknowledged
            if let classify { report.killStates[classify(directory), default: 0] += 1 }
            let driver = try await factory.open(directory)
            let found: Int64
            do {
                found = try await verify(driver, trial: trial, bulkEvery: bulkEvery)
                try await driver.close()
            } catch {
                try? await driver.close()
                throw error
            }
            let highestAck = acked.max() ?? lastVerified
            guard found >= highestAck else {
                throw failure("trial \(trial): transaction \(highestAck) was acknowledged but the store ends at \(found)")
            }
            guard found <= highestAck + 1 else {
                throw failure("trial \(trial): the store holds transaction \(found) but only \(highestAck) could have started")
            }
            report.trials += 1
            if !acked.isEmpty { report.trialsWithCommits += 1 }
            report.acknowledgedCommits += acked.count
            if found == highestAck + 1 { report.inFlightCommitsKept += 1 }
            lastVerified = found
        }
        report.finalTransaction = lastVerified
        return report
    }

    /// Records the helper's large transactions insert into `bulk` (``run(store:factory:directory:trials:seed:maxDelayMilliseconds:classify:bulkEvery:)``):
    /// more than the GDBM driver's threshold for applying a commit with its files unmapped
    /// (Docs/GDBMDriver.md, "Large applies").
    public static let bulkRecords = 1_100

    /// Checks a store the helper wrote: integrity, every transaction up to `meta.last`
    /// whole, nothing beyond it (with `bulkEvery`, the large transactions' `bulk` records
    /// too). Returns the last transaction number.
    public static func verify(_ driver: any StorageDriver, trial: Int = 0, bulkEvery: Int = 0) async throws -> Int64 {
        let problems = try await driver.integrityCheck()
        guard problems.isEmpty else { throw failure("trial \(trial): integrity check: \(problems.joined(separator: "; "))") }
        let accounts = try CollectionName("accounts"), ledger = try CollectionName("ledger"), meta = try CollectionName("meta")
        let (last, accountRecords, ledgerRecords) = try await driver.read { tx in
            (try tx.get("last", from: meta)?.fields["n"]?.intValue ?? 0,
             try tx.query(Query(), in: accounts),
             try tx.query(Query(), in: ledger))
        }
        var expected: [Int64] = []
        if last > 0 {
            for n in 1...last where !((n + 5) % 7 == 0 && n + 5 <= last && n + 5 > 5) { expected.append(n) }
        }
        let accountIDs = accountRecords.map { $0.id }, ledgerIDs = ledgerRecords.map { $0.id }
        let expectedIDs = expected.map { RecordID.int($0) }
        guard accountIDs == expectedIDs else {
            throw failure("trial \(trial): accounts hold \(accountIDs.count) records, expected \(expectedIDs.count) for transaction \(last) (first difference at \(String(describing: zip(accountIDs, expectedIDs).first { $0 != $1 })))")
        }
        guard ledgerIDs == expectedIDs else {
            throw failure("trial \(trial): ledger holds \(ledgerIDs.count) records, expected \(expectedIDs.count): a transaction is partly visible")
        }
        for record in accountRecords + ledgerRecords where record.fields["n"] != record.id.fieldValue {
            throw failure("trial \(trial): record \(record.id) holds n = \(record.fields["n"] ?? .null)")
        }
        if bulkEvery > 0 { try await verifyBulk(driver, last: last, every: Int64(bulkEvery), trial: trial) }
        return last
    }

    /// The `bulk` records: for each transaction n ≤ `last` with n % `every` == 0, exactly
    /// ids n × 100,000 + 0 ..< ``bulkRecords``, each with t = n; nothing else.
    static func verifyBulk(_ driver: any StorageDriver, last: Int64, every: Int64, trial: Int) async throws {
        let bulk = try CollectionName("bulk")
        let records = try await driver.read { tx in try tx.query(Query(), in: bulk) }
        var expected: [RecordID] = []
        var n = every
        while n <= last {
            for i in 0..<Int64(bulkRecords) { expected.append(.int(n * 100_000 + i)) }
            n += every
        }
        let ids = records.map(\.id)
        guard ids == expected else {
            throw failure("trial \(trial): bulk holds \(ids.count) records, expected \(expected.count) for transaction \(last): a large transaction is partly visible or lost")
        }
        for record in records {
            guard case .int(let id) = record.id, record.fields["t"] == .int(id / 100_000) else {
                throw failure("trial \(trial): bulk record \(record.id) holds t = \(record.fields["t"] ?? .null)")
            }
        }
    }

    struct HelperOutput {
        var acknowledged: [Int64]
    }

    static func runAndKill(helper: String, store: String, seed: UInt64, delayMicroseconds: Int, trial: Int, bulkEvery: Int = 0) async throws -> HelperOutput {
        let child = try ChildProcess(path: helper, arguments: [store, String(seed)] + (bulkEvery > 0 ? [String(bulkEvery), String(bulkRecords)] : []))
        try? await Task.sleep(for: .microseconds(delayMicroseconds))
        let exitedEarly = !child.isRunning
        child.kill(SIGKILL)
        let result = await child.exit()
        if exitedEarly, case .exited(let code) = result.status {
            throw failure("trial \(trial): the helper exited with status \(code) before the kill: \(result.errorText.prefix(500))")
        }
        var acked: [Int64] = []
        for line in result.outputText.split(separator: "\n") where line.hasPrefix("ACK ") {
            if let n = Int64(line.dropFirst(4)) { acked.append(n) }
        }
        return HelperOutput(acknowledged: acked)
    }

    /// Finds `depot-crash-helper` beside the test binary (or in `DEPOT_CRASH_HELPER`).
    public static func helperPath() throws -> String {
        if let path = ProcessInfo.processInfo.environment["DEPOT_CRASH_HELPER"] { return path }
        var directory = URL(fileURLWithPath: CommandLine.arguments.first ?? ".").deletingLastPathComponent()
        for _ in 0..<6 {
            let candidate = directory.appendingPathComponent("depot-crash-helper").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        throw failure("depot-crash-helper was not found beside the test binary; run `swift build` first")
    }

    static func failure(_ message: String, line: Int = #line) -> ConformanceFailure {
        ConformanceFailure(check: "crash", message: message, file: #fileID, line: line)
    }
}
