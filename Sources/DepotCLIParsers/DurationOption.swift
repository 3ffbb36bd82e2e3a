/// The duration options of `depot serve`: `--retention` and `--retention-sweep`
/// (Docs/CLI.md, `depot serve`; Docs/Server.md, "Retention").
///
/// A duration is a whole number of ASCII digits followed by one unit: `s` (seconds), `m`
/// (minutes), `h` (hours) or `d` (days), such as `90s`, `30m`, `12h` or `7d`. White space
/// around it is ignored; none is allowed inside (`7 d`). It must be more than zero and at
/// most ``maxSeconds`` (100 years), so every later computation with it (the server turns a
/// retention into milliseconds) stays far from overflow. `--retention` also takes `forever`.
package enum DurationOption {
    /// The longest duration accepted, in seconds: 36,500 days (100 years).
    package static let maxSeconds: Int64 = 36_500 * 86_400

    /// The units, with their length in seconds, in the order they are listed in messages.
    package static let units: [(unit: Character, seconds: Int64)] = [("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)]

    /// Parses `--retention`: a duration, or `forever` (returned as `nil`: keep everything).
    /// - Throws: a usage ``CLIFailure`` saying what is wrong and how to write it.
    package static func retention(_ text: String) throws -> Duration? {
        if OptionText.trimmed(text) == "forever" { return nil }
        return .seconds(try seconds(text, option: "--retention", forever: true))
    }

    /// Parses a duration option that must be a positive length of time (`--retention-sweep`).
    /// - Parameter option: the option's name for the message, e.g. `--retention-sweep`.
    /// - Throws: a usage ``CLIFailure`` saying what is wrong and how to write it.
    package static func interval(_ text: String, option: String) throws -> Duration {
        .seconds(try seconds(text, option: option, forever: false))
    }

    /// The number of seconds `text` stands for, between 1 and ``maxSeconds``.
    /// - Parameter forever: whether the option also takes `forever` (named in the hint).
    /// - Throws: a usage ``CLIFailure``.
    package static func seconds(_ text: String, option: String, forever: Bool) throws -> Int64 {
        let hint = "write a whole number and a unit: s, m, h or d, e.g. \(option) 90s, 30m, 12h or 7d" + (forever ? ", or \(option) forever" : "")
        func fail(_ message: String, _ hint: String = hint) -> CLIFailure {
            CLIFailure.usage("\(option) \(WhereParser.quoted(text)): \(message)", hint)
        }
        let trimmed = OptionText.trimmed(text)
        guard !trimmed.isEmpty else { throw fail("expected a duration") }
        let bytes = Array(trimmed.utf8)
        var index = 0
        var value: Int64 = 0
        var overflow = false
        while index < bytes.count, (0x30...0x39).contains(bytes[index]) {
            let digit = Int64(bytes[index] - 0x30)
            // Keep reading digits after an overflow, so the message is about the size and not the unit.
            if !overflow {
                let (times, o1) = value.multipliedReportingOverflow(by: 10)
                let (sum, o2) = times.addingReportingOverflow(digit)
                if o1 || o2 { overflow = true } else { value = sum }
            }
            index += 1
        }
        if index == 0 {
            if bytes[0] == UInt8(ascii: "-") { throw fail("a duration cannot be negative") }
            throw fail("expected a number first")
        }
        let unitText = String(decoding: bytes[index...], as: UTF8.self)
        guard !unitText.isEmpty else { throw fail("missing unit") }
        guard unitText.count == 1, let unit = unitText.first, let scale = units.first(where: { $0.unit == unit })?.seconds else {
            throw fail("unknown unit \(WhereParser.quoted(unitText))")
        }
        let tooLong = "longer than 100 years (36500d)"
        let tooLongHint = forever ? "use \(option) forever to keep everything" : "use at most \(option) 36500d"
        guard !overflow else { throw fail(tooLong, tooLongHint) }
        guard value > 0 else {
            throw fail("must be more than zero", forever ? "use \(option) forever to keep everything, or a positive duration such as 7d" : "use a positive duration such as 1h")
        }
        let (total, o) = value.multipliedReportingOverflow(by: scale)
        guard !o, total <= maxSeconds else { throw fail(tooLong, tooLongHint) }
        return total
    }
}
