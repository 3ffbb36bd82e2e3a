import DepotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The one place where the JSON-file driver turns native errors into ``DepotError``s.
extension JSONFileDriver {
    /// Maps a failed file-system operation (or anything else) met while doing `action`.
    ///
    /// Every operating-system failure is `.io` (disk full, EIO, permission, read-only file
    /// system); a file over the size limit is `.decoding`. The message names the operation,
    /// the store's file and the system's description of the `errno`.
    static func mapError(_ error: any Error, while action: String) -> DepotError {
        if let error = error as? DepotError { return error }
        guard let fsError = error as? FileSystemError else {
            return DepotError.wrap(error, as: .io, "Could not \(action).")
        }
        let reason = String(cString: strerror(fsError.errno))
        return DepotError(
            .io, "Could not \(action): \(fsError.operation) failed (\(reason)).", cause: fsError,
            detail: "\(fsError.operation) \(fsError.path): errno \(fsError.errno)")
    }

    /// `true` when `error` says a file exceeded the read limit.
    static func isTooLarge(_ error: any Error) -> Bool {
        (error as? FileSystemError)?.errno == EFBIG
    }
}
