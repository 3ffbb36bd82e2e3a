import DepotCore

/// Upsert keyed by a unique field (save-or-update by natural key) through a ``Store``
/// (Docs/Semantics.md, "Writes").
enum UpsertChecks {
    struct Account: Model, Equatable {
        static let collectionName = "accounts"
        static let uniqueConstraints = [UniqueConstraint(["email"]), UniqueConstraint(["region", "handle"], name: "handle_in_region")]
        var id: Int64?
        var email: String
        var region: String?
        var handle: String?
        var balance: Int
    }

    static let all: [ConformanceCheck] = [
        .driver("upsert.insertsThenUpdatesKeepingId", requires: [.uniqueConstraints, .assignedIDs]) { driver, expect in
            let store = try await Store(driver: driver)
            let accounts = try await store.repository(Account.self)
            let first = try await accounts.upsert(Account(id: nil, email: "a@x", balance: 1), uniqueOn: "email_unique")
            try expect.equal(first.id, 1, "id assigned on the first upsert")
            let second = try await accounts.upsert(Account(id: nil, email: "a@x", balance: 5), uniqueOn: "email_unique")
            try expect.equal(second, Account(id: 1, email: "a@x", balance: 5), "second upsert updates record 1")
            try expect.equal(try await accounts.all(), [Account(id: 1, email: "a@x", balance: 5)], "one account")
        },
        .driver("upsert.untypedByCompoundKey", requires: .uniqueConstraints) { driver, expect in
            let store = try await Store(driver: driver)
            _ = try await store.repository(Account.self)
            let accounts = try store.collection("accounts")
            let a = try await accounts.upsert(Record(id: 10, fields: ["email": "a", "region": "eu", "handle": "h", "balance": 1]), uniqueOn: "handle_in_region")
            let b = try await accounts.upsert(Record(id: 11, fields: ["email": "b", "region": "eu", "handle": "h", "balance": 2]), uniqueOn: "handle_in_region")
            let c = try await accounts.upsert(Record(id: 12, fields: ["email": "c", "region": "us", "handle": "h", "balance": 3]), uniqueOn: "handle_in_region")
            try expect.equal([a.outcome, b.outcome, c.outcome], [.inserted, .updated, .inserted], "outcomes")
            try expect.equal([a.id, b.id, c.id], [10, 10, 12], "ids stored")
            try expect.equal(try await accounts.query(), [
                Record(id: 10, fields: ["email": "b", "region": "eu", "handle": "h", "balance": 2]),
                Record(id: 12, fields: ["email": "c", "region": "us", "handle": "h", "balance": 3]),
            ], "records")
        },
        .driver("upsert.numericKeyMatchesAcrossKinds", requires: .uniqueConstraints) { driver, expect in
            let store = try await Store(driver: driver)
            let codes = try store.collection("codes")
            try await codes.prepare(idKind: .string, uniqueConstraints: [UniqueConstraint(["code"])])
            _ = try await codes.upsert(Record(id: "first", fields: ["code": 7, "v": "a"]), uniqueOn: "code_unique")
            let second = try await codes.upsert(Record(id: "second", fields: ["code": 7.0, "v": "b"]), uniqueOn: "code_unique")
            try expect.equal(second.id, "first", "7.0 finds the record keyed 7")
            try expect.equal(try await codes.query(), [Record(id: "first", fields: ["code": 7.0, "v": "b"])], "records")
        },
        .driver("upsert.nullKeyInserts", requires: .uniqueConstraints) { driver, expect in
            let store = try await Store(driver: driver)
            _ = try await store.repository(Account.self)
            let accounts = try store.collection("accounts")
            _ = try await accounts.upsert(Record(id: 1, fields: ["email": "a", "region": "eu"]), uniqueOn: "handle_in_region")
            let second = try await accounts.upsert(Record(id: 2, fields: ["email": "b", "region": "eu"]), uniqueOn: "handle_in_region")
            try expect.equal(second.outcome, .inserted, "a key with a null part matches nothing")
            try expect.equal(try await accounts.count(), 2, "records")
        },
        .driver("upsert.unknownConstraintNotFound", requires: .uniqueConstraints) { driver, expect in
            let store = try await Store(driver: driver)
            let accounts = try await store.repository(Account.self)
            try await expect.throwsCode(.notFound, "upsert on a constraint the model lacks") {
                try await accounts.upsert(Account(id: 1, email: "a", balance: 0), uniqueOn: "nope")
            }
        },
        .driver("upsert.conflictOnOtherConstraintFails", requires: .uniqueConstraints) { driver, expect in
            let store = try await Store(driver: driver)
            let accounts = try await store.repository(Account.self)
            try await accounts.save(Account(id: 1, email: "a", region: "eu", handle: "x", balance: 0))
            try await accounts.save(Account(id: 2, email: "b", region: "eu", handle: "y", balance: 0))
            let error = try await expect.error(.uniqueViolation, "upsert by email onto a taken handle") {
                try await accounts.upsert(Account(id: 9, email: "b", region: "eu", handle: "x", balance: 1), uniqueOn: "email_unique")
            }
            try expect.equal(error.constraint, "handle_in_region", "constraint named")
            try expect.equal(try await accounts.find(id: 2)?.handle, "y", "record 2 unchanged")
        },
    ]
}
