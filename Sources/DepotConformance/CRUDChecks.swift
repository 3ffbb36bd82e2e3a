import DepotCore

/// Insert, update, save, delete: what each does and reports (Docs/Semantics.md, "Writes").
enum CRUDChecks {
    static let all: [ConformanceCheck] = [
        .driver("crud.insertThenGet") { driver, expect in
            let users = try Fixture.users
            try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["name": "Ada", "age": 36]), into: users) }
            let got = try await driver.record(1, in: users)
            try expect.equal(got, Record(id: 1, fields: ["name": "Ada", "age": 36]), "record read back")
        },
        .driver("crud.insertExistingIdFails") { driver, expect in
            let users = try Fixture.users
            try await driver.write { tx in try tx.insert(Record(id: "a", fields: ["n": 1]), into: users) }
            try await expect.throwsCode(.alreadyExists, "second insert of id 'a'") {
                try await driver.write { tx in try tx.insert(Record(id: "a", fields: ["n": 2]), into: users) }
            }
            let got = try await driver.record("a", in: users)
            try expect.equal(got?.fields["n"], .int(1), "first record unchanged")
        },
        .driver("crud.getMissingIsNil") { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: 1, fields: ["n": 1])], into: users)
            try expect.equal(try await driver.record(2, in: users), nil, "get of an id never written")
            try expect.equal(try await driver.record(1, in: try Fixture.posts), nil, "get from a collection that does not exist")
        },
        .driver("crud.emptyRecordRoundTrips") { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: 7)], into: users)
            try expect.equal(try await driver.record(7, in: users), Record(id: 7), "record without fields")
            try expect.equal(try await driver.count(in: users), 1, "count")
        },
        .driver("crud.updateReplacesAllFields") { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: 1, fields: ["a": 1, "b": "x"])], into: users)
            try await driver.write { tx in try tx.update(Record(id: 1, fields: ["b": "y", "c": true]), in: users) }
            try expect.equal(try await driver.record(1, in: users), Record(id: 1, fields: ["b": "y", "c": true]), "field 'a' removed, 'b' replaced, 'c' added")
        },
        .driver("crud.updateMissingFailsNotFound") { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: 1, fields: ["a": 1])], into: users)
            try await expect.throwsCode(.notFound, "update of id 2") {
                try await driver.write { tx in try tx.update(Record(id: 2, fields: ["a": 2]), in: users) }
            }
            try expect.equal(try await driver.ids(in: users), [1], "no record created by the failed update")
        },
        .driver("crud.updateInMissingCollectionFailsNotFound") { driver, expect in
            let posts = try Fixture.posts
            try await expect.throwsCode(.notFound, "update in a collection that does not exist") {
                try await driver.write { tx in try tx.update(Record(id: 1, fields: ["a": 2]), in: posts) }
            }
            try expect.equal(try await driver.record(1, in: posts), nil, "nothing created")
        },
        .driver("crud.updateLeavesOtherRecords") { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: 1, fields: ["a": 1]), Record(id: 2, fields: ["a": 2]), Record(id: 3, fields: ["a": 3])], into: users)
            try await driver.write { tx in try tx.update(Record(id: 2, fields: ["a": 20]), in: users) }
            try expect.equal(try await driver.records(in: users), [Record(id: 1, fields: ["a": 1]), Record(id: 2, fields: ["a": 20]), Record(id: 3, fields: ["a": 3])], "records after the update")
        },
        .driver("crud.saveReportsInsertedThenUpdated") { driver, expect in
            let users = try Fixture.users
            let first = try await driver.write { tx in try tx.save(Record(id: "k", fields: ["v": 1, "w": 1]), into: users) }
            try expect.equal(first, .inserted, "first save")
            let second = try await driver.write { tx in try tx.save(Record(id: "k", fields: ["v": 2]), into: users) }
            try expect.equal(second, .updated, "second save")
            try expect.equal(try await driver.record("k", in: users), Record(id: "k", fields: ["v": 2]), "save replaces the whole record")
            try expect.equal(try await driver.count(in: users), 1, "one record")
        },
        .driver("crud.saveTwiceInOneTransaction") { driver, expect in
            let users = try Fixture.users
            let outcomes = try await driver.write { tx in
                [try tx.save(Record(id: 1, fields: ["v": 1]), into: users), try tx.save(Record(id: 1, fields: ["v": 2]), into: users)]
            }
            try expect.equal(outcomes, [.inserted, .updated], "outcomes")
            try expect.equal(try await driver.record(1, in: users), Record(id: 1, fields: ["v": 2]), "last save wins")
        },
        .driver("crud.deleteReportsTrueThenFalse") { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: 1, fields: ["a": 1]), Record(id: 2, fields: ["a": 2])], into: users)
            let first = try await driver.write { tx in try tx.delete(1, from: users) }
            let second = try await driver.write { tx in try tx.delete(1, from: users) }
            try expect.equal(first, true, "delete of an existing id")
            try expect.equal(second, false, "delete of a deleted id")
            try expect.equal(try await driver.ids(in: users), [2], "remaining ids")
            try expect.equal(try await driver.record(1, in: users), nil, "deleted record")
        },
        .driver("crud.deleteFromMissingCollectionIsFalse") { driver, expect in
            let posts = try Fixture.posts
            let deleted = try await driver.write { tx in try tx.delete(1, from: posts) }
            try expect.equal(deleted, false, "delete in a collection that does not exist")
            let matched = try await driver.write { tx in try tx.delete(matching: .all, from: posts) }
            try expect.equal(matched, 0, "delete matching in a collection that does not exist")
        },
        .driver("crud.deleteMatchingReportsCount") { driver, expect in
            let users = try Fixture.users
            try await driver.seed((1...10).map { Record(id: .int($0), fields: ["n": .int($0), "even": .bool($0 % 2 == 0)]) }, into: users)
            let deleted = try await driver.write { tx in try tx.delete(matching: .equal("even", true), from: users) }
            try expect.equal(deleted, 5, "records deleted")
            try expect.equal(try await driver.ids(in: users), Fixture.intIDs(1, 3, 5, 7, 9), "remaining ids")
            let none = try await driver.write { tx in try tx.delete(matching: .greater("n", 100), from: users) }
            try expect.equal(none, 0, "delete matching nothing")
        },
        .driver("crud.deleteAllKeepsCollection") { driver, expect in
            let users = try Fixture.users
            try await driver.seed((1...4).map { Record(id: .int($0), fields: ["n": .int($0)]) }, into: users)
            let deleted = try await driver.write { tx in try tx.delete(matching: .all, from: users) }
            try expect.equal(deleted, 4, "records deleted")
            try expect.equal(try await driver.count(in: users), 0, "count after delete all")
            let names = try await driver.read { tx in try tx.collectionNames() }
            try expect.that(names.contains(users), "the emptied collection still exists (got \(names))")
        },
        .driver("crud.reinsertAfterDelete") { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: 5, fields: ["v": "old", "x": 1])], into: users)
            try await driver.write { tx in _ = try tx.delete(5, from: users) }
            try await driver.write { tx in try tx.insert(Record(id: 5, fields: ["v": "new"]), into: users) }
            try expect.equal(try await driver.record(5, in: users), Record(id: 5, fields: ["v": "new"]), "reinserted record has only its own fields")
        },
        .driver("crud.caughtErrorKeepsTransactionUsable") { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: 1, fields: ["v": 1])], into: users)
            let code = try await driver.write { tx -> String in
                var code = "none"
                do { try tx.insert(Record(id: 1, fields: ["v": 99]), into: users) } catch let error as DepotError { code = error.code.name }
                try tx.insert(Record(id: 2, fields: ["v": 2]), into: users)
                return code
            }
            try expect.equal(code, "alreadyExists", "error caught inside the transaction")
            try expect.equal(try await driver.records(in: users), [Record(id: 1, fields: ["v": 1]), Record(id: 2, fields: ["v": 2])], "the failed insert changed nothing; the later insert committed")
        },
        .driver("crud.writesAcrossCollectionsIndependent") { driver, expect in
            let users = try Fixture.users, posts = try Fixture.posts
            try await driver.write { tx in
                try tx.insert(Record(id: 1, fields: ["in": "users"]), into: users)
                try tx.insert(Record(id: 1, fields: ["in": "posts"]), into: posts)
            }
            try expect.equal(try await driver.record(1, in: users)?.fields["in"], .string("users"), "users record")
            try expect.equal(try await driver.record(1, in: posts)?.fields["in"], .string("posts"), "posts record")
            try await driver.write { tx in _ = try tx.delete(1, from: users) }
            try expect.equal(try await driver.count(in: posts), 1, "posts untouched by a delete in users")
        },
        .driver("crud.manyFieldsRecord") { driver, expect in
            let users = try Fixture.users
            var fields: [String: FieldValue] = [:]
            for i in 0..<120 { fields["f\(i)"] = i % 3 == 0 ? .string("s\(i)") : (i % 3 == 1 ? .int(Int64(i)) : .double(Double(i) + 0.5)) }
            try await driver.seed([Record(id: 1, fields: fields)], into: users)
            try expect.sameRecord(try await driver.record(1, in: users), Record(id: 1, fields: fields), "record with 120 fields")
            try expect.equal(try await driver.ids(Query(filter: .equal("f119", 119.5)), in: users), [1], "filter on the last field")
        },
    ]
}
