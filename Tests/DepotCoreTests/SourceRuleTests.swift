import Foundation
import Testing

@testable import DepotCore

/// Calls the package's code must not make, each for a reason in Docs/Testing.md
/// ("Sanitizers"): `Synchronization.Mutex`, whose lock ThreadSanitizer does not see (one would
/// bring back false race reports and fail `scripts/sanitize thread`; use `Locked`), and
/// Foundation's whole-file reads `Data(contentsOf:)` and `FileManager.contents(atPath:)`,
/// which leak 4 KB for every empty file they read on Linux (use `FileHandle.readToEnd()`);
/// and `try` on the right of `&&` or `||`: a throw from inside the operator's autoclosure
/// released a captured transaction once too often (a use after free that AddressSanitizer
/// found in relation loading; compute the operand in a statement of its own).
@Suite struct SourceRuleTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test func noBannedCalls() throws {
        // Spelled in two parts so that this file does not match itself.
        let banned = [
            "Mu" + "tex<", "Mu" + "tex(", "Data(contents" + "Of:", "contents(at" + "Path:",
            "&& " + "try ", "&& (" + "try ", "&& !(" + "try ", "|| " + "try ", "|| (" + "try ", "|| !(" + "try ",
        ]
        var offenders: [String] = []
        var scanned = 0
        for folder in ["Sources", "Tests", "Examples"] {
            let base = Self.root.appendingPathComponent(folder)
            guard let walker = FileManager.default.enumerator(atPath: base.path) else { continue }
            for case let relative as String in walker where relative.hasSuffix(".swift") {
                let text = try String(contentsOf: base.appendingPathComponent(relative), encoding: .utf8)
                scanned += 1
                for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    let code = line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
                    if banned.contains(where: { code.contains($0) }) {
                        offenders.append("\(folder)/\(relative):\(number + 1)")
                    }
                }
            }
        }
        #expect(scanned > 100, "the source tree was found at \(Self.root.path)")
        #expect(offenders.isEmpty, "see this suite's doc comment: \(offenders)")
    }

    /// `Locked` excludes: two threads adding under it lose no update.
    @Test func lockedExcludes() async {
        let counter = Counter()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask { for _ in 0..<10_000 { counter.count.withLock { $0 += 1 } } }
            }
        }
        #expect(counter.count.withLock { $0 } == 40_000)
        #expect(counter.count.withLockIfAvailable { $0 } == 40_000)
    }
}

private final class Counter: Sendable {
    let count = Locked(0)
}
