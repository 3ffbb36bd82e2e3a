import DepotCore
import Foundation

/// Assertions for checks: each throws a ``ConformanceFailure`` naming the check.
struct Expect: Sendable {
    let check: String

    /// A failure of this check with `message`.
    func failure(_ message: String, file: String = #fileID, line: Int = #line) -> ConformanceFailure {
        ConformanceFailure(check: check, message: message, file: file, line: line)
    }

    func that(_ condition: Bool, _ message: @autoclosure () -> String, file: String = #fileID, line: Int = #line) throws {
        if !condition { throw ConformanceFailure(check: check, message: message(), file: file, line: line) }
    }

    func equal<T: Equatable>(_ actual: T, _ expected: T, _ what: String, file: String = #fileID, line: Int = #line) throws {
        if actual != expected {
            throw ConformanceFailure(check: check, message: "\(what): expected \(expected), got \(actual)", file: file, line: line)
        }
    }

    /// Expects an optional result to be present and equal to `expected`.
    func equal<T: Equatable>(_ actual: T?, _ expected: T, _ what: String, file: String = #fileID, line: Int = #line) throws {
        try equal(actual, Optional(expected), what, file: file, line: line)
    }

    /// Expects the records' ids, in this order.
    func ids(_ records: [Record], _ expected: [RecordID], _ what: String, file: String = #fileID, line: Int = #line) throws {
        let actual = records.map(\.id)
        if actual != expected {
            throw ConformanceFailure(
                check: check, message: "\(what): expected ids [\(expected.map(\.description).joined(separator: ", "))], got [\(actual.map(\.description).joined(separator: ", "))]",
                file: file, line: line)
        }
    }

    /// Expects `actual` to be `expected` exactly, where a top-level null and a missing field
    /// count as the same (drivers may keep either).
    func sameRecord(_ actual: Record?, _ expected: Record, _ what: String, file: String = #fileID, line: Int = #line) throws {
        guard let actual else {
            throw ConformanceFailure(check: check, message: "\(what): expected \(expected), got nothing", file: file, line: line)
        }
        let a = actual.withoutNulls, e = expected.withoutNulls
        guard a != e else { return }
        var differences: [String] = []
        if a.id != e.id { differences.append("id \(a.id) instead of \(e.id)") }
        for key in Set(a.fields.keys).union(e.fields.keys).sorted() where a.fields[key] != e.fields[key] {
            differences.append("field '\(key)': expected \(e.fields[key].map(\.description) ?? "missing") (\(kindName(e.fields[key]))), got \(a.fields[key].map(\.description) ?? "missing") (\(kindName(a.fields[key])))")
        }
        throw ConformanceFailure(check: check, message: "\(what): " + differences.joined(separator: "; "), file: file, line: line)
    }

    /// Expects the same records in the same order (null and missing alike).
    func sameRecords(_ actual: [Record], _ expected: [Record], _ what: String, file: String = #fileID, line: Int = #line) throws {
        try ids(actual, expected.map(\.id), what, file: file, line: line)
        for (a, e) in zip(actual, expected) { try sameRecord(a, e, what, file: file, line: line) }
    }

    /// Expects `body` to throw a ``DepotError`` with `code`.
    func throwsCode<T>(_ code: DepotError.Code, _ what: String, file: String = #fileID, line: Int = #line, _ body: () async throws -> T) async throws {
        _ = try await error(code, what, file: file, line: line, body)
    }

    /// Expects `body` to throw a ``DepotError`` with `code` and returns it for more checks.
    func error<T>(_ code: DepotError.Code, _ what: String, file: String = #fileID, line: Int = #line, _ body: () async throws -> T) async throws -> DepotError {
        do {
            _ = try await body()
        } catch let error as DepotError {
            if error.code != code {
                throw ConformanceFailure(check: check, message: "\(what): expected error \(code), got \(error.code) (\(error.message))", file: file, line: line)
            }
            return error
        } catch let failure as ConformanceFailure {
            throw failure
        } catch {
            throw ConformanceFailure(check: check, message: "\(what): expected DepotError \(code), got \(error)", file: file, line: line)
        }
        throw ConformanceFailure(check: check, message: "\(what): expected error \(code), but it succeeded", file: file, line: line)
    }

    /// The same as ``throwsCode(_:_:file:line:_:)`` for synchronous code (name validation).
    func throwsCodeSync<T>(_ code: DepotError.Code, _ what: String, file: String = #fileID, line: Int = #line, _ body: () throws -> T) throws {
        do {
            _ = try body()
        } catch let error as DepotError {
            if error.code != code {
                throw ConformanceFailure(check: check, message: "\(what): expected error \(code), got \(error.code) (\(error.message))", file: file, line: line)
            }
            return
        } catch {
            throw ConformanceFailure(check: check, message: "\(what): expected DepotError \(code), got \(error)", file: file, line: line)
        }
        throw ConformanceFailure(check: check, message: "\(what): expected error \(code), but it succeeded", file: file, line: line)
    }

    private func kindName(_ value: FieldValue?) -> String {
        switch value {
        case nil: "missing"
        case .int?: "int"
        case .double?: "double"
        case let v?: v.kind.description
        }
    }
}

