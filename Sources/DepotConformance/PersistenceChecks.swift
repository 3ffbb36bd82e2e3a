import DepotCore
import Foundation

/// What survives closing and reopening the store
/// (Docs/Semantics.md, "Durability" and "Closed drivers").
enum PersistenceChecks {
    /// Closes `driver`, reopens the store through the context, and returns the new driver.
    static func reopen(_ driver: any StorageDriver, _ context: ConformanceContext) async throws -> any StorageDriver {
        try await driver.close()
        return try await context.openDriver()
    }

    static let all: [ConformanceCheck] = [
        .context("persistence.recordsSurviveReopen", requires: .persistence) { context, driver, expect in
            let items = try Fixture.items
            let values: [FieldValue] = [
                true, false, .int(.min), .int(.max), -0.0, .double(.greatestFiniteMagnitude), .double(.infinity), 1.0, 0.1,
                "a\u{0}b", "👩‍👩‍👧‍👦e\u{301}", "", "{}", .bytes(Data()), .bytes(ValueChecks.allBytes), [1, [2, .null], ["k": "v"]], ["a": ["b": []]], ValueChecks.deep,
            ]
            let records = values.enumerated().map { Record(id: .int(Int64($0 + 1)), fields: ["v": $1]) }
            try await driver.seed(records, into: items)
            let reopened = try await reopen(driver, context)
            try expect.sameRecords(try await reopened.records(in: items), records, "records after reopening")
        },
        .context("persistence.schemaSurvivesReopen", requires: [.persistence, .uniqueConstraints]) { context, driver, expect in
            let users = try Fixture.users, tags = try Fixture.tags
            let schema = CollectionSchema(name: users, idKind: .int, uniqueConstraints: [UniqueConstraint(["email"]), UniqueConstraint(["first", "last"], name: "full_name")], indexes: [IndexDefinition(["age"]), IndexDefinition(["city", "age"], name: "city_age")])
            try await driver.write { tx in
                try tx.prepare(schema)
                try tx.prepare(CollectionSchema(name: tags, idKind: .string))
            }
            let reopened = try await reopen(driver, context)
            let (usersSchema, tagsSchema, names) = try await reopened.read { tx in (try tx.schema(of: users), try tx.schema(of: tags), try tx.collectionNames()) }
            try expect.equal(usersSchema, schema, "users schema after reopening")
            try expect.equal(tagsSchema, CollectionSchema(name: tags, idKind: .string), "empty string-id collection after reopening")
            try expect.equal(names, [tags, users], "collections after reopening")
        },
        .context("persistence.constraintsEnforcedAfterReopen", requires: [.persistence, .uniqueConstraints]) { context, driver, expect in
            let users = try Fixture.users
            try await driver.write { tx in try tx.prepare(CollectionSchema(name: users, idKind: .int, uniqueConstraints: [UniqueConstraint(["email"], name: "email_u")])) }
            try await driver.seed([Record(id: 1, fields: ["email": "a"])], into: users)
            let reopened = try await reopen(driver, context)
            let error = try await expect.error(.uniqueViolation, "duplicate after reopening") {
                try await reopened.write { tx in try tx.insert(Record(id: 2, fields: ["email": "a"]), into: users) }
            }
            try expect.equal(error.constraint, "email_u", "constraint named")
            try await reopened.write { tx in try tx.insert(Record(id: 3, fields: ["email": "b"]), into: users) }
            try expect.equal(try await reopened.ids(in: users), [1, 3], "records")
        },
        .context("persistence.assignedIdCounterSurvives", requires: [.persistence, .assignedIDs]) { context, driver, expect in
            let items = try Fixture.items
            let ids = try await driver.write { tx in try (0..<3).map { _ in try tx.insert(fields: [:], into: items) } }
            try expect.equal(ids, Fixture.intIDs(1, 2, 3), "ids before reopening")
            _ = try await driver.write { tx in try tx.delete(3, from: items) }
            let reopened = try await reopen(driver, context)
            let next = try await reopened.write { tx in try tx.insert(fields: [:], into: items) }
            try expect.equal(next, 4, "id assigned after deleting the max and reopening")
        },
        .context("persistence.deletesAndDropsSurvive", requires: .persistence) { context, driver, expect in
            let users = try Fixture.users, posts = try Fixture.posts
            try await driver.seed((1...5).map { Record(id: .int(Int64($0))) }, into: users)
            try await driver.seed([Record(id: 1)], into: posts)
            try await driver.write { tx in
                _ = try tx.delete(2, from: users)
                _ = try tx.delete(matching: .greater("id", 3), from: users)
                _ = try tx.dropCollection(posts)
            }
            let reopened = try await reopen(driver, context)
            try expect.equal(try await reopened.ids(in: users), [1, 3], "users after reopening")
            try expect.equal(try await reopened.read { tx in try tx.collectionNames() }, [users], "dropped collection stays dropped")
        },
        .context("persistence.rolledBackWritesNeverAppear", requires: [.persistence, .transactions]) { context, driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: 1, fields: ["v": "kept"])], into: users)
            _ = try? await driver.write { tx in
                try tx.update(Record(id: 1, fields: ["v": "rolled back"]), in: users)
                try tx.insert(Record(id: 2), into: users)
                throw Fixture.Rollback()
            }
            let reopened = try await reopen(driver, context)
            try expect.equal(try await reopened.records(in: users), [Record(id: 1, fields: ["v": "kept"])], "records after reopening")
        },
        .context("persistence.manyCommitsSurvive", requires: .persistence) { context, driver, expect in
            let items = try Fixture.items
            for i in 1...100 { try await driver.write { tx in try tx.save(Record(id: .int(Int64(i % 40)), fields: ["i": .int(Int64(i))]), into: items) } }
            let reopened = try await reopen(driver, context)
            try expect.equal(try await reopened.count(in: items), 40, "records after reopening")
            try expect.equal(try await reopened.record(0, in: items)?.fields["i"], .int(80), "last save of id 0")
            try expect.equal(try await reopened.record(20, in: items)?.fields["i"], .int(100), "last save of id 20")
        },
        .context("persistence.awkwardNamesAndIdsSurvive", requires: .persistence) { context, driver, expect in
            let names = try ["Users", "users", "sqlite_x", "con"].map { try CollectionName($0) } + [try CollectionName(reserved: "_depot_meta")]
            try await driver.write { tx in
                for name in names {
                    for (i, id) in IDChecks.awkwardStringIDs.enumerated() { try tx.insert(Record(id: .string(id), fields: ["i": .int(Int64(i)), "Name": .string(name.rawValue)]), into: name) }
                }
            }
            let reopened = try await reopen(driver, context)
            try expect.equal(try await reopened.read { tx in try tx.collectionNames() }, names.sorted(), "collections after reopening")
            for name in names {
                let records = try await reopened.records(in: name)
                try expect.equal(records.map(\.id), IDChecks.awkwardStringIDs.map { RecordID.string($0) }.sorted(), "ids in \(name) after reopening")
                try expect.that(records.allSatisfy { $0.fields["Name"] == .string(name.rawValue) }, "records of \(name) stay in \(name)")
            }
        },
        .context("persistence.integrityAfterReopen", requires: .persistence) { context, driver, expect in
            let items = try Fixture.items
            try await driver.seed((1...200).map { Record(id: .int(Int64($0)), fields: ["n": .int(Int64($0)), "s": .string(String(repeating: "x", count: $0))]) }, into: items)
            _ = try await driver.write { tx in try tx.delete(matching: .less("n", 100), from: items) }
            let reopened = try await reopen(driver, context)
            try expect.equal(try await reopened.integrityCheck(), [], "integrity problems after reopening")
            try expect.equal(try await reopened.count(in: items), 101, "records after reopening")
        },
        .context("persistence.reopenTwiceWritingBetween", requires: .persistence) { context, driver, expect in
            let items = try Fixture.items
            try await driver.seed([Record(id: 1, fields: ["round": 1])], into: items)
            let second = try await reopen(driver, context)
            try await second.write { tx in try tx.insert(Record(id: 2, fields: ["round": 2]), into: items) }
            let third = try await reopen(second, context)
            try expect.equal(try await third.records(in: items), [Record(id: 1, fields: ["round": 1]), Record(id: 2, fields: ["round": 2])], "records after two reopenings")
        },
        .context("persistence.twoOpenHandlesNeverCorrupt", requires: [.persistence, .multiProcess]) { context, first, expect in
            let items = try Fixture.items
            let second = try await context.openDriver()
            /// Writes `ids` one per transaction, retrying `.locked` for a while; returns the ids acknowledged.
            @Sendable func writeAll(_ driver: any StorageDriver, _ ids: [Int64]) async throws -> [Int64] {
                var acknowledged: [Int64] = []
                for id in ids {
                    for attempt in 0..<200 {
                        do {
                            try await driver.write { tx in try tx.insert(Record(id: .int(id), fields: ["by": .int(id / 1000)]), into: items) }
                            acknowledged.append(id)
                            break
                        } catch let error as DepotError where error.code == .locked && attempt < 199 {
                            try await Task.sleep(nanoseconds: 5_000_000)
                        }
                    }
                }
                return acknowledged
            }
            let (a, b) = try await withTimeout(120, expect, "two handles writing at once") {
                async let a = writeAll(first, (1...25).map { Int64($0) })
                async let b = writeAll(second, (1...25).map { Int64(1000 + $0) })
                return try await (a, b)
            }
            try expect.equal(a.count + b.count, 50, "writes acknowledged through both handles")
            let seenByFirst = try await first.count(.equal("by", 1), in: items)
            try expect.equal(seenByFirst, 25, "the first handle sees the second handle's commits")
            try await first.close()
            try await second.close()
            let reopened = try await context.openDriver()
            try expect.equal(try await reopened.integrityCheck(), [], "integrity problems after two handles wrote")
            try expect.equal(try await reopened.ids(in: items), (a + b).sorted().map { RecordID.int($0) }, "every acknowledged write after reopening")
        },
    ]
}
