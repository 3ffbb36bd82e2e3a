import DepotCore
import Testing

/// Runs `body`, expecting a ``DepotError`` with `code`; returns it for further checks.
@discardableResult
func expectError(_ code: DepotError.Code, _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void) async -> DepotError? {
    do {
        try await body()
        Issue.record("expected \(code), but it succeeded. \(comment?.description ?? "")", sourceLocation: sourceLocation)
        return nil
    } catch let error as DepotError {
        #expect(error.code == code, "expected \(code), got \(error.code): \(error.message). \(comment?.description ?? "")", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected DepotError \(code), got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}
