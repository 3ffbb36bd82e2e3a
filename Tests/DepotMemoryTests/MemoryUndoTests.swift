import DepotCore
import DepotMemory
import Testing

/// The memory driver changes its one state in place and undoes a failed transaction from an
/// undo log: these check that the undo restores every kind of change exactly, and that
/// readers, writers and streams still see whole transactions only.
@Suite struct MemoryUndoTests {
    struct Failure: Error {}

    let users: CollectionName
    let tags: CollectionName
    let fresh: CollectionName
    init() throws {
        users = try CollectionName("users")
        tags = try CollectionName("tags")
        fresh = try CollectionName("fresh")
    }

    /// Every collection's schema and records.
    func observe(_ driver: MemoryDriver) async throws -> String {
        let names = try await driver.read { tx in try tx.collectionNames() }
        var lines: [String] = []
        for name in names {
            let (schema, records) = try await driver.read { tx in (try tx.schema(of: name), try tx.query(Query(), in: name)) }
            lines.append("\(name): \(String(describing: schema)) \(records)")
        }
        return lines.joined(separator: "\n")
    }

    struct ProbeID: Error { let id: RecordID }

    /// The id the next assigning insert gets (inserted, then thrown away).
    func nextID(_ driver: MemoryDriver) async -> RecordID? {
        do {
            _ = try await driver.write { tx -> Int in
                let id = try tx.insert(fields: ["probe": true], into: self.users)
                throw ProbeID(id: id)
            }
        } catch let probe as ProbeID {
            return probe.id
        } catch {}
        return nil
    }

    func seeded() async throws -> MemoryDriver {
        let driver = MemoryDriver()
        try await driver.write { tx in
            try tx.prepare(CollectionSchema(name: self.users, idKind: .int, uniqueConstraints: [UniqueConstraint(["email"])]))
            for n in 1...5 { try tx.insert(Record(id: .int(Int64(n)), fields: ["email": .string("u\(n)@x"), "n": .int(Int64(n))]), into: self.users) }
            try tx.insert(Record(id: "a", fields: ["t": 1]), into: self.tags)
            try tx.insert(Record(id: "b", fields: ["t": 2]), into: self.tags)
        }
        return driver
    }

    @Test func aThrowingClosureLeavesNoTraceOfAnyKindOfChange() async throws {
        let driver = try await seeded()
        let before = try await observe(driver)
        let nextBefore = await nextID(driver)
        #expect(nextBefore == .int(6))

        await #expect(throws: Failure.self) {
            try await driver.write { tx in
                // Records: update, delete, insert, assigned ids, a swap of unique values.
                try tx.update(Record(id: 1, fields: ["email": "swap@x", "n": 10]), in: self.users)
                try tx.update(Record(id: 2, fields: ["email": "u1@x", "n": 20]), in: self.users)
                try tx.update(Record(id: 1, fields: ["email": "u2@x", "n": 10]), in: self.users)
                _ = try tx.delete(3, from: self.users)
                try tx.insert(Record(id: 3, fields: ["email": "again@x"]), into: self.users)
                _ = try tx.insert(fields: ["email": "new1@x"], into: self.users)
                _ = try tx.insert(fields: ["email": "new2@x"], into: self.users)
                try tx.update(Record(id: 4, fields: ["email": "u4-again@x"]), in: self.users)
                // A failed op inside the closure changes nothing by itself.
                #expect(throws: DepotError.self) { try tx.insert(Record(id: 9, fields: ["email": "u5@x"]), into: self.users) }
                // Collections: drop one and write to it again, create one, re-prepare one.
                try tx.update(Record(id: "b", fields: ["t": 3]), in: self.tags)
                #expect(try tx.dropCollection(self.tags))
                try tx.insert(Record(id: "c", fields: ["t": "new"]), into: self.tags)
                try tx.insert(Record(id: "a", fields: ["t": "changed"]), into: self.tags)
                try tx.insert(Record(id: "z", fields: ["t": 26]), into: self.fresh)
                try tx.prepare(CollectionSchema(name: self.users, idKind: .int, uniqueConstraints: [UniqueConstraint(["email"]), UniqueConstraint(["n"])]))
                _ = try tx.delete(5, from: self.users)
                throw Failure()
            }
        }

