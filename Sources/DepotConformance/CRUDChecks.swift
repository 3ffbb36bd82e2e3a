import DepotCore

/// Insert, update, save, delete: what each does and reports.
enum CRUDChecks {
    static let all: [ConformanceCheck] = [
        .driver("crud.insertThenGet") { driver, expect in
            let users = try Fixture.users
            try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["name": "Ada", "age": 36]), into: users) }
            let got = try await driver.read { tx in try tx.get(1, from: users) }
            try expect.equal(got, Record(id: 1, fields: ["name": "Ada", "age": 36]), "record read back")
        },
        .driver("crud.insertExistingIdFails") { driver, expect in
            let users = try Fixture.users
            try await driver.write { tx in try tx.insert(Record(id: "a", fields: ["n": 1]), into: users) }
            try await expect.throwsCode(.alreadyExists, "second insert of id 'a'") {
                try await driver.write { tx in try tx.insert(Record(id: "a", fields: ["n": 2]), into: users) }
            }
            let got = try await driver.read { tx in try tx.get("a", from: users) }
            try expect.equal(got?.fields["n"], .int(1), "first record unchanged")
        },
    ]
}