extension ConformanceCheck {
    /// A check whose body gets the first driver and an ``Expect`` bound to its name.
    static func driver(_ name: String, requires: DriverCapabilities = [], _ body: @escaping @Sendable (any StorageDriver, Expect) async throws -> Void) -> ConformanceCheck {
        ConformanceCheck(name, requires: requires) { context in
            let driver = try await context.firstDriver()
            try await body(driver, Expect(check: name))
        }
    }

    /// A check that needs the context too (to reopen the store).
    static func context(_ name: String, requires: DriverCapabilities = [], _ body: @escaping @Sendable (ConformanceContext, any StorageDriver, Expect) async throws -> Void) -> ConformanceCheck {
        ConformanceCheck(name, requires: requires) { context in
            let driver = try await context.firstDriver()
            try await body(context, driver, Expect(check: name))
        }
    }

    /// A check with no driver at all (name rules and other pure contract parts).
    static func pure(_ name: String, _ body: @escaping @Sendable (Expect) throws -> Void) -> ConformanceCheck {
        ConformanceCheck(name) { _ in try body(Expect(check: name)) }
    }
}

/// Short forms the checks use; all go through the public protocol only.
extension StorageDriver {
    /// Writes `records` with `insert` in one transaction.
    func seed(_ records: [Record], into collection: CollectionName) async throws {
        try await write { tx in for record in records { try tx.insert(record, into: collection) } }
    }

    /// The results of `query`.
    func records(_ query: Query = Query(), in collection: CollectionName) async throws -> [Record] {
        try await read { tx in try tx.query(query, in: collection) }
    }

    /// The ids of the results of `query`.
    func ids(_ query: Query = Query(), in collection: CollectionName) async throws -> [RecordID] {
        try await records(query, in: collection).map(\.id)
    }

    /// The record with `id`, if any.
    func record(_ id: RecordID, in collection: CollectionName) async throws -> Record? {
        try await read { tx in try tx.get(id, from: collection) }
    }

    /// How many records match `filter`.
    func count(_ filter: Filter = .all, in collection: CollectionName) async throws -> Int {
        try await read { tx in try tx.count(filter, in: collection) }
    }

    /// Every record `stream` yields, optionally stopping after `limit`.
    func streamed(_ query: Query = Query(), from collection: CollectionName, stopAfter limit: Int? = nil) async throws -> [Record] {
        var out: [Record] = []
        for try await record in stream(query, from: collection) {
            out.append(record)
            if let limit, out.count >= limit { break }
        }
        return out
    }
}

/// Names used by many checks.
enum Fixture {
    static var users: CollectionName { get throws { try CollectionName("users") } }
    static var posts: CollectionName { get throws { try CollectionName("posts") } }
    static var items: CollectionName { get throws { try CollectionName("items") } }
    static var tags: CollectionName { get throws { try CollectionName("tags") } }

    /// A check-local error that a transaction closure throws to roll back.
    struct Rollback: Error, Equatable { var tag = 0 }

    /// Ids `1...n` as record ids.
    static func intIDs(_ values: Int64...) -> [RecordID] { values.map { .int($0) } }
}

/// How much longer than their nominal time the checks' deadlock timeouts and the tests' time
/// limits wait: the `DEPOT_TEST_TIMEOUT_SCALE` environment variable (a whole number from 1 to
/// 1,000; 1 when unset or out of range), which `scripts/sanitize` sets because a sanitizer
/// build runs several times slower (Docs/Testing.md, "Sanitizers").
public let testTimeoutScale: Int = {
    guard let text = ProcessInfo.processInfo.environment["DEPOT_TEST_TIMEOUT_SCALE"], let scale = Int(text), scale >= 1, scale <= 1000 else { return 1 }
    return scale
}()

/// Waits for `body` at most `seconds` (times ``testTimeoutScale``); a driver that deadlocks fails
/// the check instead of hanging the test run. The body keeps running in the background if it
/// never returns.
func withTimeout<T: Sendable>(_ nominalSeconds: Double, _ expect: Expect, _ what: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let seconds = nominalSeconds * Double(testTimeoutScale)
    let once = OnceResult<T>()
    return try await withCheckedThrowingContinuation { continuation in
        once.set(continuation)
        let timer = Task {
            try? await Task.sleep(nanoseconds: UInt64(seconds * 1_000_000_000))
            once.resume(.failure(expect.failure("\(what): did not finish within \(seconds) s (deadlock?)")))
        }
        Task {
            do { once.resume(.success(try await body())) } catch { once.resume(.failure(error)) }
            timer.cancel()
        }
    }
}

/// Resumes a continuation once, whichever of two racers comes first.
final class OnceResult<T: Sendable>: Sendable {
    private let state = Locked<CheckedContinuation<T, any Error>?>(nil)
    func set(_ continuation: CheckedContinuation<T, any Error>) { state.withLock { $0 = continuation } }
    func resume(_ result: Result<T, any Error>) {
        let continuation = state.withLock { value -> CheckedContinuation<T, any Error>? in
            defer { value = nil }
            return value
        }
        continuation?.resume(with: result)
    }
}
