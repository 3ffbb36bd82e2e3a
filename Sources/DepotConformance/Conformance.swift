import DepotCore
import Foundation

/// How the conformance library opens stores of the driver under test.
///
/// `open` receives a fresh, empty scratch directory for each check. Calling it again with
/// the same directory must reopen the same store (checks of persistence do that after
/// closing the first driver). Drivers without files may ignore the directory.
///
/// ```swift
/// let factory = DriverFactory(name: "sqlite") { dir in try SQLiteDriver(path: dir + "/store.db") }
/// ```
public struct DriverFactory: Sendable {
    /// The driver's name, shown in failure messages.
    public let name: String
    /// Opens, or reopens, the store kept in `directory`.
    public let open: @Sendable (_ directory: String) async throws -> any StorageDriver

    /// A factory named `name` whose `open` makes a driver for the store in the given directory.
    public init(name: String, open: @escaping @Sendable (_ directory: String) async throws -> any StorageDriver) {
        self.name = name
        self.open = open
    }
}

/// One named check of the driver contract.
public struct ConformanceCheck: Sendable {
    /// `area.name`, unique, stable (test reports show it).
    public let name: String
    /// What the driver must declare for the check to apply.
    public let requires: DriverCapabilities
    let body: @Sendable (ConformanceContext) async throws -> Void

    /// A check named `area.checkName` that runs only on drivers declaring `requires`.
    /// - Parameter body: the check; it throws ``ConformanceFailure`` when the driver breaks the
    ///   contract.
    public init(_ name: String, requires: DriverCapabilities = [], _ body: @escaping @Sendable (ConformanceContext) async throws -> Void) {
        self.name = name
        self.requires = requires
        self.body = body
    }
}

/// What a check receives: the factory, its scratch directory, and the first driver.
/// The runner closes every driver a check opened through the context, and removes the directory.
public final class ConformanceContext: @unchecked Sendable {
    // @unchecked: `opened` and `first` are guarded by `lock`; the rest is immutable.
    /// The factory of the driver under test.
    public let factory: DriverFactory
    /// The check's own empty scratch directory, removed when the check ends.
    public let directory: String
    private let lock = NSLock()
    private var opened: [any StorageDriver] = []
    private var first: (any StorageDriver)?

    init(factory: DriverFactory, directory: String) {
        self.factory = factory
        self.directory = directory
    }

    /// Opens (or reopens) the store in this check's directory.
    public func openDriver() async throws -> any StorageDriver {
        let driver = try await factory.open(directory)
        lock.withLock { opened.append(driver) }
        return driver
    }

    /// The driver the runner opened to read the capabilities (a newly opened one if there is
    /// none). Checks start with it, so a store is never open twice by accident: drivers that
    /// lock their files would refuse a second open.
    public func firstDriver() async throws -> any StorageDriver {
        if let driver = lock.withLock({ first }) { return driver }
        return try await openDriver()
    }

    /// Makes `driver` the one ``firstDriver()`` returns.
    func setFirst(_ driver: any StorageDriver) {
        lock.withLock { first = driver }
    }

    func closeAll() async {
        let drivers = lock.withLock { opened }
        for driver in drivers { try? await driver.close() }
    }
}

/// The result of running one check.
public enum ConformanceOutcome: Sendable, Equatable {
    /// The check ran and the driver met every expectation.
    case passed
    /// The driver does not declare these capabilities; the check did not run.
    case notSupported(DriverCapabilities)
}

/// A check failed: says what was expected and what the driver did.
public struct ConformanceFailure: Error, Sendable, CustomStringConvertible {
    /// The name of the check that failed.
    public let check: String
    /// What was expected and what the driver did instead.
    public let message: String
    /// The source file of the failed expectation.
    public let file: String
    /// The line of the failed expectation.
    public let line: Int
    /// The check, the message and the source location on one line.
    public var description: String { "\(check): \(message) (\(file):\(line))" }
}

/// The executable driver contract: every check, and a runner with no test framework inside,
/// so any driver (yours too) can run it from any test harness.
///
/// Checks are named `area.checkName`, one file per area:
/// `crud`, `ids`, `values` (every field value kind round-trips exactly), `filter` (every
/// operator with its null, number and string edge cases), `sort` and `paging`, `count`,
/// `stream`, `unique`, `tx` (atomicity, rollback, snapshots), `concurrency`, `schema`,
/// `names` (hostile and awkward names), `errors`, `persistence` (close and reopen),
/// `differential` (seeded random operations compared step by step with ``MemoryDriver``),
/// and through a ``Store`` on the driver: `codec`, `events` (change events, observed
/// queries, the read cache), `migrations`, `upsert` and `modelMacro` (a `@Model` type's
/// records equal those of its `Codable` twin).
///
/// Expected answers are written out by hand from Docs/Semantics.md, never computed with
/// ``QueryEvaluator`` (except by the differential checks, whose reference is a second driver).
/// A check that needs a capability declares it; a driver without it gets
/// ``ConformanceOutcome/notSupported(_:)``, which a test should report as a known issue.
///
/// ```swift
/// @Test(arguments: Conformance.checkNames)
/// func conformance(_ name: String) async throws {
///     let outcome = try await Conformance.run(name, factory: myFactory)
///     if case .notSupported(let missing) = outcome {
///         withKnownIssue("driver does not declare \(missing)") { throw ConformanceNotRun() }
///     }
/// }
/// ```
public enum Conformance {
    /// Every check, in a stable order.
    public static var checks: [ConformanceCheck] { allChecks }

    /// The names of every check.
    public static var checkNames: [String] { allChecks.map(\.name) }

    /// Runs the named check against a fresh store from `factory`.
    /// - Throws: ``ConformanceFailure`` when the driver breaks the contract, or the error the
    ///   driver threw where the contract expected success.
    public static func run(_ name: String, factory: DriverFactory) async throws -> ConformanceOutcome {
        guard let check = allChecks.first(where: { $0.name == name }) else {
            throw ConformanceFailure(check: name, message: "no such check", file: #fileID, line: #line)
        }
        return try await run(check, factory: factory)
    }

    /// Runs one check against a fresh store from `factory`.
    public static func run(_ check: ConformanceCheck, factory: DriverFactory) async throws -> ConformanceOutcome {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("depot-conformance-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let context = ConformanceContext(factory: factory, directory: directory)
        let probe = try await context.openDriver()
        context.setFirst(probe)
        let missing = check.requires.subtracting(probe.capabilities)
        guard missing.isEmpty else {
            await context.closeAll()
            return .notSupported(missing)
        }
        do {
            try await check.body(context)
        } catch {
            await context.closeAll()
            throw error
        }
        await context.closeAll()
        return .passed
    }
}

/// Thrown inside `withKnownIssue` to make an unsupported check visible in a test report.
public struct ConformanceNotRun: Error, Sendable {
    /// Makes the marker error.
    public init() {}
}

/// Every check of every area. Each area file adds its list here.
let allChecks: [ConformanceCheck] =
    CRUDChecks.all + IDChecks.all + ValueChecks.all + FilterChecks.all + SortPagingChecks.all + CountChecks.all
    + StreamingChecks.all + UniqueChecks.all + TransactionChecks.all + ConcurrencyChecks.all + SchemaChecks.all
    + NameChecks.all + ErrorChecks.all + PersistenceChecks.all + DifferentialChecks.all
    + CodecChecks.all + ObservationChecks.all + MigrationChecks.all + UpsertChecks.all + ModelMacroChecks.all
    + AggregateChecks.all + PartialChecks.all + RelationChecks.all + ResultCacheChecks.all
