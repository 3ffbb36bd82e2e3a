import DepotCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A small tmpfs mounted for a real disk-full test (Docs/Semantics.md, "I/O failures and a full disk"):
/// `mount(2)` needs root or CAP_SYS_ADMIN, so ``unavailableReason`` says whether this machine
/// allows it; tests skip with that reason where it does not.
public final class SmallTmpfs: @unchecked Sendable {
    // @unchecked: `mounted` changes only in `unmount()`, which tests call from one task.

    /// The mount point (a fresh directory under the system's temporary directory).
    public let path: String
    private var mounted = true

    private init(path: String) {
        self.path = path
    }

    /// Mounts a tmpfs of `kilobytes` at a fresh directory.
    /// - Throws: ``ConformanceFailure`` naming the `errno` when the mount is refused.
    public static func mount(kilobytes: Int) throws -> SmallTmpfs {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("depot-tmpfs-\(UUID().uuidString)").path
        guard mkdir(path, 0o755) == 0 else { throw failure("mkdir \(path)", errno) }
        guard Glibc.mount("tmpfs", path, "tmpfs", 0, "size=\(kilobytes)k,mode=0755") == 0 else {
            let err = errno
            rmdir(path)
            throw failure("mount -t tmpfs -o size=\(kilobytes)k tmpfs \(path)", err)
        }
        return SmallTmpfs(path: path)
    }

    /// Changes the file system's size (`mount -o remount,size=...`), keeping its files.
    public func resize(kilobytes: Int) throws {
        guard Glibc.mount("tmpfs", path, "tmpfs", UInt(MS_REMOUNT), "size=\(kilobytes)k") == 0 else {
            throw SmallTmpfs.failure("remount \(path) with size=\(kilobytes)k", errno)
        }
    }

    /// Unmounts (lazily if files are still open) and removes the mount point. Idempotent.
    public func unmount() {
        guard mounted else { return }
        mounted = false
        if umount2(path, 0) != 0 { _ = umount2(path, Int32(MNT_DETACH)) }
        rmdir(path)
    }

    deinit { unmount() }

    /// `nil` when this process may mount a tmpfs (probed once, by mounting and unmounting a
    /// tiny one); otherwise why not.
    public static let unavailableReason: String? = {
        #if os(Linux)
        do {
            try mount(kilobytes: 64).unmount()
            return nil
        } catch {
            return "this process cannot mount a tmpfs (\(error)); disk-full tests need root or CAP_SYS_ADMIN"
        }
        #else
        return "disk-full tests mount a tmpfs, which needs Linux"
        #endif
    }()

    /// Whether ``mount(kilobytes:)`` works here.
    public static var isAvailable: Bool { unavailableReason == nil }

    private static func failure(_ what: String, _ err: Int32) -> ConformanceFailure {
        ConformanceFailure(check: "diskFull", message: "\(what) failed: \(String(cString: strerror(err))) (errno \(err))", file: #fileID, line: #line)
    }
}

/// What a disk-full trial found.
public struct DiskFullReport: Sendable, CustomStringConvertible {
    /// Commits acknowledged before the disk filled.
    public var acknowledged = 0
    /// Whether the failed commit turned out to be durable after all (never partial).
    public var failedCommitKept = false
    /// The error that reported the full disk.
    public var error: String = ""

