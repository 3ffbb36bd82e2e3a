import DepotCore
import Foundation
import Testing

@testable import DepotGDBM

/// A partial update applied to stored bytes gives the record that decoding, applying the
/// change and encoding gives, and refuses what the decoder refuses (Docs/GDBMDriver.md,
/// "Partial updates").
@Suite struct RecordPatchTests {
    /// The same records and changes on every run.
    struct Seeded {
        var generator: SplitMix64
        init(state: UInt64) { generator = SplitMix64(seed: state) }
        mutating func next() -> UInt64 { generator.next() }
        mutating func below(_ n: Int) -> Int { Int(generator.next() % UInt64(n)) }
    }

    /// Names of every length class: short, past the 8-byte prefix (two of one length with
    /// the same first 8 bytes, told apart only by the bytes after them), not ASCII.
    static let names = ["a", "b", "name", "field_7", "a longer field name", "a longer field game", "é", "名前", "x1", "x2", "x3"]

    static func value(_ g: inout Seeded, depth: Int = 0) -> FieldValue {
        switch g.below(depth < 2 ? 9 : 7) {
        case 0: return .bool(g.below(2) == 0)
        case 1: return .int(Int64(bitPattern: g.next()))
        case 2: return .double([0.5, -0.0, 1e300, -2.25][g.below(4)])
        case 3: return .string(String(repeating: ["x", "é", "🙂", ""][g.below(4)], count: g.below(140)))
        case 4: return .bytes(Data((0..<g.below(200)).map { UInt8(truncatingIfNeeded: $0) }))
        case 5: return .int(Int64(g.below(100)))
        case 6: return .string("plain")
        case 7: return .array((0..<g.below(4)).map { _ in value(&g, depth: depth + 1) } + [.null])
        default:
            var members: [String: FieldValue] = [:]
            for _ in 0..<g.below(4) { members[names[g.below(names.count)]] = value(&g, depth: depth + 1) }
            return .object(members)
        }
    }

    static func decode(_ key: [UInt8], _ bytes: [UInt8]) throws -> [String: FieldValue] {
        try key.withUnsafeBytes { k in try bytes.withUnsafeBytes { v in try BinaryCodec.decodeFields(key: k, value: v) } }
    }

    static func patch(_ key: [UInt8], _ bytes: [UInt8], _ change: FieldChange) throws -> [UInt8] {
        try key.withUnsafeBytes { k in try bytes.withUnsafeBytes { v in try BinaryCodec.patchRecord(key: k, value: v, applying: change) } }
    }

    @Test func patchingGivesTheRecordThatDecodingChangingAndEncodingGives() throws {
        var g = Seeded(state: 2026)
        var appended = 0, replaced = 0, removed = 0
        for round in 0..<600 {
            let id: RecordID = round % 2 == 0 ? .int(Int64(round)) : .string("user\(round)")
            let key = BinaryCodec.key(for: id)
            var fields: [String: FieldValue] = [:]
            for _ in 0..<g.below(8) { fields[Self.names[g.below(Self.names.count)]] = Self.value(&g) }
            let stored = BinaryCodec.encodeRecord(key: key, fields: fields)
            var change = FieldChange()
            for _ in 0..<g.below(4) {
                let name = Self.names[g.below(Self.names.count)]
                if g.below(3) == 0 { change.remove.insert(name) } else { change.set[name] = Self.value(&g) }
            }
            change.remove.subtract(change.set.keys)
            for name in change.set.keys { if fields[name] == nil { appended += 1 } else { replaced += 1 } }
            removed += change.remove.filter { fields[$0] != nil }.count
            let patched = try Self.patch(key, stored, change)
            let expected = change.applied(to: Record(id: id, fields: fields)).fields
            #expect(try Self.decode(key, patched) == expected, "round \(round): \(change)")
        }
        // The rounds covered each kind of change many times.
        #expect(appended > 100 && replaced > 100 && removed > 50, "\(appended) appended, \(replaced) replaced, \(removed) removed")
    }

