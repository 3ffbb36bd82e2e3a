import DepotCore
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process started with `posix_spawn`, for tests that run helpers and tools.
///
/// Foundation's `Process.run()` on Linux (swift-corelibs-foundation up to Swift 6.3) can
/// crash intermittently while it lists `/proc/self/fd` (an over-read of `dirent.d_name`),
/// most often in test suites that start many processes with many files open. This type
/// spawns directly, gives the child only stdin/stdout/stderr (every other descriptor is
/// closed in the child), collects output on threads of its own so the child never blocks on
/// a full pipe, and can be killed at any moment.
///
/// ```swift
/// let child = try ChildProcess(path: "/usr/bin/gdbmtool", arguments: ["-r", file, "list"])
/// let result = child.waitForExit()
/// #expect(result.status == .exited(0))
/// ```
public final class ChildProcess: @unchecked Sendable {
    // @unchecked: `pid` and the collectors are set in `init` and never change; `finished`
    // is guarded by `lock`.
    /// How a child ended.
    public enum Status: Equatable, Sendable, CustomStringConvertible {
        /// The child called `exit` (or returned from `main`) with this status.
        case exited(Int32)
        /// The child was ended by this signal (for example 9 for SIGKILL).
        case signalled(Int32)
        /// `exit N` or `signal N`, for test messages.
        public var description: String {
            switch self {
            case .exited(let code): "exit \(code)"
            case .signalled(let signal): "signal \(signal)"
            }
        }
    }

    /// What a finished child printed and how it ended.
    public struct Result: Sendable {
        /// How the child ended.
        public var status: Status
        /// Everything the child wrote to its standard output.
        public var standardOutput: Data
        /// Everything the child wrote to its standard error.
        public var standardError: Data
        /// The standard output as UTF-8 text (invalid bytes replaced).
        public var outputText: String { String(decoding: standardOutput, as: UTF8.self) }
        /// The standard error as UTF-8 text (invalid bytes replaced).
        public var errorText: String { String(decoding: standardError, as: UTF8.self) }
    }

    /// The child's process id, for sending it signals.
    public let pid: pid_t
    private let stdoutCollector: DescriptorCollector
    private let stderrCollector: DescriptorCollector
    private let lock = NSLock()
    private var finished: Status?

