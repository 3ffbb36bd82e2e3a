import DepotCore
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Damaged stores at scale (Docs/Fuzzing.md, "Damaged stores"): a valid store of a persistent
// driver, damaged in a seeded, reproducible way per case, then opened, checked, dumped and
// queried as `depot check` and `depot dump` do. Every step must end with success or a
// `DepotError`; never a crash, a hang, or a change to a file the driver's policy does not allow.

/// The files of a store on disk, read into memory: every regular file and directory under a
/// root directory, by path relative to it.
public struct StoreImage: Sendable, Equatable {
    /// Regular files: relative path → contents.
    public var files: [String: [UInt8]]
    /// Directories (relative paths), so that empty ones are made again.
    public var directories: Set<String>

    /// An image of the given files and directories.
    public init(files: [String: [UInt8]] = [:], directories: Set<String> = []) {
        self.files = files
        self.directories = directories
    }

    /// Reads every file and directory under `root` (symbolic links are not followed).
    /// - Throws: what reading a file throws.
    public static func read(_ root: String) throws -> StoreImage {
        var image = StoreImage()
        guard let walker = FileManager.default.enumerator(atPath: root) else { return image }
        while let relative = walker.nextObject() as? String {
            let path = root + "/" + relative
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }
            if isDirectory.boolValue {
                image.directories.insert(relative)
            } else {
                // Not Data(contentsOf:), which leaks 4 KB per empty file (Docs/Testing.md, "Sanitizers").
                image.files[relative] = [UInt8](try FileHandle(forReadingFrom: URL(fileURLWithPath: path)).readToEnd() ?? Data())
            }
        }
        return image
    }

    /// Empties `root` (making it if missing) and writes the image into it.
    /// - Throws: what the file system throws.
    public func write(to root: String) throws {
        if FileManager.default.fileExists(atPath: root) { try FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        for directory in directories.sorted() {
            try FileManager.default.createDirectory(atPath: root + "/" + directory, withIntermediateDirectories: true)
        }
        for (relative, bytes) in files {
            let path = root + "/" + relative
            let parent = (path as NSString).deletingLastPathComponent
            try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
            guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else {
                throw DepotError(.io, "Could not write \(path).")
            }
        }
    }
}

/// One way of damaging one file of a store image.
public enum DamageKind: Sendable, CustomStringConvertible {
    /// Flip bit `bit` of the byte at `offset`.
    case bitFlip(offset: Int, bit: Int)
    /// Overwrite `length` bytes from `offset` with `fill` (`nil`: random bytes from `seed`).
    case overwrite(offset: Int, length: Int, fill: UInt8?, seed: UInt64)
    /// Cut the file to `length` bytes (0 included).
    case truncate(length: Int)
    /// Delete the file.
    case missing
    /// Add a file at `path` that the store never wrote: `bytes` (random, or another store's file).
    case extraFile(path: String, origin: String, bytes: [UInt8])
    /// Replace the file with another store's file (`origin` says which).
    case foreign(origin: String, bytes: [UInt8])
    /// Copy `length` bytes from `from` over the bytes at `to` (the size stays).
    case duplicate(from: Int, to: Int, length: Int)
    /// Swap the runs of `length` bytes at `first` and `second` (not overlapping).
    case swap(first: Int, second: Int, length: Int)

    /// The kind's name, for the figures.
    public var name: String {
        switch self {
        case .bitFlip: "bit flip"
        case .overwrite(_, _, let fill, _): fill == nil ? "overwrite random" : fill == 0 ? "overwrite 0x00" : "overwrite 0xFF"
        case .truncate(let length): length == 0 ? "truncate to 0" : "truncate"
        case .missing: "missing file"
        case .extraFile: "extra file"
        case .foreign: "foreign file"
        case .duplicate: "duplicated run"
        case .swap: "swapped runs"
        }
    }

