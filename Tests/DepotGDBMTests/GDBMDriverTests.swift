import CGDBM
import DepotCore
import Foundation
import Testing

@testable import DepotGDBM

/// Driver-specific behaviour: encoding, persistence, constraints, plans, options.
@Suite struct GDBMDriverTests {
    static func open(_ dir: TemporaryDirectory, _ options: String = "") async throws -> GDBMDriver {
        try await GDBMDriver(location: StoreLocation("gdbm:" + dir.path + "/store" + options))
    }

    static let tricky: [String: FieldValue] = [
        "t": true, "f": false, "one": 1, "onePointZero": 1.0, "negZero": .double(-0.0),
        "min": .int(.min), "max": .int(.max), "big": .double(.greatestFiniteMagnitude),
        "tiny": .double(.leastNonzeroMagnitude), "inf": .double(-.infinity),
        "nul": .string("a\u{0}b"), "emoji": "👩‍👩‍👧 e\u{301}", "empty": "", "braces": "{}",
        "noBytes": .bytes(Data()), "bytes": .bytes(Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })),
        "nested": ["a": [1, [2.5, ["x": .null, "y": [true, .bytes(Data([0, 255]))]]]], "": "empty key"],
        "array": [1, 1.0, "1", true, .null, [], [:]],
    ]

    /// The slicing-by-8 CRC-32 gives the standard check value and the byte-at-a-time
    /// algorithm's value for every length and alignment (stored checksums stay valid).
    @Test func crc32MatchesTheBytewiseAlgorithm() {
        func bytewise(_ bytes: ArraySlice<UInt8>) -> UInt32 {
            var c: UInt32 = 0xFFFF_FFFF
            for b in bytes {
                c ^= UInt32(b)
                for _ in 0..<8 { c = (c & 1) != 0 ? (0xEDB8_8320 ^ (c >> 1)) : (c >> 1) }
            }
            return ~c
        }
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(CRC32.checksum([]) == 0)
        var rng = SystemRandomNumberGenerator()
        let bytes = (0..<300).map { _ in UInt8.random(in: 0...255, using: &rng) }
        for start in 0..<9 {
            for end in stride(from: start, through: bytes.count, by: 7) {
                let slice = bytes[start..<end]
                let fast = slice.withUnsafeBytes { CRC32.update(0, $0) }
                #expect(fast == bytewise(slice), "bytes \(start)..<\(end)")
            }
        }
        // The folded path (x86-64 with PCLMULQDQ, 64 bytes or more) against the table alone
        // and the byte-wise reference: every length up to 1,100, two alignments, a nonzero start.
        #if arch(x86_64)
        #expect(CRC32.folds, "this x86-64 CPU has PCLMULQDQ, so the folded path is the one under test")
        #endif
        let long = (0..<1_200).map { _ in UInt8.random(in: 0...255, using: &rng) }
        for start in [0, 3] {
            for end in start...(start + 1_100) {
                let slice = long[start..<end]
                let fast = slice.withUnsafeBytes { CRC32.update(0, $0) }
                #expect(fast == bytewise(slice), "bytes \(start)..<\(end)")
                let seed: UInt32 = 0x1234_5678
                #expect(slice.withUnsafeBytes { CRC32.update(seed, $0) == CRC32.tableUpdate(seed, $0) }, "bytes \(start)..<\(end) from a seed")
            }
        }
        // Continuing a checksum equals checksumming the concatenation.
        let split = bytes[0..<123].withUnsafeBytes { first in bytes[123...].withUnsafeBytes { CRC32.update(CRC32.update(0, first), $0) } }
        #expect(split == bytewise(bytes[...]))
    }

    @Test func everyValueRoundTripsExactly() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let users = try CollectionName("users")
        let driver = try await Self.open(dir)
        try await driver.write { tx in
            try tx.insert(Record(id: 1, fields: Self.tricky), into: users)
            try tx.insert(Record(id: .int(.min), fields: ["n": 0]), into: users)
        }
        let inside = try await driver.read { tx in try tx.get(1, from: users) }
        #expect(inside == Record(id: 1, fields: Self.tricky))
        try await driver.close()
        let reopened = try await Self.open(dir)
        let got = try await reopened.read { tx in try tx.get(1, from: users) }
        #expect(got == Record(id: 1, fields: Self.tricky))
        #expect(got?.fields["negZero"]?.doubleValue?.sign == .minus)
        #expect(got?.fields["t"] == .bool(true))
        let minID = try await reopened.read { tx in try tx.get(.int(.min), from: users) }
        #expect(minID?.fields["n"] == 0)
        #expect(try await reopened.integrityCheck().isEmpty)
        try await reopened.close()
    }

    /// The pointer-based encoder of flat records writes exactly the general encoder's bytes
    /// (varint lengths at every boundary: 0, 127/128, 16383/16384 bytes), declines records
    /// with nested values, and what it writes decodes back to the fields.
    @Test func flatRecordEncoderWritesTheGeneralEncodersBytes() throws {
        var flat = Self.tricky
        flat["nested"] = nil
        flat["array"] = nil
        for n in [0, 1, 127, 128, 16_383, 16_384] {
            flat["s\(n)"] = .string(String(repeating: "é", count: n / 2) + String(repeating: "x", count: n % 2))
            flat["b\(n)"] = .bytes(Data(repeating: 7, count: n))
        }
        for key in [BinaryCodec.key(for: 1), BinaryCodec.key(for: .string("user42"))] {
            for fields in [flat, [:], ["only": .null], ["n": .int(-1), "d": .double(0.5)]] {
                let fast = try #require(BinaryCodec.encodeFlatRecord(key: key, fields: fields))
                #expect(fast == BinaryCodec.encodeAnyRecord(key: key, fields: fields))
                let decoded = try key.withUnsafeBytes { k in try fast.withUnsafeBytes { v in try BinaryCodec.decodeFields(key: k, value: v) } }
                #expect(decoded == fields)
            }
            #expect(BinaryCodec.encodeFlatRecord(key: key, fields: Self.tricky) == nil)
            #expect(BinaryCodec.encodeFlatRecord(key: key, fields: ["a": [1]]) == nil)
        }
    }

    @Test func stringIDsAndIdOrder() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let tags = try CollectionName("tags")
        let driver = try await Self.open(dir)
        let ids = ["b", "a", "é", "Z", "a\u{1}", "aa", "😀"]
        try await driver.write { tx in for id in ids { try tx.insert(Record(id: .string(id), fields: ["v": .string(id)]), into: tags) } }
        let got = try await driver.read { tx in try tx.query(Query(), in: tags).map(\.id) }
        #expect(got == ids.map { RecordID.string($0) }.sorted())
        try await driver.close()
    }

    @Test func fieldsReadInPlaceSeeTheTransactionsOwnWritesAndNest() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let items = try CollectionName("items")
        let driver = try await Self.open(dir)
        @Sendable func fields(_ source: any FieldSource) throws -> [String: FieldValue] {
            var out: [String: FieldValue] = [:]
            for name in try source.fieldNames() { out[name] = try source.value(forField: name) }
            return out
        }
        let first = ["x": FieldValue.int(1), "y": .string("one")]
        let second = ["x": FieldValue.int(2), "y": .string("two")]
        try await driver.write { tx in
            try tx.insert(Record(id: 1, fields: first), into: items)
            try tx.insert(Record(id: 2, fields: second), into: items)
        }
        // Twice, so the second pass reads through the layout the first one taught.
        for _ in 0..<2 {
            let (outer, inner, outerAgain) = try #require(try await driver.read { tx in
                try tx.withFields(of: 1, from: items) { source in
                    // A read inside another's body gets its own source; the outer one is intact.
                    let inner = try tx.withFields(of: 2, from: items) { try fields($0) }
                    return (try fields(source), inner, try source.value(forField: "y"))
                }
            })
            #expect(outer == first)
            #expect(inner == second)
            #expect(outerAgain == .string("one"))
        }
        // A write transaction reads its own uncommitted changes through the same path.
        let seen = try await driver.write { tx in
            try tx.update(Record(id: 1, fields: ["x": .int(10), "y": .string("ten")]), in: items)
            let updated = try tx.withFields(of: 1, from: items) { try fields($0) }
            _ = try tx.delete(2, from: items)
            let deleted = try tx.withFields(of: 2, from: items) { try fields($0) }
            return (updated, deleted)
        }
        #expect(seen.0 == ["x": .int(10), "y": .string("ten")])
        #expect(seen.1 == nil)
        try await driver.close()
    }

    @Test func thrownErrorRollsBackEverything() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let a = try CollectionName("a"), b = try CollectionName("b")
        let driver = try await Self.open(dir)
        try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["n": 1]), into: a) }
        struct Boom: Error {}
        await #expect(throws: Boom.self) {
            try await driver.write { tx in
                try tx.update(Record(id: 1, fields: ["n": 2]), in: a)
                try tx.insert(Record(id: 1, fields: ["n": 1]), into: b)
                #expect(try tx.get(1, from: a)?.fields["n"] == 2)
                throw Boom()
            }
        }
        let state = try await driver.read { tx in (try tx.get(1, from: a), try tx.collectionNames()) }
        #expect(state.0?.fields["n"] == 1)
        #expect(state.1 == [a])
        try await driver.close()
    }

    @Test func uniqueConstraintsSingleAndCompound() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let users = try CollectionName("users")
        let schema = CollectionSchema(
            name: users, idKind: .int,
            uniqueConstraints: [UniqueConstraint(["email"]), UniqueConstraint(["first", "last"], name: "full_name")],
            indexes: [IndexDefinition(["city"])])
        let driver = try await Self.open(dir)
        try await driver.write { tx in
            try tx.prepare(schema)
            try tx.insert(Record(id: 1, fields: ["email": "a@x", "first": "A", "last": "L", "city": "P"]), into: users)
            try tx.insert(Record(id: 2, fields: ["email": 1.0, "first": "A", "last": "M", "city": "P"]), into: users)
            // Inside the transaction a violation changes nothing and the transaction goes on.
            do {
                try tx.insert(Record(id: 3, fields: ["email": 1, "city": "Q"]), into: users)
                Issue.record("1 and 1.0 must collide")
            } catch let error as DepotError {
                #expect(error.code == .uniqueViolation)
                #expect(error.constraint == "email_unique")
            }
            #expect(try tx.get(3, from: users) == nil)
            #expect(try tx.count(Field("city") == "Q", in: users) == 0)
        }
        await expectCode(.uniqueViolation) {
            try await driver.write { tx in _ = try tx.save(Record(id: 5, fields: ["first": "A", "last": "L"]), into: users) }
        }
        // Null fields are not bound; freeing a value lets another record take it.
        try await driver.write { tx in
            try tx.insert(Record(id: 6, fields: ["first": "A"]), into: users)
            try tx.insert(Record(id: 7, fields: ["first": "A"]), into: users)
            try tx.update(Record(id: 1, fields: ["email": "b@x", "first": "A", "last": "L2", "city": "Q"]), in: users)
            try tx.insert(Record(id: 8, fields: ["email": "a@x", "first": "A", "last": "L"]), into: users)
        }
        // Adding a constraint that existing data breaks fails and changes nothing.
        let broken = CollectionSchema(name: users, idKind: .int, uniqueConstraints: schema.uniqueConstraints + [UniqueConstraint(["first"])], indexes: schema.indexes)
        await expectCode(.uniqueViolation) { try await driver.write { tx in try tx.prepare(broken) } }
        #expect(try await driver.read { tx in try tx.schema(of: users) } == schema)
        // Dropping a constraint frees its values.
        let relaxed = CollectionSchema(name: users, idKind: .int, uniqueConstraints: Array(schema.uniqueConstraints.dropFirst()), indexes: schema.indexes)
        try await driver.write { tx in
            try tx.prepare(relaxed)
            try tx.insert(Record(id: 9, fields: ["email": "a@x"]), into: users)
        }
        await expectCode(.schemaMismatch) {
            try await driver.write { tx in try tx.prepare(CollectionSchema(name: users, idKind: .string)) }
        }
        #expect(try await driver.integrityCheck().isEmpty)
        try await driver.close()
        let reopened = try await Self.open(dir)
        await expectCode(.uniqueViolation) {
            try await reopened.write { tx in try tx.insert(Record(id: 10, fields: ["first": "A", "last": "M"]), into: users) }
        }
        #expect(try await reopened.integrityCheck().isEmpty)
        try await reopened.close()
    }

    @Test func assignedIDsNeverReuse() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let notes = try CollectionName("notes")
        let driver = try await Self.open(dir)
        let first = try await driver.write { tx in
            [try tx.insert(fields: ["n": 1], into: notes), try tx.insert(fields: ["n": 2], into: notes)]
        }
        #expect(first == [1, 2])
        try await driver.write { tx in
            try tx.insert(Record(id: 40, fields: [:]), into: notes)
            _ = try tx.delete(40, from: notes)
            _ = try tx.delete(2, from: notes)
        }
        try await driver.close()
        let reopened = try await Self.open(dir)
        let next = try await reopened.write { tx in try tx.insert(fields: ["n": 3], into: notes) }
        #expect(next == 41)
        await expectCode(.invalidValue) {
            try await reopened.write { tx in _ = try tx.insert(fields: [:], into: try CollectionName("s")) ; try tx.insert(Record(id: "x"), into: try CollectionName("s")) }
        }
        try await reopened.close()
    }

    @Test func explainSaysHowAQueryRuns() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let users = try CollectionName("users")
        let driver = try await Self.open(dir)
        try await driver.write { tx in
            try tx.prepare(CollectionSchema(name: users, idKind: .int, uniqueConstraints: [UniqueConstraint(["email"])], indexes: [IndexDefinition(["city"])]))
            for i in 1...50 { try tx.insert(Record(id: .int(Int64(i)), fields: ["email": .string("u\(i)"), "city": .int(Int64(i % 5)), "n": .int(Int64(i))]), into: users) }
        }
        let plans = try await driver.read { tx in
            [
                try tx.explain(Query(filter: Field.id == 3), in: users),
                try tx.explain(Query(filter: Field("email") == "u3" && Field("n") > 1), in: users),
                try tx.explain(Query(filter: Field("city").in([1, 2.0])), in: users),
                try tx.explain(Query(filter: Field("n") > 3), in: users),
            ]
        }
        #expect(plans[0].indexesUsed == ["id"])
        #expect(plans[1].indexesUsed == ["email_unique"])
        #expect(plans[2].indexesUsed == ["city_idx"])
        #expect(plans[3].indexesUsed.isEmpty && plans[3].detail.contains("full scan"))
        let results = try await driver.read { tx in
            (
                try tx.query(Query(filter: Field("city").in([1, 2.0]), sort: [Field("n").descending], limit: 3), in: users).map(\.id),
                try tx.query(Query(filter: Field.id.in([3, 4.0, "x", 99])), in: users).map(\.id),
                try tx.count(Field("email") == "u7" && Field("city") == 2, in: users)
            )
        }
        #expect(results.0 == [47, 46, 42])
        #expect(results.1 == [3, 4])
        #expect(results.2 == 1)
        try await driver.close()
    }

    @Test func streamsInPagesAndAllowsWritesWhileIterating() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let items = try CollectionName("items")
        let driver = try await Self.open(dir)
        try await driver.write { tx in for i in 1...1000 { try tx.insert(Record(id: .int(Int64(i)), fields: ["n": .int(Int64(i % 7))]), into: items) } }
        var seen: [RecordID] = []
        for try await record in driver.stream(Query(filter: Field("n") == 3), from: items) {
            seen.append(record.id)
            if seen.count % 50 == 0 { try await driver.write { tx in _ = try tx.delete(record.id, from: items) } }
        }
        #expect(seen.count == 143)
        #expect(seen == seen.sorted())
        var few = 0
        for try await _ in driver.stream(Query(), from: items) {
            few += 1
            if few == 10 { break }
        }
        #expect(few == 10)
        try await driver.close()
        await expectCode(.closed) { for try await _ in driver.stream(Query(), from: items) {} }
    }

    /// A transaction of at least `FileSet.unmappedBatchOps` file ops is applied with gdbm's
    /// mapping off (Docs/GDBMDriver.md, "Large applies"), a smaller one mapped; the files are
    /// mapped again afterwards and hold every record, also after reopening.
    @Test func largeAppliesRunUnmappedAndMapAgain() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let items = try CollectionName("items")
        let driver = try await Self.open(dir, "?durability=normal")
        try await driver.write { tx in try tx.prepare(CollectionSchema(name: items, idKind: .int)) }
        let before = driver.engine.primary.unmappedBatches
        try await driver.write { tx in
            for n in 1...10 { try tx.insert(Record(id: .int(Int64(n)), fields: ["n": .int(Int64(n))]), into: items) }
        }
        #expect(driver.engine.primary.unmappedBatches == before)
        let large = FileSet.unmappedBatchOps + 50
        try await driver.write { tx in
            for n in 11...large { try tx.insert(Record(id: .int(Int64(n)), fields: ["n": .int(Int64(n))]), into: items) }
        }
        #expect(driver.engine.primary.unmappedBatches == before + 1)
        let file = try #require(try driver.engine.primary.file(.records(items), create: false))
        #expect(file.isMemoryMapped == true)
        #expect(try await driver.read { tx in try tx.count(.all, in: items) } == large)
        #expect(try await driver.read { tx in try tx.get(.int(Int64(large)), from: items) }?.fields == ["n": .int(Int64(large))])
        try await driver.close()
        let reopened = try await Self.open(dir)
        #expect(try await reopened.read { tx in try tx.count(.all, in: items) } == large)
        #expect(try await reopened.integrityCheck() == [])
        try await reopened.close()
    }

    @Test func unmappedReadsNestAndTurnTheMappingBackOn() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let file = try GDBMFile.open(path: dir.path + "/f.gdbm", name: "f.gdbm", create: true)
        #expect(file.isMemoryMapped == true)
        let first = UnmappedReads(file)
        let second = UnmappedReads(file)
        #expect(file.isMemoryMapped == false)
        // Writes and reads work unmapped, and are still there mapped again.
        for i in 0..<500 { try file.store(Array("k\(i)".utf8), Array(repeating: UInt8(i % 251), count: 300)) }
        #expect(try file.fetch(Array("k499".utf8)) == Array(repeating: UInt8(499 % 251), count: 300))
        first.end()
        first.end()  // a second end of the same hold changes nothing
        #expect(file.isMemoryMapped == false)
        second.end()
        #expect(file.isMemoryMapped == true)
        #expect(try file.fetch(Array("k7".utf8)) == Array(repeating: 7, count: 300))
        #expect(try file.count() == 500)
        file.endUnmappedReads()  // unbalanced: ignored
        #expect(file.isMemoryMapped == true)
        // A hold released without end() ends itself; ending after close is harmless.
        do { _ = UnmappedReads(file) }
        #expect(file.isMemoryMapped == true)
        let late = UnmappedReads(file)
        file.close()
        late.end()
        #expect(file.isMemoryMapped == nil)
    }

    @Test func storeStringOptions() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        var registry = DriverRegistry()
        GDBMDriver.register(in: &registry)
        await expectCode(.invalidStore) { _ = try await registry.makeDriver("gdbm:" + dir.path + "/s?durability=sometimes") }
        await expectCode(.invalidStore) { _ = try await registry.makeDriver("gdbm:" + dir.path + "/s?color=red") }
        await expectCode(.invalidStore) { _ = try await registry.makeDriver("gdbm:" + dir.path + "/s?lock_timeout_ms=-1") }
        await expectCode(.invalidStore) { _ = try await registry.makeDriver("gdbm:") }
        _ = FileManager.default.createFile(atPath: dir.path + "/file", contents: Data("x".utf8))
        await expectCode(.invalidStore) { _ = try await registry.makeDriver("gdbm:" + dir.path + "/file") }
        let driver = try await registry.makeDriver("gdbm:" + dir.path + "/s?durability=normal&lock_timeout_ms=100&checkpoint_kb=64&sync_every=8&sync_interval_ms=0")
        #expect(driver.backendName == "gdbm")
        try await driver.close()
        try await driver.close()
        await expectCode(.closed) { _ = try await driver.read { tx in try tx.collectionNames() } }
    }

    @Test func readOnlyOpenRefusesWrites() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let a = try CollectionName("a")
        let writer = try await Self.open(dir)
        try await writer.write { tx in try tx.insert(Record(id: 1), into: a) }
        try await writer.close()
        let reader = try await Self.open(dir, "?readonly=true")
        #expect(try await reader.read { tx in try tx.get(1, from: a) } != nil)
        await expectCode(.unsupported) { try await reader.write { tx in try tx.insert(Record(id: 2), into: a) } }
        try await reader.close()
    }
}

