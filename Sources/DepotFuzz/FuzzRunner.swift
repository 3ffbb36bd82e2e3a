import DepotCore

/// Runs a target's seeds, then mutants of them, checking the contract on each.
///
/// Without coverage feedback, inputs the target accepted (it returned a value) join a
/// bounded pool the mutator draws from, so runs move from the seeds towards inputs that get
/// deep into the decoder. One seed gives one sequence of inputs.
///
/// The time budget counts the processor time of one input (a loaded machine does not make a
/// fast input fail). A hang cannot be interrupted in-process: a watchdog thread saves the
/// input that has run for ten times the budget in wall time into `failureDirectory`, prints
/// it and ends the process with status 70. An input that finishes over the budget is a
/// `.timeout` failure.
public struct FuzzRunner: Sendable {
    /// How many inputs to run (seeds included).
    public var executions: Int
    /// The mutator's seed.
    public var seed: UInt64
    /// The longest any one input may take, in seconds.
    public var timeBudget: Double
    /// The longest input made.
    public var maximumLength: Int
    /// The run stops after this many failures.
    public var maximumFailures: Int
    /// Where the watchdog saves a hanging input (the current directory when `nil`).
    public var failureDirectory: String?
    /// The wall time after which the watchdog takes a still-running input for a hang and ends
    /// the process: ten times `timeBudget` unless set.
    public var hangLimit: Double

    /// A runner.
    public init(executions: Int, seed: UInt64 = 1, timeBudget: Double = 1, maximumLength: Int = 4096, maximumFailures: Int = 1, failureDirectory: String? = nil, hangLimit: Double? = nil) {
        self.executions = executions
        self.seed = seed
        self.timeBudget = timeBudget
        self.maximumLength = maximumLength
        self.maximumFailures = maximumFailures
        self.failureDirectory = failureDirectory
        self.hangLimit = hangLimit ?? timeBudget * 10
    }

    /// Runs `target`. `beforeEach` sees every input before it runs (the crash guard keeps a
    /// copy); `progress` is called about every second with the executions so far.
    public func run(_ target: FuzzTarget, beforeEach: (([UInt8]) -> Void)? = nil, progress: ((Int, Double) -> Void)? = nil) -> FuzzReport {
        let seeds = target.seeds.isEmpty ? [[]] : target.seeds
        var pool = seeds
        let poolLimit = 512
        var mutator = Mutator(seed: seed, dictionary: target.dictionary, nesting: target.nesting, maximumLength: maximumLength)
        var random = SplitMix64(seed: seed ^ 0x5EED_F00D)
        var report = FuzzReport(target: target.name, executions: 0, accepted: 0, seconds: 0, slowest: 0, failures: [])
        let watchdog = FuzzWatchdog(target: target.name, limit: hangLimit, directory: failureDirectory)
        defer { watchdog.stop() }
        let start = FuzzWatchdog.now()
        var lastProgress = start
        for execution in 0..<executions {
            let input: [UInt8]
            if execution < seeds.count {
                input = seeds[execution]
            } else if random.next() % 256 == 0 {
                input = (0..<Int(random.next() % 257)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            } else {
                let base = random.next() % 4 == 0 ? seeds[Int(random.next() % UInt64(seeds.count))] : pool[Int(random.next() % UInt64(pool.count))]
                let other = pool[Int(random.next() % UInt64(pool.count))]
                input = mutator.mutate(base, other: other)
            }
            beforeEach?(input)
            let began = FuzzWatchdog.now()
            let beganCPU = FuzzWatchdog.threadCPUTime()
            watchdog.begin(input, at: began)
            var violation: FuzzViolation?
            do {
                if try target.check(input) {
                    report.accepted += 1
                    if execution >= seeds.count {
                        if pool.count < poolLimit { pool.append(input) } else { pool[Int(random.next() % UInt64(poolLimit))] = input }
                    }
                }
            } catch {
                violation = error
            }
            let took = Double(FuzzWatchdog.threadCPUTime() - beganCPU) / 1e9
            let ended = FuzzWatchdog.now()
            watchdog.end()
            report.slowest = max(report.slowest, took)
            if violation == nil, took > timeBudget {
                violation = FuzzViolation(.timeout, "one input took \(took) s of processor time, over the budget of \(timeBudget) s")
            }
            report.executions += 1
            if let violation {
                report.failures.append(FuzzFailure(target: target.name, violation: violation, input: input, execution: execution))
                if report.failures.count >= maximumFailures { break }
            }
            if let progress, ended - lastProgress > 1_000_000_000 {
                lastProgress = ended
                progress(report.executions, Double(ended - start) / 1e9)
            }
        }
        report.seconds = Double(FuzzWatchdog.now() - start) / 1e9
        return report
    }

    /// Runs one saved input through `target`: `nil` when the contract held.
    public static func replay(_ input: [UInt8], on target: FuzzTarget) -> FuzzViolation? {
        do {
            _ = try target.check(input)
            return nil
        } catch {
            return error
        }
    }
}
