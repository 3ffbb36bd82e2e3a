import DepotCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `store/backup.state`: which of the two backup directories is current, the commit it
/// holds, and whether the other one holds a sound earlier commit (Docs/GDBMDriver.md,
/// "Backups and folds").
///
/// A store without the file (every store before journal segments, and a new one) has
/// `backup/` current at the base of its oldest journal segment and no sound second backup.
///
/// Layout (34 bytes, little-endian): `DEPOTBKP`, format version u32 (1), current directory
/// u8 (0 `backup/`, 1 `backup.b/`), its commit u64, a flag u8 (1: the other directory is
/// sound), the other's commit u64, CRC-32 of the first 30 bytes. Written to
/// `backup.state.new`, fsynced, renamed into place, and the store directory fsynced.
struct BackupState: Equatable, Sendable {
    /// 0: `backup/`, 1: `backup.b/`.
    var current: Int
    /// Every commit up to this one, and none after, is in the current backup.
    var currentSeq: UInt64
    /// The commit the other directory holds, when it is a sound backup; `nil` when it may be
    /// half-written (a fold into it has started) or was never made.
    var previousSeq: UInt64?

    /// The directory names, by index.
    static let directoryNames = ["backup", "backup.b"]
    static let fileName = "backup.state"
    static let magic: [UInt8] = Array("DEPOTBKP".utf8)
    static let size = 34

    var other: Int { 1 - current }

    func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: BackupState.size)
        w.bytes.append(contentsOf: BackupState.magic)
        w.u32(1)
        w.u8(UInt8(current))
        w.u64(currentSeq)
        w.u8(previousSeq == nil ? 0 : 1)
        w.u64(previousSeq ?? 0)
        w.u32(CRC32.checksum(w.bytes))
        return w.bytes
    }

    /// Parses the file's bytes.
    /// - Throws: `.corrupted` naming the file when it is not a sound state file.
    static func decode(_ bytes: [UInt8]) throws -> BackupState {
        let damaged = GDBMErrors.corrupted("The GDBM store's '\(fileName)' is damaged.")
        guard bytes.count == size, Array(bytes[0..<8]) == magic else { throw damaged }
        return try bytes.withUnsafeBytes { raw in
            var r = ByteReader(raw, from: 8)
            guard let version = try? r.u32(), version == 1, let current = try? r.u8(), current <= 1,
                let currentSeq = try? r.u64(), let flag = try? r.u8(), flag <= 1, let previous = try? r.u64(),
                let crc = try? r.u32(), crc == CRC32.update(0, UnsafeRawBufferPointer(rebasing: raw[0..<30]))
            else { throw damaged }
            return BackupState(current: Int(current), currentSeq: currentSeq, previousSeq: flag == 1 ? previous : nil)
        }
    }

    /// Reads `directory/backup.state`; `nil` when there is none.
    static func read(directory: String) throws -> BackupState? {
        let path = directory + "/" + fileName
        guard FileSystem.exists(path) else { return nil }
        try GDBMFaults.check("open", path: path)
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw GDBMErrors.system(errno, "open", path: path) }
        defer { Glibc.close(fd) }
        return try decode(try Journal.readAll(fd, path: path))
    }

    /// The current backup directory of the store at `directory` (`backup` or `backup.b`).
    static func currentDirectoryName(store directory: String) throws -> String {
        directoryNames[try read(directory: directory)?.current ?? 0]
    }

    /// Replaces `directory/backup.state` atomically and durably.
    func write(directory: String) throws {
        let path = directory + "/" + BackupState.fileName
        let tmp = path + ".new"
        try GDBMFaults.check("create", path: tmp)
        let fd = Glibc.open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw GDBMErrors.system(errno, "create", path: tmp) }
        do {
            try Journal.writeAll(fd, encoded(), at: 0, path: tmp)
            try FileSystem.sync(descriptor: fd, path: tmp)
        } catch {
            Glibc.close(fd)
            throw error
        }
        Glibc.close(fd)
        try FileSystem.rename(tmp, to: path)
        try FileSystem.syncDirectory(directory)
    }
}

/// A closed journal segment, `journal.<base>`: transactions `base + 1` through `end`.
struct JournalSegment: Sendable {
    let base: UInt64
    let end: UInt64
    let path: String
    /// Its size in bytes.
    var bytes: Int
    /// Known to be fsynced (closed at durability `full`, or fsynced by a fold).
    var synced: Bool
}