/// Expects `body` to throw a ``DepotError`` with `code`.
func expectCode(_ code: DepotError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void) async {
    do {
        try await body()
        Issue.record("expected \(code), but it succeeded", sourceLocation: sourceLocation)
    } catch let error as DepotError {
        #expect(error.code == code, "\(String(reflecting: error))", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected DepotError \(code), got \(error)", sourceLocation: sourceLocation)
    }
}

extension GDBMDriverTests {
    @Test func readOnlyProcessesShareButExcludeWriters() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let a = try CollectionName("a")
        let writer = try await Self.open(dir)
        try await writer.write { tx in try tx.insert(Record(id: 1), into: a) }
        try await writer.close()
        // A shared flock on another open file description stands in for a reader process.
        let fd = Glibc.open(dir.path + "/store/LOCK", O_RDWR)
        #expect(flock(fd, LOCK_SH | LOCK_NB) == 0)
        await expectCode(.locked) { _ = try await Self.open(dir, "?lock_timeout_ms=200") }
        let reader = try await Self.open(dir, "?readonly=true&lock_timeout_ms=200")
        #expect(try await reader.read { tx in try tx.get(1, from: a) } != nil)
        try await reader.close()
        flock(fd, LOCK_UN)
        Glibc.close(fd)
    }
}

