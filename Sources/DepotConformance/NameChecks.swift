import DepotCore

/// Collection and field names: hostile ones rejected before any driver sees them, awkward
/// valid ones stored exactly and distinctly (Docs/Semantics.md,
/// "Stores and collections" and "Field values").
enum NameChecks {
    /// Collection names that must be rejected with `.invalidName`.
    static let hostileCollectionNames: [String] = [
        "", "users; DROP TABLE x", "a\"b", "a'b", "a`b", "a]b", "..", ".", "../x", "a/b", "a\\b", "/etc/passwd", "a\u{0}b", "\u{0}",
        String(repeating: "a", count: 64), String(repeating: "a", count: 10_000), "usérs", "用户", "😀", "1abc", "_users", "a b", " a", "a ",
        "a-b", "a.b", "a:b", "a*", "a%", "a?", "a\n", "tab\t", "_depot_meta", "_depot", "a;", "$x", "@x",
    ]

    /// Top-level field names that must be rejected with `.invalidName`.
    static let hostileFieldNames: [String] = [
        "", "id", "a b", "a;b", "a\"b", "a'b", "..", "a/b", "a.b", "a\u{0}b", "é", "naïve", "😀", "1a", "-a", "a-b",
        String(repeating: "f", count: 64), "_depot", "_depotx", "_depot_meta", "a\n", "a)", "a,b", "a=b", "`a`", "[a]",
    ]

    /// Valid collection names that engines or file systems treat specially.
    static let awkwardCollectionNames: [String] = [
        "Select", "select", "order", "table", "group", "where", "a_b", "A", "x", "sqlite_master", "sqlite_x", "pg_class", "con", "nul",
        "aux", "prn", "com1", "lpt1", "index", "key", "values", "Users", "users", "USERS", "a" + String(repeating: "b", count: 62),
    ]

    /// Valid field names that engines treat specially.
    static let awkwardFieldNames: [String] = [
        "select", "from", "where", "order", "group", "rowid", "oid", "_rowid_", "ROWID", "ID", "Id", "iD", "_", "__", "_id", "key", "value",
        "json", "data", "fields", "null", "true", "NULL", "Name", "name", "NAME", "_depo", "depot", "x" + String(repeating: "9", count: 62),
    ]

