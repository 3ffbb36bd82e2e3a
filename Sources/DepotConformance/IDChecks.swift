import DepotCore

/// Record ids: integer and string, their order, store-assigned ids (Docs/Semantics.md, "Ids").
enum IDChecks {
    /// String ids a driver must keep exactly, hostile to file names, SQL and key encodings.
    static let awkwardStringIDs: [String] = [
        "a", "A", "'; DROP TABLE users; --", "../../etc/passwd", "a/b", "a\\b", "..", ".", " ", " lead", "trail ",
        "%", "_", "*", "?", "[x]", "a:b", "a|b", "con", "NUL", "😀", "e\u{301}", "\u{E9}", "日本語", "tab\there", "new\nline",
        "\"quoted\"", "1", "-1", String(repeating: "x", count: 512), String(repeating: "é", count: 256),
    ]

    static let all: [ConformanceCheck] = [
        .driver("ids.intExtremesRoundTrip") { driver, expect in
            let items = try Fixture.items
            let ids: [Int64] = [Int64.min, -1, 0, 1, Int64.max, Int64.min + 1, Int64.max - 1]
            try await driver.seed(ids.map { Record(id: .int($0), fields: ["n": .int($0)]) }, into: items)
            for id in ids {
                try expect.equal(try await driver.record(.int(id), in: items), Record(id: .int(id), fields: ["n": .int(id)]), "record \(id)")
            }
        },
        .driver("ids.intOrderIsNumeric") { driver, expect in
            let items = try Fixture.items
            let ids: [Int64] = [5, -3, 100, 0, Int64.min, Int64.max, 42, 9, 10]
            try await driver.seed(ids.map { Record(id: .int($0)) }, into: items)
            try expect.equal(try await driver.ids(in: items), Fixture.intIDs(Int64.min, -3, 0, 5, 9, 10, 42, 100, Int64.max), "default order")
            try expect.equal(
                try await driver.ids(Query(sort: [SortKey("id", descending: true)]), in: items),
                Fixture.intIDs(Int64.max, 100, 42, 10, 9, 5, 0, -3, Int64.min), "id descending")
        },
        .driver("ids.stringOrderIsBinary") { driver, expect in
            let items = try Fixture.items
            let ids = ["b", "B", "a", "aa", "a b", "\u{E9}", "😀", "\u{FFFD}", "Z", "10", "9", "_"]
            try await driver.seed(ids.map { Record(id: .string($0)) }, into: items)
            // UTF-8 bytes: "10" < "9" < "B" < "Z" < "_" < "a" < "a b" < "aa" < "b" < é (C3 A9) < U+FFFD (EF BF BD) < 😀 (F0 9F 98 80).
            let expected: [RecordID] = ["10", "9", "B", "Z", "_", "a", "a b", "aa", "b", "\u{E9}", "\u{FFFD}", "😀"]
            try expect.equal(try await driver.ids(in: items), expected, "default order of string ids")
        },
        .driver("ids.awkwardStringIDsRoundTrip") { driver, expect in
            let items = try Fixture.items
            try await driver.seed(awkwardStringIDs.enumerated().map { Record(id: .string($1), fields: ["n": .int(Int64($0))]) }, into: items)
            try expect.equal(try await driver.count(in: items), awkwardStringIDs.count, "every id is its own record")
            for (n, id) in awkwardStringIDs.enumerated() {
                let got = try await driver.record(.string(id), in: items)
                try expect.equal(got?.fields["n"], .int(Int64(n)), "record \(RecordID.string(id))")
                try expect.that(got.map { $0.id == .string(id) } ?? false, "id \(RecordID.string(id)) comes back byte for byte")
            }
            let listed = try await driver.records(in: items)
            let expectedOrder = awkwardStringIDs.map { RecordID.string($0) }.sorted()
            try expect.equal(listed.map(\.id), expectedOrder, "all ids listed in binary order")
        },
        .driver("ids.stringIDsCaseSensitive") { driver, expect in
            let items = try Fixture.items
            try await driver.seed([Record(id: "abc", fields: ["v": 1]), Record(id: "ABC", fields: ["v": 2]), Record(id: "Abc", fields: ["v": 3])], into: items)
            try expect.equal(try await driver.count(in: items), 3, "three distinct records")
            try expect.equal(try await driver.record("ABC", in: items)?.fields["v"], .int(2), "record 'ABC'")
            _ = try await driver.write { tx in try tx.delete("abc", from: items) }
            try expect.equal(try await driver.ids(in: items), ["ABC", "Abc"], "only 'abc' deleted")
        },
        .driver("ids.canonicallyEquivalentStringsAreDistinct") { driver, expect in
            let items = try Fixture.items
            // "é" precomposed (C3 A9) and decomposed (65 CC 81): equal as Swift Strings, different ids.
            try await driver.seed([Record(id: "\u{E9}", fields: ["form": "nfc"]), Record(id: "e\u{301}", fields: ["form": "nfd"])], into: items)
            try expect.equal(try await driver.count(in: items), 2, "two records")
            try expect.equal(try await driver.record("\u{E9}", in: items)?.fields["form"], .string("nfc"), "precomposed id")
            try expect.equal(try await driver.record("e\u{301}", in: items)?.fields["form"], .string("nfd"), "decomposed id")
            let ids = try await driver.ids(in: items)
            try expect.that(ids.count == 2 && ids[0] == "e\u{301}" && ids[1] == "\u{E9}", "binary order puts the decomposed form (65...) first, got \(ids)")
        },
        .driver("ids.firstAssignedIdIsOne", requires: .assignedIDs) { driver, expect in
            let items = try Fixture.items
            let id = try await driver.write { tx in try tx.insert(fields: ["v": "first"], into: items) }
            try expect.equal(id, 1, "first assigned id of a new collection")
            try expect.equal(try await driver.record(1, in: items), Record(id: 1, fields: ["v": "first"]), "assigned record")
        },
        .driver("ids.assignedIdsStrictlyIncrease", requires: .assignedIDs) { driver, expect in
            let items = try Fixture.items
            let inOne = try await driver.write { tx in try (0..<5).map { i in try tx.insert(fields: ["i": .int(Int64(i))], into: items) } }
            try expect.equal(inOne, Fixture.intIDs(1, 2, 3, 4, 5), "ids assigned in one transaction")
            var later: [RecordID] = []
            for _ in 0..<3 { later.append(try await driver.write { tx in try tx.insert(fields: [:], into: items) }) }
            try expect.equal(later, Fixture.intIDs(6, 7, 8), "ids assigned in later transactions")
        },
        .driver("ids.assignedIdsFollowExplicitMax", requires: .assignedIDs) { driver, expect in
            let items = try Fixture.items
            try await driver.seed([Record(id: 100), Record(id: -5), Record(id: 7)], into: items)
            let id = try await driver.write { tx in try tx.insert(fields: ["v": 1], into: items) }
            try expect.equal(id, 101, "assigned id after explicit id 100")
        },
        .driver("ids.assignedIdsNeverReusedAfterDeletingMax", requires: .assignedIDs) { driver, expect in
            let items = try Fixture.items
            let ids = try await driver.write { tx in try (0..<3).map { _ in try tx.insert(fields: [:], into: items) } }
            try expect.equal(ids, Fixture.intIDs(1, 2, 3), "first ids")
            _ = try await driver.write { tx in try tx.delete(3, from: items) }
            let next = try await driver.write { tx in try tx.insert(fields: [:], into: items) }
            try expect.equal(next, 4, "id after deleting the max")
            _ = try await driver.write { tx in try tx.delete(matching: .all, from: items) }
            let afterAll = try await driver.write { tx in try tx.insert(fields: [:], into: items) }
            try expect.equal(afterAll, 5, "id after deleting everything")
        },
        .driver("ids.assignedAfterExplicitDeletedMax", requires: .assignedIDs) { driver, expect in
            let items = try Fixture.items
            try await driver.seed([Record(id: 50)], into: items)
            _ = try await driver.write { tx in try tx.delete(50, from: items) }
            let next = try await driver.write { tx in try tx.insert(fields: [:], into: items) }
            try expect.equal(next, 51, "id after an explicit id 50 was deleted")
        },
        .driver("ids.assignedIdInStringCollectionInvalidValue", requires: .assignedIDs) { driver, expect in
            let items = try Fixture.items
            try await driver.seed([Record(id: "a")], into: items)
            try await expect.throwsCode(.invalidValue, "assigned id in a string-id collection") {
                try await driver.write { tx in try tx.insert(fields: ["v": 1], into: items) }
            }
            try expect.equal(try await driver.ids(in: items), ["a"], "nothing added")
        },
        .driver("ids.assignedIdPastInt64MaxInvalidValue", requires: .assignedIDs) { driver, expect in
            let items = try Fixture.items
            try await driver.seed([Record(id: .int(Int64.max))], into: items)
            try await expect.throwsCode(.invalidValue, "assigning after Int64.max") {
                try await driver.write { tx in try tx.insert(fields: ["v": 1], into: items) }
            }
            try expect.equal(try await driver.count(in: items), 1, "nothing added")
        },
        .driver("ids.wrongKindIsInvalidValue") { driver, expect in
            let items = try Fixture.items, tags = try Fixture.tags
            try await driver.seed([Record(id: 1, fields: ["v": 1])], into: items)
            try await driver.seed([Record(id: "t", fields: ["v": 1])], into: tags)
            try await expect.throwsCode(.invalidValue, "insert of a string id into an int-id collection") {
                try await driver.write { tx in try tx.insert(Record(id: "1", fields: ["v": 2]), into: items) }
            }
            try await expect.throwsCode(.invalidValue, "save of a string id into an int-id collection") {
                try await driver.write { tx in try tx.save(Record(id: "x", fields: ["v": 2]), into: items) }
            }
            try await expect.throwsCode(.invalidValue, "insert of an int id into a string-id collection") {
                try await driver.write { tx in try tx.insert(Record(id: 5, fields: ["v": 2]), into: tags) }
            }
            try expect.equal(try await driver.ids(in: items), [1], "int collection unchanged")
            try expect.equal(try await driver.ids(in: tags), ["t"], "string collection unchanged")
        },
        .driver("ids.getWithOtherKindIsNil") { driver, expect in
            let items = try Fixture.items
            try await driver.seed([Record(id: 1, fields: ["v": 1])], into: items)
            try expect.equal(try await driver.record("1", in: items), nil, "string id '1' in an int-id collection")
        },
        .driver("ids.autoCreatedCollectionSchema") { driver, expect in
            let items = try Fixture.items, tags = try Fixture.tags
            try await driver.write { tx in
                try tx.insert(Record(id: 1, fields: ["v": 1]), into: items)
                try tx.insert(Record(id: "a", fields: ["v": 1]), into: tags)
            }
            let (itemSchema, tagSchema, names) = try await driver.read { tx in (try tx.schema(of: items), try tx.schema(of: tags), try tx.collectionNames()) }
            try expect.equal(itemSchema, CollectionSchema(name: items, idKind: .int), "schema made by the first insert of an int id")
            try expect.equal(tagSchema, CollectionSchema(name: tags, idKind: .string), "schema made by the first insert of a string id")
            try expect.equal(names, [items, tags], "collection names")
        },
        .driver("ids.assignedIdCreatesIntCollection", requires: .assignedIDs) { driver, expect in
            let items = try Fixture.items
            _ = try await driver.write { tx in try tx.insert(fields: ["v": 1], into: items) }
            let schema = try await driver.read { tx in try tx.schema(of: items) }
            try expect.equal(schema, CollectionSchema(name: items, idKind: .int), "schema made by an assigned-id insert")
        },
    ]
}