extension GDBMDriverTests {
    @Test func tasksPreferringTheStoreThreadRunTransactionsInline() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let a = try CollectionName("a")
        let driver = try await Self.open(dir)
        let total = try await withTaskExecutorPreference(driver.taskExecutor) {
            for i in 1...100 { try await driver.write { tx in try tx.insert(Record(id: .int(Int64(i)), fields: ["n": .int(Int64(i))]), into: a) } }
            var sum: Int64 = 0
            for i in 1...100 { sum += try await driver.read { tx in try tx.get(.int(Int64(i)), from: a)?.fields["n"]?.intValue ?? 0 } }
            return sum
        }
        #expect(total == 5050)
        #expect(try await driver.read { tx in try tx.count(.all, in: a) } == 100)
        try await driver.close()
    }
}

extension GDBMDriverTests {
    @Test func readersSeeConsistentSnapshotsWhileWritersCommit() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let accounts = try CollectionName("accounts"), scratch = try CollectionName("scratch")
        let driver = try await Self.open(dir, "?durability=normal&sync_every=7&sync_interval_ms=0")
        try await driver.write { tx in
            try tx.prepare(CollectionSchema(name: accounts, idKind: .int, indexes: [IndexDefinition(["owner"])]))
            for i in 1...10 { try tx.insert(Record(id: .int(Int64(i)), fields: ["balance": 100, "owner": .int(Int64(i % 3))]), into: accounts) }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for w in 0..<3 {
                group.addTask {
                    var rng = SplitMix64(seed: UInt64(w + 1))
                    for round in 0..<40 {
                        let from = Int64(rng.next() % 10 + 1), to = Int64(rng.next() % 10 + 1), amount = Int64(rng.next() % 50)
                        try await driver.write { tx in
                            guard from != to, let a = try tx.get(.int(from), from: accounts), let b = try tx.get(.int(to), from: accounts) else { return }
                            let ab = a.fields["balance"]?.intValue ?? 0, bb = b.fields["balance"]?.intValue ?? 0
                            try tx.update(Record(id: .int(from), fields: ["balance": .int(ab - amount), "owner": .int(to % 3)]), in: accounts)
                            try tx.update(Record(id: .int(to), fields: ["balance": .int(bb + amount), "owner": .int(from % 3)]), in: accounts)
                            if round % 5 == 0 {
                                _ = try tx.dropCollection(scratch)
                                try tx.insert(Record(id: .int(Int64(round)), fields: ["w": .int(Int64(w))]), into: scratch)
                            }
                        }
                    }
                }
            }
            for _ in 0..<4 {
                group.addTask {
                    for _ in 0..<40 {
                        let (sum, count, owners, scratchCount) = try await driver.read { tx in
                            let all = try tx.query(Query(), in: accounts)
                            let byOwner = try (0..<3).map { try tx.query(Query(filter: Field("owner") == Int64($0)), in: accounts).count }
                            return (all.reduce(Int64(0)) { $0 + ($1.fields["balance"]?.intValue ?? 0) }, all.count, byOwner.reduce(0, +), try tx.count(.all, in: scratch))
                        }
                        #expect(sum == 1000)
                        #expect(count == 10)
                        #expect(owners == 10)
                        #expect(scratchCount <= 1)
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try await driver.integrityCheck().isEmpty)
        try await driver.close()
        let reopened = try await Self.open(dir)
        let sum = try await reopened.read { tx in try tx.query(Query(), in: accounts).reduce(Int64(0)) { $0 + ($1.fields["balance"]?.intValue ?? 0) } }
        #expect(sum == 1000)
        #expect(try await reopened.integrityCheck().isEmpty)
        try await reopened.close()
    }
}

@Suite struct KeyOrderTests {
    /// Ids of both kinds that stress the byte order: signs, extremes, prefixes, multi-byte
    /// UTF-8 and NUL.
    static func hostileIDs(count: Int, seed: UInt64) -> [RecordID] {
        var state = seed
        func next() -> UInt64 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return state >> 11
        }
        let fixedInts: [Int64] = [.min, .min + 1, -256, -255, -1, 0, 1, 255, 256, 65_536, .max - 1, .max]
        let alphabet = ["a", "b", "A", "Z", "0", "\u{0}", "é", "€", "𝄞", "ab", "user", "~"]
        var seen = Set<RecordID>()
        var ids: [RecordID] = []
        for n in 0..<count {
            let id: RecordID
            switch next() % 4 {
            case 0: id = .int(n < fixedInts.count ? fixedInts[n] : Int64(bitPattern: next() &* 0x9E37_79B9_7F4A_7C15))
            case 1: id = .int(Int64(next() % 2000) - 1000)
            default: id = .string((0..<Int(1 + next() % 3)).map { _ in alphabet[Int(next() % UInt64(alphabet.count))] }.joined())
            }
            if seen.insert(id).inserted { ids.append(id) }
        }
        return ids
    }

    @Test func keyBytesSortLikeRecordIDs() {
        for seed in UInt64(1)...20 {
            let ids = Self.hostileIDs(count: 600, seed: seed)
            let expected = ids.indices.sorted { ids[$0] < ids[$1] }
            #expect(KeyOrder.sortedIndices(ids, descending: false) == expected)
            #expect(KeyOrder.sortedIndices(ids, descending: true) == Array(expected.reversed()))
            // The packed keys are the driver's own keys.
            for id in ids.prefix(50) {
                let key = BinaryCodec.key(for: id)
                #expect(key.withUnsafeBytes { (try? BinaryCodec.id(fromKey: $0)) } == id)
            }
        }
        #expect(KeyOrder.sortedIndices([], descending: false).isEmpty)
    }

    @Test func pagesMatchTheEvaluator() {
        let ids = Self.hostileIDs(count: 1500, seed: 99)
        let records = ids.enumerated().map { Record(id: $1, fields: ["n": .int(Int64($0 % 7))]) }
        for descending in [false, true] {
            for (offset, limit) in [(0, nil), (0, 10), (5, 100), (300, 2000), (1400, 50), (2000, 5), (0, 0), (10, 400)] as [(Int, Int?)] {
                let query = Query(sort: [SortKey("id", descending: descending)], offset: offset, limit: limit)
                #expect(KeyOrder.page(records, descending: descending, offset: offset, limit: limit).map(\.id)
                        == QueryEvaluator.execute(query, over: records).map(\.id), "descending \(descending), offset \(offset), limit \(String(describing: limit))")
            }
        }
    }
}

