import DepotCore

/// Assertions for checks: each throws a ``ConformanceFailure`` naming the check.
struct Expect {
    let check: String

    func that(_ condition: Bool, _ message: @autoclosure () -> String, file: String = #fileID, line: Int = #line) throws {
        if !condition { throw ConformanceFailure(check: check, message: message(), file: file, line: line) }
    }

    func equal<T: Equatable>(_ actual: T, _ expected: T, _ what: String, file: String = #fileID, line: Int = #line) throws {
        if actual != expected {
            throw ConformanceFailure(check: check, message: "\(what): expected \(expected), got \(actual)", file: file, line: line)
        }
    }

    /// Expects `body` to throw a ``DepotError`` with `code`.
    func throwsCode<T>(_ code: DepotError.Code, _ what: String, file: String = #fileID, line: Int = #line, _ body: () async throws -> T) async throws {
        do {
            _ = try await body()
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
}

extension ConformanceCheck {
    /// A check whose body gets a fresh driver and an ``Expect`` bound to its name.
    static func driver(_ name: String, requires: DriverCapabilities = [], _ body: @escaping @Sendable (any StorageDriver, Expect) async throws -> Void) -> ConformanceCheck {
        ConformanceCheck(name, requires: requires) { context in
            let driver = try await context.openDriver()
            try await body(driver, Expect(check: name))
        }
    }
}

/// Names used by many checks.
enum Fixture {
    static var users: CollectionName { get throws { try CollectionName("users") } }
}