    /// The damage with its parameters, as printed with a case.
    public var description: String {
        switch self {
        case .bitFlip(let offset, let bit): "flip bit \(bit) of byte \(offset)"
        case .overwrite(let offset, let length, let fill, let seed):
            "overwrite \(length) bytes at \(offset) with \(fill.map { String(format: "0x%02X", $0) } ?? "random bytes (seed \(seed))")"
        case .truncate(let length): "truncate to \(length) bytes"
        case .missing: "delete the file"
        case .extraFile(let path, let origin, let bytes): "add \(path) (\(bytes.count) bytes: \(origin))"
        case .foreign(let origin, let bytes): "replace with \(origin) (\(bytes.count) bytes)"
        case .duplicate(let from, let to, let length): "copy \(length) bytes from \(from) over \(to)"
        case .swap(let first, let second, let length): "swap \(length) bytes at \(first) and \(second)"
        }
    }
}

/// Case N of a driver's damage run: which base image, which file, what damage. Made by
/// ``DamageGenerator/makeCase(_:)`` from the seed and N alone.
public struct DamageCase: Sendable, CustomStringConvertible {
    /// The driver's name (`sqlite`, `gdbm`, `json`).
    public var driver: String
    /// The run's seed.
    public var seed: UInt64
    /// N.
    public var index: Int
    /// The name of the base image damaged.
    public var base: String
    /// The file damaged (relative to the image root), or the directory an extra file goes in.
    public var file: String
    /// The damage.
    public var kind: DamageKind

    /// What to print on a failure: enough to replay the case (`DEPOT_DAMAGE_SEED`, `DEPOT_DAMAGE_FIRST`).
    public var description: String {
        "damage case \(driver) seed \(seed) #\(index): base '\(base)', \(file): \(kind)"
    }

    /// The base image with the damage applied.
    public func apply(to image: StoreImage) -> StoreImage {
        var result = image
        let original = image.files[file] ?? []
        var bytes = original
        switch kind {
        case .bitFlip(let offset, let bit):
            if offset < bytes.count { bytes[offset] ^= UInt8(1) << UInt8(bit & 7) }
        case .overwrite(let offset, let length, let fill, let seed):
            var random = SplitMix64(seed: seed)
            for i in offset..<min(bytes.count, offset + length) {
                bytes[i] = fill ?? UInt8(truncatingIfNeeded: random.next())
            }
        case .truncate(let length):
            bytes = Array(bytes.prefix(length))
        case .missing:
            result.files[file] = nil
            return result
        case .extraFile(let path, _, let extra):
            result.files[path] = extra
            return result
        case .foreign(_, let replacement):
            bytes = replacement
        case .duplicate(let from, let to, let length):
            if from + length <= bytes.count, to + length <= bytes.count {
                bytes.replaceSubrange(to..<to + length, with: original[from..<from + length])
            }
        case .swap(let first, let second, let length):
            if first + length <= bytes.count, second + length <= bytes.count {
                bytes.replaceSubrange(first..<first + length, with: original[second..<second + length])
                bytes.replaceSubrange(second..<second + length, with: original[first..<first + length])
            }
        }
        result.files[file] = bytes
        return result
    }
}

/// Makes damage cases, deterministically: case N of (driver, seed) is always the same damage
/// of the same base image (given base images built the same way).
public struct DamageGenerator: Sendable {
    /// The driver's name, printed with each case.
    public var driver: String
    /// The valid images to damage, by name (e.g. a clean store and one with an un-checkpointed journal).
    public var bases: [(name: String, image: StoreImage)]
    /// A valid store of the same driver with other contents: the source of swapped-in files.
    public var foreign: StoreImage
    /// Paths (relative to the root) where an extra, unrelated file may appear: names the
    /// driver might look at (a journal beside the database, a collection file no catalog lists).
    public var extraPaths: [String]
    /// The run's seed.
    public var seed: UInt64

    /// A generator of damage to `bases`.
    public init(driver: String, bases: [(name: String, image: StoreImage)], foreign: StoreImage, extraPaths: [String], seed: UInt64) {
        self.driver = driver
        self.bases = bases
        self.foreign = foreign
        self.extraPaths = extraPaths
        self.seed = seed
    }

