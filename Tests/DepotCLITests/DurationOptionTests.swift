import Testing

@testable import DepotCLIParsers

/// ``DurationOption``: `depot serve --retention` and `--retention-sweep`.
@Suite struct DurationOptionTests {
    @Test("each unit, white space around, leading zeros, the 100-year limit")
    func accepted() throws {
        let cases: [(String, Int64)] = [
            ("90s", 90), ("30m", 1800), ("12h", 43_200), ("7d", 604_800), ("1s", 1),
            (" 7d", 604_800), ("7d\t", 604_800), ("\u{A0}12h ", 43_200), ("007d", 604_800),
            ("36500d", DurationOption.maxSeconds), ("876000h", DurationOption.maxSeconds),
            ("3153600000s", DurationOption.maxSeconds),
        ]
        for (text, seconds) in cases {
            #expect(try DurationOption.seconds(text, option: "--retention", forever: true) == seconds, "\(text)")
            #expect(try DurationOption.retention(text) == .seconds(seconds), "\(text)")
            #expect(try DurationOption.interval(text, option: "--retention-sweep") == .seconds(seconds), "\(text)")
        }
    }

    @Test("'forever' is nil for --retention and an error for --retention-sweep")
    func forever() throws {
        #expect(try DurationOption.retention("forever") == nil)
        #expect(try DurationOption.retention(" forever ") == nil)
        let sweep = #expect(throws: CLIFailure.self) { try DurationOption.interval("forever", option: "--retention-sweep") }
        #expect(sweep?.status == ExitStatus.usage)
        #expect(sweep?.message == "--retention-sweep 'forever': expected a number first", "\(String(describing: sweep))")
        #expect(sweep?.hint.contains("forever") == false, "the sweep takes no 'forever': \(String(describing: sweep))")
        #expect(throws: CLIFailure.self) { try DurationOption.retention("Forever") }
        #expect(throws: CLIFailure.self) { try DurationOption.retention("forever7d") }
    }

    @Test("bad values are usage errors naming the option, the text and what is wrong")
    func rejected() {
        let cases: [(String, String)] = [
            ("0s", "must be more than zero"),
            ("0d", "must be more than zero"),
            ("000h", "must be more than zero"),
            ("-5d", "cannot be negative"),
            ("-0s", "cannot be negative"),
            ("+5d", "expected a number first"),
            ("99999999999999999d", "longer than 100 years (36500d)"),
            ("99999999999999999999999999s", "longer than 100 years (36500d)"),
            ("36501d", "longer than 100 years (36500d)"),
            ("3153600001s", "longer than 100 years (36500d)"),
            ("106751991167301d", "longer than 100 years (36500d)"),  // the seconds overflow Int64
            ("90", "missing unit"),
            ("7 d", "unknown unit ' d'"),
            ("7w", "unknown unit 'w'"),
            ("7ms", "unknown unit 'ms'"),
            ("7D", "unknown unit 'D'"),
            ("1.5h", "unknown unit '.5h'"),
            ("7dd", "unknown unit 'dd'"),
            ("7d7d", "unknown unit 'd7d'"),
            ("", "expected a duration"),
            ("   ", "expected a duration"),
            ("d", "expected a number first"),
            ("٣d", "expected a number first"),  // digits are ASCII
            ("never", "expected a number first"),
        ]
        for (text, problem) in cases {
            for (option, forever) in [("--retention", true), ("--retention-sweep", false)] {
                let failure = #expect(throws: CLIFailure.self, "\(option) \(text)") { try DurationOption.seconds(text, option: option, forever: forever) }
                #expect(failure?.status == ExitStatus.usage, "\(option) \(text)")
                #expect(failure?.message.hasPrefix("\(option) \(WhereParser.quoted(text)): ") == true, "\(option) \(text): \(String(describing: failure))")
                #expect(failure?.message.hasSuffix(problem) == true, "\(option) \(text): \(String(describing: failure))")
                #expect(failure?.hint.isEmpty == false, "\(option) \(text)")
            }
            #expect(throws: CLIFailure.self, "\(text)") { try DurationOption.retention(text) }
            #expect(throws: CLIFailure.self, "\(text)") { try DurationOption.interval(text, option: "--retention-sweep") }
        }
        // Zero and too long point --retention at 'forever', and --retention-sweep at a valid value.
        let zero = #expect(throws: CLIFailure.self) { try DurationOption.retention("0s") }
        #expect(zero?.hint.contains("--retention forever") == true, "\(String(describing: zero))")
        let long = #expect(throws: CLIFailure.self) { try DurationOption.interval("99999999999999999d", option: "--retention-sweep") }
        #expect(long?.hint == "use at most --retention-sweep 36500d", "\(String(describing: long))")
        // A control character is shown escaped, never raw.
        let control = #expect(throws: CLIFailure.self) { try DurationOption.retention("7\u{1B}d") }
        #expect(control?.message.contains("\u{1B}") == false, "\(String(describing: control))")
    }
}
