#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Saves the input being run when the process traps (SIGILL, SIGTRAP, SIGSEGV, SIGBUS,
/// SIGABRT, SIGFPE), then lets the signal end the process. The signal handler only calls
/// `open`, `write`, `close`, `signal` and `raise`, which are safe there.
enum CrashGuard {
    /// The input being run (capacity ``capacity``), its length, and the file to write it to.
    /// Written only by the fuzzing thread between inputs, read only by the signal handler on
    /// that thread: nothing else touches them.
    nonisolated(unsafe) private static var buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
    nonisolated(unsafe) private static var length = 0
    nonisolated(unsafe) private static var path: UnsafeMutablePointer<CChar>?
    static let capacity = 1 << 20

    /// Installs the handlers; a trap writes the current input to `file`.
    static func install(file: String) {
        if let old = path { free(old) }
        path = strdup(file)
        for sig in [SIGILL, SIGTRAP, SIGSEGV, SIGBUS, SIGABRT, SIGFPE] {
            signal(sig) { sig in CrashGuard.handle(sig) }
        }
    }

    /// Keeps a copy of the input about to run (cut at ``capacity`` bytes).
    static func willRun(_ input: [UInt8]) {
        let n = min(input.count, capacity)
        input.withUnsafeBufferPointer { if let base = $0.baseAddress { buffer.update(from: base, count: n) } }
        length = n
    }

    private static func handle(_ sig: Int32) {
        if let path {
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            if fd >= 0 {
                _ = write(fd, buffer, length)
                close(fd)
            }
            let note = "depot-fuzz: the target trapped; the input is saved in the crash file printed at the start\n"
            note.utf8CString.withUnsafeBufferPointer { _ = write(2, $0.baseAddress, $0.count - 1) }
        }
        signal(sig, SIG_DFL)
        raise(sig)
    }
}
