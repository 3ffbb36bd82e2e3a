import DepotCore
import DepotGDBM
import Foundation

extension FuzzTarget {
    /// Harness input of the GDBM targets: a flags byte (bit 0: repair the checksums, so
    /// mutations reach the decoder behind them), a key length byte, the key, the value.
    static func keyAndValue(_ bytes: [UInt8]) -> (repair: Bool, key: [UInt8], value: [UInt8]) {
        guard bytes.count >= 2 else { return (false, [], []) }
        let keyLength = min(Int(bytes[1]), bytes.count - 2)
        return (bytes[0] & 1 == 1, Array(bytes[2..<2 + keyLength]), Array(bytes[(2 + keyLength)...]))
    }

    static func harnessInput(key: [UInt8], value: [UInt8]) -> [UInt8] { [1, UInt8(key.count)] + key + value }

    static let gdbmRecordReader = _GDBMRecordFormat.Reader()

    /// The partial update the gdbm-record target applies to every record it decodes: one
    /// field of the seeds set, one removed, one the seeds lack added.
    static let gdbmRecordChange = FieldChange(set: ["name": .string("Bea"), "added": .array([.int(1), .null])], remove: ["b"])

    /// `_GDBMRecordFormat.decode` and the driver's layout-cached reader: a record or
    /// `.corrupted`; stored values are storable; encoded again, the record decodes equal;
    /// a partial update of the bytes fails exactly when decoding does and decodes to the
    /// changed record.
    public static let gdbmRecord = FuzzTarget(
        name: "gdbm-record", summary: "_GDBMRecordFormat.decode and .Reader, and the partial update of stored bytes (DepotGDBM): a GDBM key and stored record value",
        seeds: [
            Record(id: .int(1), fields: ["name": .string("Ada"), "year": .int(1815)]),
            Record(id: .string("k"), fields: ["a": .array([.null, .bool(true), .double(-0.0)]), "b": .object(["x": .bytes(.init([0, 1]))])]),
            Record(id: .int(-5), fields: [:]),
        ].map { harnessInput(key: _GDBMRecordFormat.key(for: $0.id), value: _GDBMRecordFormat.encode($0)) }
    ) { bytes throws(FuzzViolation) in
        var (repair, key, value) = keyAndValue(bytes)
        if repair, value.count >= 5 {
            let crc = _GDBMFuzzEntryPoints.checksum(key + value[5...])
            for n in 0..<4 { value[1 + n] = UInt8(truncatingIfNeeded: crc >> (8 * UInt32(n))) }
        }
        let corrupted: (any Error) -> Bool = { ($0 as? DepotError)?.code == .corrupted }
        let plain = try FuzzContract.expecting(corrupted) {
            try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try _GDBMRecordFormat.decode(key: k, value: v, collection: "c") } }
        }
        let cached = try FuzzContract.expecting(corrupted) {
            try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try gdbmRecordReader.decode(key: k, value: v, collection: "c") } }
        }
        try FuzzContract.require(plain == cached, "the layout-cached reader and the plain decoder disagree")
        // A partial update of the stored bytes (Docs/GDBMDriver.md, "Partial updates") refuses
        // what the decoder refuses and otherwise gives the record the change makes of it.
        let patched = try FuzzContract.expecting(corrupted) { try _GDBMFuzzEntryPoints.patchRecord(key: key, value: value, applying: gdbmRecordChange, collection: "c") }
        try FuzzContract.require((patched == nil) == (plain == nil), "the partial update and the decoder disagree on whether the record is damaged")
        if let patched, let plain {
            let changed = try FuzzContract.expecting(corrupted) {
                try key.withUnsafeBytes { k in try patched.withUnsafeBytes { v in try _GDBMRecordFormat.decode(key: k, value: v, collection: "c") } }
            }
            // As a write of the changed record would store it: without top-level nulls (a
            // stored null, which no Depot writer leaves, is dropped; regression input
            // stored-null-beside-a-partial-update).
            try FuzzContract.require(changed == gdbmRecordChange.applied(to: plain).withoutNulls, "the partially updated bytes do not decode to the changed record")
        }
        guard let record = plain else { return false }
        try RecordChecks.storable(record.fields, "the GDBM record decoder")
        let encoded = _GDBMRecordFormat.encode(record)
        let again = try FuzzContract.expecting(corrupted) {
            try _GDBMRecordFormat.key(for: record.id).withUnsafeBytes { k in try encoded.withUnsafeBytes { v in try _GDBMRecordFormat.decode(key: k, value: v, collection: "c") } }
        }
        try FuzzContract.require(again == record, "the record changed in a round trip through the encoder")
        return true
    }

    /// The journal reader of `Journal.open`: records or `.corrupted`/`.schemaMismatch`; the
    /// valid prefix is within the file; the records written again read back the same.
    public static let gdbmJournal = FuzzTarget(
        name: "gdbm-journal", summary: "Journal.parse (DepotGDBM): the redo journal read when a store opens",
        seeds: [
            [1] + _GDBMFuzzEntryPoints.journalFile(baseSequence: 7, payloads: [
                [2, 8, 0, 0, 0, 0, 0, 0, 0],
                // a transaction: seq 9, one put to the records of "c", one delete, one drop
                [1, 9, 0, 0, 0, 0, 0, 0, 0, 3, 1, 1, 1, 0x63, 2, 1, 2, 2, 0x41, 0x42, 2, 0, 1, 0x78, 3, 2, 1, 0x63],
                [3, 9, 0, 0, 0, 0, 0, 0, 0],
            ]),
            [0] + _GDBMFuzzEntryPoints.journalFile(baseSequence: 0, payloads: []),
        ],
        dictionary: [Array(utf8: "DEPOTJNL"), [1, 0, 0, 0], [0xFF, 0xFF, 0xFF, 0xFF]]
    ) { bytes throws(FuzzViolation) in
        guard let flags = bytes.first else { return false }
        var file = Array(bytes.dropFirst())
        if flags & 1 == 1 { repairJournal(&file) }
        let typed: (any Error) -> Bool = { [.corrupted, .schemaMismatch].contains(($0 as? DepotError)?.code) }
        guard let parsed = try FuzzContract.expecting(typed, { try _GDBMFuzzEntryPoints.parseJournal(file) }) else { return false }
        try FuzzContract.require(parsed.validLength >= 24 && parsed.validLength <= file.count, "the valid length \(parsed.validLength) is outside the file (\(file.count) bytes)")
        let rewritten = _GDBMFuzzEntryPoints.journalFile(baseSequence: parsed.baseSequence, payloads: parsed.payloads)
        guard let again = try FuzzContract.expecting(typed, { try _GDBMFuzzEntryPoints.parseJournal(rewritten) }) else {
            throw FuzzViolation(.contract, "the records written again do not read")
        }
        try FuzzContract.require(again.payloads == parsed.payloads && again.validLength == rewritten.count && again.baseSequence == parsed.baseSequence,
                                 "the journal changed in a round trip")
        return true
    }

    /// Sets the header's and every complete record's checksum, as a writer would have.
    static func repairJournal(_ file: inout [UInt8]) {
        func put(_ value: UInt32, at offset: Int) { for n in 0..<4 { file[offset + n] = UInt8(truncatingIfNeeded: value >> (8 * UInt32(n))) } }
        guard file.count >= 24 else { return }
        put(_GDBMFuzzEntryPoints.checksum(Array(file[0..<20])), at: 20)
        var position = 24
        while position + 8 <= file.count {
            let length = (0..<4).reduce(0) { $0 | Int(file[position + $1]) << (8 * $1) }
            guard length <= file.count - position - 8 else { return }
            put(_GDBMFuzzEntryPoints.checksum(Array(file[position + 8..<position + 8 + length])), at: position + 4)
            position += 8 + length
        }
    }

    /// The catalog entry decoder: a collection's schema or `.corrupted`/`.schemaMismatch`;
    /// encoded again, it decodes to the same entry.
    public static let gdbmCatalog = FuzzTarget(
        name: "gdbm-catalog", summary: "CollectionMeta.decode (DepotGDBM): a catalog entry (schema, last id)",
        seeds: [
            // version 1, int ids, last id 3, one unique constraint u(a), one index i(b, c)
            harnessInput(key: Array(utf8: "c:books"), value: [0, 0, 0, 0, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0x75, 1, 1, 0x61, 1, 1, 0x69, 2, 1, 0x62, 1, 0x63]),
            harnessInput(key: Array(utf8: "c:s"), value: [0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        ],
        dictionary: [Array(utf8: "c:")]
    ) { bytes throws(FuzzViolation) in
        var (repair, key, value) = keyAndValue(bytes)
        if repair, value.count >= 4 {
            let crc = _GDBMFuzzEntryPoints.checksum(Array(value[4...]))
            for n in 0..<4 { value[n] = UInt8(truncatingIfNeeded: crc >> (8 * UInt32(n))) }
        }
        let typed: (any Error) -> Bool = { [.corrupted, .schemaMismatch].contains(($0 as? DepotError)?.code) }
        guard let encoded = try FuzzContract.expecting(typed, { try _GDBMFuzzEntryPoints.catalogEntry(key: key, value: value) }) else { return false }
        let again = try FuzzContract.expecting(typed) { try _GDBMFuzzEntryPoints.catalogEntry(key: key, value: encoded) }
        try FuzzContract.require(again == encoded, "the catalog entry changed in a round trip")
        return true
    }
}
