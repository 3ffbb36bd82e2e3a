import CSQLite
import DepotCore
@testable import DepotSQLite
import Foundation
import Testing

/// A scratch directory removed when the test ends.
final class ScratchDirectory {
    let path: String
    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("depot-sqlite-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
    var store: String { path + "/store.sqlite" }
}

/// Runs `body` and returns the DepotError code it threw, or nil.
func errorCode(_ body: () async throws -> Void) async -> DepotError.Code? {
    do {
        try await body()
        return nil
    } catch let error as DepotError {
        return error.code
    } catch {
        return .internal
    }
}

@Suite struct SQLiteDriverTests {
    let users: CollectionName
    init() throws { users = try CollectionName("users") }

    /// Reads rows of SQL through a plain connection, as a person with the sqlite3 shell would.
    static func shell(_ path: String, _ sql: String) throws -> [[SQLValue]] {
        let connection = try SQLiteConnection(path: path, create: false, busyTimeoutMilliseconds: 1000)
        defer { connection.close() }
        var rows: [[SQLValue]] = []
        let statement = try connection.statement(sql)
        defer { statement.finish() }
        while try statement.step() {
            rows.append((0..<sqlite3ColumnCount(statement)).map { statement.value($0) })
        }
        return rows
    }

    /// The first column of the first row of `sql`, when it is an integer.
    static func firstInt(_ path: String, _ sql: String) throws -> Int64? {
        if case .int(let value) = try shell(path, sql).first?.first { return value }
        return nil
    }

    static func sqlite3ColumnCount(_ statement: Statement) -> Int32 { columnCount(statement) }

    /// Docs/SQLiteDriver.md, "Library settings": SQLite keeps no process-wide memory
    /// statistics once a driver has opened a store, so its allocations take no global mutex.
    /// With statistics on, an open connection and the rows written count as memory in use.
    @Test func sqliteKeepsNoGlobalMemoryStatistics() async throws {
        let dir = try ScratchDirectory()
        let driver = try await SQLiteDriver(path: dir.store)
        try await driver.write { tx in
            for i in 1...100 { try tx.insert(Record(id: .int(Int64(i)), fields: ["name": .string(String(repeating: "x", count: i))]), into: self.users) }
        }
        let count = try await driver.read { tx in try tx.count(.all, in: self.users) }
        #expect(count == 100)
        #expect(sqlite3_memory_used() == 0)
        #expect(sqlite3_memory_highwater(0) == 0)
        try await driver.close()
    }

