import DepotCore
import Foundation

/// Projections and partial updates (Docs/Semantics.md, "Projections" and "Partial
/// updates"), through a store over the driver as an app uses them.
enum PartialChecks {
    static let people: [Record] = [
        Record(id: 1, fields: ["name": "Ada", "age": 36, "admin": true, "tags": ["x", "y"], "photo": .bytes(Data([1, 2]))]),
        Record(id: 2, fields: ["name": "Bob", "age": 2.5, "city": "Oslo"]),
        Record(id: 3, fields: ["name": "Cy", "nested": ["k": [1, 2]]]),
        Record(id: 4, fields: ["age": 40]),
    ]

    static func seeded(_ driver: any StorageDriver) async throws -> (Store, Collection) {
        let items = try Fixture.items
        try await driver.seed(people, into: items)
        let store = try await Store(driver: driver)
        return (store, store.collection(items))
    }

    /// The records as the store has them, in id order.
    static func stored(_ collection: Collection) async throws -> [Record] { try await collection.query() }

    static let projections: [ConformanceCheck] = [
        .driver("projection.onlyNamedFields") { driver, expect in
            let (_, items) = try await seeded(driver)
            let rows = try await items.query(selecting: ["name", "age"])
            try expect.sameRecords(rows, people.map { Record(id: $0.id, fields: $0.fields.filter { ["name", "age"].contains($0.key) }) }, "name and age of everyone")
        },
        .driver("projection.keepsKinds") { driver, expect in
            let (_, items) = try await seeded(driver)
            let rows = try await items.query(Query(filter: .equal("id", 1)), selecting: ["admin", "tags", "photo", "age"])
            try expect.sameRecords(rows, [Record(id: 1, fields: ["admin": true, "tags": ["x", "y"], "photo": .bytes(Data([1, 2])), "age": 36])], "bool, array, bytes and int read back as written")
            let nested = try await items.query(Query(filter: .equal("id", 3)), selecting: ["nested"])
            try expect.sameRecords(nested, [Record(id: 3, fields: ["nested": ["k": [1, 2]]])], "an object with an array inside")
        },
        .driver("projection.unknownAndEmptySelections") { driver, expect in
            let (_, items) = try await seeded(driver)
            try expect.sameRecords(try await items.query(selecting: []), people.map { Record(id: $0.id) }, "no fields: ids only")
            try expect.sameRecords(try await items.query(selecting: ["nothing", "id"]), people.map { Record(id: $0.id) }, "a field no record has, and id")
        },
        .driver("projection.filterSortAndPageOnOtherFields") { driver, expect in
            let (_, items) = try await seeded(driver)
            let query = Query(filter: .isNotNull("age"), sort: [SortKey("age", descending: true)], offset: 1, limit: 2)
            let rows = try await items.query(query, selecting: ["name"])
            try expect.sameRecords(rows, [Record(id: 1, fields: ["name": "Ada"]), Record(id: 2, fields: ["name": "Bob"])], "names of the 2nd and 3rd oldest")
        },
        .driver("projection.invalidNamesAreRefused") { driver, expect in
            let (_, items) = try await seeded(driver)
            try await expect.throwsCode(.invalidQuery, "a field name with a space") { try await items.query(selecting: ["bad name"]) }
            try await expect.throwsCode(.invalidQuery, "a field name with a quote") { try await items.query(selecting: ["a\"b"]) }
        },
        .driver("projection.missingCollection") { driver, expect in
            let store = try await Store(driver: driver)
            try expect.equal(try await store.collection(try Fixture.tags).query(selecting: ["a"]).count, 0, "records of a collection that does not exist")
        },
        .driver("projection.insideWriteSeesOwnWrites") { driver, expect in
            let (store, items) = try await seeded(driver)
            let name = items.name
            let rows = try await store.write { tx -> [Record] in
                try tx.update(Record(id: 2, fields: ["name": "Bea", "age": 3]), in: name)
                return try tx.query(Query(filter: .equal("id", 2)), selecting: ["name"], in: name)
            }
            try expect.sameRecords(rows, [Record(id: 2, fields: ["name": "Bea"])], "the transaction's own update")
        },
    ]

