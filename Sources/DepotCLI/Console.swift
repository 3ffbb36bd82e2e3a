import Depot
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

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