        #expect(try await observe(driver) == before)
        #expect(await nextID(driver) == .int(6))
        #expect(try await driver.integrityCheck().isEmpty)
        // The unique index is the old one: the old values still collide, freed ones are free.
        await #expect(throws: DepotError.self) {
            try await driver.write { tx in try tx.insert(Record(id: 7, fields: ["email": "u1@x"]), into: self.users) }
        }
        try await driver.write { tx in try tx.insert(Record(id: 7, fields: ["email": "new1@x"]), into: self.users) }
    }

    @Test func undoOfTheFirstWritesToACollectionRemovesIt() async throws {
        let driver = MemoryDriver()
        await #expect(throws: Failure.self) {
            try await driver.write { tx in
                _ = try tx.insert(fields: ["x": 1], into: self.users)
                throw Failure()
            }
        }
        #expect(try await driver.read { tx in try tx.collectionNames() }.isEmpty)
    }

    @Test func readersSeeWholeTransactionsWhileWritersChangeTheStateInPlace() async throws {
        let driver = MemoryDriver()
        try await driver.write { tx in
            try tx.insert(Record(id: "a", fields: ["n": 0]), into: self.users)
            try tx.insert(Record(id: "b", fields: ["n": 0]), into: self.users)
        }
        // Writers move both records to the same new value, and every third one throws after
        // changing them; readers must always see the two equal.
        try await withThrowingTaskGroup(of: Int.self) { group in
            for writer in 0..<2 {
                group.addTask {
                    var thrown = 0
                    for step in 0..<200 {
                        do {
                            try await driver.write { tx in
                                guard case .int(let n)? = try tx.get("a", from: self.users)?.fields["n"] else { throw Failure() }
                                try tx.update(Record(id: "a", fields: ["n": .int(n + 1)]), in: self.users)
                                try tx.update(Record(id: "b", fields: ["n": .int(n + 1)]), in: self.users)
                                if (step + writer) % 3 == 0 { throw Failure() }
                            }
                        } catch is Failure {
                            thrown += 1
                        }
                    }
                    return thrown
                }
            }
            for _ in 0..<2 {
                group.addTask {
                    for _ in 0..<400 {
                        let (a, b) = try await driver.read { tx in (try tx.get("a", from: self.users), try tx.get("b", from: self.users)) }
                        guard a?.fields["n"] == b?.fields["n"] else { throw DepotError(.internal, "saw half a transaction: \(String(describing: a)) \(String(describing: b))") }
                    }
                    return 0
                }
            }
            var thrown = 0
            for try await count in group { thrown += count }
            let final = try await driver.read { tx in try tx.get("a", from: self.users) }
            #expect(final?.fields["n"] == .int(Int64(400 - thrown)))
        }
    }

    @Test func streamsKeepTheirSnapshotAndAStreamMadeInAWriteReadsAfterIt() async throws {
        let driver = MemoryDriver()
        try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["v": "old"]), into: self.users) }
        let before = driver.stream(Query(), from: users)
        let inside = try await driver.write { tx -> RecordStream in
            try tx.update(Record(id: 1, fields: ["v": "new"]), in: self.users)
            // Made while this closure holds the lock: it reads when iterated.
            return driver.stream(Query(), from: self.users)
        }
        var old: [Record] = []
        for try await record in before { old.append(record) }
        var new: [Record] = []
        for try await record in inside { new.append(record) }
        #expect(old == [Record(id: 1, fields: ["v": "old"])])
        #expect(new == [Record(id: 1, fields: ["v": "new"])])
    }
}