    static let updates: [ConformanceCheck] = [
        .driver("partialUpdate.setKeepsOtherFields") { driver, expect in
            let (_, items) = try await seeded(driver)
            let changed = try await items.update(2, FieldChange(set: ["age": 3, "name": "Bea"]))
            try expect.equal(changed, true, "the record existed")
            try expect.sameRecord(try await items.get(2), Record(id: 2, fields: ["name": "Bea", "age": 3, "city": "Oslo"]), "record 2 after the update")
            try expect.sameRecords(try await stored(items).filter { $0.id != 2 }, people.filter { $0.id != 2 }, "the other records")
        },
        .driver("partialUpdate.removeAndSetNull") { driver, expect in
            let (_, items) = try await seeded(driver)
            try await items.update(1, FieldChange(set: ["admin": .null], remove: ["tags", "nothing"]))
            try expect.sameRecord(try await items.get(1), Record(id: 1, fields: ["name": "Ada", "age": 36, "photo": .bytes(Data([1, 2]))]), "admin set to null and tags removed")
            try expect.equal(try await items.count(.isNull("admin")), 4, "nobody is admin any more")
        },
        .driver("partialUpdate.newField") { driver, expect in
            let (_, items) = try await seeded(driver)
            try await items.update(3, FieldChange(set: ["email": "cy@example.com"]))
            try expect.sameRecord(try await items.get(3), Record(id: 3, fields: ["name": "Cy", "nested": ["k": [1, 2]], "email": "cy@example.com"]), "a field no record had")
            try expect.equal(try await items.count(.hasPrefix("email", "cy@")), 1, "a filter finds the new field")
        },
        .driver("partialUpdate.changesKinds") { driver, expect in
            let (_, items) = try await seeded(driver)
            try await items.update(1, FieldChange(set: ["admin": 1, "age": true, "tags": "x", "name": ["first": "Ada"]]))
            try await items.update(2, FieldChange(set: ["city": [1, 2], "age": .bytes(Data([7]))]))
            try expect.sameRecord(try await items.get(1), Record(id: 1, fields: ["admin": 1, "age": true, "tags": "x", "name": ["first": "Ada"], "photo": .bytes(Data([1, 2]))]), "record 1 with new kinds")
            try expect.sameRecord(try await items.get(2), Record(id: 2, fields: ["name": "Bob", "city": [1, 2], "age": .bytes(Data([7]))]), "record 2 with new kinds")
            try expect.equal(try await items.count(.equal("admin", true)), 0, "an int 1 is not true")
            try expect.equal(try await items.count(.equal("admin", 1)), 1, "the int 1")
            try expect.equal(try await items.count(.equal("age", true)), 1, "a bool where an int was")
            try expect.equal(try await items.count(.equal("tags", "x")), 1, "a string where an array was")
            try expect.equal(try await items.count(.equal("city", [1, 2])), 1, "an array where a string was")
            let sorted = try await items.query(Query(sort: [SortKey("age")])).map(\.id)
            try expect.equal(sorted, Fixture.intIDs(3, 1, 4, 2), "age sorts null < bool < number < bytes")
        },
        .driver("partialUpdate.keepsNumberForms") { driver, expect in
            // Doubles, -0.0 and ints of equal value stay what they were written as, whichever
            // fields a change touches (a driver that keeps number forms beside the values must
            // drop and add them field by field).
            let (_, items) = try await seeded(driver)
            try await items.update(2, FieldChange(set: ["score": 1.5, "zero": .double(-0.0), "whole": 2.0]))
            try expect.sameRecord(
                try await items.get(2), Record(id: 2, fields: ["name": "Bob", "age": 2.5, "city": "Oslo", "score": 1.5, "zero": .double(-0.0), "whole": 2.0]),
                "doubles set beside a double already there")
            try await items.update(2, FieldChange(set: ["age": 3, "whole": 2], remove: ["score"]))
            try expect.sameRecord(
                try await items.get(2), Record(id: 2, fields: ["name": "Bob", "age": 3, "city": "Oslo", "zero": .double(-0.0), "whole": 2]),
                "doubles turned into ints and one removed; -0.0 kept")
            try await items.update(matching: .all, FieldChange(set: ["zero": 0, "ratio": 0.25]))
            try expect.sameRecords(
                try await stored(items),
                people.map { person in
                    var record = person
                    if record.id == 2 { record.fields = ["name": "Bob", "age": 3, "city": "Oslo", "whole": 2] }
                    record.fields["zero"] = 0
                    record.fields["ratio"] = 0.25
                    return record
                },
                "an int zero and a double set on every record")
            try expect.equal(try await items.count(.equal("zero", 0)), 4, "the int 0 equals 0")
            try expect.equal(try await items.count(.greater("ratio", 0.2)), 4, "the double compares as a number")
        },
        .driver("partialUpdate.missingRecordAndCollection") { driver, expect in
            let (store, items) = try await seeded(driver)
            try expect.equal(try await items.update(99, FieldChange(set: ["a": 1])), false, "no record 99")
            try expect.equal(try await items.update("text", FieldChange(set: ["a": 1])), false, "an id of the other kind")
            try expect.equal(try await store.collection(try Fixture.tags).update(1, FieldChange(set: ["a": 1])), false, "a collection that does not exist")
            try expect.equal(try await store.collection(try Fixture.tags).update(matching: .all, FieldChange(set: ["a": 1])), 0, "no records to change")
            try expect.sameRecords(try await stored(items), people, "nothing changed")
        },
        .driver("partialUpdate.matchingFilter") { driver, expect in
            let (store, items) = try await seeded(driver)
            let changes = store.changes()
            let count = try await items.update(matching: .isNotNull("age"), FieldChange(set: ["seen": true], remove: ["city"]))
            try expect.equal(count, 3, "records with an age")
            var expected = people
            for i in expected.indices where !expected[i].fields["age", default: .null].isNull {
                expected[i].fields["seen"] = true
                expected[i].fields["city"] = nil
            }
            try expect.sameRecords(try await stored(items), expected, "records after the bulk change")
            var iterator = changes.makeAsyncIterator()
            let batch = await iterator.next()
            try expect.equal(batch?.changes.map(\.id), Fixture.intIDs(1, 2, 4), "one update event per changed record, in id order")
            try expect.equal(batch?.changes.allSatisfy { $0.kind == .updated }, true, "the events are updates")
        },
        .driver("partialUpdate.matchingNothing") { driver, expect in
            let (_, items) = try await seeded(driver)
            try expect.equal(try await items.update(matching: .equal("name", "Zed"), FieldChange(set: ["brandNew": 1])), 0, "nobody is called Zed")
            try expect.equal(try await items.count(.isNotNull("brandNew")), 0, "no record has the field")
            try expect.sameRecords(try await stored(items), people, "nothing changed")
        },
        .driver("partialUpdate.uniqueViolation") { driver, expect in
            let (_, items) = try await seeded(driver)
            try await items.prepare(idKind: .int, uniqueConstraints: [UniqueConstraint(["name"])])
            let error = try await expect.error(.uniqueViolation, "renaming Bob to Ada") { try await items.update(2, FieldChange(set: ["name": "Ada"])) }
            try expect.equal(error.constraint, "name_unique", "the constraint named")
            try await expect.throwsCode(.uniqueViolation, "everyone with an age renamed Max") {
                try await items.update(matching: .isNotNull("age"), FieldChange(set: ["name": "Max"]))
            }
            try expect.sameRecords(try await stored(items), people, "nothing changed after the refused updates")
            try expect.equal(try await items.update(4, FieldChange(set: ["name": "Dee"])), true, "a name nobody has")
        },
        .driver("partialUpdate.invalidChangesAreRefused") { driver, expect in
            let (_, items) = try await seeded(driver)
            try await expect.throwsCode(.invalidName, "changing the id") { try await items.update(1, FieldChange(set: ["id": 5])) }
            try await expect.throwsCode(.invalidName, "a field name with a space") { try await items.update(1, FieldChange(set: ["bad name": 5])) }
            try await expect.throwsCode(.invalidName, "removing a reserved name") { try await items.update(1, FieldChange(remove: ["_depot_x"])) }
            try await expect.throwsCode(.invalidValue, "NaN") { try await items.update(1, FieldChange(set: ["x": .double(.nan)])) }
            try await expect.throwsCode(.invalidValue, "set and removed at once") { try await items.update(1, FieldChange(set: ["x": 1], remove: ["x"])) }
            try expect.sameRecords(try await stored(items), people, "nothing changed")
        },
        .driver("partialUpdate.rollsBackWithTransaction") { driver, expect in
            let (store, items) = try await seeded(driver)
            let name = items.name
            do {
                try await store.write { tx in
                    try tx.update(1, in: name, FieldChange(set: ["age": 99]))
                    try tx.update(matching: .all, in: name, FieldChange(set: ["flag": true]))
                    throw Fixture.Rollback()
                }
                throw expect.failure("the transaction should have thrown")
            } catch is Fixture.Rollback {}
            try expect.sameRecords(try await stored(items), people, "nothing of the rolled back changes")
        },
        .driver("partialUpdate.seenInsideTransaction") { driver, expect in
            let (store, items) = try await seeded(driver)
            let name = items.name
            let seen = try await store.write { tx -> [Record] in
                try tx.update(matching: .equal("name", "Cy"), in: name, FieldChange(set: ["age": 7]))
                return try tx.query(Query(filter: .equal("age", 7)), in: name)
            }
            try expect.ids(seen, Fixture.intIDs(3), "the changed record found by its new value")
        },
        .driver("partialUpdate.emptyChange") { driver, expect in
            let (_, items) = try await seeded(driver)
            try expect.equal(try await items.update(1, FieldChange()), true, "an empty change of an existing record")
            try expect.equal(try await items.update(9, FieldChange()), false, "an empty change of no record")
            try expect.equal(try await items.update(matching: .isNotNull("name"), FieldChange()), 3, "an empty change counts the matches")
            try expect.sameRecords(try await stored(items), people, "nothing changed")
        },
        .driver("partialUpdate.observersSeeWholeRecords") { driver, expect in
            let (store, items) = try await seeded(driver)
            let observer = RecordingObserver()
            store.addWriteObserver(observer)
            try await items.update(2, FieldChange(set: ["age": 3], remove: ["city"]))
            try await items.update(matching: .equal("id", 3), FieldChange(set: ["x": 1]))
            let seen = observer.changes.withLock { $0 }
            try expect.equal(seen.map(\.id), Fixture.intIDs(2, 3), "the records the observer saw")
            try expect.equal(seen.first?.fields, ["name": "Bob", "age": 3], "record 2's fields after the change, whole")
            try expect.equal(seen.last?.fields, ["name": "Cy", "nested": ["k": [1, 2]], "x": 1], "record 3's fields after the change, whole")
        },
        .driver("byExample.updateAndDelete") { driver, expect in
            let store = try await Store(driver: driver)
            let repository = try await store.repository(ExamplePerson.self)
            try await repository.save([
                ExamplePerson(id: 1, name: "Ada", city: "Oslo", age: 36), ExamplePerson(id: 2, name: "Bob", city: "Oslo", age: 20),
                ExamplePerson(id: 3, name: "Cy", city: "Rome", age: 36),
            ])
            let updated = try await repository.update(matching: ExamplePerson(id: 0, name: nil, city: "Oslo", age: nil), FieldChange(set: ["city": "Bergen"]))
            try expect.equal(updated, 2, "people in Oslo moved")
            try expect.equal(try await repository.find(matching: ExamplePerson(id: 0, name: nil, city: "Bergen", age: nil)).map(\.id), [1, 2], "people now in Bergen")
            let deleted = try await repository.delete(matching: ExamplePerson(id: 0, name: nil, city: "Bergen", age: 36))
            try expect.equal(deleted, 1, "only Ada is 36 and in Bergen")
            try expect.equal(try await repository.all().map(\.id), [2, 3], "who is left")
        },
    ]

    static let all: [ConformanceCheck] = projections + updates
}

/// A model for the by-example checks: optional fields are left out of the example.
struct ExamplePerson: Model, Equatable {
    static let collectionName = "people"
    var id: Int
    var name: String?
    var city: String?
    var age: Int?
}

/// A write observer that keeps every change it is given, with fields.
final class RecordingObserver: StoreWriteObserver, Sendable {
    let changes = Locked<[RecordChange]>([])
    func wantsFields(of collection: CollectionName, in transaction: StoreWriteTransaction) throws -> Bool { true }
    func record(_ change: RecordChange, in transaction: StoreWriteTransaction) throws {
        changes.withLock { $0.append(change) }
    }
}
