import DepotCore
@testable import DepotSQLite
import Foundation
import Testing

/// The page size of new files, updates that learn whether the record exists from the
/// UPDATE itself, cached statements after the schema changes, and the connection thread's
/// hand-off under many callers.
@Suite struct SQLiteFastPathTests {
    let items: CollectionName
    init() throws { items = try CollectionName("items") }

    static func pageSize(_ path: String) throws -> Int64? {
        guard case .int(let size)? = try SQLiteDriverTests.shell(path, "PRAGMA page_size").first?.first else { return nil }
        return size
    }

    static func columns(_ path: String, table: String) throws -> [String] {
        try SQLiteDriverTests.shell(path, "SELECT name FROM pragma_table_info('\(table)')").compactMap { row in
            if case .text(let name)? = row.first { return name }
            return nil
        }
    }

    @Test func newFilesUse8KiBPagesAndExistingFilesKeepTheirs() async throws {
        let dir = try ScratchDirectory()
        let driver = try await SQLiteDriver(path: dir.store)
        try await driver.write { tx in try tx.insert(Record(id: "a", fields: ["text": .string(String(repeating: "x", count: 1500))]), into: self.items) }
        try await driver.close()
        #expect(try Self.pageSize(dir.store) == Int64(SQLiteDriver.newFilePageSize))

        // A file made elsewhere with 4 KiB pages keeps them, and Depot reads and writes it.
        let old = dir.path + "/old.sqlite"
        let plain = try SQLiteConnection(path: old, create: true, busyTimeoutMilliseconds: 1000)
        try plain.execute("PRAGMA page_size = 4096; CREATE TABLE t(x)")
        plain.close()
        let reopened = try await SQLiteDriver(path: old)
        try await reopened.write { tx in try tx.insert(Record(id: 1, fields: ["n": 1]), into: self.items) }
        let back = try await reopened.read { tx in try tx.get(1, from: self.items) }
        #expect(back == Record(id: 1, fields: ["n": 1]))
        try await reopened.close()
        #expect(try Self.pageSize(old) == 4096)
    }

    @Test func updateOfAMissingRecordIsNotFoundAndAddsNoColumn() async throws {
        let dir = try ScratchDirectory()
        let driver = try await SQLiteDriver(path: dir.store)
        try await driver.write { tx in try tx.insert(Record(id: "a", fields: ["n": 1]), into: self.items) }
        // Known fields: the UPDATE finds no row.
        #expect(await errorCode { try await driver.write { tx in try tx.update(Record(id: "b", fields: ["n": 2]), in: self.items) } } == .notFound)
        // A new field: still notFound, and no column was added for it.
        #expect(await errorCode { try await driver.write { tx in try tx.update(Record(id: "b", fields: ["fresh": 2]), in: self.items) } } == .notFound)
        // The model path (a field sink) answers the same.
        let outcome = await errorCode {
            _ = try await driver.write { tx in
                try tx.write(.update, into: self.items) { sink in
                    try sink.set(.int(3), forField: "n")
                    return .string("b")
                }
            }
        }
        #expect(outcome == .notFound)
        // An existing record is updated by both paths, and a caught notFound leaves the
        // transaction usable.
        try await driver.write { tx in
            try tx.update(Record(id: "a", fields: ["n": 5]), in: self.items)
            #expect(throws: DepotError.self) { try tx.update(Record(id: "zz", fields: ["n": 6]), in: self.items) }
            let result = try tx.write(.update, into: self.items) { sink in
                try sink.set(.int(7), forField: "n")
                return .string("a")
            }
            #expect(result == .updated)
        }
        let a = try await driver.read { tx in try tx.get("a", from: self.items) }
        let b = try await driver.read { tx in try tx.get("b", from: self.items) }
        #expect(a == Record(id: "a", fields: ["n": 7]))
        #expect(b == nil)
        try await driver.close()
        #expect(try !Self.columns(dir.store, table: "items").contains("fresh"))
    }

