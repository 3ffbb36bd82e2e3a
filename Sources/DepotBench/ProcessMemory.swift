import Foundation

/// Reads this process's memory figures from Linux's `/proc/self/status`.
///
/// Peak RSS is `VmHWM` (the resident set's high-water mark, in kB). On Linux, writing `5`
/// to `/proc/self/clear_refs` resets that mark to the current RSS, so a phase's own peak
/// can be measured inside one process; where that is not possible (other systems) the
/// figures are `nil`.
public enum ProcessMemory {
    /// The resident set's high-water mark in bytes (`VmHWM`), `nil` when unknown.
    public static func peakResidentBytes() -> Int? { field("VmHWM:") }

    /// The current resident set in bytes (`VmRSS`), `nil` when unknown.
    public static func residentBytes() -> Int? { field("VmRSS:") }

    /// Resets the high-water mark to the current RSS; `false` when the system refused.
    @discardableResult
    public static func resetPeak() -> Bool {
        guard let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") else { return false }
        defer { try? handle.close() }
        do {
            try handle.write(contentsOf: Data("5".utf8))
            return true
        } catch {
            return false
        }
    }

    private static func field(_ name: String) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(name) {
            let digits = line.dropFirst(name.count).filter(\.isNumber)
            return Int(digits).map { $0 * 1024 }
        }
        return nil
    }
}
