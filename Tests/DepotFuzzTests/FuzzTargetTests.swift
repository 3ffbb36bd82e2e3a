import DepotCore
import DepotFuzz
import Foundation
import Testing

/// The short fuzz run of the default suite (Docs/Fuzzing.md): every target, a few thousand
/// inputs each from its committed corpus, and every saved regression input.
@Suite("Fuzz targets")
struct FuzzTargetTests {
    /// `Tests/Fuzz`: corpora, dictionaries, regressions.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz").path

    /// Inputs per target: `DEPOT_FUZZ_EXECUTIONS`, or 3,000.
    static var executions: Int { ProcessInfo.processInfo.environment["DEPOT_FUZZ_EXECUTIONS"].flatMap(Int.init) ?? 3_000 }

    @Test("short run keeps the contract", arguments: FuzzTarget.all.map(\.name))
    func shortRun(_ name: String) throws {
        let target = try #require(FuzzTarget.named(name))
        #expect(!FuzzFiles.inputs(in: Self.root + "/corpus/" + name).isEmpty, "no committed corpus in Tests/Fuzz/corpus/\(name)")
        let (report, failures) = FuzzFiles.shortRun(target, root: Self.root)
        for failure in failures { Issue.record(Comment(rawValue: failure)) }
        #expect(report.executions == Self.executions || !report.failures.isEmpty)
        #expect(report.accepted > 0, "no input was accepted: the run never got past the first check")
    }

    @Test("saved regression inputs keep the contract", arguments: FuzzTarget.all.map(\.name))
    func regressions(_ name: String) throws {
        let target = try #require(FuzzTarget.named(name))
        for (file, input) in FuzzFiles.inputs(in: Self.root + "/regressions/" + name) {
            #expect(FuzzRunner.replay(input, on: target) == nil, "regressions/\(name)/\(file)")
        }
    }
}

/// The harness itself: it must see what it is there to see.
@Suite("Fuzz harness")
struct FuzzHarnessTests {
    struct Untyped: Error {}

    @Test func untypedErrorIsAFailure() {
        let target = FuzzTarget(name: "t", seeds: [[1]]) { bytes throws(FuzzViolation) in
            try FuzzContract.expecting(DepotError.self) { () throws -> Int in
                if bytes.count > 3 { throw Untyped() }
                return 0
            } != nil
        }
        let report = FuzzRunner(executions: 2_000, seed: 3).run(target)
        #expect(report.failures.first?.violation.kind == .untypedError)
        #expect((report.failures.first?.input.count ?? 0) > 3)
    }

    @Test func typedErrorIsNotAFailure() {
        let target = FuzzTarget(name: "t", seeds: [[1]]) { bytes throws(FuzzViolation) in
            try FuzzContract.expecting(DepotError.self) { () throws -> Int in
                if bytes.count > 3 { throw DepotError(.decoding, "no") }
                return 0
            } != nil
        }
        let report = FuzzRunner(executions: 2_000, seed: 3).run(target)
        #expect(report.failures.isEmpty)
        #expect(report.accepted > 0 && report.accepted < 2_000)
    }

    @Test func slowInputIsATimeout() {
        let target = FuzzTarget(name: "t", seeds: [[1]]) { bytes throws(FuzzViolation) in
            // Busy for 30 ms of processor time (the budget counts processor time, not sleep).
            if bytes.count > 1 {
                func cpu() -> Int { var ts = timespec(); clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); return ts.tv_sec * 1_000_000_000 + ts.tv_nsec }
                let start = cpu()
                while cpu() - start < 30_000_000 {}
            }
            return true
        }
        // The watchdog's wall-time limit is raised: on a loaded machine (or under a sanitizer)
        // 30 ms of processor time can take longer than its default 0.1 s, and the watchdog
        // would end the test process instead of the budget reporting a timeout.
        let report = FuzzRunner(executions: 50, seed: 3, timeBudget: 0.01, hangLimit: 60).run(target)
        #expect(report.failures.first?.violation.kind == .timeout)
    }

    @Test func brokenRoundTripIsAContractFailure() {
        let target = FuzzTarget(name: "t", seeds: [[1]]) { bytes throws(FuzzViolation) in
            try FuzzContract.require(!bytes.contains(0x7B), "a brace came back different")
            return true
        }
        let report = FuzzRunner(executions: 5_000, seed: 5).run(target.adding(seeds: [], dictionary: [[0x7B]]))
        #expect(report.failures.first?.violation.kind == .contract)
    }

    @Test func aSeedReplaysTheSameInputs() {
        var a = Mutator(seed: 9, dictionary: [[0x41]], nesting: ([0x5B], [0x5D]))
        var b = Mutator(seed: 9, dictionary: [[0x41]], nesting: ([0x5B], [0x5D]))
        for _ in 0..<500 { #expect(a.mutate([1, 2, 3], other: [4, 5]) == b.mutate([1, 2, 3], other: [4, 5])) }
    }

    @Test func mutantsStayUnderTheLengthLimit() {
        var m = Mutator(seed: 2, dictionary: [], nesting: ([0x5B], [0x5D]), maximumLength: 100)
        var input: [UInt8] = [1]
        for _ in 0..<2_000 {
            input = m.mutate(input, other: input)
            #expect(input.count <= 100)
        }
    }

    @Test func dictionaryFiles() {
        let text = """
            # a comment
            "abc"
            kw="\\x41\\"\\\\"
            not a token
            ""
            """
        #expect(FuzzFiles.dictionary(text) == [Array("abc".utf8), [0x41, 0x22, 0x5C]])
    }
}