@Suite struct FieldLayoutTests {
    /// Record bytes with `pairs` in exactly this order (repeats allowed), under a valid CRC.
    static func recordBytes(key: [UInt8], _ pairs: [(String, FieldValue)], trailing: [UInt8] = []) -> [UInt8] {
        var w = ByteWriter()
        w.u8(BinaryCodec.recordVersion)
        w.u32(0)
        w.varint(pairs.count)
        for (name, value) in pairs {
            w.string(name)
            BinaryCodec.write(value, to: &w, canonical: false)
        }
        var bytes = w.bytes + trailing
        var crc = key.withUnsafeBytes { CRC32.update(0, $0) }
        bytes.withUnsafeBytes { crc = CRC32.update(crc, UnsafeRawBufferPointer(rebasing: $0[5...])) }
        withUnsafeBytes(of: crc.littleEndian) { for n in 0..<4 { bytes[1 + n] = $0[n] } }
        return bytes
    }

    static func decode(_ key: [UInt8], _ bytes: [UInt8], _ layouts: FieldLayoutCache?) throws -> [String: FieldValue] {
        try key.withUnsafeBytes { k in try bytes.withUnsafeBytes { v in try BinaryCodec.decodeFields(key: k, value: v, layouts: layouts) } }
    }

    @Test func decodingThroughLayoutsGivesTheGeneralDecodersAnswer() throws {
        let key = BinaryCodec.key(for: .string("k"))
        let cache = FieldLayoutCache()
        let long = "a field name longer than eight bytes"
        let shapes: [[String]] = [
            (0..<10).map { "field\($0)" },
            ["a", "b"],
            ["b", "a"],                            // the same names in another order
            [long, long + "!", "é", "€uro", "x"],  // long names sharing a prefix, multi-byte names
            ["a", "c"],                            // same count as ["a", "b"], one name differs
            (0..<64).map { "f\($0)" },
            (0..<65).map { "f\($0)" },             // past the layout limit: general path only
        ]
        var n: Int64 = 0
        for round in 0..<3 {
            for names in shapes {
                // Each round writes the names in a different order.
                let ordered = round == 0 ? names : (round == 1 ? names.reversed() : names.shuffled())
                let pairs = ordered.map { name -> (String, FieldValue) in
                    n += 1
                    return (name, n % 3 == 0 ? .string("v\(n)") : (n % 3 == 1 ? .int(n) : .array([.int(n), .null])))
                }
                let bytes = Self.recordBytes(key: key, pairs)
                let expected = Dictionary(pairs, uniquingKeysWith: { _, last in last })
                #expect(try Self.decode(key, bytes, nil) == expected)
                #expect(try Self.decode(key, bytes, cache) == expected)
                #expect(try Self.decode(key, bytes, cache) == expected, "again, now through a learned layout")
            }
        }
        // One layout per set of names, whatever the order: 10 fields, {a, b}, the long names,
        // {a, c}, 64 fields (65 is past the limit).
        #expect(cache.current().map(\.count).sorted() == [2, 2, 5, 10, 64])
        // At most `capacity` layouts are kept, the newest first.
        for k in 0..<12 { cache.learn(["x\(k)", "y"]) }
        #expect(cache.current().count == FieldLayoutCache.capacity)
        #expect(try Self.decode(key, Self.recordBytes(key: key, [("y", .int(1)), ("x11", .int(2))]), cache) == ["y": .int(1), "x11": .int(2)])
    }