    /// Case `index`: its own generator, seeded from the run's seed and the index, so a case
    /// needs no other case to be made.
    public func makeCase(_ index: Int) -> DamageCase {
        var random = SplitMix64(seed: seed ^ (UInt64(truncatingIfNeeded: index) &* 0xD1B5_4A32_D192_ED03))
        func below(_ n: Int) -> Int { n <= 1 ? 0 : Int(random.next() % UInt64(n)) }
        let base = bases[below(bases.count)]
        let files = base.image.files.keys.sorted()
        let file = files.isEmpty ? "" : files[below(files.count)]
        let size = base.image.files[file]?.count ?? 0
        let foreignFiles = foreign.files.keys.sorted()
        // A run length: mostly short, sometimes a page or more.
        func runLength() -> Int { [1 + below(16), 1 + below(512), 1 + below(16_384)][below(3)] }
        var kind: DamageKind
        switch below(100) {
        case 0..<30 where size > 0:
            kind = .bitFlip(offset: below(size), bit: below(8))
        case 30..<48 where size > 0:
            let fill: UInt8? = [nil, 0x00, 0xFF][below(3)]
            kind = .overwrite(offset: below(size), length: runLength(), fill: fill, seed: random.next())
        case 48..<62:
            kind = .truncate(length: below(3) == 0 ? 0 : below(size + 1))
        case 62..<69:
            kind = .missing
        case 69..<77 where !extraPaths.isEmpty:
            let path = extraPaths[below(extraPaths.count)]
            if below(2) == 0, !foreignFiles.isEmpty {
                let origin = foreignFiles[below(foreignFiles.count)]
                kind = .extraFile(path: path, origin: "the other store's \(origin)", bytes: foreign.files[origin] ?? [])
            } else {
                var bytes = [UInt8](repeating: 0, count: below(8192))
                for i in bytes.indices { bytes[i] = UInt8(truncatingIfNeeded: random.next()) }
                kind = .extraFile(path: path, origin: "random bytes", bytes: bytes)
            }
        case 77..<87 where !foreignFiles.isEmpty:
            // The same file of the other store when it has one, else any of its files.
            let origin = foreign.files[file] != nil && below(4) != 0 ? file : foreignFiles[below(foreignFiles.count)]
            kind = .foreign(origin: "the other store's \(origin)", bytes: foreign.files[origin] ?? [])
        case 87..<94 where size > 1:
            let length = min(runLength(), size / 2)
            kind = .duplicate(from: below(size - length + 1), to: below(size - length + 1), length: length)
        case 94..<100 where size > 1:
            let length = max(1, min(runLength(), size / 2))
            let first = below(size / 2 - length + 1)
            let second = size / 2 + below(size - size / 2 - length + 1)
            kind = .swap(first: first, second: second, length: length)
        default:
            kind = size > 0 ? .bitFlip(offset: below(size), bit: below(8)) : .missing
        }
        return DamageCase(driver: driver, seed: seed, index: index, base: base.name, file: file, kind: kind)
    }
}

/// What the run is allowed to see change in the damaged files, per driver (Docs/Fuzzing.md,
/// "Damaged stores"). On top of it, always: a file whose path a `.corrupted` error or an
/// integrity problem names is never changed.
public struct DamagePolicy: Sendable {
    /// A change to one file between before opening and after closing.
    public struct Change: Sendable, CustomStringConvertible {
        /// The file, relative to the image root.
        public var path: String
        /// `changed`, `removed` or `added`.
        public var what: String
        /// `PATH changed`, `PATH removed` or `PATH added`.
        public var description: String { "\(path) \(what)" }
    }

    /// What the session saw, for the policy.
    public struct Context: Sendable {
        /// The damaged image the session opened.
        public var before: StoreImage
        /// `true` when a step threw `.corrupted` or the integrity check reported a problem.
        public var reportedDamage: Bool
    }

    /// The rule in words, for the figures.
    public var summary: String
    /// `true` when `change` is allowed in `context`.
    public var allows: @Sendable (_ change: Change, _ context: Context) -> Bool

    /// A policy; `allows` decides each change.
    public init(summary: String, allows: @escaping @Sendable (_ change: Change, _ context: Context) -> Bool) {
        self.summary = summary
        self.allows = allows
    }
}

/// How one damaged store fared: each step's result.
public struct DamageSession: Sendable {
    /// One step (`open`, `check`, `collections`, `read NAME`, `count NAME`, `schema version`,
    /// `dump`, `query`, `close`) and what it ended with: `nil` for success, or the error.
    public var steps: [(step: String, error: DepotError?)] = []
    /// The integrity check's problems.
    public var problems: [String] = []
    /// Errors that were not `DepotError`s (always a failure).
    public var untyped: [String] = []
    /// `true` when the CLI's test found no store of the driver there, so nothing was opened
    /// (as `depot check` and `depot dump` refuse such a path).
    public var noStore = false

