import DepotCore
import Foundation

/// The files of a fuzz run: seed corpora (one folder per target), dictionaries and saved
/// failures. Layout (Docs/Fuzzing.md): `Tests/Fuzz/corpus/TARGET/*`,
/// `Tests/Fuzz/dictionaries/TARGET.dict`, `Tests/Fuzz/regressions/TARGET/*`.
public enum FuzzFiles {
    /// Every regular file in `directory`, sorted by name; empty when it does not exist.
    public static func inputs(in directory: String) -> [(name: String, bytes: [UInt8])] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [] }
        return names.sorted().compactMap { name in
            // Through FileHandle: Foundation's Data(contentsOf:) and contents(atPath:) leak a
            // 4 KB buffer for every empty file they read (Docs/Testing.md, "Sanitizers").
            guard !name.hasPrefix("."), let handle = FileHandle(forReadingAtPath: directory + "/" + name), let data = try? handle.readToEnd() ?? Data() else { return nil }
            return (name, Array(data))
        }
    }

    /// The tokens of a dictionary file in the AFL/libFuzzer form: one `"token"` per line
    /// (optionally `name="token"`), `\\`, `\"` and `\xNN` escapes; `#` lines are comments.
    /// Lines that are not tokens are skipped.
    public static func dictionary(_ text: String) -> [[UInt8]] {
        var tokens: [[UInt8]] = []
        for line in text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            let bytes = Array(line.utf8)
            guard let open = bytes.firstIndex(of: 0x22), let close = bytes.lastIndex(of: 0x22), close > open else { continue }
            if bytes.first == 0x23 { continue }
            var token: [UInt8] = []
            var i = open + 1
            while i < close {
                if bytes[i] == 0x5C, i + 1 < close {
                    if bytes[i + 1] == 0x78, i + 3 < close, let value = UInt8(String(decoding: bytes[i + 2...i + 3], as: UTF8.self), radix: 16) {
                        token.append(value)
                        i += 4
                    } else {
                        token.append(bytes[i + 1])
                        i += 2
                    }
                } else {
                    token.append(bytes[i])
                    i += 1
                }
            }
            if !token.isEmpty { tokens.append(token) }
        }
        return tokens
    }

    /// `target` with the seeds of `root/corpus/NAME/` and the tokens of
    /// `root/dictionaries/NAME.dict` added.
    public static func loading(_ target: FuzzTarget, from root: String) -> FuzzTarget {
        let seeds = inputs(in: root + "/corpus/" + target.name).map(\.bytes)
        let dictionaryText = (try? String(contentsOfFile: root + "/dictionaries/" + target.name + ".dict", encoding: .utf8)) ?? ""
        return target.adding(seeds: seeds, dictionary: dictionary(dictionaryText))
    }

    /// Saves a failing input as `KIND-TARGET-HASH.bin` in `directory` (the current one when
    /// `nil`), creating it; returns the path (or a note when it cannot be written).
    @discardableResult
    public static func save(_ input: [UInt8], kind: String, target: String, directory: String?) -> String {
        let folder = directory ?? FileManager.default.currentDirectoryPath
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in input { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        let path = folder + "/\(kind)-\(target)-\(String(hash, radix: 16)).bin"
        guard FileManager.default.createFile(atPath: path, contents: Data(input)) else { return "(could not write \(path))" }
        return path
    }

    /// The short run the test suites make of a target (Docs/Fuzzing.md): `target` loaded with
    /// its corpus and dictionary from `root`, run for `DEPOT_FUZZ_EXECUTIONS` inputs (3,000 by
    /// default) from `DEPOT_FUZZ_SEED` (1), a summary line printed, and each failing input
    /// saved in `DEPOT_FUZZ_FAILURES` (a temporary folder by default). Returns the report and
    /// one line per failure naming the saved file, for the test to record.
    public static func shortRun(_ target: FuzzTarget, root: String) -> (report: FuzzReport, failures: [String]) {
        let environment = ProcessInfo.processInfo.environment
        let executions = environment["DEPOT_FUZZ_EXECUTIONS"].flatMap(Int.init) ?? 3_000
        let seed = environment["DEPOT_FUZZ_SEED"].flatMap(UInt64.init) ?? 1
        let report = FuzzRunner(executions: executions, seed: seed, timeBudget: 2, maximumFailures: 3).run(loading(target, from: root))
        print(String(format: "%@: %d executions in %.1f s (%.0f/s), %d accepted, slowest %.2f ms, %d failures",
                     target.name, report.executions, report.seconds, report.rate, report.accepted, report.slowest * 1000, report.failures.count))
        let folder = environment["DEPOT_FUZZ_FAILURES"] ?? NSTemporaryDirectory() + "depot-fuzz-failures"
        let failures = report.failures.map { failure in
            "\(failure) -> \(save(failure.input, kind: "failure", target: target.name, directory: folder)); first bytes (base64): \(Data(failure.input.prefix(120)).base64EncodedString())"
        }
        return (report, failures)
    }
}