    @Test func manyShapesDoNotRelearnOnEveryRead() throws {
        let key = BinaryCodec.key(for: .int(1))
        let cache = FieldLayoutCache()
        // 20 shapes of 3 fields (more than the cache holds), read in rotation.
        let shapes = (0..<20).map { s in ["a\(s)", "b", "c"] }
        let reads = 2_000
        for n in 0..<reads {
            let pairs = shapes[n % shapes.count].map { ($0, FieldValue.int(Int64(n))) }
            let bytes = Self.recordBytes(key: key, pairs)
            #expect(try Self.decode(key, bytes, cache) == Dictionary(uniqueKeysWithValues: pairs))
        }
        // The first 8 shapes fill the cache; after that one miss in `learnInterval` learns.
        #expect(cache.current().count == FieldLayoutCache.capacity)
        #expect(cache.learnedCount <= FieldLayoutCache.capacity + reads / FieldLayoutCache.learnInterval)
        #expect(cache.learnedCount > FieldLayoutCache.capacity, "new shapes are still learned, slowly")

        // A store with few shapes learns each once and then always hits.
        let few = FieldLayoutCache()
        for n in 0..<300 {
            let pairs = [["x", "y"], ["x", "z"], ["p", "q", "r"]][n % 3].map { ($0, FieldValue.int(Int64(n))) }
            #expect(try Self.decode(key, Self.recordBytes(key: key, pairs), few) == Dictionary(uniqueKeysWithValues: pairs))
        }
        #expect(few.learnedCount == 3)
    }