    /// A one-line summary, for test output.
    public var description: String {
        "\(acknowledged) commits acknowledged before the disk filled, every one found after reopening; failed commit \(failedCommitKept ? "kept whole" : "absent"); error: \(error)"
    }
}

/// A real full disk: fills a store on a small tmpfs with commits until one fails, then checks
/// that the failure is a typed `.io` error the caller recognizes as a full disk, that the
/// store still reads (with every acknowledged commit), and that after space is freed the
/// reopened store holds every acknowledged commit, shows the failed one whole or not at all,
/// passes its integrity check and takes commits again (Docs/Semantics.md, "I/O failures and a full disk").
///
/// Each commit inserts record `n` (about 2 KB) into `fill` and sets `counter` record 1 to
/// `n`, so a mix of two commits is visible.
public enum DiskFullTrial {
    /// Runs one trial on a fresh tmpfs of `kilobytes`.
    /// - Parameters:
    ///   - factory: opens the store in the directory it is given (on the tmpfs).
    ///   - isDiskFull: whether an error says the disk is full (its native cause: `ENOSPC`,
    ///     `SQLITE_FULL`).
    /// - Throws: ``ConformanceFailure`` for a broken guarantee; what mounting throws.
    public static func run(
        factory: DriverFactory, kilobytes: Int = 1024, isDiskFull: @Sendable (DepotError) -> Bool
    ) async throws -> DiskFullReport {
        let tmpfs = try SmallTmpfs.mount(kilobytes: kilobytes)
        defer { tmpfs.unmount() }
        let check = Expect(check: "diskFull.\(factory.name)")
        // A filler file, deleted to free space later.
        let filler = tmpfs.path + "/filler"
        try Data(count: 64 << 10).write(to: URL(fileURLWithPath: filler))
        let directory = tmpfs.path + "/store"
        guard mkdir(directory, 0o755) == 0 else { throw check.failure("mkdir \(directory): errno \(errno)") }
        let fill = try CollectionName("fill"), counter = try CollectionName("counter")
        let payload = String(repeating: "x", count: 2000)
        var report = DiskFullReport()
        let driver = try await factory.open(directory)
        var failure: DepotError?
        for n in 1...100_000 {
            do {
                try await driver.write { tx in
                    try tx.insert(Record(id: .int(Int64(n)), fields: ["payload": .string(payload)]), into: fill)
                    _ = try tx.save(Record(id: 1, fields: ["n": .int(Int64(n))]), into: counter)
                }
                report.acknowledged = n
            } catch let error as DepotError {
                failure = error
                break
            }
        }
        guard let failure else {
            try? await driver.close()
            throw check.failure("100,000 commits fitted on a \(kilobytes) KB file system")
        }
        report.error = String(reflecting: failure)
        try check.that(failure.code == .io, "the full disk is a typed .io error: \(report.error)")
        try check.that(isDiskFull(failure), "the error's cause is a full disk: \(report.error)")
        let message = failure.message.lowercased()
        try check.that(message.contains("full") || message.contains("no space"), "the message says the disk is full: \(failure.message)")
        try check.that(report.acknowledged > 0, "no commit fitted at all")
        // The driver still reads: every acknowledged commit, or a typed error.
        do {
            let seen = try await contents(driver, fill, counter)
            try check.that(seen.ids == upTo(seen.counter) && seen.counter >= report.acknowledged && seen.counter <= report.acknowledged + 1,
                "while full, the store shows \(seen.ids.count) records and counter \(seen.counter) after \(report.acknowledged) acknowledged commits")
        } catch let error as DepotError {
            try check.that(error.code == .io, "while full, a read failed untyped: \(String(reflecting: error))")
        }
        do { try await driver.close() } catch let error as DepotError {
            try check.that(error.code == .io, "closing on a full disk: \(String(reflecting: error))")
        }
        // Free space: the filler, and a larger file system.
        try FileManager.default.removeItem(atPath: filler)
        try tmpfs.resize(kilobytes: kilobytes * 8)
        let reopened = try await factory.open(directory)
        do {
            let found = try await contents(reopened, fill, counter)
            try check.that(found.ids == upTo(found.counter),
                "reopened: records \(found.ids.count) but counter \(found.counter) (a partial commit)")
            try check.that(found.counter >= report.acknowledged, "reopened: counter \(found.counter), but \(report.acknowledged) commits were acknowledged")
            try check.that(found.counter <= report.acknowledged + 1, "reopened: counter \(found.counter) after \(report.acknowledged) acknowledged commits")
            report.failedCommitKept = found.counter == report.acknowledged + 1
            let problems = try await reopened.integrityCheck()
            try check.that(problems.isEmpty, "reopened: integrity problems \(problems)")
            let next = found.counter + 1
            try await reopened.write { tx in
                try tx.insert(Record(id: .int(Int64(next)), fields: ["payload": .string(payload)]), into: fill)
                _ = try tx.save(Record(id: 1, fields: ["n": .int(Int64(next))]), into: counter)
            }
            try check.that(try await contents(reopened, fill, counter).counter == next, "the commit after freeing space is visible")
        } catch {
            try? await reopened.close()
            throw error
        }
        try await reopened.close()
        return report
    }

    /// `error` and its causes, outermost first (a ``DepotError``'s ``DepotError/cause``, and
    /// that one's, ...): where a driver's native code (an errno, a SQLite result) is found.
    public static func causes(of error: any Error) -> [any Error] {
        var chain: [any Error] = [error]
        while chain.count < 16, let next = (chain[chain.count - 1] as? DepotError)?.cause { chain.append(next) }
        return chain
    }

    /// The ids 1 to `n` (none for 0).
    private static func upTo(_ n: Int) -> [Int64] { n > 0 ? Array(1...Int64(n)) : [] }

    /// The ids in `fill`, sorted, and the counter's value (0 when absent).
    private static func contents(_ driver: any StorageDriver, _ fill: CollectionName, _ counter: CollectionName) async throws -> (ids: [Int64], counter: Int) {
        try await driver.read { tx in
            let ids = try tx.query(Query(), in: fill).compactMap { record -> Int64? in
                if case .int(let value) = record.id { value } else { nil }
            }.sorted()
            var n = 0
            if let record = try tx.get(1, from: counter), case .int(let value)? = record.fields["n"] { n = Int(value) }
            return (ids, n)
        }
    }
}