    /// A partial update by id builds its statement once per shape (the columns set and
    /// removed, the kind of each value set) and then fills in the values: every update of a
    /// shape already seen must still write its own values, tags and target, and a change of
    /// kind is a new shape (SQLitePartialAccess.swift).
    @Test func partialUpdatesOfOneShapeKeepTheirOwnValues() async throws {
        let dir = try ScratchDirectory()
        let driver = try await SQLiteDriver(path: dir.store)
        try await driver.write { tx in
            for i in 1...4 { try tx.insert(Record(id: .int(Int64(i)), fields: ["a": .string("a\(i)"), "b": .int(Int64(i))]), into: self.users) }
        }
        let changes: [(Int64, FieldChange)] = [
            (1, FieldChange(set: ["a": "x"])), (2, FieldChange(set: ["a": "y"])),  // same shape twice
            (3, FieldChange(set: ["a": true])), (4, FieldChange(set: ["a": false])),  // bools
            (1, FieldChange(set: ["a": ["n": 1]])), (2, FieldChange(set: ["a": [1, 2]])),  // nested
            (3, FieldChange(set: ["a": "back"])),  // a string over a bool: its tag goes
            (4, FieldChange(set: ["b": 40], remove: ["a"])), (1, FieldChange(set: ["b": 10], remove: ["a"])),
            (2, FieldChange(set: ["c": "new"])), (3, FieldChange(set: ["c": "column"])),  // a new column, then its shape again
        ]
        var expected: [Int64: [String: FieldValue]] = [1: ["a": "a1", "b": 1], 2: ["a": "a2", "b": 2], 3: ["a": "a3", "b": 3], 4: ["a": "a4", "b": 4]]
        for (id, change) in changes {
            let found = try await driver.write { tx in try tx.update(.int(id), applying: change, in: self.users) }
            #expect(found)
            for (name, value) in change.set { expected[id]?[name] = value }
            for name in change.remove { expected[id]?[name] = nil }
            let stored = try await driver.read { tx in try (1...4).map { try tx.get(.int(Int64($0)), from: self.users) } }
            for (n, record) in stored.enumerated() { #expect(record?.fields == expected[Int64(n + 1)], "after updating \(id) with \(change)") }
        }
        let missing = try await driver.write { tx in try tx.update(.int(99), applying: FieldChange(set: ["a": "y"]), in: self.users) }
        #expect(!missing)
        try await driver.close()
    }

    @Test func layoutIsOneTablePerCollectionWithRealColumns() async throws {
        let dir = try ScratchDirectory()
        let driver = try await SQLiteDriver(path: dir.store)
        try await driver.write { tx in
            try tx.insert(Record(id: 1, fields: ["name": "Ada", "age": 36, "tags": ["x", "y"], "active": true]), into: self.users)
            try tx.insert(Record(id: 2, fields: ["name": "Bob", "score": 2.5, "blob": .bytes(Data([0, 1]))]), into: self.users)
        }
        // A later field that differs only in case from an existing one gets its own column.
        try await driver.write { tx in
            try tx.update(Record(id: 1, fields: ["name": "Ada", "age": 36, "tags": ["x", "y"], "active": true, "Name": "shadow"]), in: self.users)
        }
        try await driver.close()
        let rows = try Self.shell(dir.store, #"SELECT id, name, age, tags, active, score FROM users ORDER BY id"#)
        #expect(rows.count == 2)
        guard rows.count == 2 else { return }
        if case .int(1) = rows[0][0], case .text("Ada") = rows[0][1], case .int(36) = rows[0][2], case .text(#"["x","y"]"#) = rows[0][3], case .int(1) = rows[0][4] {
        } else {
            Issue.record("row 1 as the shell sees it: \(rows[0])")
        }
        if case .double(2.5) = rows[1][5] {} else { Issue.record("row 2 score: \(rows[1][5])") }
        // The field that differs only in case lives in its own column.
        let shadow = try Self.shell(dir.store, #"SELECT "Name_2" FROM users WHERE id = 1"#)
        if case .text("shadow") = shadow.first?.first {} else { Issue.record("Name column: \(shadow)") }
        // Depot's metadata is in _depotsys tables.
        let meta = try Self.shell(dir.store, #"SELECT name, tbl, id_kind FROM "_depotsys_collections""#)
        #expect(meta.count == 1)
        // Reopening gives the same records.
        let again = try await SQLiteDriver(path: dir.store)
        let got = try await again.read { tx in try tx.get(1, from: self.users) }
        #expect(got == Record(id: 1, fields: ["name": "Ada", "age": 36, "tags": ["x", "y"], "active": true, "Name": "shadow"]))
        try await again.close()
    }

    @Test func collectionsDifferingInCaseAndSQLiteNamesCoexist() async throws {
        let driver = try await SQLiteDriver(path: ":memory:")
        let lower = try CollectionName("items"), upper = try CollectionName("Items"), sqliteLike = try CollectionName("sqlite_stuff")
        try await driver.write { tx in
            try tx.insert(Record(id: 1, fields: ["n": 1]), into: lower)
            try tx.insert(Record(id: "a", fields: ["n": 2]), into: upper)
            try tx.insert(Record(id: 1, fields: ["n": 3]), into: sqliteLike)
        }
        let (a, b, c, names) = try await driver.read { tx in
            (try tx.get(1, from: lower), try tx.get("a", from: upper), try tx.get(1, from: sqliteLike), try tx.collectionNames())
        }
        #expect(a?.fields["n"] == 1 && b?.fields["n"] == 2 && c?.fields["n"] == 3)
        #expect(names == [upper, lower, sqliteLike].sorted())
        try await driver.close()
    }

    @Test func hostileNamesAreRejected() async throws {
        #expect(throws: DepotError.self) { try CollectionName("users\"; DROP TABLE users; --") }
        let driver = try await SQLiteDriver(path: ":memory:")
        let code = await errorCode {
            try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["a\"b": 1]), into: self.users) }
        }
        #expect(code == .invalidName)
        let count = try await driver.read { tx in try tx.collectionNames().count }
        #expect(count == 0, "nothing was created by the rejected write")
        try await driver.close()
    }

    @Test func garbageFileIsCorrupted() async throws {
        let dir = try ScratchDirectory()
        var bytes = [UInt8](repeating: 0, count: 16384)
        for i in bytes.indices { bytes[i] = UInt8(truncatingIfNeeded: i &* 31 &+ 7) }
        try Data(bytes).write(to: URL(fileURLWithPath: dir.store))
        let code = await errorCode { _ = try await SQLiteDriver(path: dir.store) }
        #expect(code == .corrupted)
    }

    @Test func damagedDatabaseIsCorrupted() async throws {
        let dir = try ScratchDirectory()
        let driver = try await SQLiteDriver(path: dir.store)
        try await driver.write { tx in
            for i in 1...500 { try tx.insert(Record(id: .int(Int64(i)), fields: ["text": .string(String(repeating: "x", count: 200))]), into: self.users) }
        }
        try await driver.close()
        // Checkpointed on close; now overwrite the middle of the file.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: dir.store))
        try handle.seek(toOffset: 4096 * 3)
        try handle.write(contentsOf: Data(repeating: 0xA5, count: 4096 * 4))
        try handle.close()
        let code = await errorCode {
            let reopened = try await SQLiteDriver(path: dir.store)
            _ = try await reopened.read { tx in try tx.query(Query(), in: self.users) }
            try await reopened.close()
        }
        #expect(code == .corrupted)
    }

    @Test func storeStringsAndOptions() async throws {
        var registry = DriverRegistry()
        SQLiteDriver.register(in: &registry)
        let memory = try await registry.makeDriver("sqlite::memory:")
        #expect(memory.backendName == "sqlite")
        try await memory.close()
        let dir = try ScratchDirectory()
        let normal = try await registry.makeDriver("sqlite:\(dir.store)?durability=normal&busy_timeout_ms=10")
        #expect((normal as? SQLiteDriver)?.durability == .normal)
        try await normal.close()
        #expect(await errorCode { _ = try await registry.makeDriver("sqlite:\(dir.store)?cache=big") } == .invalidStore)
        #expect(await errorCode { _ = try await registry.makeDriver("sqlite:\(dir.store)?durability=maybe") } == .invalidStore)
        #expect(await errorCode { _ = try await registry.makeDriver("sqlite:\(dir.store)?busy_timeout_ms=-1") } == .invalidStore)
        #expect(await errorCode { _ = try await registry.makeDriver("sqlite:") } == .invalidStore)
    }

    @Test func uniqueIndexesKeepDepotEquality() async throws {
        let driver = try await SQLiteDriver(path: ":memory:")
        try await driver.write { tx in
            try tx.prepare(CollectionSchema(name: self.users, idKind: .int, uniqueConstraints: [UniqueConstraint(["k"], name: "k_unique")]))
            try tx.insert(Record(id: 1, fields: ["k": 1]), into: self.users)
            try tx.insert(Record(id: 2, fields: ["k": true]), into: self.users)
            try tx.insert(Record(id: 3, fields: ["k": "1"]), into: self.users)
            try tx.insert(Record(id: 4, fields: ["k": ["x"]]), into: self.users)
            try tx.insert(Record(id: 5, fields: ["k": #"["x"]"#]), into: self.users)
        }
        do {
            try await driver.write { tx in try tx.insert(Record(id: 6, fields: ["k": 1.0]), into: self.users) }
            Issue.record("1.0 must collide with 1")
        } catch let error as DepotError {
            #expect(error.code == .uniqueViolation)
            #expect(error.constraint == "k_unique")
        }
        // An existing id wins over a unique violation, as in every driver.
        let both = await errorCode { try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["k": 1]), into: self.users) } }
        #expect(both == .alreadyExists)
        // Existing duplicates make a new unique constraint fail, naming it.
        do {
            try await driver.write { tx in
                try tx.insert(Record(id: 7, fields: ["m": 2]), into: self.users)
                try tx.insert(Record(id: 8, fields: ["m": 2.0]), into: self.users)
            }
            try await driver.write { tx in
                try tx.prepare(CollectionSchema(name: self.users, idKind: .int, uniqueConstraints: [UniqueConstraint(["k"], name: "k_unique"), UniqueConstraint(["m"], name: "m_unique")]))
            }
            Issue.record("prepare must fail")
        } catch let error as DepotError {
            #expect(error.code == .uniqueViolation)
            #expect(error.constraint == "m_unique")
        }
        try await driver.close()
    }

    @Test func assignedIDsExceedEveryIDEverUsed() async throws {
        let dir = try ScratchDirectory()
        let driver = try await SQLiteDriver(path: dir.store)
        let first = try await driver.write { tx in
            try tx.insert(Record(id: 100, fields: [:]), into: self.users)
            _ = try tx.delete(100, from: self.users)
            return try tx.insert(fields: ["n": 1], into: self.users)
        }
        #expect(first == .int(101))
        try await driver.close()
        let again = try await SQLiteDriver(path: dir.store)
        let second = try await again.write { tx in
            _ = try tx.delete(101, from: self.users)
            return try tx.insert(fields: ["n": 2], into: self.users)
        }
        #expect(second == .int(102))
        try await again.close()
    }

    /// Integer-id tables have no AUTOINCREMENT (an insert does not write a sequence row);
    /// triggers keep the id mark when anything, raw SQL included, takes away the largest id.
    @Test func idMarksFollowDeletesAndIDUpdatesFromAnyConnection() async throws {
        let dir = try ScratchDirectory()
        let driver = try await SQLiteDriver(path: dir.store)
        try await driver.write { tx in
            for id in [3, 7, 10] as [Int64] { try tx.insert(Record(id: .int(id), fields: ["n": .int(id)]), into: self.users) }
            // Not the largest: no mark.
            _ = try tx.delete(7, from: self.users)
        }
        try await driver.close()
        let ddl = try Self.shell(dir.store, #"SELECT sql FROM sqlite_schema WHERE name = 'users'"#)
        if case .text(let sql) = ddl.first?.first {
            #expect(!sql.uppercased().contains("AUTOINCREMENT"), "table: \(sql)")
        } else {
            Issue.record("no table: \(ddl)")
        }
        #expect(try Self.firstInt(dir.store, #"SELECT count(*) FROM "_depotsys_idmarks""#) == 0)
        #expect(try Self.firstInt(dir.store, #"SELECT value FROM "_depotsys_meta" WHERE key = 'format'"#) == 2)
        // A plain connection takes the largest id away, first by UPDATE, then by DELETE.
        _ = try Self.shell(dir.store, #"UPDATE users SET id = 5 WHERE id = 10"#)
        _ = try Self.shell(dir.store, #"DELETE FROM users WHERE id = 5"#)
        #expect(try Self.firstInt(dir.store, #"SELECT mark FROM "_depotsys_idmarks" WHERE tbl = 'users'"#) == 10)
        let again = try await SQLiteDriver(path: dir.store)
        let assigned = try await again.write { tx in try tx.insert(fields: ["n": 1], into: self.users) }
        #expect(assigned == .int(11))
        // Emptying the table keeps the mark; dropping the collection forgets it.
        let afterEmptying = try await again.write { tx in
            _ = try tx.delete(matching: .all, from: self.users)
            return try tx.insert(fields: ["n": 2], into: self.users)
        }
        #expect(afterEmptying == .int(12))
        let afterDrop = try await again.write { tx in
            _ = try tx.dropCollection(self.users)
            return try tx.insert(fields: ["n": 3], into: self.users)
        }
        #expect(afterDrop == .int(1))
        try await again.close()
    }

    /// A table of layout 1 (AUTOINCREMENT, no id mark) keeps assigning from its sequence; a
    /// new integer collection in that store moves the store to layout 2.
    @Test func layoutOneTablesKeepTheirSequence() async throws {
        let dir = try ScratchDirectory()
        let driver = try await SQLiteDriver(path: dir.store)
        try await driver.write { tx in try tx.insert(Record(id: 1, fields: [:]), into: self.users) }
        try await driver.close()
        // Rewrite the store as layout 1 wrote it: an AUTOINCREMENT table whose sequence is at 7.
        for sql in [
            #"DROP TABLE users"#,
            #"CREATE TABLE users("id" INTEGER PRIMARY KEY AUTOINCREMENT, "_depot_t" TEXT)"#,
            #"INSERT INTO users(id) VALUES (7)"#,
            #"DELETE FROM users"#,
            #"UPDATE "_depotsys_collections" SET info = '{"columns":{},"indexes":[],"sqlIndexes":{},"uniqueConstraints":[]}'"#,
            #"UPDATE "_depotsys_meta" SET value = 1 WHERE key = 'format'"#,
            #"UPDATE "_depotsys_meta" SET value = value + 1 WHERE key = 'generation'"#,
        ] { _ = try Self.shell(dir.store, sql) }
        let again = try await SQLiteDriver(path: dir.store)
        let assigned = try await again.write { tx in try tx.insert(fields: ["n": 1], into: self.users) }
        #expect(assigned == .int(8))
        #expect(try Self.firstInt(dir.store, #"SELECT value FROM "_depotsys_meta" WHERE key = 'format'"#) == 1)
        let other = try CollectionName("later")
        let first = try await again.write { tx in try tx.insert(fields: ["n": 1], into: other) }
        #expect(first == .int(1))
        #expect(try Self.firstInt(dir.store, #"SELECT value FROM "_depotsys_meta" WHERE key = 'format'"#) == 2)
        try await again.close()
    }

    @Test func secondInstanceWaitsOrGetsLockedAndNothingCorrupts() async throws {
        let dir = try ScratchDirectory()
        let a = try await SQLiteDriver(path: dir.store)
        let b = try await SQLiteDriver(path: dir.store, busyTimeoutMilliseconds: 5000)
        let counter = try CollectionName("counter")
        try await a.write { tx in try tx.insert(Record(id: 1, fields: ["n": 0]), into: counter) }
        // Both increment the same record; each write waits for the other's lock.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for driver in [a, b] {
                group.addTask {
                    for _ in 0..<40 {
                        try await driver.write { tx in
                            let n = try tx.get(1, from: counter)?.fields["n"]?.intValue ?? 0
                            try tx.update(Record(id: 1, fields: ["n": .int(n + 1)]), in: counter)
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let n = try await b.read { tx in try tx.get(1, from: counter)?.fields["n"] }
        #expect(n == .int(80), "no lost update across the two instances")
        // A writer that cannot get the lock in time fails with .locked.
        let impatient = try await SQLiteDriver(path: dir.store, busyTimeoutMilliseconds: 20)
        let holding = Task {
            try await a.write { _ in Thread.sleep(forTimeInterval: 0.6) }
        }
        try await Task.sleep(for: .milliseconds(150))
        let code = await errorCode { try await impatient.write { tx in try tx.insert(Record(id: 2, fields: [:]), into: counter) } }
        #expect(code == .locked)
        try await holding.value
        #expect(try await a.integrityCheck() == [])
        for driver in [a, b, impatient] { try await driver.close() }
    }

    @Test func readersSeeSnapshotsWhileWritersCommit() async throws {
        let dir = try ScratchDirectory()
        let driver = try await SQLiteDriver(path: dir.store)
        try await driver.write { tx in for i in 1...10 { try tx.insert(Record(id: .int(Int64(i)), fields: ["n": 1]), into: self.users) } }
        var seen: [Record] = []
        for try await record in driver.stream(Query(sort: [Field.id.ascending]), from: users) {
            if seen.isEmpty {
                // A write while the stream's snapshot is open: the stream does not see it.
                try await driver.write { tx in try tx.insert(Record(id: 11, fields: ["n": 1]), into: self.users) }
            }
            seen.append(record)
        }
        #expect(seen.count == 10)
        #expect(try await driver.read { tx in try tx.count(.all, in: self.users) } == 11)
        try await driver.close()
    }

    /// A read transaction is one snapshot for all its statements (it is held open by a
    /// pending statement, not by BEGIN): a commit from another connection between two of
    /// its statements is not seen.
    @Test func aReadTransactionIsOneSnapshotAcrossItsStatements() async throws {
        let dir = try ScratchDirectory()
        let driver = try await SQLiteDriver(path: dir.store)
        try await driver.write { tx in for i in 1...3 { try tx.insert(Record(id: .int(Int64(i)), fields: ["n": 1]), into: self.users) } }
        let path = dir.store
        let (before, after, got) = try await driver.read { tx in
            let before = try tx.count(.all, in: self.users)
            _ = try Self.shell(path, #"INSERT INTO users(id, n) VALUES (4, 1)"#)
            _ = try Self.shell(path, #"UPDATE users SET n = 2 WHERE id = 1"#)
            return (before, try tx.count(.all, in: self.users), try tx.get(1, from: self.users))
        }
        #expect(before == 3)
        #expect(after == 3)
        #expect(got?.fields["n"] == 1)
        #expect(try await driver.read { tx in try tx.count(.all, in: self.users) } == 4)
        try await driver.close()
    }

    @Test func nestedQueriesAndManyStatementShapesInsideALoop() async throws {
        let dir = try ScratchDirectory()
        let driver = try await SQLiteDriver(path: dir.store)
        try await driver.write { tx in for i in 1...5 { try tx.insert(Record(id: .int(Int64(i)), fields: ["n": .int(Int64(i))]), into: self.users) } }
        let (outer, inner) = try await driver.read { tx -> (Int, Int) in
            var outer = 0, inner = 0
            try tx.forEach(Query(), in: self.users) { _ in
                outer += 1
                // The same statement again, while the outer one is stepping.
                inner += try tx.query(Query(), in: self.users).count
                // More distinct statements than the cache holds.
                for k in 0..<(outer == 1 ? 300 : 1) { _ = try tx.count(.isIn("n", Array(repeating: .int(1), count: k + 1)), in: self.users) }
                return true
            }
            return (outer, inner)
        }
        #expect(outer == 5 && inner == 25)
        // In a write, deleting while iterating sees the results as of the call.
        let visited = try await driver.write { tx -> Int in
            var visited = 0
            try tx.forEach(Query(), in: self.users) { record in
                visited += 1
                _ = try tx.delete(matching: .all, from: self.users)
                return true
            }
            return visited
        }
        #expect(visited == 5)
        try await driver.close()
    }

    @Test func closedDriverThrowsClosed() async throws {
        let driver = try await SQLiteDriver(path: ":memory:")
        try await driver.close()
        try await driver.close()
        #expect(await errorCode { _ = try await driver.read { tx in try tx.collectionNames() } } == .closed)
    }
}