    @Test func repeatedOrForeignNamesFallBackToTheGeneralDecoder() throws {
        let key = BinaryCodec.key(for: .int(7))
        let cache = FieldLayoutCache()
        let learned = Self.recordBytes(key: key, [("a", .int(1)), ("b", .int(2)), ("c", .int(3))])
        #expect(try Self.decode(key, learned, cache) == ["a": .int(1), "b": .int(2), "c": .int(3)])
        #expect(cache.current().count == 1)
        // Three names, one repeated: the last value wins and "c" is absent, never null.
        let repeated = Self.recordBytes(key: key, [("a", .int(1)), ("a", .int(9)), ("b", .int(2))])
        #expect(try Self.decode(key, repeated, cache) == ["a": .int(9), "b": .int(2)])
        // A name the layout lacks.
        let foreign = Self.recordBytes(key: key, [("a", .int(1)), ("b", .int(2)), ("d", .int(4))])
        #expect(try Self.decode(key, foreign, cache) == ["a": .int(1), "b": .int(2), "d": .int(4)])
        // A matching record with a damaged checksum is still refused.
        var damaged = learned
        damaged[damaged.count - 1] ^= 1
        #expect(throws: BinaryCodec.RecordProblem.checksum) { try Self.decode(key, damaged, cache) }
        // A matching record with trailing bytes (under a valid CRC) is malformed on both paths.
        let trailing = Self.recordBytes(key: key, [("a", .int(1)), ("b", .int(2)), ("c", .int(3))], trailing: [0])
        #expect(throws: BinaryCodec.RecordProblem.malformed) { try Self.decode(key, trailing, nil) }
        #expect(throws: BinaryCodec.RecordProblem.malformed) { try Self.decode(key, trailing, cache) }
    }

