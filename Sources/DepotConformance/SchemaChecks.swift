import DepotCore

/// `prepare`, `dropCollection`, `collectionNames`, schema evolution (Docs/Semantics.md,
/// "Stores and collections", "Unique constraints" and "Migrations").
enum SchemaChecks {
    static let all: [ConformanceCheck] = [
        .driver("schema.prepareCreatesEmptyCollection") { driver, expect in
            let users = try Fixture.users
            let schema = CollectionSchema(name: users, idKind: .string, indexes: [IndexDefinition(["age"]), IndexDefinition(["last", "first"], name: "by_name")])
            try await driver.write { tx in try tx.prepare(schema) }
            let (got, names, count) = try await driver.read { tx in (try tx.schema(of: users), try tx.collectionNames(), try tx.count(.all, in: users)) }
            try expect.equal(got, schema, "schema read back")
            try expect.equal(names, [users], "collection names")
            try expect.equal(count, 0, "records")
        },
        .driver("schema.schemaOfMissingIsNil") { driver, expect in
            let got = try await driver.read { tx in try tx.schema(of: try Fixture.users) }
            try expect.equal(got, nil, "schema of a collection that does not exist")
            try expect.equal(try await driver.read { tx in try tx.collectionNames() }, [], "a new store has no collections")
        },
        .driver("schema.idKindMismatchIsSchemaMismatch") { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: 1, fields: ["a": 1])], into: users)
            try await expect.throwsCode(.schemaMismatch, "prepare with string ids over an int-id collection") {
                try await driver.write { tx in try tx.prepare(CollectionSchema(name: users, idKind: .string)) }
            }
            try expect.equal(try await driver.read { tx in try tx.schema(of: users)?.idKind }, .int, "id kind unchanged")
            try expect.equal(try await driver.ids(in: users), [1], "records unchanged")
        },
        .driver("schema.prepareIsIdempotentAndKeepsData") { driver, expect in
            let users = try Fixture.users
            let schema = CollectionSchema(name: users, idKind: .int, indexes: [IndexDefinition(["a"])])
            try await driver.write { tx in try tx.prepare(schema) }
            try await driver.seed([Record(id: 1, fields: ["a": 1]), Record(id: 2, fields: ["a": 2])], into: users)
            try await driver.write { tx in try tx.prepare(schema) }
            try await driver.write { tx in try tx.prepare(schema) }
            try expect.equal(try await driver.read { tx in try tx.schema(of: users) }, schema, "schema")
            try expect.equal(try await driver.records(in: users), [Record(id: 1, fields: ["a": 1]), Record(id: 2, fields: ["a": 2])], "records kept")
        },
        .driver("schema.indexesReplacedExactly") { driver, expect in
            let users = try Fixture.users
            try await driver.write { tx in try tx.prepare(CollectionSchema(name: users, idKind: .int, indexes: [IndexDefinition(["a"]), IndexDefinition(["b"])])) }
            try await driver.seed([Record(id: 1, fields: ["a": 1, "b": 2, "c": 3])], into: users)
            let next = CollectionSchema(name: users, idKind: .int, indexes: [IndexDefinition(["b"]), IndexDefinition(["c", "a"], name: "c_then_a")])
            try await driver.write { tx in try tx.prepare(next) }
            try expect.equal(try await driver.read { tx in try tx.schema(of: users) }, next, "indexes after the second prepare")
            try expect.equal(try await driver.ids(Query(filter: .equal("c", 3)), in: users), [1], "query on the newly indexed field")
            try await driver.write { tx in try tx.prepare(CollectionSchema(name: users, idKind: .int)) }
            try expect.equal(try await driver.read { tx in try tx.schema(of: users)?.indexes }, [], "all indexes removed")
        },
        .driver("schema.indexedFieldGivesSameAnswers") { driver, expect in
            let items = try Fixture.items
            try await driver.write { tx in try tx.prepare(CollectionSchema(name: items, idKind: .int, indexes: [IndexDefinition(["v"])])) }
            try await driver.seed(FilterChecks.mixed, into: items)
            let answers: [(Filter, [RecordID])] = [
                (.equal("v", 1), [5, 6]), (.greater("v", 0), [5, 6, 7, 16, 17]), (.less("v", "a"), [9, 10, 12]),
                (.equal("v", .null), [1]), (.notEqual("v", 1), [1, 2, 3, 4, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]),
                (.hasPrefix("v", "a"), [11]), (.isIn("v", [true, "1"]), [3, 10]), (.equal("v", .double(9_007_199_254_740_992.0)), [17]),
            ]
            for (filter, expected) in answers {
                try expect.equal(try await driver.ids(Query(filter: filter), in: items), expected, "indexed \(filter)")
            }
            try expect.equal(try await driver.ids(Query(sort: [SortKey("v")]), in: items), [1, 2, 3, 8, 4, 5, 6, 7, 17, 16, 9, 10, 12, 11, 13, 14, 15], "sort on the indexed field")
        },
        .driver("schema.compoundIndexGivesSameAnswers") { driver, expect in
            let items = try Fixture.items
            try await driver.write { tx in try tx.prepare(CollectionSchema(name: items, idKind: .int, indexes: [IndexDefinition(["g", "s"])])) }
            try await driver.seed(SortPagingChecks.scores, into: items)
            try expect.equal(try await driver.ids(Query(filter: .and([.equal("g", "a"), .greaterOrEqual("s", 3)])), in: items), [4, 6], "g == a and s >= 3")
            try expect.equal(try await driver.ids(Query(sort: [SortKey("g"), SortKey("s", descending: true)]), in: items), [5, 4, 6, 2, 1, 3], "sort by the index's fields")
        },
        .driver("schema.dropCollection") { driver, expect in
            let users = try Fixture.users, posts = try Fixture.posts
            try await driver.seed([Record(id: 1, fields: ["a": 1])], into: users)
            try await driver.seed([Record(id: 1, fields: ["b": 1])], into: posts)
            let dropped = try await driver.write { tx in try tx.dropCollection(users) }
            let again = try await driver.write { tx in try tx.dropCollection(users) }
            try expect.equal(dropped, true, "first drop")
            try expect.equal(again, false, "second drop")
            let (names, schema, record) = try await driver.read { tx in (try tx.collectionNames(), try tx.schema(of: users), try tx.get(1, from: users)) }
            try expect.equal(names, [posts], "collections after the drop")
            try expect.equal(schema, nil, "schema of the dropped collection")
            try expect.equal(record, nil, "record of the dropped collection")
            try expect.equal(try await driver.count(in: posts), 1, "other collection untouched")
        },
        .driver("schema.recreateAfterDropStartsFresh") { driver, expect in
            let users = try Fixture.users
            try await driver.write { tx in try tx.prepare(CollectionSchema(name: users, idKind: .int, uniqueConstraints: [UniqueConstraint(["email"])], indexes: [IndexDefinition(["age"])])) }
            try await driver.seed([Record(id: 1, fields: ["email": "a"]), Record(id: 2, fields: ["email": "b"])], into: users)
            try await driver.write { tx in _ = try tx.dropCollection(users) }
            try await driver.seed([Record(id: "x", fields: ["email": "a"]), Record(id: "y", fields: ["email": "a"])], into: users)
            try expect.equal(try await driver.read { tx in try tx.schema(of: users) }, CollectionSchema(name: users, idKind: .string), "new schema: string ids, no constraints, no indexes")
            try expect.equal(try await driver.ids(in: users), ["x", "y"], "only the new records")
        },
        .driver("schema.dropMissingIsFalse") { driver, expect in
            let dropped = try await driver.write { tx in try tx.dropCollection(try Fixture.users) }
            try expect.equal(dropped, false, "drop of a collection that never existed")
        },
        .driver("schema.collectionNamesSortedWithReserved") { driver, expect in
            let names = try ["beta", "Zeta", "alpha", "a_b", "A"].map { try CollectionName($0) } + [try CollectionName(reserved: "_depot_meta"), try CollectionName(reserved: "_depot_0")]
            try await driver.write { tx in for (i, name) in names.enumerated() { try tx.insert(Record(id: .int(Int64(i))), into: name) } }
            let listed = try await driver.read { tx in try tx.collectionNames() }
            try expect.equal(listed.map(\.rawValue), ["A", "Zeta", "_depot_0", "_depot_meta", "a_b", "alpha", "beta"], "collection names in binary order")
            try expect.equal(listed.filter(\.isReserved).count, 2, "reserved collections listed")
        },
        .driver("schema.reservedCollectionWorksLikeAnother") { driver, expect in
            let meta = try CollectionName(reserved: "_depot_schema_versions")
            try await driver.write { tx in try tx.prepare(CollectionSchema(name: meta, idKind: .string)) }
            try await driver.write { tx in try tx.insert(Record(id: "version", fields: ["value": 3]), into: meta) }
            _ = try await driver.write { tx in try tx.save(Record(id: "version", fields: ["value": 4]), into: meta) }
            try expect.equal(try await driver.record("version", in: meta), Record(id: "version", fields: ["value": 4]), "reserved record")
        },
        .driver("schema.fieldsComeAndGo") { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: 1, fields: ["a": 1]), Record(id: 2, fields: ["a": 2, "b": "new"])], into: users)
            try await driver.write { tx in try tx.update(Record(id: 1, fields: ["c": true]), in: users) }
            try await driver.write { tx in try tx.insert(Record(id: 3, fields: ["d": 1.5, "a": "text"]), into: users) }
            try expect.equal(try await driver.records(in: users), [
                Record(id: 1, fields: ["c": true]), Record(id: 2, fields: ["a": 2, "b": "new"]), Record(id: 3, fields: ["d": 1.5, "a": "text"]),
            ], "records as the model gained and lost fields")
            try expect.equal(try await driver.ids(Query(filter: .isNull("a")), in: users), [1], "records without 'a'")
            try expect.equal(try await driver.ids(Query(filter: .equal("c", true)), in: users), [1], "records with c == true")
            try expect.equal(try await driver.ids(Query(sort: [SortKey("a", descending: true)]), in: users), [3, 2, 1], "sort over a field some records lack")
        },
        .driver("schema.unseenFieldQueries") { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: 1, fields: ["a": 1]), Record(id: 2, fields: ["a": 2])], into: users)
            try expect.equal(try await driver.ids(Query(filter: .equal("never", .null)), in: users), [1, 2], "never-written field is null everywhere")
            try expect.equal(try await driver.ids(Query(filter: .greater("never", 0)), in: users), [], "range on a never-written field")
            try expect.equal(try await driver.ids(Query(filter: .notIn("never", [1])), in: users), [1, 2], "notIn on a never-written field")
            try expect.equal(try await driver.ids(Query(sort: [SortKey("never", descending: true)]), in: users), [1, 2], "sort on a never-written field")
            try expect.equal(try await driver.count(.isNotNull("never"), in: users), 0, "count isNotNull on a never-written field")
        },
        .driver("schema.invalidSchemaRejected") { driver, expect in
            let users = try Fixture.users
            try await expect.throwsCode(.invalidName, "constraint named with SQL in it") {
                try await driver.write { tx in try tx.prepare(CollectionSchema(name: users, idKind: .int, uniqueConstraints: [UniqueConstraint(["a"], name: "x\"; DROP TABLE users; --")])) }
            }
            try await expect.throwsCode(.invalidName, "index over a field with a quote") {
                try await driver.write { tx in try tx.prepare(CollectionSchema(name: users, idKind: .int, indexes: [IndexDefinition(["a'b"], name: "ok_name")])) }
            }
            try await expect.throwsCode(.invalidName, "two constraints with one name") {
                try await driver.write { tx in try tx.prepare(CollectionSchema(name: users, idKind: .int, uniqueConstraints: [UniqueConstraint(["a"], name: "same")], indexes: [IndexDefinition(["b"], name: "same")])) }
            }
            try await expect.throwsCode(.invalidValue, "constraint without fields") {
                try await driver.write { tx in try tx.prepare(CollectionSchema(name: users, idKind: .int, uniqueConstraints: [UniqueConstraint([], name: "empty")])) }
            }
            try await expect.throwsCode(.invalidValue, "index naming one field twice") {
                try await driver.write { tx in try tx.prepare(CollectionSchema(name: users, idKind: .int, indexes: [IndexDefinition(["a", "a"])])) }
            }
            try expect.equal(try await driver.read { tx in try tx.collectionNames() }, [], "no collection created by a rejected schema")
        },
    ]
}
