import DepotCore
import Foundation

/// A one-line progress display on standard error: count, rate and (with a total) ETA.
///
/// Shown only when standard error is a terminal and `--quiet` is not given; otherwise every
/// call does nothing, so pipes and logs stay clean. Redraws at most ten times a second.
final class Progress: Sendable {
    private struct State {
        var done = 0
        var lastDraw: Double = 0
    }

    private let what: String
    private let total: Int?
    private let unit: String
    private let enabled: Bool
    private let start = ProcessInfo.processInfo.systemUptime
    private let state = Locked(State())

    /// - Parameters:
    ///   - what: the label in front of the figures.
    ///   - total: the units expected, for a bar and an ETA; `nil` when unknown.
    ///   - unit: the unit of the rate (`records`, `B`).
    ///   - enabled: `false` makes every call do nothing.
    init(_ what: String, total: Int?, unit: String = "records", enabled: Bool) {
        self.what = what
        self.total = total
        self.unit = unit
        self.enabled = enabled
    }

    /// Records `count` more units done and redraws when due.
    func advance(by count: Int = 1) {
        update { $0 += count }
    }

    /// Sets the units done so far and redraws when due.
    func set(_ done: Int) {
        update { $0 = done }
    }

    private func update(_ change: (inout Int) -> Void) {
        guard enabled else { return }
        let now = ProcessInfo.processInfo.systemUptime
        let line: String? = state.withLock { state in
            change(&state.done)
            guard now - state.lastDraw >= 0.1 else { return nil }
            state.lastDraw = now
            return render(state.done, elapsed: now - start)
        }
        if let line { Console.progressDraw(line) }
    }

    /// Clears the progress line.
    func finish() {
        guard enabled else { return }
        Console.progressClear()
    }

    private func render(_ done: Int, elapsed: Double) -> String {
        let rate = elapsed > 0 ? Double(done) / elapsed : 0
        var text = "\(what): \(done)"
        if let total, total > 0 {
            let percent = min(100, Int(Double(done) * 100 / Double(total)))
            let width = 20
            let filled = min(width, Int(Double(done) / Double(total) * Double(width)))
            text = "\(what) [\(String(repeating: "#", count: filled))\(String(repeating: ".", count: width - filled))] \(done)/\(total) \(percent)%"
            if rate > 0 && done < total {
                text += " ETA \(Progress.duration(Double(total - done) / rate))"
            }
        }
        text += "  \(Progress.rate(rate)) \(unit)/s"
        return text
    }

    /// `1.2k`, `3.4M`: a compact count.
    static func rate(_ value: Double) -> String {
        if value >= 1_000_000 { return String(format: "%.1fM", value / 1_000_000) }
        if value >= 1_000 { return String(format: "%.1fk", value / 1_000) }
        return String(format: "%.0f", value)
    }

    /// `12s`, `3m04s`: a compact duration.
    static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite else { return "?" }
        let s = Int(seconds.rounded())
        return s < 60 ? "\(s)s" : String(format: "%dm%02ds", s / 60, s % 60)
    }
}

extension Console {
    private static let progressShown = Locked(false)

    /// Draws a progress line in place (carriage return, clear to end of line).
    static func progressDraw(_ line: String) {
        progressShown.withLock { $0 = true }
        stderr("\r\u{1B}[K" + line)
    }

    /// Removes the progress line, if one is shown, before other output.
    static func progressClear() {
        let shown = progressShown.withLock { shown in
            defer { shown = false }
            return shown
        }
        if shown { stderr("\r\u{1B}[K") }
    }
}
