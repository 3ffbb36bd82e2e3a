import DepotCore
import Foundation

/// Every error code a driver can raise, and closed drivers
/// (Docs/Semantics.md, "Errors" and "Closed drivers").
enum ErrorChecks {
    static let all: [ConformanceCheck] = [
        .driver("errors.alreadyExistsNamesRecord") { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: 3, fields: ["a": 1])], into: users)
            let error = try await expect.error(.alreadyExists, "duplicate insert") {
                try await driver.write { tx in try tx.insert(Record(id: 3), into: users) }
            }
            try expect.that(!error.message.isEmpty, "the error has a message")
        },
        .driver("errors.notFoundOnUpdate") { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: "a")], into: users)
            let error = try await expect.error(.notFound, "update of a missing id") {
                try await driver.write { tx in try tx.update(Record(id: "b", fields: ["x": 1]), in: users) }
            }
            try expect.that(!error.message.isEmpty, "the error has a message")
        },
        .driver("errors.invalidQueryForBadPaging") { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: 1)], into: users)
            try await expect.throwsCode(.invalidQuery, "negative limit") { try await driver.ids(Query(limit: -1), in: users) }
            try await expect.throwsCode(.invalidQuery, "negative offset") { try await driver.ids(Query(offset: -1), in: users) }
        },
        .driver("errors.invalidQueryForNaNOperand") { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: 1, fields: ["n": 1])], into: users)
            try await expect.throwsCode(.invalidQuery, "filter with NaN") { try await driver.ids(Query(filter: .less("n", .double(.nan))), in: users) }
            try await expect.throwsCode(.invalidQuery, "count with NaN inside an array operand") { try await driver.count(.isIn("n", [[.double(.nan)]]), in: users) }
            try await expect.throwsCode(.invalidQuery, "delete matching NaN") {
                try await driver.write { tx in try tx.delete(matching: .equal("n", .double(.nan)), from: users) }
            }
            try expect.equal(try await driver.count(in: users), 1, "nothing deleted")
        },
        .driver("errors.invalidQueryInEveryEntryPoint") { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: 1, fields: ["n": 1])], into: users)
            let bad: Filter = .equal("bad field", 1)
            try await expect.throwsCode(.invalidQuery, "explain") { try await driver.read { tx in try tx.explain(Query(filter: bad), in: users) } }
            try await expect.throwsCode(.invalidQuery, "first") { try await driver.read { tx in try tx.first(Query(filter: bad), in: users) } }
            try await expect.throwsCode(.invalidQuery, "exists") { try await driver.read { tx in try tx.exists(bad, in: users) } }
            try await expect.throwsCode(.invalidQuery, "delete matching") { try await driver.write { tx in try tx.delete(matching: bad, from: users) } }
            try await expect.throwsCode(.invalidQuery, "query inside a write") { try await driver.write { tx in try tx.query(Query(filter: bad), in: users) } }
        },
        .driver("errors.invalidValueForWrongIdKind") { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: "s")], into: users)
            try await expect.throwsCode(.invalidValue, "update with an int id in a string-id collection") {
                try await driver.write { tx in try tx.update(Record(id: 1), in: users) }
            }
        },
        .driver("errors.uniqueViolationNamesConstraint", requires: .uniqueConstraints) { driver, expect in
            let users = try Fixture.users
            try await driver.write { tx in try tx.prepare(CollectionSchema(name: users, idKind: .int, uniqueConstraints: [UniqueConstraint(["email"], name: "users_email")])) }
            try await driver.seed([Record(id: 1, fields: ["email": "a@x"])], into: users)
            let error = try await expect.error(.uniqueViolation, "duplicate email") {
                try await driver.write { tx in try tx.insert(Record(id: 2, fields: ["email": "a@x"]), into: users) }
            }
            try expect.equal(error.constraint, "users_email", "constraint named in the error")
            try expect.that(!error.message.contains("a@x"), "the message does not show the record's values: \(error.message)")
        },
        .driver("errors.schemaMismatch") { driver, expect in
            let users = try Fixture.users
            try await driver.write { tx in try tx.prepare(CollectionSchema(name: users, idKind: .string)) }
            try await expect.throwsCode(.schemaMismatch, "prepare with int ids") {
                try await driver.write { tx in try tx.prepare(CollectionSchema(name: users, idKind: .int)) }
            }
        },
        .driver("errors.closedDriverRefusesWork") { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: 1)], into: users)
            try await driver.close()
            try await expect.throwsCode(.closed, "read after close") { try await driver.read { tx in try tx.count(.all, in: users) } }
            try await expect.throwsCode(.closed, "write after close") { try await driver.write { tx in try tx.insert(Record(id: 2), into: users) } }
            try await expect.throwsCode(.closed, "stream after close") { try await driver.streamed(from: users) }
            try await expect.throwsCode(.closed, "integrity check after close") { try await driver.integrityCheck() }
        },
        .driver("errors.closeTwiceIsHarmless") { driver, expect in
            try await driver.close()
            try await driver.close()
            try await expect.throwsCode(.closed, "read after two closes") { try await driver.read { tx in try tx.collectionNames() } }
        },
        .driver("errors.integrityCheckOfSoundStore") { driver, expect in
            let users = try Fixture.users, posts = try Fixture.posts
            try expect.equal(try await driver.integrityCheck(), [], "problems in a new store")
            try await driver.seed((1...50).map { Record(id: .int(Int64($0)), fields: ["n": .int(Int64($0))]) }, into: users)
            try await driver.seed([Record(id: "p", fields: ["b": .bytes(Data([1, 2, 3]))])], into: posts)
            _ = try await driver.write { tx in try tx.delete(matching: .greater("n", 25), from: users) }
            _ = try? await driver.write { tx in try tx.insert(Record(id: 1), into: users) }
            try expect.equal(try await driver.integrityCheck(), [], "problems after writes and a failed write")
        },
        .driver("errors.explainNamesBackend") { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: 1, fields: ["n": 1])], into: users)
            let plan = try await driver.read { tx in try tx.explain(Query(filter: .equal("n", 1), sort: [SortKey("n")], limit: 1), in: users) }
            // A driver that keeps the default explain says the shared evaluator did it all.
            if plan.backend != QueryPlan.evaluatorBackend {
                try expect.equal(plan.backend, driver.backendName, "backend named by the plan")
            }
            try expect.that(!plan.description.isEmpty, "the plan describes itself")
        },
        .driver("errors.storeUsableAfterEveryError") { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: 1, fields: ["n": 1])], into: users)
            _ = try? await driver.write { tx in try tx.insert(Record(id: 1), into: users) }
            _ = try? await driver.write { tx in try tx.update(Record(id: 9), in: users) }
            _ = try? await driver.write { tx in try tx.insert(Record(id: "s"), into: users) }
            _ = try? await driver.write { tx in try tx.prepare(CollectionSchema(name: users, idKind: .string)) }
            _ = try? await driver.read { tx in try tx.query(Query(limit: -5), in: users) }
            try await driver.write { tx in try tx.insert(Record(id: 2, fields: ["n": 2]), into: users) }
            try expect.equal(try await driver.records(in: users), [Record(id: 1, fields: ["n": 1]), Record(id: 2, fields: ["n": 2])], "records after a series of errors")
        },
        .driver("errors.decodingMismatchNamesRecord") { driver, expect in
            let store = try await Store(driver: driver)
            try await store.collection("people").save(Record(id: "p1", fields: ["city": 12, "age": "old"]))
            let people = try await store.repository(CodecChecks.Person.self)
            let error = try await expect.error(.decoding, "a stored record whose 'city' is a number") { try await people.find(id: "p1") }
            try expect.equal(error.id, "p1", "record id named by the error")
            try expect.equal(error.collection, "people", "collection named by the error")
        },
        .driver("errors.unsupportedWriteInReadTransaction") { driver, expect in
            let store = try await Store(driver: driver)
            try await expect.throwsCode(.unsupported, "a repository write inside a read transaction") {
                try await store.read { tx in try tx.repository(CodecChecks.Person.self).insert(CodecChecks.Person(id: "x", city: nil, age: nil)) }
            }
            try expect.equal(try await store.collection("people").count(), 0, "nothing written")
        },
        .driver("errors.transactionUsedAfterItsClosure") { driver, expect in
            let store = try await Store(driver: driver)
            let escaped = EscapedTransaction()
            try await store.write { tx in escaped.set(tx) }
            try await expect.throwsCode(.closed, "a store transaction used after its closure returned") {
                try escaped.use { tx in try tx.insert(Record(id: 1), into: try Fixture.items) }
            }
        },
    ]
}

/// Holds a store transaction past its closure, to check it refuses further use.
final class EscapedTransaction: @unchecked Sendable {
    // @unchecked: set once inside the write closure, used after `write` returned; the lock
    // orders the two. The transaction is only touched to check that it refuses work.
    private let lock = NSLock()
    private var transaction: StoreWriteTransaction?

    func set(_ tx: StoreWriteTransaction) { lock.withLock { transaction = tx } }

    func use(_ body: (StoreWriteTransaction) throws -> Void) throws {
        guard let tx = lock.withLock({ transaction }) else { return }
        try body(tx)
    }
}
