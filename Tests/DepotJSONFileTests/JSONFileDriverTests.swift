import DepotCore
import Foundation
import Testing
@testable import DepotJSONFile

#if canImport(Glibc)
import Glibc
#endif

/// The driver against real files: options, the file it writes, reopening, other writers.
@Suite struct JSONFileDriverTests {
    static var users: CollectionName { get throws { try CollectionName("users") } }

    static func open(_ string: String) async throws -> any StorageDriver {
        var registry = DriverRegistry()
        JSONFileDriver.register(in: &registry)
        return try await registry.makeDriver(string)
    }

    @Test(arguments: [
        "json:", "json:DIR/db.json?colour=blue", "json:DIR/db.json?durability=fast", "json:DIR/db.json?pretty=yes",
        "json:DIR/db.json?lock_timeout_ms=-1", "json:DIR/db.json?lock_timeout_ms=abc", "json:DIR/missing/db.json", "json:DIR/",
    ])
    func badStoreStrings(_ template: String) async throws {
        let dir = TestDirectory()
        await expectError(.invalidStore) { _ = try await Self.open(template.replacingOccurrences(of: "DIR", with: dir.path)) }
    }

    @Test func optionsAreRead() throws {
        let config = try JSONFileDriver.configuration(from: StoreLocation("json:x.json?durability=normal&pretty=false&lock_timeout_ms=250"))
        #expect(config == JSONFileDriver.Configuration(durability: .normal, pretty: false, lockTimeout: .milliseconds(250)))
        #expect(try JSONFileDriver.configuration(from: StoreLocation("json:x.json")) == JSONFileDriver.Configuration())
    }

