import DepotCore

/// Not public API: DepotGDBM's readers of file bytes, reachable by the fuzz harness
/// (`DepotFuzz`, Docs/Fuzzing.md) without making their types public. Each does what the
/// driver does with the bytes it reads from a file.
package enum _GDBMFuzzEntryPoints {
    /// The CRC-32 the files use (the record, catalog and journal checksums).
    package static func checksum(_ bytes: [UInt8]) -> UInt32 { CRC32.checksum(bytes) }

    /// Parses a journal as opening a store does: its base sequence, the payload of every
    /// complete record re-encoded, and the length of the valid prefix.
    /// - Throws: ``DepotError`` `.corrupted` or `.schemaMismatch`, as `Journal.open`.
    package static func parseJournal(_ bytes: [UInt8]) throws -> (baseSequence: UInt64, payloads: [[UInt8]], validLength: Int) {
        let (base, records, valid) = try Journal.parse(bytes)
        return (base, records.map { Journal.encode($0) }, valid)
    }

    /// A journal file holding `payloads` as records after a header with `baseSequence`.
    package static func journalFile(baseSequence: UInt64, payloads: [[UInt8]]) -> [UInt8] {
        var w = ByteWriter()
        w.bytes.append(contentsOf: Journal.magic)
        w.u32(Journal.formatVersion)
        w.u64(baseSequence)
        w.u32(CRC32.checksum(w.bytes))
        for payload in payloads {
            w.u32(UInt32(payload.count))
            w.u32(CRC32.checksum(payload))
            w.bytes.append(contentsOf: payload)
        }
        return w.bytes
    }

    /// Applies `change` (normalized) to a stored record value as a partial update does
    /// (``BinaryCodec/patchRecord(key:value:applying:)``, Docs/GDBMDriver.md "Partial
    /// updates"); returns the new value.
    /// - Throws: ``DepotError`` `.corrupted` for a key that is no record id or a damaged
    ///   value, as decoding them does.
    package static func patchRecord(key: [UInt8], value: [UInt8], applying change: FieldChange, collection: String) throws -> [UInt8] {
        let id: RecordID
        do { id = try BinaryCodec.id(fromKey: key) } catch {
            throw GDBMErrors.corrupted("A key in collection '\(collection)' (file '\(collection).records.gdbm') is not a record id.", collection: collection)
        }
        do {
            return try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try BinaryCodec.patchRecord(key: k, value: v, applying: change) } }
        } catch let problem as BinaryCodec.RecordProblem {
            throw GDBMErrors.badRecord(problem, collection: collection, id: id)
        }
    }

    /// Decodes a catalog entry; returns it encoded again.
    /// - Throws: ``DepotError`` `.corrupted` or `.schemaMismatch`.
    package static func catalogEntry(key: [UInt8], value: [UInt8]) throws -> [UInt8] {
        try key.withUnsafeBytes { key in try value.withUnsafeBytes { value in try CollectionMeta.decode(key: key, value: value).encoded() } }
    }
}