    /// `true` when the store opened.
    public var opened: Bool { steps.first.map { $0.step == "open" && $0.error == nil } ?? false }
    /// Every `DepotError` thrown.
    public var errors: [DepotError] { steps.compactMap(\.error) }
    /// `true` when anything said the store is damaged.
    public var reportedDamage: Bool { !problems.isEmpty || errors.contains { $0.code == .corrupted } }

    /// The case's outcome for the figures: `opened, sound`, `opened, damage found`, `open: CODE`.
    public var outcome: String {
        if !untyped.isEmpty { return "untyped error" }
        if noStore { return "no store there" }
        if let first = steps.first, first.step == "open", let error = first.error { return "open failed: \(error.code)" }
        if reportedDamage { return "opened, damage reported" }
        if let error = errors.first { return "opened, error: \(error.code)" }
        return "opened, sound"
    }

    /// Opens a store with `open` and does what `depot check`, `depot dump` and one query do
    /// (Sources/DepotCLI/CheckCommand.swift, DumpCommand.swift), recording every step. `open`
    /// returns `nil` where the CLI's test of the path finds no store (nothing is opened).
    public static func run(open: () async throws -> (any StorageDriver)?) async -> DamageSession {
        var session = DamageSession()
        let store: Store
        do {
            guard let driver = try await open() else {
                session.noStore = true
                session.steps.append(("open", nil))
                return session
            }
            store = try await Store(driver: driver)
            session.steps.append(("open", nil))
        } catch {
            session.record("open", error)
            return session
        }
        var problems: [String] = []
        session.record("check", await attempt { problems = try await store.driver.integrityCheck() })
        session.problems = problems
        var names: [CollectionName] = []
        session.record("collections", await attempt { names = try await store.collectionNames(includingReserved: true) })
        var invalid: [String] = []
        for name in names {
            session.record("read \(name)", await attempt {
                for try await record in try store.collection(name).stream() {
                    do { try record.validate(collection: name.rawValue) } catch let error as DepotError { invalid.append(error.message) }
                }
            })
            session.record("count \(name)", await attempt { _ = try await store.collection(name).count() })
        }
        session.problems += invalid
        session.record("schema version", await attempt { _ = try await store.schemaVersion() })
        session.record("dump", await attempt {
            for name in try await store.collectionNames() {
                for try await record in try store.collection(name).stream() { _ = record.jsonText }
            }
        })
        let queried = names.filter { !$0.isReserved }
        session.record("query", await attempt {
            for name in queried {
                _ = try await store.collection(name).query(Query(filter: Field("n") >= 3, sort: [Field("n").descending], limit: 20))
            }
        })
        session.record("close", await attempt { try await store.close() })
        return session
    }

    /// Runs `body`; returns what it threw.
    private static func attempt(_ body: () async throws -> Void) async -> (any Error)? {
        do {
            try await body()
            return nil
        } catch {
            return error
        }
    }

    private mutating func record(_ step: String, _ error: (any Error)?) {
        guard let error else {
            steps.append((step, nil))
            return
        }
        if let error = error as? DepotError {
            steps.append((step, error))
        } else {
            untyped.append("\(step): \(String(reflecting: error))")
            steps.append((step, DepotError(.internal, "untyped error")))
        }
    }
}

/// The run's settings: `DEPOT_DAMAGE_CASES` (how many), `DEPOT_DAMAGE_FIRST` (the first case
/// index), `DEPOT_DAMAGE_SEED`, `DEPOT_DAMAGE_CASE_SECONDS` (the wall-time limit of one case).
public struct DamageSettings: Sendable {
    /// Cases to run.
    public var cases: Int
    /// The first case's index.
    public var first: Int
    /// The seed.
    public var seed: UInt64
    /// A case still running after this many seconds is a hang.
    public var caseSeconds: Double

