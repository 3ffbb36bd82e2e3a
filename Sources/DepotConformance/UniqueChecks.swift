import DepotCore
import Foundation

/// Unique constraints over one or more fields (Docs/Semantics.md, "Unique constraints").
enum UniqueChecks {
    static func users(_ constraints: [UniqueConstraint], idKind: IDKind = .int) throws -> CollectionSchema {
        CollectionSchema(name: try Fixture.users, idKind: idKind, uniqueConstraints: constraints)
    }

    /// A check on a `users` collection prepared with `constraints`, for drivers with unique
    /// constraints and the capabilities in `also`.
    static func unique(
        _ name: String, _ constraints: [UniqueConstraint], also: DriverCapabilities = [],
        _ body: @escaping @Sendable (any StorageDriver, CollectionName, Expect) async throws -> Void
    ) -> ConformanceCheck {
        .driver("unique." + name, requires: DriverCapabilities.uniqueConstraints.union(also)) { driver, expect in
            let schema = try users(constraints)
            try await driver.write { tx in try tx.prepare(schema) }
            try await body(driver, schema.name, expect)
        }
    }

    static let email = UniqueConstraint(["email"], name: "users_email")
    static let fullName = UniqueConstraint(["first", "last"], name: "users_full_name")

    static let all: [ConformanceCheck] = [
        unique("insertDuplicateRejected", [email]) { driver, users, expect in
            try await driver.seed([Record(id: 1, fields: ["email": "a@x"])], into: users)
            let error = try await expect.error(.uniqueViolation, "insert of a duplicate email") {
                try await driver.write { tx in try tx.insert(Record(id: 2, fields: ["email": "a@x"]), into: users) }
            }
            try expect.equal(error.constraint, "users_email", "constraint named by the error")
            try expect.equal(try await driver.ids(in: users), [1], "records")
        },
        unique("updateIntoDuplicateRejected", [email]) { driver, users, expect in
            try await driver.seed([Record(id: 1, fields: ["email": "a"]), Record(id: 2, fields: ["email": "b"])], into: users)
            let error = try await expect.error(.uniqueViolation, "update of 2 to 1's email") {
                try await driver.write { tx in try tx.update(Record(id: 2, fields: ["email": "a"]), in: users) }
            }
            try expect.equal(error.constraint, "users_email", "constraint named by the error")
            try expect.equal(try await driver.record(2, in: users)?.fields["email"], .string("b"), "record 2 unchanged")
        },
        unique("saveIntoDuplicateRejected", [email]) { driver, users, expect in
            try await driver.seed([Record(id: 1, fields: ["email": "a"])], into: users)
            try await expect.throwsCode(.uniqueViolation, "save of a new record with a taken email") {
                try await driver.write { tx in try tx.save(Record(id: 2, fields: ["email": "a"]), into: users) }
            }
            let outcome = try await driver.write { tx in try tx.save(Record(id: 1, fields: ["email": "a", "n": 1]), into: users) }
            try expect.equal(outcome, .updated, "save of the holder with its own email")
        },
        unique("assignedIdInsertChecked", [email], also: .assignedIDs) { driver, users, expect in
            _ = try await driver.write { tx in try tx.insert(fields: ["email": "a"], into: users) }
            try await expect.throwsCode(.uniqueViolation, "assigned-id insert of a taken email") {
                try await driver.write { tx in try tx.insert(fields: ["email": "a"], into: users) }
            }
            try expect.equal(try await driver.count(in: users), 1, "records")
        },
        unique("recordKeepsItsOwnValue", [email]) { driver, users, expect in
            try await driver.seed([Record(id: 1, fields: ["email": "a", "n": 1])], into: users)
            try await driver.write { tx in try tx.update(Record(id: 1, fields: ["email": "a", "n": 2]), in: users) }
            try expect.equal(try await driver.record(1, in: users), Record(id: 1, fields: ["email": "a", "n": 2]), "updated record")
        },
        unique("valueFreedByDelete", [email]) { driver, users, expect in
            try await driver.seed([Record(id: 1, fields: ["email": "a"])], into: users)
            _ = try await driver.write { tx in try tx.delete(1, from: users) }
            try await driver.write { tx in try tx.insert(Record(id: 2, fields: ["email": "a"]), into: users) }
            try expect.equal(try await driver.ids(Query(filter: .equal("email", "a")), in: users), [2], "new holder")
        },
        unique("valueFreedByUpdate", [email]) { driver, users, expect in
            try await driver.seed([Record(id: 1, fields: ["email": "a"])], into: users)
            try await driver.write { tx in try tx.update(Record(id: 1, fields: ["email": "b"]), in: users) }
            try await driver.write { tx in try tx.insert(Record(id: 2, fields: ["email": "a"]), into: users) }
            try await driver.write { tx in try tx.update(Record(id: 1, fields: ["name": "no email"]), in: users) }
            try await driver.write { tx in try tx.insert(Record(id: 3, fields: ["email": "b"]), into: users) }
            try expect.equal(try await driver.count(in: users), 3, "records")
        },
        unique("swapInsideTransaction", [email]) { driver, users, expect in
            try await driver.seed([Record(id: 1, fields: ["email": "a"]), Record(id: 2, fields: ["email": "b"])], into: users)
            try await driver.write { tx in
                try tx.update(Record(id: 1, fields: ["email": "tmp"]), in: users)
                try tx.update(Record(id: 2, fields: ["email": "a"]), in: users)
                try tx.update(Record(id: 1, fields: ["email": "b"]), in: users)
            }
            try expect.equal(try await driver.records(in: users), [Record(id: 1, fields: ["email": "b"]), Record(id: 2, fields: ["email": "a"])], "swapped")
        },
        unique("nullAndMissingNotBound", [email, fullName]) { driver, users, expect in
            try await driver.seed([
                Record(id: 1), Record(id: 2), Record(id: 3, fields: ["email": .null]),
                Record(id: 4, fields: ["first": "Ada"]), Record(id: 5, fields: ["first": "Ada"]), Record(id: 6, fields: ["last": "L", "first": .null]),
                Record(id: 7, fields: ["last": "L"]),
            ], into: users)
            try expect.equal(try await driver.count(in: users), 7, "records with null or missing constrained fields never collide")
        },
        unique("compoundAllowsPartialOverlap", [fullName]) { driver, users, expect in
            try await driver.seed([
                Record(id: 1, fields: ["first": "Ada", "last": "Lovelace"]), Record(id: 2, fields: ["first": "Ada", "last": "Byron"]),
                Record(id: 3, fields: ["first": "Bob", "last": "Lovelace"]),
            ], into: users)
            let error = try await expect.error(.uniqueViolation, "same first and last") {
                try await driver.write { tx in try tx.insert(Record(id: 4, fields: ["first": "Ada", "last": "Lovelace", "x": 1]), into: users) }
            }
            try expect.equal(error.constraint, "users_full_name", "constraint named")
            try await driver.write { tx in try tx.insert(Record(id: 5, fields: ["first": "Lovelace", "last": "Ada"]), into: users) }
            try expect.equal(try await driver.count(in: users), 4, "records")
        },
        unique("intAndDoubleCollide", [UniqueConstraint(["n"])]) { driver, users, expect in
            try await driver.seed([Record(id: 1, fields: ["n": 1]), Record(id: 2, fields: ["n": 0.0])], into: users)
            try await expect.throwsCode(.uniqueViolation, "1.0 after 1") {
                try await driver.write { tx in try tx.insert(Record(id: 3, fields: ["n": 1.0]), into: users) }
            }
            try await expect.throwsCode(.uniqueViolation, "0 after 0.0") {
                try await driver.write { tx in try tx.insert(Record(id: 4, fields: ["n": 0]), into: users) }
            }
            try await expect.throwsCode(.uniqueViolation, "-0.0 after 0.0") {
                try await driver.write { tx in try tx.insert(Record(id: 5, fields: ["n": -0.0]), into: users) }
            }
            try expect.equal(try await driver.ids(in: users), [1, 2], "records")
        },
        unique("largeIntsDoNotCollideWithNearbyDoubles", [UniqueConstraint(["n"])]) { driver, users, expect in
            try await driver.seed([
                Record(id: 1, fields: ["n": .int(9_007_199_254_740_993)]), Record(id: 2, fields: ["n": .double(9_007_199_254_740_992.0)]),
                Record(id: 3, fields: ["n": .int(.max)]), Record(id: 4, fields: ["n": .double(9.223372036854775808e18)]),
            ], into: users)
            try await expect.throwsCode(.uniqueViolation, "int 2^53 after double 2^53") {
                try await driver.write { tx in try tx.insert(Record(id: 5, fields: ["n": .int(9_007_199_254_740_992)]), into: users) }
            }
            try expect.equal(try await driver.count(in: users), 4, "records")
        },
        unique("kindsDoNotCollide", [UniqueConstraint(["v"])]) { driver, users, expect in
            try await driver.seed([
                Record(id: 1, fields: ["v": 1]), Record(id: 2, fields: ["v": true]), Record(id: 3, fields: ["v": "1"]),
                Record(id: 4, fields: ["v": .bytes(Data([1]))]), Record(id: 5, fields: ["v": [1]]), Record(id: 6, fields: ["v": "true"]),
                Record(id: 7, fields: ["v": 0]), Record(id: 8, fields: ["v": false]), Record(id: 9, fields: ["v": ""]),
            ], into: users)
            try expect.equal(try await driver.count(in: users), 9, "values of different kinds never collide")
        },
        unique("stringsCompareByBytes", [email]) { driver, users, expect in
            try await driver.seed([
                Record(id: 1, fields: ["email": "a@x"]), Record(id: 2, fields: ["email": "A@x"]), Record(id: 3, fields: ["email": "\u{E9}"]),
                Record(id: 4, fields: ["email": "e\u{301}"]), Record(id: 5, fields: ["email": "a@x "]),
            ], into: users)
            try expect.equal(try await driver.count(in: users), 5, "case, normalization and trailing space all distinct")
        },
        unique("violationRollsBackTransaction", [email], also: .transactions) { driver, users, expect in
            try await driver.seed([Record(id: 1, fields: ["email": "a"])], into: users)
            try await expect.throwsCode(.uniqueViolation, "second write of the transaction") {
                try await driver.write { tx in
                    try tx.insert(Record(id: 2, fields: ["email": "b"]), into: users)
                    try tx.insert(Record(id: 3, fields: ["email": "a"]), into: users)
                }
            }
            try expect.equal(try await driver.ids(in: users), [1], "nothing of the failed transaction")
        },
        unique("multipleConstraintsNameTheBrokenOne", [email, fullName]) { driver, users, expect in
            try await driver.seed([Record(id: 1, fields: ["email": "a", "first": "F", "last": "L"])], into: users)
            let byName = try await expect.error(.uniqueViolation, "same name, other email") {
                try await driver.write { tx in try tx.insert(Record(id: 2, fields: ["email": "b", "first": "F", "last": "L"]), into: users) }
            }
            try expect.equal(byName.constraint, "users_full_name", "constraint broken by the name")
            let byEmail = try await expect.error(.uniqueViolation, "same email, other name") {
                try await driver.write { tx in try tx.insert(Record(id: 3, fields: ["email": "a", "first": "G", "last": "L"]), into: users) }
            }
            try expect.equal(byEmail.constraint, "users_email", "constraint broken by the email")
        },
        .driver("unique.prepareOverViolatingDataFails", requires: .uniqueConstraints) { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: 1, fields: ["email": "a"]), Record(id: 2, fields: ["email": "a"]), Record(id: 3, fields: ["email": "b"])], into: users)
            let error = try await expect.error(.uniqueViolation, "adding a constraint existing records break") {
                try await driver.write { tx in try tx.prepare(try UniqueChecks.users([UniqueChecks.email])) }
            }
            try expect.equal(error.constraint, "users_email", "constraint named")
            try expect.equal(try await driver.read { tx in try tx.schema(of: users)?.uniqueConstraints }, [], "constraint not added")
            try await driver.write { tx in try tx.insert(Record(id: 4, fields: ["email": "b"]), into: users) }
            try expect.equal(try await driver.count(in: users), 4, "duplicates still allowed")
        },
        .driver("unique.prepareOverCleanDataEnforces", requires: .uniqueConstraints) { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: 1, fields: ["email": "a"]), Record(id: 2, fields: ["email": "b"]), Record(id: 3)], into: users)
            try await driver.write { tx in try tx.prepare(try UniqueChecks.users([UniqueChecks.email])) }
            try await expect.throwsCode(.uniqueViolation, "duplicate after adding the constraint") {
                try await driver.write { tx in try tx.insert(Record(id: 4, fields: ["email": "b"]), into: users) }
            }
        },
        unique("dropConstraintAllowsDuplicates", [email, fullName]) { driver, users, expect in
            try await driver.seed([Record(id: 1, fields: ["email": "a", "first": "F", "last": "L"])], into: users)
            try await driver.write { tx in try tx.prepare(try UniqueChecks.users([UniqueChecks.fullName])) }
            try await driver.write { tx in try tx.insert(Record(id: 2, fields: ["email": "a"]), into: users) }
            try await expect.throwsCode(.uniqueViolation, "the remaining constraint still holds") {
                try await driver.write { tx in try tx.insert(Record(id: 3, fields: ["first": "F", "last": "L"]), into: users) }
            }
            try expect.equal(try await driver.read { tx in try tx.schema(of: users)?.uniqueConstraints }, [UniqueChecks.fullName], "constraints listed")
        },
        unique("constraintsListedInSchema", [email, fullName]) { driver, users, expect in
            let schema = try await driver.read { tx in try tx.schema(of: users) }
            try expect.equal(schema, try UniqueChecks.users([UniqueChecks.email, UniqueChecks.fullName]), "schema")
        },
        unique("bytesAndNestedValues", [UniqueConstraint(["b"])]) { driver, users, expect in
            try await driver.seed([Record(id: 1, fields: ["b": .bytes(Data([0, 1]))]), Record(id: 2, fields: ["b": .bytes(Data([0, 1, 0]))]), Record(id: 3, fields: ["b": ["k": [1]]])], into: users)
            try await expect.throwsCode(.uniqueViolation, "same bytes") {
                try await driver.write { tx in try tx.insert(Record(id: 4, fields: ["b": .bytes(Data([0, 1]))]), into: users) }
            }
            try await expect.throwsCode(.uniqueViolation, "same object") {
                try await driver.write { tx in try tx.insert(Record(id: 5, fields: ["b": ["k": [1]]]), into: users) }
            }
        },
        .driver("unique.stringIdCollection", requires: .uniqueConstraints) { driver, expect in
            let schema = try users([email], idKind: .string)
            try await driver.write { tx in try tx.prepare(schema) }
            try await driver.seed([Record(id: "u1", fields: ["email": "a"])], into: schema.name)
            let error = try await expect.error(.uniqueViolation, "duplicate in a string-id collection") {
                try await driver.write { tx in try tx.save(Record(id: "u2", fields: ["email": "a"]), into: schema.name) }
            }
            try expect.equal(error.constraint, "users_email", "constraint named")
        },
        .driver("unique.existingIdComesFirst", requires: .uniqueConstraints) { driver, expect in
            // An insert whose id exists is `.alreadyExists`, even when its values also collide
            // with another record's under a unique constraint; for both kinds of id.
            let cases: [(IDKind, RecordID, RecordID, RecordID)] = [(.int, 1, 2, 3), (.string, "u1", "u2", "u3")]
            for (kind, first, second, third) in cases {
                let schema = CollectionSchema(name: try CollectionName("users_\(kind.rawValue)"), idKind: kind, uniqueConstraints: [email])
                try await driver.write { tx in try tx.prepare(schema) }
                try await driver.seed([Record(id: first, fields: ["email": "a"]), Record(id: second, fields: ["email": "b"])], into: schema.name)
                let error = try await expect.error(.alreadyExists, "insert of \(kind.rawValue) id \(first) with \(second)'s email") {
                    try await driver.write { tx in try tx.insert(Record(id: first, fields: ["email": "b"]), into: schema.name) }
                }
                try expect.equal(error.id, first, "the error names the existing record")
                try await expect.throwsCode(.uniqueViolation, "insert of a new \(kind.rawValue) id with a taken email") {
                    try await driver.write { tx in try tx.insert(Record(id: third, fields: ["email": "a"]), into: schema.name) }
                }
                try expect.equal(try await driver.count(in: schema.name), 2, "records of \(kind.rawValue) ids")
            }
        },
    ]
}
