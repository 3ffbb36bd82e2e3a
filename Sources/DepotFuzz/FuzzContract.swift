/// Helpers that targets use to state their contract.
public enum FuzzContract {
    /// Runs `body`; returns its value, or `nil` when it threw an error `isTyped` accepts.
    /// - Throws: ``FuzzViolation`` `.untypedError` for any other error, and passes on a
    ///   ``FuzzViolation`` thrown by `body` itself.
    public static func expecting<T>(_ isTyped: (any Error) -> Bool, _ body: () throws -> T) throws(FuzzViolation) -> T? {
        do {
            return try body()
        } catch let violation as FuzzViolation {
            throw violation
        } catch {
            guard isTyped(error) else {
                throw FuzzViolation(.untypedError, "\(type(of: error)): \(String(describing: error).prefix(300))")
            }
            return nil
        }
    }

    /// ``expecting(_:_:)`` where the one documented error is `E` (DepotError, usually).
    public static func expecting<E: Error, T>(_ type: E.Type, _ body: () throws -> T) throws(FuzzViolation) -> T? {
        try expecting({ $0 is E }, body)
    }

    /// Throws a `.contract` violation with `message` unless `condition` holds.
    public static func require(_ condition: Bool, _ message: @autoclosure () -> String) throws(FuzzViolation) {
        guard condition else { throw FuzzViolation(.contract, message()) }
    }
}