    @Test func repeatedNamesAndStoredNullsPatchAsTheDecoderReadsThem() throws {
        let key = BinaryCodec.key(for: .int(9))
        // "a" twice (the decoder keeps the last), a stored null (no Depot writer leaves one).
        let stored = FieldLayoutTests.recordBytes(key: key, [("a", .int(1)), ("n", .null), ("b", .string("keep")), ("a", .int(2))])
        #expect(try Self.decode(key, stored) == ["a": .int(2), "n": .null, "b": "keep"])
        #expect(try Self.decode(key, Self.patch(key, stored, FieldChange(set: ["a": 5]))) == ["a": .int(5), "b": "keep"])
        #expect(try Self.decode(key, Self.patch(key, stored, FieldChange(remove: ["a"]))) == ["b": "keep"])
        #expect(try Self.decode(key, Self.patch(key, stored, FieldChange(set: ["n": "now"], remove: ["b"]))) == ["a": .int(2), "n": "now"])
        // The last copy of a repeated name is null: the name is gone, whatever came before
        // (found by the gdbm-record fuzz target; Docs/Fuzzing.md).
        let lastNull = FieldLayoutTests.recordBytes(key: key, [("", .bool(true)), ("\0\0", .null), ("", .null), ("long name past 8", 1), ("long name past 8", 2)])
        #expect(try Self.decode(key, lastNull) == ["": .null, "\0\0": .null, "long name past 8": 2])
        #expect(try Self.decode(key, Self.patch(key, lastNull, FieldChange(set: ["x": 1]))) == ["long name past 8": 2, "x": 1])
        #expect(try Self.decode(key, Self.patch(key, lastNull, FieldChange(set: ["": "set"]))) == ["": "set", "long name past 8": 2])
        // An empty record gains fields; a change of nothing keeps the fields.
        let empty = BinaryCodec.encodeRecord(key: key, fields: [:])
        #expect(try Self.decode(key, Self.patch(key, empty, FieldChange(set: ["x": 1, "y": [1, 2]], remove: ["z"]))) == ["x": 1, "y": [1, 2]])
        let plain = BinaryCodec.encodeRecord(key: key, fields: ["p": 1.5])
        #expect(try Self.patch(key, plain, FieldChange()) == plain)
    }

    @Test func damagedRecordsAreRefusedAsTheDecoderRefusesThem() throws {
        let key = BinaryCodec.key(for: .string("k"))
        let change = FieldChange(set: ["a": 1])
        func refusal(_ bytes: [UInt8]) -> (decode: BinaryCodec.RecordProblem?, patch: BinaryCodec.RecordProblem?) {
            var problems: (BinaryCodec.RecordProblem?, BinaryCodec.RecordProblem?) = (nil, nil)
            do { _ = try Self.decode(key, bytes) } catch let problem as BinaryCodec.RecordProblem { problems.0 = problem } catch {}
            do { _ = try Self.patch(key, bytes, change) } catch let problem as BinaryCodec.RecordProblem { problems.1 = problem } catch {}
            return problems
        }
        let good = FieldLayoutTests.recordBytes(key: key, [("a", .int(0)), ("s", .string("text"))])
        var checksum = good
        checksum[checksum.count - 1] ^= 1
        var version = good
        version[0] = 9
        let cases: [(String, [UInt8], BinaryCodec.RecordProblem)] = [
            ("checksum", checksum, .checksum),
            ("version", version, .version),
            ("short", Array(good[0..<5]), .malformed),
            ("trailing byte", FieldLayoutTests.recordBytes(key: key, [("a", .int(0))], trailing: [0]), .malformed),
            ("NaN nested", FieldLayoutTests.recordBytes(key: key, [("n", .array([.double(.nan)]))]), .malformed),
            ("bad UTF-8 value", Self.withString(key, [0x66, 0xFF, 0x66]), .malformed),
            ("bad UTF-8 name", Self.withName(key, [0xC3]), .malformed),
            ("unknown tag", Self.withName(key, Array("z".utf8), tag: 42), .malformed),
            ("too deep", FieldLayoutTests.recordBytes(key: key, [("d", Self.nested(FieldValue.maximumDepth + 2))]), .malformed),
            ("count past the end", Self.withCount(key, 200), .malformed),
        ]
        for (name, bytes, problem) in cases {
            let got = refusal(bytes)
            #expect(got.decode == problem, "\(name): the decoder")
            #expect(got.patch == problem, "\(name): the patch")
        }
        #expect(refusal(good).patch == nil && refusal(good).decode == nil)
    }