    /// Settings given in full.
    public init(cases: Int, first: Int = 0, seed: UInt64, caseSeconds: Double = 60) {
        self.cases = cases
        self.first = first
        self.seed = seed
        self.caseSeconds = caseSeconds
    }

    /// The settings from the environment, `defaultCases` when `DEPOT_DAMAGE_CASES` is unset.
    public static func fromEnvironment(defaultCases: Int) -> DamageSettings {
        let environment = ProcessInfo.processInfo.environment
        return DamageSettings(
            cases: environment["DEPOT_DAMAGE_CASES"].flatMap { Int($0) } ?? defaultCases,
            first: environment["DEPOT_DAMAGE_FIRST"].flatMap { Int($0) } ?? 0,
            seed: environment["DEPOT_DAMAGE_SEED"].flatMap { UInt64($0) } ?? 1,
            caseSeconds: environment["DEPOT_DAMAGE_CASE_SECONDS"].flatMap { Double($0) } ?? 60)
    }
}

/// The figures of a run and its failures.
public struct DamageReport: Sendable {
    /// The driver.
    public var driver: String
    /// Cases run.
    public var cases = 0
    /// Outcome counts by damage kind: kind → outcome → cases.
    public var outcomes: [String: [String: Int]] = [:]
    /// Error codes by step: `step: code` → count.
    public var codes: [String: Int] = [:]
    /// `.corrupted` errors whose message names no file of the store (by path or by name) nor
    /// the store's directory.
    public var unnamedCorruption = 0
    /// Examples of unnamed corruption and of codes other than `.corrupted` (first case of each).
    public var examples: [String: String] = [:]
    /// Cases that changed files the policy allows to change.
    public var allowedChanges = 0
    /// Failures: the case and what went wrong.
    public var failures: [String] = []
    /// Wall time of the whole run, seconds.
    public var seconds = 0.0
    /// The slowest case, seconds, and which.
    public var slowest: (seconds: Double, index: Int) = (0, 0)
    /// The process's peak resident set (VmHWM) at the end, in KiB.
    public var peakRSSKiB = 0

    /// The figures as text (Markdown tables).
    public var summary: String {
        var text = "\(driver): \(cases) cases in \(String(format: "%.1f", seconds)) s (\(String(format: "%.1f", Double(cases) / max(seconds, 0.001))) cases/s), slowest case #\(slowest.index) \(String(format: "%.2f", slowest.seconds)) s, peak RSS \(peakRSSKiB / 1024) MiB, failures \(failures.count)\n"
        let columns = Set(outcomes.values.flatMap(\.keys)).sorted()
        text += "| damage | " + columns.joined(separator: " | ") + " |\n|" + String(repeating: " --- |", count: columns.count + 1) + "\n"
        for kind in outcomes.keys.sorted() {
            text += "| \(kind) | " + columns.map { String(outcomes[kind]?[$0] ?? 0) }.joined(separator: " | ") + " |\n"
        }
        text += "errors by step: " + codes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + "\n"
        text += "corrupted errors naming no file: \(unnamedCorruption); cases with allowed file changes: \(allowedChanges)\n"
        for (key, example) in examples.sorted(by: { $0.key < $1.key }) { text += "example \(key): \(example)\n" }
        for failure in failures.prefix(20) { text += "FAILURE \(failure)\n" }
        return text
    }
}