    /// A model write binds each field to the statement as it is encoded: a save through the
    /// upsert (its outcome from the id lookup), columns the record leaves out bound to NULL,
    /// type tags of the record's own values, a field with no column yet taking the record
    /// path, and an encoding that throws halfway leaving nothing behind.
    @Test func fieldSinkWritesBindStraightToTheirStatement() async throws {
        let dir = try ScratchDirectory()
        let driver = try await SQLiteDriver(path: dir.store)
        try await driver.write { tx in try tx.insert(Record(id: "a", fields: ["n": 1, "flag": true, "s": "x"]), into: self.items) }
        let outcomes = try await driver.write { tx -> [WriteOutcome] in
            let first = try tx.write(.save, into: self.items) { sink in
                try sink.set(.int(2), forField: "n")
                try sink.set(.bool(false), forField: "flag")
                return .string("b")
            }
            // The same collection's next record leaves "flag" out and sets "s": nothing of
            // the record before it may stay bound.
            let second = try tx.write(.save, into: self.items) { sink in
                try sink.set(.int(3), forField: "n")
                try sink.set(.string("y"), forField: "s")
                return .string("a")
            }
            return [first, second]
        }
        #expect(outcomes == [.inserted, .updated])
        #expect(try await driver.read { tx in try tx.get("a", from: self.items) } == Record(id: "a", fields: ["n": 3, "s": "y"]))
        #expect(try await driver.read { tx in try tx.get("b", from: self.items) } == Record(id: "b", fields: ["n": 2, "flag": false]))

        struct Halfway: Error {}
        await #expect(throws: Halfway.self) {
            try await driver.write { tx in
                _ = try tx.write(.insert, into: self.items) { sink in
                    try sink.set(.int(9), forField: "n")
                    throw Halfway()
                }
            }
        }
        // A field the table has no column for: the record path adds it, with every field.
        let added = try await driver.write { tx in
            try tx.write(.insert, into: self.items) { sink in
                try sink.set(.int(4), forField: "n")
                try sink.set(.string("new"), forField: "fresh")
                return .string("c")
            }
        }
        #expect(added == .inserted)
        #expect(try await driver.read { tx in try tx.get("c", from: self.items) } == Record(id: "c", fields: ["n": 4, "fresh": "new"]))
        #expect(try await driver.read { tx in try tx.count(.all, in: self.items) } == 3)
        try await driver.close()
    }

    /// A save holds its bound upsert while it looks the id up; when that lookup prepares its
    /// statement into a full cache, the cache makes room without finalizing the upsert.
    @Test func aBoundWriteSurvivesTheStatementCacheMakingRoom() async throws {
        let dir = try ScratchDirectory()
        let driver = try await SQLiteDriver(path: dir.store)
        try await driver.write { tx in try tx.insert(Record(id: "a", fields: ["n": 1]), into: self.items) }
        let outcome = try await driver.write { tx -> WriteOutcome in
            let sqlite = try #require(tx as? SQLiteTransaction)
            let connection = sqlite.connection
            let meta = try #require(sqlite.catalog.collections[self.items])
            var filler = 0
            func fill() throws {
                filler += 1
                try connection.statement("SELECT \(filler)").finish()
            }
            while connection.cachedStatementCount < SQLiteConnection.cacheLimit { try fill() }
            // Making room finalizes every statement not in use: the cache holds the new one only.
            try fill()
            #expect(connection.cachedStatementCount == 1)
            try connection.statement(meta.upsertSQL).finish()
            while connection.cachedStatementCount < SQLiteConnection.cacheLimit { try fill() }
            #expect(connection.isCached(meta.upsertSQL))
            #expect(!connection.isCached(meta.existsSQL))
            return try tx.write(.save, into: self.items) { sink in
                try sink.set(.int(5), forField: "n")
                return .string("a")
            }
        }
        #expect(outcome == .updated)
        #expect(try await driver.read { tx in try tx.get("a", from: self.items) } == Record(id: "a", fields: ["n": 5]))
        try await driver.close()
    }

    /// The fields `names` of record `id` read through `withFields`, in that order.
    static func fields(_ driver: SQLiteDriver, _ id: RecordID, _ collection: CollectionName, _ names: [String]) async throws -> [String: FieldValue]? {
        try await driver.read { tx in
            try tx.withFields(of: id, from: collection) { source in
                var out: [String: FieldValue] = [:]
                for name in names { out[name] = try source.value(forField: name) }
                #expect(source.recordID == id)
                return out
            }
        }
    }

    @Test func pointReadsReuseTheirRowSourceAcrossCollectionsOrdersAndColumns() async throws {
        let dir = try ScratchDirectory()
        let driver = try await SQLiteDriver(path: dir.store)
        let other = try CollectionName("other")
        try await driver.write { tx in
            try tx.insert(Record(id: 1, fields: ["a": 1, "b": "x", "c": 2.5]), into: self.items)
            try tx.insert(Record(id: 2, fields: ["a": 2, "c": -1.0]), into: self.items)
            try tx.insert(Record(id: "k", fields: ["b": "other", "z": true]), into: other)
        }
        // The same collection in two field orders, alternating with another collection,
        // repeated so that each read finds the source (and the order) the last one left.
        for _ in 0..<3 {
            #expect(try await Self.fields(driver, 1, items, ["a", "b", "c"]) == ["a": 1, "b": "x", "c": 2.5])
            #expect(try await Self.fields(driver, 2, items, ["c", "b", "a", "missing"]) == ["a": 2, "c": -1.0])
            #expect(try await Self.fields(driver, "k", other, ["z", "b", "a"]) == ["b": "other", "z": true])
            #expect(try await Self.fields(driver, 3, items, ["a"]) == nil)
        }
        // A read whose body throws leaves the next read correct.
        await #expect(throws: DepotError.self) {
            _ = try await driver.read { tx in
                try tx.withFields(of: 1, from: self.items) { source -> Int in
                    _ = try source.value(forField: "a")
                    throw DepotError(.decoding, "stop")
                }
            }
        }
        #expect(try await Self.fields(driver, 1, items, ["b", "a"]) == ["a": 1, "b": "x"])
        // A nested read inside the body gets a source of its own.
        let nested = try await driver.read { tx in
            try tx.withFields(of: 1, from: self.items) { outer -> [FieldValue?] in
                let first = try outer.value(forField: "a")
                let inner = try tx.withFields(of: "k", from: other) { try $0.value(forField: "b") }
                return [first, inner ?? nil, try outer.value(forField: "c")]
            }
        }
        #expect(nested == [1, "other", 2.5])
        // A column added later (a new table layout): reads see it.
        _ = try await driver.write { tx in try tx.save(Record(id: 1, fields: ["a": 1, "new": "n"]), into: self.items) }
        #expect(try await Self.fields(driver, 1, items, ["a", "b", "c", "new"]) == ["a": 1, "new": "n"])
        try await driver.close()
    }

    /// A read transaction reads the catalog generation only when `PRAGMA data_version` says
    /// another connection committed since its connection's last transaction; a column and a
    /// collection added through another driver on the same file are seen by the next read,
    /// and so is a change of values alone.
    @Test func readsReadTheGenerationOnlyAfterACommitElsewhere() async throws {
        let dir = try ScratchDirectory()
        let capture = LogCapture()
        let reader = try await SQLiteDriver(path: dir.store, logger: capture.logger)
        let writer = try await SQLiteDriver(path: dir.store)
        try await writer.write { tx in try tx.insert(Record(id: 1, fields: ["n": 1]), into: self.items) }
        let generationRead = { (log: ArraySlice<String>) in log.contains { $0.contains("'generation'") } }
        #expect(try await reader.read { tx in try tx.get(1, from: self.items) } == Record(id: 1, fields: ["n": 1]))
        var seen = capture.messages.count
        // Nothing committed since: the snapshot statement alone, no read of the generation.
        #expect(try await reader.read { tx in try tx.get(1, from: self.items) } == Record(id: 1, fields: ["n": 1]))
        #expect(capture.messages[seen...].contains { $0.hasPrefix("PRAGMA data_version") }, "\(capture.messages[seen...])")
        #expect(!generationRead(capture.messages[seen...]), "\(capture.messages[seen...])")
        // Another driver adds a column and a collection: the next read sees both.
        let others = try CollectionName("others")
        try await writer.write { tx in
            try tx.update(Record(id: 1, fields: ["n": 2, "added": "yes"]), in: self.items)
            try tx.insert(Record(id: 1, fields: [:]), into: others)
        }
        seen = capture.messages.count
        let (got, names) = try await reader.read { tx in (try tx.get(1, from: self.items), try tx.collectionNames()) }
        #expect(got == Record(id: 1, fields: ["n": 2, "added": "yes"]))
        #expect(names.contains(others))
        #expect(generationRead(capture.messages[seen...]))
        // A change of values alone is seen too.
        try await writer.write { tx in try tx.update(Record(id: 1, fields: ["n": 3, "added": "again"]), in: self.items) }
        #expect(try await reader.read { tx in try tx.get(1, from: self.items) } == Record(id: 1, fields: ["n": 3, "added": "again"]))
        try await writer.close()
        try await reader.close()
    }

    @Test func cachedStatementsFollowAddedColumns() async throws {
        let dir = try ScratchDirectory()
        let driver = try await SQLiteDriver(path: dir.store)
        try await driver.write { tx in
            for n in 0..<5 { try tx.insert(Record(id: .string("k\(n)"), fields: ["n": .int(Int64(n))]), into: self.items) }
        }
        let scan = Query(filter: Field.id >= "k1", sort: [SortKey("id")], limit: 2)
        let before = try await driver.read { tx in try tx.query(scan, in: self.items) }
        #expect(before.map(\.id) == ["k1", "k2"])
        _ = try await driver.read { tx in try tx.get("k1", from: self.items) }
        // ALTER TABLE ADD COLUMN through a write of a new field, then the same query shape
        // and the same get: the cached statements must return the new column.
        try await driver.write { tx in
            try tx.update(Record(id: "k1", fields: ["n": 1, "added": "yes"]), in: self.items)
            // Inside the same write transaction too.
            #expect(try tx.get("k1", from: self.items)?.fields["added"] == "yes")
        }
        let after = try await driver.read { tx in try tx.query(scan, in: self.items) }
        #expect(after.first == Record(id: "k1", fields: ["n": 1, "added": "yes"]))
        #expect(after.last == Record(id: "k2", fields: ["n": 2]))
        let got = try await driver.read { tx in try tx.get("k1", from: self.items) }
        #expect(got?.fields["added"] == "yes")
        try await driver.close()
    }

    @Test func connectionThreadServesManyConcurrentCallersInOrder() async throws {
        let dir = try ScratchDirectory()
        let driver = try await SQLiteDriver(path: dir.store)
        try await driver.write { tx in try tx.insert(Record(id: "c", fields: ["n": 0]), into: self.items) }
        // Many tasks increment one counter through the writer thread: no lost update, no
        // lost wake-up (a hang would time the test out).
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    for _ in 0..<50 {
                        try await driver.write { tx in
                            guard var record = try tx.get("c", from: self.items), case .int(let n)? = record.fields["n"] else { throw DepotError(.internal, "missing") }
                            record.fields["n"] = .int(n + 1)
                            try tx.update(record, in: self.items)
                        }
                        _ = try await driver.read { tx in try tx.get("c", from: self.items) }
                    }
                }
            }
            try await group.waitForAll()
        }
        let final = try await driver.read { tx in try tx.get("c", from: self.items) }
        #expect(final?.fields["n"] == .int(400))
        // Idle pauses longer than the spin, then more work: the parked thread wakes.
        for _ in 0..<3 {
            try await Task.sleep(nanoseconds: 2_000_000)
            #expect(try await driver.read { tx in try tx.get("c", from: self.items) } != nil)
        }
        try await driver.close()
        #expect(await errorCode { _ = try await driver.read { tx in try tx.get("c", from: self.items) } } == .closed)
    }
}
