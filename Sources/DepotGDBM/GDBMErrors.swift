import CGDBM
import DepotCore
import Foundation

/// The one place where native failures (gdbm error codes, errno, undecodable bytes) become
/// ``DepotError`` codes. Nothing else in the driver builds an error from a native code.
///
/// gdbm's own `gdbm_errno` is a C macro Swift cannot see; the driver reads the code through
/// `gdbm_last_errno(dbf)` for an open file and `gdbm_errno_location()` when opening failed,
/// asks `gdbm_check_syserr` whether `errno` explains it, and takes the text from
/// `gdbm_strerror`/`gdbm_db_strerror` (debug detail only).
enum GDBMErrors {
    /// The error of a call on an open database `dbf`.
    static func fromFile(_ dbf: OpaquePointer, operation: String, file: String) -> DepotError {
        let code = Int(gdbm_last_errno(dbf))
        let sys = gdbm_check_syserr(gdbm_error(code)) != 0 ? gdbm_last_syserr(dbf) : 0
        let text = gdbm_db_strerror(dbf).map { String(cString: $0) } ?? "gdbm error \(code)"
        return map(code: code, syserr: sys, text: text, operation: operation, file: file)
    }

    /// The error of a failed `gdbm_open`, read from the thread's gdbm error and `errno`.
    static func fromOpen(operation: String, file: String, savedErrno: Int32) -> DepotError {
        let code = Int(gdbm_errno_location().pointee)
        let sys = gdbm_check_syserr(gdbm_error(code)) != 0 ? savedErrno : 0
        let text = gdbm_strerror(gdbm_error(code)).map { String(cString: $0) } ?? "gdbm error \(code)"
        return map(code: code, syserr: sys, text: text, operation: operation, file: file)
    }

    /// Maps a gdbm error code (and the system error behind it, if any) to a Depot code:
    /// - locks held by someone else (`GDBM_CANT_BE_READER/WRITER`, or EAGAIN/EACCES/EWOULDBLOCK
    ///   while locking) → `.locked`;
    /// - damaged or foreign files (bad magic, bad header/bucket/avail/hash table/directory,
    ///   empty database, byte-swapped, bad offsets, needs recovery, cache corrupted,
    ///   malformed data, read past EOF) → `.corrupted`;
    /// - allocation failures → `.io` (resources);
    /// - reads, writes, seeks, syncs, stat, truncation, opening, closing, permission → `.io`
    ///   (the message says "the disk is full" when the system error is ENOSPC or EDQUOT);
    /// - usage errors (reader cannot store, bad flags, options) → `.internal`.
    static func map(code: Int, syserr: Int32, text: String, operation: String, file: String) -> DepotError {
        let depotCode: DepotError.Code
        let message: String
        switch code {
        case Int(GDBM_CANT_BE_READER), Int(GDBM_CANT_BE_WRITER):
            depotCode = .locked
            message = "The GDBM file '\(file)' is locked by another process."
        case Int(GDBM_BAD_MAGIC_NUMBER), Int(GDBM_EMPTY_DATABASE), Int(GDBM_BYTE_SWAPPED), Int(GDBM_BAD_FILE_OFFSET),
            Int(GDBM_NEED_RECOVERY), Int(GDBM_DIR_OVERFLOW), Int(GDBM_BAD_BUCKET), Int(GDBM_BAD_HEADER), Int(GDBM_BAD_AVAIL),
            Int(GDBM_BAD_HASH_TABLE), Int(GDBM_BAD_DIR_ENTRY), Int(GDBM_BUCKET_CACHE_CORRUPTED), Int(GDBM_BAD_HASH_ENTRY),
            Int(GDBM_MALFORMED_DATA), Int(GDBM_FILE_EOF), Int(GDBM_BLOCK_SIZE_ERROR):
            depotCode = .corrupted
            message = "The GDBM file '\(file)' is damaged or is not a GDBM database (\(operation))."
        case Int(GDBM_FILE_OPEN_ERROR) where syserr == EACCES || syserr == EPERM:
            depotCode = .io
            message = "No permission to open the GDBM file '\(file)'."
        case Int(GDBM_FILE_OPEN_ERROR) where syserr == EWOULDBLOCK || syserr == EAGAIN:
            depotCode = .locked
            message = "The GDBM file '\(file)' is locked by another process."
        case Int(GDBM_MALLOC_ERROR):
            depotCode = .io
            message = "gdbm ran out of memory (\(operation) on '\(file)')."
        case Int(GDBM_FILE_OPEN_ERROR), Int(GDBM_FILE_WRITE_ERROR), Int(GDBM_FILE_SEEK_ERROR), Int(GDBM_FILE_READ_ERROR),
            Int(GDBM_FILE_STAT_ERROR), Int(GDBM_FILE_CLOSE_ERROR), Int(GDBM_FILE_SYNC_ERROR), Int(GDBM_FILE_TRUNCATE_ERROR),
            Int(GDBM_ERR_FILE_OWNER), Int(GDBM_ERR_FILE_MODE), Int(GDBM_ERR_REALPATH), Int(GDBM_BACKUP_FAILED),
            Int(GDBM_REORGANIZE_FAILED), Int(GDBM_ERR_SNAPSHOT_CLONE):
            depotCode = .io
            // A full disk says so (Docs/Semantics.md, "I/O failures and a full disk").
            message = syserr == ENOSPC || syserr == EDQUOT
                ? "gdbm could not \(operation) '\(file)': the disk is full."
                : "gdbm could not \(operation) '\(file)': input/output failure."
        default:
            depotCode = .internal
            message = "gdbm refused to \(operation) '\(file)'."
        }
        let sysText = syserr != 0 ? " (errno \(syserr): \(String(cString: strerror(syserr))))" : ""
        return DepotError(depotCode, message, cause: GDBMNativeError(code: code, syserr: syserr), detail: "gdbm: \(text)\(sysText)")
    }

