import DepotCore

/// Versioned migrations through a ``Store`` on the driver under test
/// (Docs/Semantics.md, "Migrations").
enum MigrationChecks {
    static func seeded(_ driver: any StorageDriver) async throws -> Store {
        let store = try await Store(driver: driver)
        let users = try store.collection("users")
        try await users.prepare(idKind: .int)
        try await users.save([
            Record(id: 1, fields: ["name": "Ada", "email": "ADA@x"]),
            Record(id: 2, fields: ["name": "Bob", "email": "bob@x", "active": false]),
            Record(id: 3, fields: ["email": "bob@X"]),
        ])
        return store
    }

    static let all: [ConformanceCheck] = [
        .driver("migrations.addFieldWithDefault") { driver, expect in
            let store = try await seeded(driver)
            let reached = try await store.migrate([Migration(version: 1, [.addField("users", "active", default: true)])])
            try expect.equal(reached, 1, "version reached")
            let records = try await store.collection("users").query()
            try expect.equal(records.map { $0["active"] }, [true, false, true], "'active' filled only where missing")
            try expect.equal(try await store.schemaVersion(), 1, "recorded version")
        },
        .driver("migrations.renameAndRemoveField") { driver, expect in
            let store = try await seeded(driver)
            try await store.migrate([
                Migration(version: 1, [.renameField("users", from: "name", to: "fullName")]),
                Migration(version: 2, [.removeField("users", "email")]),
            ])
            try expect.equal(try await store.collection("users").query(), [
                Record(id: 1, fields: ["fullName": "Ada"]), Record(id: 2, fields: ["fullName": "Bob", "active": false]), Record(id: 3),
            ], "records after rename and remove")
            try expect.equal(try await store.schemaVersion(), 2, "recorded version")
        },
        .driver("migrations.transformClosure") { driver, expect in
            let store = try await seeded(driver)
            try await store.migrate([Migration(version: 1, [.transform("users") { record in
                record.fields["email"] = record["email"].stringValue.map { .string($0.lowercased()) } ?? .null
                record.fields["n"] = .int(Int64(record.fields.count))
            }])])
            let records = try await store.collection("users").query()
            try expect.equal(records.map { $0["email"] }, ["ada@x", "bob@x", "bob@x"], "lower-cased emails")
            try expect.equal(records.map { $0["n"] }, [2, 3, 1], "fields counted by the transform")
        },
        .driver("migrations.indexesAddedAndRemoved") { driver, expect in
            let store = try await seeded(driver)
            try await store.migrate([
                Migration(version: 1, [.addIndex("users", IndexDefinition(["name"])), .addIndex("users", IndexDefinition(["email", "name"], name: "by_email"))]),
                Migration(version: 2, [.removeIndex("users", name: "name_idx")]),
            ])
            try expect.equal(try await store.collection("users").schema()?.indexes, [IndexDefinition(["email", "name"], name: "by_email")], "indexes after the migrations")
            try expect.equal(try await store.collection("users").query(Query(filter: .equal("name", "Bob"))).map(\.id), [2], "query on a field indexed then unindexed")
        },
        .driver("migrations.addUniqueOverCleanData", requires: .uniqueConstraints) { driver, expect in
            let store = try await seeded(driver)
            try await store.migrate([Migration(version: 1, [.addUnique("users", UniqueConstraint(["email"]))])])
            let error = try await expect.error(.uniqueViolation, "duplicate after the migration") {
                try await store.collection("users").insert(Record(id: 4, fields: ["email": "ADA@x"]))
            }
            try expect.equal(error.constraint, "email_unique", "constraint named")
            try await store.migrate([Migration(version: 1, [.addUnique("users", UniqueConstraint(["email"]))]), Migration(version: 2, [.removeUnique("users", name: "email_unique")])])
            try await store.collection("users").insert(Record(id: 4, fields: ["email": "ADA@x"]))
            try expect.equal(try await store.collection("users").count(), 4, "duplicates allowed after removing the constraint")
        },
        .driver("migrations.failedStepRollsBackWholeMigration", requires: [.uniqueConstraints, .transactions]) { driver, expect in
            let store = try await seeded(driver)
            try await store.migrate([Migration(version: 1, [.addField("users", "active", default: true)])])
            let before = try await store.collection("users").query()
            // Lower-casing makes records 2 and 3 collide before the unique constraint is added.
            let migrations = [
                Migration(version: 1, [.addField("users", "active", default: true)]),
                Migration(version: 2, [
                    .renameField("users", from: "name", to: "fullName"),
                    .transform("users") { $0.fields["email"] = $0["email"].stringValue.map { .string($0.lowercased()) } ?? .null },
                    .addUnique("users", UniqueConstraint(["email"])),
                ]),
            ]
            try await expect.throwsCode(.uniqueViolation, "migration 2 over colliding emails") { try await store.migrate(migrations) }
            try expect.equal(try await store.schemaVersion(), 1, "version after the failed migration")
            try expect.equal(try await store.collection("users").query(), before, "records after the failed migration")
            try expect.equal(try await store.collection("users").schema()?.uniqueConstraints, [], "no constraint added")
        },
        .driver("migrations.newerStoreIsSchemaMismatch") { driver, expect in
            let store = try await seeded(driver)
            try await store.migrate([Migration(version: 1, []), Migration(version: 2, []), Migration(version: 3, [])])
            try await expect.throwsCode(.schemaMismatch, "opening a version-3 store with migrations up to 2") {
                try await store.migrate([Migration(version: 1, []), Migration(version: 2, [])])
            }
            try await expect.throwsCode(.schemaMismatch, "two migrations with one version") {
                try await store.migrate([Migration(version: 4, []), Migration(version: 4, [])])
            }
            try expect.equal(try await store.schemaVersion(), 3, "version unchanged")
        },
        .driver("migrations.rerunIsNoOp") { driver, expect in
            let store = try await seeded(driver)
            let migrations = [Migration(version: 1, [.transform("users") { record in
                record.fields["count"] = .int((record["count"].intValue ?? 0) + 1)
            }])]
            try await store.migrate(migrations)
            try await store.migrate(migrations)
            try expect.equal(try await store.collection("users").query().map { $0["count"] }, [1, 1, 1], "the transform ran once")
            try expect.equal(try await store.schemaVersion(), 1, "version")
        },
        .context("migrations.versionSurvivesReopen", requires: .persistence) { context, driver, expect in
            let store = try await seeded(driver)
            try await store.migrate([Migration(version: 1, [.addField("users", "active", default: true)]), Migration(version: 2, [])])
            try await store.close()
            let reopened = try await Store(driver: try await context.openDriver())
            try expect.equal(try await reopened.schemaVersion(), 2, "version after reopening")
            try await expect.throwsCode(.schemaMismatch, "an older program opening the migrated store") {
                try await reopened.migrate([Migration(version: 1, [])])
            }
            try expect.equal(try await reopened.collection("users").query().map { $0["active"] }, [true, false, true], "migrated data after reopening")
        },
        .driver("migrations.addFieldNeedsNoMigration") { driver, expect in
            let store = try await Store(driver: driver)
            let old = try await store.repository(OldUser.self)
            try await old.save(OldUser(id: 1, name: "Ada"))
            let new = try await store.repository(NewUser.self)
            try expect.equal(try await new.find(id: 1), NewUser(id: 1, name: "Ada", nickname: nil), "old record read by the grown model")
            try await new.save(NewUser(id: 2, name: "Bob", nickname: "B"))
            try expect.equal(try await old.find(id: 2), OldUser(id: 2, name: "Bob"), "new record read by the old model")
            try expect.equal(try await new.query().filter(Field("nickname") == "B").all().map(\.id), [2], "query on the new field")
        },
    ]

    struct OldUser: Model, Equatable { static let collectionName = "people"; var id: Int; var name: String }
    struct NewUser: Model, Equatable { static let collectionName = "people"; var id: Int; var name: String; var nickname: String? }
}