/// Runs damage cases one after another in this process (fast: no process per case). A case
/// that traps kills the process, so the case is written to standard error first by a signal
/// handler (``DamageCrashNote``); a case that hangs past the time limit is written there by a
/// watchdog thread, which then ends the process with status 70.
public enum DamageRunner {
    /// Runs `settings.cases` cases of `generator` in `workDirectory` (emptied for each case):
    /// writes the damaged image, runs ``DamageSession/run(open:)`` with `open(root)` (`nil`:
    /// the CLI's test finds no store there, so nothing is opened), reads
    /// the files back and holds the changes to `policy`.
    public static func run(
        _ generator: DamageGenerator, settings: DamageSettings, workDirectory: String, policy: DamagePolicy,
        open: @escaping (_ root: String) async throws -> (any StorageDriver)?
    ) async -> DamageReport {
        var report = DamageReport(driver: generator.driver)
        // A case past its limit is a hang: name it and end the process.
        let watchdog = HangWatchdog(limit: settings.caseSeconds, pollInterval: 0.2) { limit in
            DamageCrashNote.writeNote("a case has run for over \(limit) s (a hang): ")
            _exit(70)
        }
        defer { watchdog.stop() }
        let started = HangWatchdog.now()
        for index in settings.first..<settings.first + settings.cases {
            let damage = generator.makeCase(index)
            guard let base = generator.bases.first(where: { $0.name == damage.base }) else { continue }
            let image = damage.apply(to: base.image)
            do {
                try image.write(to: workDirectory)
            } catch {
                report.failures.append("\(damage): the image could not be written: \(error)")
                continue
            }
            DamageCrashNote.set("\(damage)")
            let caseStart = HangWatchdog.now()
            watchdog.begin(at: caseStart)
            let session = await DamageSession.run { try await open(workDirectory) }
            watchdog.end()
            let caseSeconds = Double(HangWatchdog.now() - caseStart) / 1e9
            if caseSeconds > report.slowest.seconds { report.slowest = (caseSeconds, index) }
            report.cases += 1
            report.outcomes[damage.kind.name, default: [:]][session.outcome, default: 0] += 1
            for untyped in session.untyped { report.failures.append("\(damage): untyped error in \(untyped)") }
            // A message names a file by its path or its name (GDBM names `users.records.gdbm`).
            let names = image.files.keys.map { workDirectory + "/" + $0 } + image.files.keys.map { ($0 as NSString).lastPathComponent } + [workDirectory]
            for (step, error) in session.steps {
                guard let error else { continue }
                let stepName = step.hasPrefix("read ") ? "read" : step.hasPrefix("count ") ? "count" : step
                let key = "\(stepName): \(error.code)"
                report.codes[key, default: 0] += 1
                if error.code == .corrupted, !names.contains(where: { error.message.contains($0) }) {
                    report.unnamedCorruption += 1
                    if report.examples["corrupted naming no file (\(stepName))"] == nil {
                        report.examples["corrupted naming no file (\(stepName))"] = "\(damage): \(error.message)"
                    }
                } else if error.code != .corrupted, report.examples[key] == nil {
                    report.examples[key] = "\(damage): \(String(reflecting: error))"
                }
            }
            // Files after the session, against the damaged image it opened.
            let after: StoreImage
            do {
                after = try StoreImage.read(workDirectory)
            } catch {
                report.failures.append("\(damage): the files could not be read back: \(error)")
                continue
            }
            var changes: [DamagePolicy.Change] = []
            for (path, bytes) in image.files.sorted(by: { $0.key < $1.key }) {
                if let now = after.files[path] {
                    if now != bytes { changes.append(.init(path: path, what: "changed")) }
                } else {
                    changes.append(.init(path: path, what: "removed"))
                }
            }
            for path in after.files.keys.sorted() where image.files[path] == nil { changes.append(.init(path: path, what: "added")) }
            let context = DamagePolicy.Context(before: image, reportedDamage: session.reportedDamage)
            let reports = session.errors.filter { $0.code == .corrupted }.map(\.message) + session.problems
            var allowed = false
            for change in changes {
                let full = workDirectory + "/" + change.path
                if change.what != "added", reports.contains(where: { $0.contains(full) }) {
                    report.failures.append("\(damage): \(change), though the driver reported it damaged (outcome: \(session.outcome))")
                } else if !policy.allows(change, context) {
                    report.failures.append("\(damage): \(change), which the policy forbids (outcome: \(session.outcome); \(policy.summary))")
                } else {
                    allowed = true
                }
            }
            if allowed { report.allowedChanges += 1 }
        }
        DamageCrashNote.set("")
        report.seconds = Double(HangWatchdog.now() - started) / 1e9
        report.peakRSSKiB = peakRSSKiB()
        return report
    }

    /// The process's peak resident set size in KiB (`VmHWM` in /proc/self/status; 0 where absent).
    public static func peakRSSKiB() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
        }
        return 0
    }
}

/// The case being run, written to standard error if the process receives a crash signal
/// (SIGILL, SIGTRAP, SIGSEGV, SIGBUS, SIGFPE, SIGABRT), so that a trap names its case.
public enum DamageCrashNote {
    private static let capacity = 2048
    nonisolated(unsafe) private static let buffer: UnsafeMutablePointer<UInt8> = .allocate(capacity: 2048)
    private static let length = Atomic<Int>(0)
    private static let installed = Locked(false)