    /// An operating-system call (open, write, fsync, rename, flock) failed with `err`.
    static func system(_ err: Int32, _ operation: String, path: String) -> DepotError {
        let code: DepotError.Code = (err == EWOULDBLOCK || err == EAGAIN) ? .locked : .io
        return DepotError(code, "Could not \(operation) '\(path)': \(String(cString: strerror(err))).", cause: GDBMNativeError(code: 0, syserr: err))
    }

    /// A stored record failed its checks: `.corrupted` naming the collection, the id and the
    /// collection's records file.
    static func badRecord(_ problem: BinaryCodec.RecordProblem, collection: String, id: RecordID?) -> DepotError {
        let what: String
        switch problem {
        case .checksum: what = "fails its checksum"
        case .version: what = "has an unknown format version"
        case .malformed: what = "cannot be decoded"
        }
        let idText = id.map { " with id \($0)" } ?? ""
        return DepotError(.corrupted, "The stored record\(idText) in collection '\(collection)' (file '\(collection).records.gdbm') \(what).", collection: collection, id: id)
    }

    /// A driver file (journal, catalog, index entry) is damaged.
    static func corrupted(_ message: String, collection: String? = nil, detail: String? = nil) -> DepotError {
        DepotError(.corrupted, message, collection: collection, detail: detail)
    }

    /// The other process kept the store past `timeout`.
    static func lockTimeout(path: String, milliseconds: Int) -> DepotError {
        DepotError(.locked, "The GDBM store '\(path)' is open for writing in another process (gave up after \(milliseconds) ms).")
    }
}

/// The native code behind a ``DepotError`` from the GDBM driver (its `cause`).
public struct GDBMNativeError: Error, Sendable, CustomStringConvertible {
    /// The gdbm error code (`0` when the failure came from the operating system alone).
    public let code: Int
    /// The `errno` value behind it, `0` when none.
    public let syserr: Int32
    public var description: String { "gdbm error \(code), errno \(syserr)" }
}