    static func nested(_ depth: Int) -> FieldValue { depth == 0 ? .int(1) : .array([nested(depth - 1)]) }

    /// Record bytes under a valid CRC with one field whose value is a string of `utf8`.
    static func withString(_ key: [UInt8], _ utf8: [UInt8]) -> [UInt8] {
        sealed(key, [1, 1, UInt8(ascii: "s"), 5, UInt8(utf8.count)] + utf8)
    }

    /// Record bytes under a valid CRC with one field named `name` of the value tag `tag`.
    static func withName(_ key: [UInt8], _ name: [UInt8], tag: UInt8 = 1) -> [UInt8] {
        sealed(key, [1, UInt8(name.count)] + name + [tag])
    }

    /// Record bytes claiming `count` fields and holding one.
    static func withCount(_ key: [UInt8], _ count: UInt8) -> [UInt8] {
        sealed(key, [count & 0x7F, 1, UInt8(ascii: "a"), 1])
    }

    static func sealed(_ key: [UInt8], _ payload: [UInt8]) -> [UInt8] {
        var bytes = [BinaryCodec.recordVersion, 0, 0, 0, 0] + payload
        var crc = key.withUnsafeBytes { CRC32.update(0, $0) }
        bytes.withUnsafeBytes { crc = CRC32.update(crc, UnsafeRawBufferPointer(rebasing: $0[5...])) }
        withUnsafeBytes(of: crc.littleEndian) { for n in 0..<4 { bytes[1 + n] = $0[n] } }
        return bytes
    }

    /// Through the driver: a change inside the transaction that wrote the record, one to a
    /// record committed earlier and read back after reopening, one to a deleted record, and
    /// one on a collection with an index (the decoded path, which moves the index entry).
    @Test func partialUpdatesThroughTheDriverSeeEveryLayer() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let users = try CollectionName("users")
        let tagged = try CollectionName("tagged")
        let driver = try await GDBMDriverTests.open(dir)
        let changedInside = try await driver.write { tx -> Bool in
            try tx.insert(Record(id: 1, fields: ["name": "Ada", "age": 36]), into: users)
            try tx.insert(Record(id: 2, fields: ["name": "Bob"]), into: users)
            return try tx.update(1, applying: FieldChange(set: ["age": 37]), in: users)
        }
        #expect(changedInside)
        let answers = try await driver.write { tx -> [Bool] in
            var answers = [try tx.update(2, applying: FieldChange(set: ["city": "Oslo"], remove: ["name"]), in: users)]
            answers.append(try tx.delete(1, from: users))
            answers.append(try tx.update(1, applying: FieldChange(set: ["age": 1]), in: users))
            answers.append(try tx.update(3, applying: FieldChange(set: ["age": 1]), in: users))
            answers.append(try tx.update(1, applying: FieldChange(set: ["age": 1]), in: tagged))
            try tx.prepare(CollectionSchema(name: tagged, idKind: .int, indexes: [IndexDefinition(["tag"], name: "by_tag")]))
            try tx.insert(Record(id: 1, fields: ["tag": "old"]), into: tagged)
            return answers
        }
        // Updated, deleted, then three updates of nothing: a deleted record, an absent one, a
        // collection that does not exist yet.
        #expect(answers == [true, true, false, false, false])
        let indexed = try await driver.write { tx in try tx.update(1, applying: FieldChange(set: ["tag": "new"]), in: tagged) }
        #expect(indexed)
        try await driver.close()
        let reopened = try await GDBMDriverTests.open(dir)
        let (bob, ada, newTag, oldTag) = try await reopened.read { tx in
            (
                try tx.get(2, from: users), try tx.get(1, from: users),
                try tx.query(Query(filter: .equal("tag", "new")), in: tagged).map(\.id), try tx.query(Query(filter: .equal("tag", "old")), in: tagged).count
            )
        }
        #expect(bob == Record(id: 2, fields: ["city": "Oslo"]))
        #expect(ada == nil)
        #expect(newTag == [1])
        #expect(oldTag == 0)
        #expect(try await reopened.integrityCheck().isEmpty)
        try await reopened.close()
    }
}