    /// Sets the note (and installs the handlers the first time).
    public static func set(_ text: String) {
        installed.withLock { done in
            guard !done else { return }
            done = true
            for crash in [SIGILL, SIGTRAP, SIGSEGV, SIGBUS, SIGFPE, SIGABRT] {
                _ = signal(crash) { received in
                    DamageCrashNote.writeNote(prefix: "a crash signal arrived while running ")
                    _ = signal(received, SIG_DFL)
                    _ = raise(received)
                }
            }
        }
        length.store(0, ordering: .sequentiallyConsistent)
        let bytes = Array(text.utf8.prefix(capacity - 1)) + [0x0A]
        bytes.withUnsafeBufferPointer { source in
            if let base = source.baseAddress { buffer.update(from: base, count: source.count) }
        }
        length.store(bytes.count, ordering: .sequentiallyConsistent)
    }

    /// Writes the note to standard error with `write(2)` (safe in a signal handler but for the
    /// prefix, which is built before anything is written).
    static func writeNote(prefix: StaticString) {
        _ = write(2, prefix.utf8Start, prefix.utf8CodeUnitCount)
        _ = write(2, buffer, length.load(ordering: .sequentiallyConsistent))
    }

    /// Writes the note after `prefix` (any text; not for signal handlers).
    static func writeNote(_ prefix: String) {
        FileHandle.standardError.write(Data(prefix.utf8))
        _ = write(2, buffer, length.load(ordering: .sequentiallyConsistent))
    }
}

/// The contents of the valid stores the damage runs start from: three collections (integer
/// ids with a unique constraint and an index, string ids, assigned ids), records of every
/// field kind, long enough to span several pages, and a schema version.
public enum DamageFixture {
    /// Writes the fixture into `driver` in a few transactions; `variant` changes the values
    /// (the other store of a run uses another variant), `records` sets the size.
    /// - Throws: what the driver throws.
    public static func fill(_ driver: any StorageDriver, variant: Int, records: Int = 120) async throws {
        let books = try CollectionName("books"), tags = try CollectionName("tags"), events = try CollectionName("events")
        let meta = try CollectionName(reserved: "_depot_meta")
        try await driver.write { tx in
            try tx.prepare(CollectionSchema(name: books, idKind: .int, uniqueConstraints: [UniqueConstraint(["isbn"])], indexes: [IndexDefinition(["shelf"])]))
            try tx.prepare(CollectionSchema(name: tags, idKind: .string))
            try tx.prepare(CollectionSchema(name: events, idKind: .int))
            try tx.insert(Record(id: "schema", fields: ["version": .int(Int64(3 + variant))]), into: meta)
        }
        for chunk in stride(from: 0, to: records, by: 40) {
            try await driver.write { tx in
                for i in chunk..<min(records, chunk + 40) {
                    let n = Int64(i * (variant + 1))
                    try tx.insert(Record(id: .int(Int64(i + 1)), fields: [
                        "title": .string("Book \(i) " + String(repeating: "lorem ipsum ", count: i % 23)),
                        "isbn": .string("978-\(variant)-\(i)"), "shelf": .int(Int64(i % 7)), "n": .int(n),
                        "price": .double(Double(i) * 1.25 + 0.1), "available": .bool(i % 3 == 0), "note": i % 5 == 0 ? .null : .string("n\(i)"),
                        "authors": .array([.string("A\(i)"), .string("B\(i % 4)")]),
                        "meta": .object(["pages": .int(Int64(100 + i)), "lang": .string(i % 2 == 0 ? "en" : "fr")]),
                        "cover": .bytes(Data((0..<(i % 40)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ i) })),
                    ]), into: books)
                    try tx.insert(Record(id: .string("tag-\(variant)-\(i)"), fields: ["n": .int(n % 11), "label": .string("label \(i)")]), into: tags)
                    _ = try tx.insert(fields: ["n": .int(n), "at": .double(Double(i)), "kind": .string(["open", "close", "move"][i % 3])], into: events)
                }
            }
        }
    }
}
