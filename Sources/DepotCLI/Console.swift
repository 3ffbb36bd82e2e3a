import Depot
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The exit statuses of `depot`, documented in `depot --help` and Docs/CLI.md.
enum ExitStatus {
    /// Everything asked for was done.
    static let success: Int32 = 0
    /// The work failed, or `check` found problems.
    static let failure: Int32 = 1
    /// The command line was wrong: nothing was changed.
    static let usage: Int32 = 2
}

/// A failure the CLI reports as one line: what went wrong, then what to do.
struct CLIFailure: Error {
    var message: String
    var hint: String
    var status: Int32

    /// A usage error (exit status 2).
    static func usage(_ message: String, _ hint: String) -> CLIFailure {
        CLIFailure(message: message, hint: hint, status: ExitStatus.usage)
    }

    /// A failure of the work itself (exit status 1).
    static func failed(_ message: String, _ hint: String) -> CLIFailure {
        CLIFailure(message: message, hint: hint, status: ExitStatus.failure)
    }

    /// Turns any error into a one-line failure. A ``DepotError`` shows its `description`
    /// (never `debugDescription`, which may hold detail not meant for users); codes that mean
    /// the command line was wrong map to status 2.
    static func from(_ error: any Error) -> CLIFailure {
        if let failure = error as? CLIFailure { return failure }
        let depot = DepotError.wrap(error, as: .internal, "Unexpected error.")
        let (hint, status): (String, Int32) =
            switch depot.code {
            case .invalidStore: ("check the store string, e.g. sqlite:app.db or memory:", ExitStatus.usage)
            case .invalidName: ("names are 1 to 63 ASCII letters, digits or '_', starting with a letter", ExitStatus.usage)
            case .invalidQuery: ("check --where, --sort, --limit and --offset", ExitStatus.usage)
            case .uniqueViolation: ("fix the duplicate values, or drop the constraint", ExitStatus.failure)
            case .locked: ("another program holds the store; try again later", ExitStatus.failure)
            case .corrupted: ("run 'depot check STORE' and restore from a copy if needed", ExitStatus.failure)
            case .schemaMismatch: ("use a matching program version, or a new collection", ExitStatus.failure)
            case .io: ("check the path, permissions and free space", ExitStatus.failure)
            case .decoding: ("fix the input or the stored data", ExitStatus.failure)
            case .cancelled: ("run the command again", ExitStatus.failure)
            default: ("run again with --verbose for more", ExitStatus.failure)
            }
        return CLIFailure(message: depot.description, hint: hint, status: status)
    }
}

/// Writing to standard output and standard error without Foundation buffering surprises.
enum Console {
    /// `true` when standard error is a terminal (progress is shown only then).
    static var stderrIsTerminal: Bool { isatty(2) != 0 }

    /// Writes one line `depot: message` to standard error.
    static func error(_ message: String) {
        progressClear()
        writeAll(2, Array(("depot: " + message + "\n").utf8))
    }

    /// Writes raw text to standard error.
    static func stderr(_ text: String) { writeAll(2, Array(text.utf8)) }

    /// Writes text to standard output, unbuffered.
    static func print(_ text: String = "") { writeAll(1, Array((text + "\n").utf8)) }

    /// Writes every byte to a file descriptor, retrying short writes and EINTR.
    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(fd, buffer.baseAddress.map { $0 + offset }, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return
                }
                offset += written
            }
        }
    }
}

/// Buffered standard output for JSON Lines: flushes every 64 KiB and at the end.
final class OutputBuffer {
    private var bytes: [UInt8] = []

    init() { bytes.reserveCapacity(70_000) }

    /// Appends one line (a newline is added).
    func line(_ text: String) {
        bytes.append(contentsOf: text.utf8)
        bytes.append(0x0A)
        if bytes.count >= 65_536 { flush() }
    }

    /// Writes what is buffered.
    func flush() {
        guard !bytes.isEmpty else { return }
        Console.writeAll(1, bytes)
        bytes.removeAll(keepingCapacity: true)
    }
}