    /// Starts `path` with `arguments`.
    /// - Parameters:
    ///   - environment: the child's environment; the parent's when `nil`.
    ///   - standardInput: bytes written to the child's stdin, which is then closed.
    /// - Throws: ``DepotError`` `.io` when the process cannot be started.
    public init(path: String, arguments: [String] = [], environment: [String: String]? = nil, standardInput: Data = Data()) throws {
        var inPipe: [Int32] = [-1, -1], outPipe: [Int32] = [-1, -1], errPipe: [Int32] = [-1, -1]
        guard pipe(&inPipe) == 0, pipe(&outPipe) == 0, pipe(&errPipe) == 0 else {
            throw DepotError(.io, "Could not create pipes for a child process (errno \(errno)).")
        }
        // The parent's ends must not leak into other children spawned at the same time.
        for fd in [inPipe[1], outPipe[0], errPipe[0]] { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        #if os(Linux)
        _ = spawnActionsCloseFrom(&actions, 3)
        #endif

        let argv = ([path] + arguments).map { strdup($0) }
        defer { argv.forEach { free($0) } }
        let env = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") }
        defer { env.forEach { free($0) } }
        var childPID: pid_t = 0
        let result = (argv + [nil]).withUnsafeBufferPointer { argvBuffer -> Int32 in
            (env + [nil]).withUnsafeBufferPointer { envBuffer -> Int32 in
                guard let argvBase = argvBuffer.baseAddress, let envBase = envBuffer.baseAddress else { return EINVAL }
                return posix_spawn(&childPID, path, &actions, nil, UnsafeMutablePointer(mutating: argvBase), UnsafeMutablePointer(mutating: envBase))
            }
        }
        close(inPipe[0])
        close(outPipe[1])
        close(errPipe[1])
        guard result == 0 else {
            close(inPipe[1])
            close(outPipe[0])
            close(errPipe[0])
            throw DepotError(.io, "Could not start \(path) (error \(result)).")
        }
        pid = childPID
        stdoutCollector = DescriptorCollector(outPipe[0])
        stderrCollector = DescriptorCollector(errPipe[0])
        let input = standardInput, inFD = inPipe[1]
        Thread {
            input.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let n = write(inFD, buffer.baseAddress.map { $0 + offset }, buffer.count - offset)
                    if n <= 0 { break }
                    offset += n
                }
            }
            close(inFD)
        }.start()
    }

    /// Sends `signal` (SIGKILL by default) unless the child has already been reaped.
    public func kill(_ signal: Int32 = SIGKILL) {
        lock.withLock {
            if finished == nil { _ = Glibc.kill(pid, signal) }
        }
    }

    /// `true` while the child has not ended.
    public var isRunning: Bool {
        lock.withLock {
            if finished != nil { return false }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                finished = ChildProcess.decode(status)
                return false
            }
            return true
        }
    }

    /// Waits for the child to end and for its output to be read to the end.
    public func waitForExit() -> Result {
        let status: Status = lock.withLock {
            if let finished { return finished }
            var raw: Int32 = 0
            while waitpid(pid, &raw, 0) == -1 && errno == EINTR {}
            let decoded = ChildProcess.decode(raw)
            finished = decoded
            return decoded
        }
        return Result(status: status, standardOutput: stdoutCollector.wait(), standardError: stderrCollector.wait())
    }

    /// What the child has written to its standard error so far (a copy), while it runs: for
    /// a server whose first line says where it listens.
    public var standardErrorSoFar: Data { stderrCollector.snapshot() }

    /// Waits for the child on a thread of its own, so async callers never block the
    /// cooperative pool while a child runs.
    public func exit() async -> Result {
        await withCheckedContinuation { (continuation: CheckedContinuation<Result, Never>) in
            Thread { continuation.resume(returning: self.waitForExit()) }.start()
        }
    }

    /// Runs a program to its end without blocking the cooperative pool.
    public static func run(_ path: String, _ arguments: [String] = [], environment: [String: String]? = nil, standardInput: Data = Data()) async throws -> Result {
        try await ChildProcess(path: path, arguments: arguments, environment: environment, standardInput: standardInput).exit()
    }

    static func decode(_ raw: Int32) -> Status {
        let signal = raw & 0x7F
        return signal == 0 ? .exited((raw >> 8) & 0xFF) : .signalled(signal)
    }

    /// Runs a program to its end.
    public static func run(_ path: String, _ arguments: [String] = [], environment: [String: String]? = nil, standardInput: Data = Data()) throws -> Result {
        try ChildProcess(path: path, arguments: arguments, environment: environment, standardInput: standardInput).waitForExit()
    }
}

/// Reads a descriptor to its end on a thread of its own, then closes it.
final class DescriptorCollector: @unchecked Sendable {
    // @unchecked: `data` is only touched under `dataLock`; `result` under `lock`.
    private var data = Data()
    private let dataLock = NSLock()
    private let done = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var result: Data?

    init(_ fd: Int32) {
        Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n > 0 {
                    dataLock.withLock { data.append(contentsOf: buffer[0..<n]) }
                } else if n == 0 || errno != EINTR {
                    break
                }
            }
            close(fd)
            done.signal()
        }.start()
    }

    /// The bytes read so far, without waiting for the end.
    func snapshot() -> Data { dataLock.withLock { data } }

    /// The bytes read, once the writer has closed its end. Safe to call more than once.
    func wait() -> Data {
        lock.withLock {
            if let result { return result }
            done.wait()
            let all = snapshot()
            result = all
            return all
        }
    }
}

#if os(Linux)
/// glibc's `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34+), which Swift's Glibc
/// module does not import: closes every descriptor from `from` up in the child.
@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
func spawnActionsCloseFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ from: Int32) -> Int32
#endif
