import DepotFuzz
import Foundation

// depot-fuzz: runs the fuzz targets of DepotFuzz (Docs/Fuzzing.md). scripts/fuzz builds and
// runs it.

/// Prints one line and flushes it, so a long run's progress shows as it goes even when the
/// output is a file.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let usage = """
    usage: depot-fuzz [--executions N] [--seed S] [--time-budget SECONDS] [--max-length BYTES]
                      [--corpus DIR] [--failures DIR] [--list] [--replay FILE] [--export-seeds DIR] [TARGET...]
    Runs each TARGET (all by default) for N executions (default 100000); a failing input is saved
    in the failures folder (default fuzz-failures). --replay runs one saved input through the TARGETs.
    """

var executions = 100_000
var seed: UInt64 = 1
var budget = 1.0
var maximumLength = 4096
var corpus = "Tests/Fuzz"
var failures = "fuzz-failures"
var replay: String?
var names: [String] = []
var arguments = Array(CommandLine.arguments.dropFirst())

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("depot-fuzz: \(message)\n\(usage)\n".utf8))
    exit(2)
}

@MainActor func value(_ option: String) -> String {
    guard !arguments.isEmpty else { fail("\(option) needs a value") }
    return arguments.removeFirst()
}

while !arguments.isEmpty {
    let argument = arguments.removeFirst()
    switch argument {
    case "--executions": guard let n = Int(value(argument)), n > 0 else { fail("--executions needs a positive integer") }; executions = n
    case "--seed": guard let n = UInt64(value(argument)) else { fail("--seed needs an integer") }; seed = n
    case "--time-budget": guard let n = Double(value(argument)), n > 0 else { fail("--time-budget needs seconds") }; budget = n
    case "--max-length": guard let n = Int(value(argument)), n > 0 else { fail("--max-length needs bytes") }; maximumLength = n
    case "--corpus": corpus = value(argument)
    case "--failures": failures = value(argument)
    case "--replay": replay = value(argument)
    case "--export-seeds":
        // Writes each target's built-in seeds as corpus files (how the binary corpora were made).
        let folder = value(argument)
        for target in FuzzTarget.all {
            let directory = folder + "/" + target.name
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                FileHandle.standardError.write(Data("depot-fuzz: cannot create \(directory): \(error.localizedDescription)\n".utf8))
                exit(1)
            }
            for (n, seed) in target.seeds.enumerated() {
                let path = directory + "/builtin-\(n)"
                guard FileManager.default.createFile(atPath: path, contents: Data(seed)) else {
                    FileHandle.standardError.write(Data("depot-fuzz: cannot write \(path)\n".utf8))
                    exit(1)
                }
            }
        }
        exit(0)
    case "--list":
        for target in FuzzTarget.all { print("\(target.name)\t\(target.summary)") }
        exit(0)
    case "-h", "--help": print(usage); exit(0)
    default:
        guard !argument.hasPrefix("-") else { fail("unknown option \(argument)") }
        names.append(argument)
    }
}

let targets: [FuzzTarget] = names.isEmpty ? FuzzTarget.all : names.map { name in
    guard let target = FuzzTarget.named(name) else { fail("no target \(name); --list shows them") }
    return target
}

if let replay {
    // Not contents(atPath:), which leaks 4 KB per empty file (Docs/Testing.md, "Sanitizers").
    guard let handle = FileHandle(forReadingAtPath: replay), let data = try? handle.readToEnd() ?? Data() else { fail("cannot read \(replay)") }
    var broken = false
    for target in targets {
        if let violation = FuzzRunner.replay(Array(data), on: target) {
            print("\(target.name): \(violation)")
            broken = true
        } else {
            print("\(target.name): contract held")
        }
    }
    exit(broken ? 1 : 0)
}

var failed = false
for base in targets {
    let target = FuzzFiles.loading(base, from: corpus)
    try? FileManager.default.createDirectory(atPath: failures, withIntermediateDirectories: true)
    let crashFile = failures + "/crash-\(target.name)-seed\(seed).bin"
    CrashGuard.install(file: crashFile)
    say("\(target.name): \(target.seeds.count) seeds, \(target.dictionary.count) tokens, seed \(seed), \(executions) executions (a trap saves its input to \(crashFile))")
    let runner = FuzzRunner(executions: executions, seed: seed, timeBudget: budget, maximumLength: maximumLength, maximumFailures: 5, failureDirectory: failures)
    let report = runner.run(target, beforeEach: CrashGuard.willRun) { count, seconds in
        if Int(seconds) % 30 == 0 { say("  \(count) executions, \(Int(seconds)) s, \(Int(Double(count) / seconds))/s") }
    }
    say(String(format: "%@: %d executions in %.1f s (%.0f/s), %d accepted, slowest %.2f ms, %d failures",
                 target.name, report.executions, report.seconds, report.rate, report.accepted, report.slowest * 1000, report.failures.count))
    for failure in report.failures {
        let path = FuzzFiles.save(failure.input, kind: failure.violation.kind == .timeout ? "timeout" : "failure", target: target.name, directory: failures)
        say("  FAILED \(failure) -> \(path)")
        failed = true
    }
}
exit(failed ? 1 : 0)
