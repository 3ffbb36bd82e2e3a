import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reads a file or standard input line by line in 64 KiB chunks, so input of any size
/// streams through a small buffer. A trailing `\r` is removed from each line.
package final class LineReader {
    private let fd: Int32
    private let ownsDescriptor: Bool
    private var buffer: [UInt8] = []
    private var start = 0
    private var atEnd = false
    /// The number of the line last returned (1-based).
    package private(set) var lineNumber = 0
    /// Bytes read so far (for progress).
    package private(set) var bytesRead = 0

    /// Reads standard input.
    package init() {
        fd = 0
        ownsDescriptor = false
    }

    /// Reads `bytes` already in memory, as if they were a file (the fuzz targets,
    /// Docs/Fuzzing.md).
    package init(bytes: [UInt8]) {
        fd = -1
        ownsDescriptor = false
        buffer = bytes
        atEnd = true
        bytesRead = bytes.count
    }

    /// Opens `path` for reading.
    /// - Throws: a ``CLIFailure`` when the file cannot be opened.
    package init(path: String) throws {
        let opened = open(path, O_RDONLY)
        guard opened >= 0 else {
            let reason = String(cString: strerror(errno))
            throw CLIFailure.failed("cannot read \(WhereParser.quoted(path)): \(reason)", "check the file name and its permissions")
        }
        fd = opened
        ownsDescriptor = true
    }

    deinit { if ownsDescriptor { close(fd) } }

    /// The size of the input when it is a regular file, for progress.
    package var fileSize: Int? {
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int(info.st_size)
    }

    /// The next line without its line ending, or `nil` at the end of the input.
    /// - Throws: a ``CLIFailure`` when reading fails.
    package func next() throws -> ArraySlice<UInt8>? {
        while true {
            if let newline = buffer[start...].firstIndex(of: 0x0A) {
                var line = buffer[start..<newline]
                start = newline + 1
                lineNumber += 1
                if line.last == 0x0D { line = line.dropLast() }
                return line
            }
            if atEnd {
                guard start < buffer.count else { return nil }
                var line = buffer[start...]
                start = buffer.count
                lineNumber += 1
                if line.last == 0x0D { line = line.dropLast() }
                return line
            }
            if start > 0 {
                buffer.removeFirst(start)
                start = 0
            }
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                let reason = String(cString: strerror(errno))
                throw CLIFailure.failed("reading the input failed after line \(lineNumber): \(reason)", "check the input file")
            }
            if count == 0 {
                atEnd = true
            } else {
                bytesRead += count
                buffer.append(contentsOf: chunk[0..<count])
            }
        }
    }
}
