import DepotCore
import Foundation
import Testing

@testable import DepotGDBM

/// Damaged bytes inside GDBM files (not only foreign files): opening and reading give
/// records or `DepotError`s, never a crash.
@Suite struct GDBMFuzzTests {
    @Test func flippedBytesInsideGDBMFilesNeverCrash() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let users = try CollectionName("users")
        let driver = try await GDBMDriver(location: StoreLocation("gdbm:" + dir.path + "/store"))
        try await driver.write { tx in
            for i in 1...300 { try tx.insert(Record(id: .int(Int64(i)), fields: ["name": .string("user \(i)"), "n": .int(Int64(i))]), into: users) }
        }
        try await driver.close()
        let backupPath = dir.path + "/store/" + (try BackupState.currentDirectoryName(store: dir.path + "/store")) + "/users.records.gdbm"
        let pristine = try (FileHandle(forReadingFrom: URL(fileURLWithPath: dir.path + "/store/data/users.records.gdbm")).readToEnd() ?? Data())
        let backup = try (FileHandle(forReadingFrom: URL(fileURLWithPath: backupPath)).readToEnd() ?? Data())
        var rng = SplitMix64(seed: 99)
        var outcomes: [String: Int] = [:]
        for round in 0..<40 {
            var damaged = [UInt8](pristine)
            // Every other round hits gdbm's header, directory and first buckets.
            let span = round % 2 == 0 ? min(damaged.count, 8192) : damaged.count
            for _ in 0..<8 {
                let at = Int(rng.next() % UInt64(span))
                damaged[at] ^= UInt8(truncatingIfNeeded: rng.next() | 1)
            }
            // Damage both copies the same way, so no rebuild can hide it.
            try Data(damaged).write(to: URL(fileURLWithPath: dir.path + "/store/data/users.records.gdbm"))
            try Data(damaged).write(to: URL(fileURLWithPath: backupPath))
            do {
                let store = try await GDBMDriver(location: StoreLocation("gdbm:" + dir.path + "/store"))
                do {
                    _ = try await store.read { tx in try tx.query(Query(), in: users).count }
                    _ = try await store.integrityCheck()
                    outcomes["read", default: 0] += 1
                } catch let error as DepotError {
                    outcomes[error.code.name, default: 0] += 1
                }
                try? await store.close()
            } catch let error as DepotError {
                outcomes["open: " + error.code.name, default: 0] += 1
            }
        }
        try backup.write(to: URL(fileURLWithPath: backupPath))
        #expect(outcomes.values.reduce(0, +) == 40, "\(outcomes)")
        print("gdbm fuzz outcomes: \(outcomes)")
    }

    /// A string that is not UTF-8, under a checksum that matches (a file written by
    /// something other than Depot): `malformed`, never a repaired string.
    @Test func invalidUTF8UnderAValidChecksumIsMalformed() throws {
        let key: [UInt8] = [0x02, 0x78]
        var bytes = BinaryCodec.encodeRecord(key: key, fields: ["name": .string("AB")])
        let decoded = try key.withUnsafeBytes { k in try bytes.withUnsafeBytes { v in try BinaryCodec.decodeFields(key: k, value: v) } }
        #expect(decoded == ["name": .string("AB")])
        let at = try #require((5..<bytes.count - 1).first { bytes[$0] == 0x41 && bytes[$0 + 1] == 0x42 })
        bytes[at] = 0xC3  // a lead byte followed by a byte that cannot continue it
        bytes[at + 1] = 0x28
        var crc = key.withUnsafeBytes { CRC32.update(0, $0) }
        bytes.withUnsafeBytes { crc = CRC32.update(crc, UnsafeRawBufferPointer(rebasing: $0[5...])) }
        withUnsafeBytes(of: crc.littleEndian) { for n in 0..<4 { bytes[1 + n] = $0[n] } }
        #expect(throws: BinaryCodec.RecordProblem.malformed) {
            try key.withUnsafeBytes { k in try bytes.withUnsafeBytes { v in try BinaryCodec.decodeFields(key: k, value: v) } }
        }
    }

    /// A key that is no record id (found by the gdbm-record fuzz target, Docs/Fuzzing.md):
    /// `_GDBMRecordFormat.decode` threw the codec's internal error; it is `.corrupted`.
    @Test(arguments: [[], [0x09], [0x01, 0x00], [0x02], [0x02, 0xFF]] as [[UInt8]])
    func aKeyThatIsNoRecordIDIsCorrupted(_ key: [UInt8]) throws {
        let value = _GDBMRecordFormat.encode(Record(id: .int(1), fields: ["a": .int(1)]))
        let error = #expect(throws: DepotError.self) {
            try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try _GDBMRecordFormat.decode(key: k, value: v, collection: "c") } }
        }
        #expect(error?.code == .corrupted)
        #expect(throws: DepotError.self) {
            try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try _GDBMRecordFormat.Reader().decode(key: k, value: v, collection: "c") } }
        }
    }

    /// Values no Depot writer stores, under a valid checksum: NaN, and nesting one level
    /// deeper than `FieldValue.maximumDepth` (the decoder allowed both; the gdbm-record fuzz
    /// target's contract says a decoded value is storable, Docs/Fuzzing.md). Both are
    /// `.corrupted`; the deepest storable value still reads.
    @Test func unstorableValuesUnderAValidChecksumAreCorrupted() throws {
        func nested(_ levels: Int) -> FieldValue { (0..<levels).reduce(FieldValue.null) { inner, _ in .array([inner]) } }
        let key = _GDBMRecordFormat.key(for: .int(1))
        func decode(_ fields: [String: FieldValue]) throws -> Record {
            let value = BinaryCodec.encodeAnyRecord(key: key, fields: fields)
            return try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try _GDBMRecordFormat.decode(key: k, value: v, collection: "c") } }
        }
        let deepest = nested(FieldValue.maximumDepth)
        try deepest.validate(field: "a")
        #expect(try decode(["a": deepest]).fields == ["a": deepest])
        #expect(throws: (any Error).self) { try nested(FieldValue.maximumDepth + 1).validate(field: "a") }
        for unstorable: FieldValue in [.double(.nan), .array([.double(-.nan)]), nested(FieldValue.maximumDepth + 1)] {
            let error = #expect(throws: DepotError.self) { try decode(["a": unstorable]) }
            #expect(error?.code == .corrupted)
        }
    }
}