    /// Every field a source offers, asked for in `order`, with names it lacks asked between.
    static func read(_ source: GDBMFieldSource, _ order: [String]) -> [String: FieldValue] {
        var out: [String: FieldValue] = [:]
        for name in order {
            #expect(source.value(forField: name + "-absent") == nil)
            if let value = source.value(forField: name) { out[name] = value }
        }
        return out
    }

    @Test func aFieldSourceOffersWhatTheRecordDecoderReturns() throws {
        let key = BinaryCodec.key(for: .int(3))
        let cache = FieldLayoutCache()
        let source = GDBMFieldSource()
        let long = "a field name longer than eight bytes"
        let shapes: [[String]] = [
            (0..<10).map { "field\($0)" }, ["a", "b"], ["b", "a"], [long, long + "!", "é", "x"], ["a", "c"],
            (0..<65).map { "f\($0)" },  // past the layout limit: always the dictionary
        ]
        var n: Int64 = 0
        for round in 0..<3 {
            for names in shapes {
                let ordered = round == 1 ? names.reversed() : names.shuffled()
                let pairs = ordered.map { name -> (String, FieldValue) in
                    n += 1
                    return (name, n % 2 == 0 ? .string("v\(n)") : .int(n))
                }
                let bytes = Self.recordBytes(key: key, pairs)
                let expected = Dictionary(uniqueKeysWithValues: pairs)
                try key.withUnsafeBytes { k in try bytes.withUnsafeBytes { v in try source.load(id: .int(3), key: k, value: v, layouts: cache) } }
                // Asked for in the stored order, another order, and with a name asked twice.
                #expect(Self.read(source, ordered) == expected)
                #expect(Self.read(source, names.shuffled()) == expected)
                #expect(Set(source.fieldNames()) == Set(names))
                #expect(source.recordID == .int(3))
            }
        }
        // Every shape within the limit was learned on its first read and served by position after.
        #expect(cache.current().map(\.count).sorted() == [2, 2, 4, 10])
        // A damaged record is refused whether or not its layout is known.
        var damaged = Self.recordBytes(key: key, [("a", .int(1)), ("b", .int(2))])
        damaged[damaged.count - 1] ^= 1
        #expect(throws: BinaryCodec.RecordProblem.checksum) {
            try key.withUnsafeBytes { k in try damaged.withUnsafeBytes { v in try source.load(id: .int(3), key: k, value: v, layouts: cache) } }
        }
    }
}