    static let all: [ConformanceCheck] = [
        .pure("names.hostileCollectionNamesRejected") { expect in
            for name in hostileCollectionNames {
                try expect.throwsCodeSync(.invalidName, "CollectionName(\(name.debugDescription.prefix(60)))") { try CollectionName(name) }
            }
        },
        .pure("names.hostileReservedNamesRejected") { expect in
            for name in ["users", "_depot_", "_depot_Meta", "_depot_a-b", "_depot_../x", "_depotx", "_depot_a\u{0}", "_depot_" + String(repeating: "a", count: 57), "_depot_é"] {
                try expect.throwsCodeSync(.invalidName, "CollectionName(reserved: \(name.debugDescription))") { try CollectionName(reserved: name) }
            }
            let longest = try CollectionName(reserved: "_depot_" + String(repeating: "a", count: 56))
            try expect.equal(longest.isReserved, true, "longest reserved name")
        },
        .pure("names.validatingInitAcceptsBothSpaces") { expect in
            try expect.equal(try CollectionName(validating: "users").rawValue, "users", "user name")
            try expect.equal(try CollectionName(validating: "_depot_outbox").isReserved, true, "reserved name")
            try expect.throwsCodeSync(.invalidName, "validating a hostile name") { try CollectionName(validating: "_depot_../../x") }
            try expect.throwsCodeSync(.invalidName, "validating a name with a slash") { try CollectionName(validating: "a/b") }
        },
        .pure("names.hostileFieldNamesRejected") { expect in
            for name in hostileFieldNames {
                try expect.throwsCodeSync(.invalidName, "FieldName.validate(\(name.debugDescription.prefix(60)))") { try FieldName.validate(name) }
                try expect.that(!FieldName.isValid(name), "FieldName.isValid(\(name.debugDescription.prefix(60))) is false")
            }
        },
        .pure("names.recordValidationRejectsHostileFields") { expect in
            try expect.throwsCodeSync(.invalidName, "record with field 'a;b'") { try Record(id: 1, fields: ["a;b": 1]).validate() }
            try expect.throwsCodeSync(.invalidName, "record with field 'id'") { try Record(id: 1, fields: ["id": 1]).validate() }
            try expect.throwsCodeSync(.invalidValue, "record with a NaN") { try Record(id: 1, fields: ["a": .double(.nan)]).validate() }
            try expect.throwsCodeSync(.invalidValue, "string id with NUL") { try Record(id: "a\u{0}b").validate() }
            try expect.throwsCodeSync(.invalidValue, "empty string id") { try Record(id: "").validate() }
            try expect.throwsCodeSync(.invalidValue, "string id of 513 bytes") { try Record(id: .string(String(repeating: "x", count: 513))).validate() }
            try Record(id: 1, fields: ["ok": ["nested key with spaces; and 'quotes'": 1]]).validate()
        },
        .pure("names.errorMessagesQuoteSafely") { expect in
            let hostile = "a\u{0}\u{1B}[31m" + String(repeating: "x", count: 5_000)
            do {
                _ = try CollectionName(hostile)
                throw expect.failure("a hostile name was accepted")
            } catch let error as DepotError {
                try expect.that(!error.message.unicodeScalars.contains { $0.value < 0x20 }, "message has no raw control characters: \(error.message.debugDescription)")
                try expect.that(error.message.count < 400, "message is short (\(error.message.count) characters)")
            }
        },
        .driver("names.awkwardCollectionNamesStoredDistinctly") { driver, expect in
            let names = try awkwardCollectionNames.map { try CollectionName($0) }
            try await driver.write { tx in
                for (i, name) in names.enumerated() { try tx.insert(Record(id: 1, fields: ["which": .string(name.rawValue), "i": .int(Int64(i))]), into: name) }
            }
            for name in names {
                let got = try await driver.record(1, in: name)
                try expect.equal(got?.fields["which"], .string(name.rawValue), "record in collection \(name)")
                try expect.equal(try await driver.count(in: name), 1, "records in \(name)")
            }
            let listed = try await driver.read { tx in try tx.collectionNames() }
            try expect.equal(listed.map(\.rawValue), awkwardCollectionNames.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }, "collection names listed")
            try await driver.write { tx in _ = try tx.dropCollection(try CollectionName("Users")) }
            try expect.equal(try await driver.count(in: try CollectionName("users")), 1, "'users' survives dropping 'Users'")
            try expect.equal(try await driver.count(in: try CollectionName("USERS")), 1, "'USERS' survives dropping 'Users'")
        },
        .driver("names.awkwardFieldNamesStoredDistinctly") { driver, expect in
            let items = try Fixture.items
            var fields: [String: FieldValue] = [:]
            for (i, name) in awkwardFieldNames.enumerated() { fields[name] = .int(Int64(i)) }
            try await driver.seed([Record(id: 1, fields: fields), Record(id: 2, fields: ["name": "lower", "Name": "Upper"])], into: items)
            try expect.sameRecord(try await driver.record(1, in: items), Record(id: 1, fields: fields), "record with awkward field names")
            for (i, name) in awkwardFieldNames.enumerated() {
                try expect.equal(try await driver.ids(Query(filter: .equal(name, .int(Int64(i)))), in: items), [1], "filter on field '\(name)'")
            }
            try expect.equal(try await driver.ids(Query(filter: .equal("Name", "Upper")), in: items), [2], "'Name' is not 'name'")
            try expect.equal(try await driver.ids(Query(filter: .equal("name", "Upper")), in: items), [], "'name' does not hold 'Name''s value")
            try expect.equal(try await driver.ids(Query(sort: [SortKey("ROWID", descending: true)]), in: items), [1, 2], "sort on a field named ROWID")
        },
        .driver("names.caseDistinctFieldsInOneRecord") { driver, expect in
            let items = try Fixture.items
            let record = Record(id: 1, fields: ["name": "a", "Name": "b", "NAME": 3, "nAmE": true])
            try await driver.seed([record], into: items)
            try expect.equal(try await driver.record(1, in: items), record, "four fields differing only in case")
            try await driver.write { tx in try tx.update(Record(id: 1, fields: ["Name": "only"]), in: items) }
            try expect.equal(try await driver.record(1, in: items), Record(id: 1, fields: ["Name": "only"]), "after keeping only 'Name'")
        },
        .driver("names.invalidFieldInQueryIsInvalidQuery") { driver, expect in
            let items = try Fixture.items
            try await driver.seed([Record(id: 1, fields: ["a": 1])], into: items)
            for bad in ["a;b", "a\"b", "x') OR 1=1 --", "", "_depot_x", "é"] {
                try await expect.throwsCode(.invalidQuery, "filter on \(bad.debugDescription)") {
                    try await driver.ids(Query(filter: .equal(bad, 1)), in: items)
                }
                try await expect.throwsCode(.invalidQuery, "sort on \(bad.debugDescription)") {
                    try await driver.ids(Query(sort: [SortKey(bad)]), in: items)
                }
                try await expect.throwsCode(.invalidQuery, "count on \(bad.debugDescription)") {
                    try await driver.count(.isNull(bad), in: items)
                }
            }
            try expect.equal(try await driver.count(in: items), 1, "store unchanged")
        },
        .driver("names.longestNamesWork") { driver, expect in
            let name = try CollectionName("L" + String(repeating: "o", count: 61) + "g")
            let field = "f" + String(repeating: "_", count: 61) + "x"
            try await driver.write { tx in
                try tx.prepare(CollectionSchema(name: name, idKind: .int, uniqueConstraints: [UniqueConstraint([field], name: "u" + String(repeating: "1", count: 62))], indexes: [IndexDefinition([field], name: "i" + String(repeating: "2", count: 62))]))
                try tx.insert(Record(id: 1, fields: [field: "v"]), into: name)
            }
            try expect.equal(name.rawValue.utf8.count, 63, "collection name length")
            try expect.equal(try await driver.ids(Query(filter: .equal(field, "v")), in: name), [1], "query on a 63-byte field in a 63-byte collection")
            try expect.equal(try await driver.read { tx in try tx.schema(of: name)?.uniqueConstraints.first?.name.utf8.count }, 63, "63-byte constraint name kept")
        },
    ]
}