    @Test func writesAPlainJSONFileAndReopens() async throws {
        let dir = TestDirectory()
        let users = try Self.users
        var driver = try await Self.open("json:\(dir.store)")
        #expect(dir.contents() == nil, "nothing is written before the first commit")
        try await driver.write { tx in
            try tx.prepare(CollectionSchema(name: users, idKind: .int, uniqueConstraints: [UniqueConstraint(["email"])]))
            try tx.insert(Record(id: 2, fields: ["name": "Grace", "email": "g@x"]), into: users)
            try tx.insert(Record(id: 1, fields: ["name": "Ada", "email": "a@x", "score": 1.0]), into: users)
        }
        let text = try #require(dir.contents())
        #expect(text.hasPrefix("{\n  \"_depot\": {"))
        #expect(text.contains("""
              "users": [
                {
                  "id": 1,
                  "email": "a@x",
                  "name": "Ada",
                  "score": 1.0
                },
                {
                  "id": 2,
            """))
        // A record is deleted, then the store is reopened: data, constraints and the id counter survive.
        _ = try await driver.write { tx in try tx.delete(2, from: users) }
        try await driver.close()
        await expectError(.closed) { _ = try await driver.read { tx in try tx.collectionNames() } }
        driver = try await Self.open("json:\(dir.store)?pretty=false")
        let (record, schema) = try await driver.read { tx in (try tx.get(1, from: users), try tx.schema(of: users)) }
        #expect(record == Record(id: 1, fields: ["name": "Ada", "email": "a@x", "score": 1.0]))
        #expect(schema?.uniqueConstraints == [UniqueConstraint(["email"])])
        let id = try await driver.write { tx in try tx.insert(fields: ["name": "Next"], into: users) }
        #expect(id == 3, "assigned ids stay above every id ever used")
        await expectError(.uniqueViolation) {
            try await driver.write { tx in try tx.insert(Record(id: 9, fields: ["email": "a@x"]), into: users) }
        }
        #expect(dir.contents()?.contains("\n{\"id\":1,\"email\":\"a@x\",\"name\":\"Ada\",\"score\":1.0},\n") == true)
        #expect(try await driver.integrityCheck().isEmpty)
        try await driver.close()
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/.db.json.tmp"))
    }

    @Test func aWriteThatChangesNothingDoesNotRewrite() async throws {
        let dir = TestDirectory()
        let users = try Self.users
        let driver = try await JSONFileDriver(path: dir.store)
        try await driver.write { tx in try tx.insert(Record(id: 1, fields: [:]), into: users) }
        let before = try FileManager.default.attributesOfItem(atPath: dir.store)[.systemFileNumber] as? Int
        _ = try await driver.write { tx in try tx.get(1, from: users) }
        await expectError(.alreadyExists) { try await driver.write { tx in try tx.insert(Record(id: 1, fields: [:]), into: users) } }
        let after = try FileManager.default.attributesOfItem(atPath: dir.store)[.systemFileNumber] as? Int
        #expect(before == after)
        try await driver.close()
    }

    @Test func anEditByAPersonIsReloadedNotOverwritten() async throws {
        let dir = TestDirectory()
        let users = try Self.users
        let driver = try await JSONFileDriver(path: dir.store)
        try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["name": "Ada"]), into: users) }
        // Rewritten in place (same inode), as some editors do.
        let edited = try #require(dir.contents()).replacingOccurrences(of: "\"Ada\"", with: "\"Ada Lovelace\"")
        try dir.write(edited)
        #expect(try await driver.read { tx in try tx.get(1, from: users) }?.fields["name"] == "Ada Lovelace")
        // Replaced by another program (new inode), same size as before.
        try dir.write(#"{"users":[{"id":1,"name":"Ada Lovelace"},{"id":5,"name":"Eve"}]}"#, to: "other.json")
        try FileManager.default.removeItem(atPath: dir.store)
        try FileManager.default.moveItem(atPath: dir.path + "/other.json", toPath: dir.store)
        try await driver.write { tx in try tx.insert(Record(id: 6, fields: ["name": "Frank"]), into: users) }
        let ids = try await driver.read { tx in try tx.query(Query(), in: users).map(\.id) }
        #expect(ids == [1, 5, 6])
        // A deleted file is an empty store.
        try FileManager.default.removeItem(atPath: dir.store)
        #expect(try await driver.read { tx in try tx.count(.all, in: users) } == 0)
        try await driver.close()
    }

    @Test func aFileThatCannotBeReadIsNeverWritten() async throws {
        let dir = TestDirectory()
        let users = try Self.users
        try dir.write(#"{"users":[{"id":1},{"id":1}]}"#)
        let error = await expectError(.decoding) { _ = try await JSONFileDriver(path: dir.store) }
        #expect(error?.message.contains("two records have id 1") == true)
        #expect(error?.message.contains("line 1, column 20") == true, "\(error?.message ?? "")")

        try dir.write(#"{"users":[{"id":1}]}"#)
        let driver = try await JSONFileDriver(path: dir.store)
        let broken = "{\"users\":[{\"id\":1},\n{\"id\":2 \"x\":1}]}"
        try dir.write(broken)
        await expectError(.corrupted) { _ = try await driver.read { tx in try tx.count(.all, in: users) } }
        await expectError(.corrupted) { try await driver.write { tx in try tx.insert(Record(id: 3, fields: [:]), into: users) } }
        let problems = try await driver.integrityCheck()
        #expect(problems.first?.contains("line 2, column 9") == true, "\(problems)")
        #expect(dir.contents() == broken, "the unreadable file is left exactly as it was")
        // Fixed by hand: the driver reads it again.
        try dir.write(#"{"users":[{"id":1},{"id":2,"x":1}]}"#)
        try await driver.write { tx in try tx.insert(Record(id: 3, fields: [:]), into: users) }
        #expect(try await driver.read { tx in try tx.count(.all, in: users) } == 3)
        try await driver.close()
    }

    @Test func tooLargeAFileFailsCleanly() async throws {
        let dir = TestDirectory()
        try dir.write(#"{"users":[{"id":1,"s":""# + String(repeating: "x", count: 5000) + #""}]}"#)
        let error = await expectError(.decoding) {
            _ = try await JSONFileDriver(path: dir.store, configuration: .init(maximumFileSize: 4096))
        }
        #expect(error?.message.contains("larger than 4096 bytes") == true)
    }

    @Test func anotherProcessHoldingTheLockMeansLocked() async throws {
        let dir = TestDirectory()
        let users = try Self.users
        let driver = try await Self.open("json:\(dir.store)?lock_timeout_ms=150")
        try await driver.write { tx in try tx.insert(Record(id: 1, fields: [:]), into: users) }
        // Another open file description on the lock file: flock excludes it like another process.
        let fd = Glibc.open(dir.store + ".lock", O_RDWR | O_CREAT, 0o644)
        #expect(fd >= 0)
        defer { Glibc.close(fd) }
        #expect(flock(fd, LOCK_EX | LOCK_NB) == 0)
        let start = ContinuousClock.now
        let error = await expectError(.locked) { try await driver.write { tx in try tx.insert(Record(id: 2, fields: [:]), into: users) } }
        #expect(ContinuousClock.now - start >= .milliseconds(150))
        #expect(error?.message.contains("Another process") == true)
        // Reads do not need the lock.
        #expect(try await driver.read { tx in try tx.count(.all, in: users) } == 1)
        flock(fd, LOCK_UN)
        try await driver.write { tx in try tx.insert(Record(id: 2, fields: [:]), into: users) }
        #expect(try await driver.read { tx in try tx.count(.all, in: users) } == 2)
        try await driver.close()
    }

    @Test func twoDriversOnOneFileSeeEachOthersCommits() async throws {
        let dir = TestDirectory()
        let users = try Self.users
        let a = try await JSONFileDriver(path: dir.store)
        let b = try await JSONFileDriver(path: dir.store, configuration: .init(durability: .normal))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<40 {
                let driver = i % 2 == 0 ? a : b
                group.addTask {
                    try await driver.write { tx in
                        let n = try tx.get("counter", from: try CollectionName("counters"))?.fields["n"]?.intValue ?? 0
                        try tx.save(Record(id: "counter", fields: ["n": .int(n + 1)]), into: try CollectionName("counters"))
                        _ = try tx.insert(fields: ["by": .int(Int64(i))], into: users)
                    }
                }
            }
            try await group.waitForAll()
        }
        for driver in [a, b] {
            let (count, counter) = try await driver.read { tx in
                (try tx.count(.all, in: users), try tx.get("counter", from: try CollectionName("counters"))?.fields["n"])
            }
            #expect(count == 40)
            #expect(counter == .int(40), "no update was lost between the two drivers")
        }
        try await a.close()
        try await b.close()
    }

    @Test func streamsFromASnapshot() async throws {
        let dir = TestDirectory()
        let users = try Self.users
        let driver = try await JSONFileDriver(path: dir.store)
        try await driver.write { tx in for i in 1...1000 { try tx.insert(Record(id: .int(Int64(i)), fields: ["n": .int(Int64(i % 7))]), into: users) } }
        var seen: [RecordID] = []
        for try await record in driver.stream(Query(filter: Field("n") == 3, sort: [Field("id").descending]), from: users) {
            seen.append(record.id)
            // Reading inside the loop must not deadlock the driver.
            if seen.count == 300 { _ = try await driver.read { tx in try tx.count(.all, in: users) } }
        }
        #expect(seen.count == 143)
        #expect(seen.first == 997)
        var firstTen = 0
        for try await _ in driver.stream(Query(), from: users) {
            firstTen += 1
            if firstTen == 10 { break }
        }
        #expect(firstTen == 10)
        try await driver.close()
        var failed = false
        do { for try await _ in driver.stream(Query(), from: users) {} } catch let error as DepotError { failed = error.code == .closed }
        #expect(failed)
    }
}
