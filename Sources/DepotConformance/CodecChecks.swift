import DepotCore
import Foundation

/// Codable models through a ``Store`` on the driver under test: every type of the mapping
/// table (Docs/TypeMapping.md) comes back `==`, and the stored record is exactly what the
/// codec wrote (Docs/Semantics.md, "Field values").
enum CodecChecks {
    enum Color: String, Codable, Sendable, Equatable { case red, green }
    enum Level: Int, Codable, Sendable, Equatable { case low = 1, high = 9 }

    struct Inner: Codable, Sendable, Equatable {
        var label: String
        var weights: [Double]
        var child: [String: Int]?
    }

    /// Every Swift type of the mapping table with its edge values.
    struct Everything: Model, Equatable {
        static let collectionName = "everything"
        var id: Int64
        var flag: Bool
        var int: Int
        var int8: Int8
        var int64Min: Int64
        var int64Max: Int64
        var uint32: UInt32
        var uint64: UInt64
        var negativeZero: Double
        var greatest: Double
        var tiniest: Double
        var infinity: Double
        var minusInfinity: Double
        var float: Float
        var nul: String
        var emoji: String
        var combining: String
        var jsonLike: String
        var empty: String
        var emptyData: Data
        var data: Data
        var date: Date
        var oldDate: Date
        var uuid: UUID
        var url: URL
        var decimal: Decimal
        var color: Color
        var level: Level
        var inner: Inner
        var list: [Int]
        var nested: [[String]]
        var holes: [Int?]
        var dictionary: [String: Double]
        var optionalValues: [String: String?]
        var tags: Set<String>
        var missing: Int?
        var present: String?
        var doubleOptional: Int??
        var schemaless: FieldValue
    }

    struct WithNaN: Model { static let collectionName = "nans"; var id: Int; var value: Double }
    struct Note: Model, Equatable { static let collectionName = "notes"; var id: Int64?; var text: String }
    struct Person: Model, Equatable { static let collectionName = "people"; var id: String; var city: String?; var age: Int? }

    /// Writes its fields in a different order for even and odd `n`, sometimes writes the id
    /// last, a nil as an explicit null, and one field twice: what a driver that places fields
    /// as they are encoded (``FieldSink``) must store exactly as the record path would.
    struct Written: Model, Equatable {
        static let collectionName = "written"
        var id: String
        var n: Int
        var s: String?
        var flag: Bool
        var tags: [String]
        var nested: [String: Int]?
        var d: Double
        enum CodingKeys: String, CodingKey { case id, n, s, flag, tags, nested, d }
        init(id: String, n: Int, s: String?, flag: Bool, tags: [String], nested: [String: Int]?, d: Double) {
            (self.id, self.n, self.s, self.flag, self.tags, self.nested, self.d) = (id, n, s, flag, tags, nested, d)
        }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            if n % 2 == 0 {
                try container.encode(d, forKey: .d)
                try container.encode(tags, forKey: .tags)
                try container.encodeIfPresent(nested, forKey: .nested)
                try container.encode(flag, forKey: .flag)
                try container.encode(s, forKey: .s)
                try container.encode(n, forKey: .n)
                try container.encode(id, forKey: .id)
            } else {
                try container.encode(id, forKey: .id)
                try container.encode(-1, forKey: .n)
                try container.encodeIfPresent(s, forKey: .s)
                try container.encode(flag, forKey: .flag)
                try container.encode(tags, forKey: .tags)
                try container.encode(nested, forKey: .nested)
                try container.encode(d, forKey: .d)
                try container.encode(n, forKey: .n)
            }
        }
    }

    /// ``Written`` with one more field: a model that gained a property.
    struct WrittenLater: Model, Equatable {
        static let collectionName = "written"
        var id: String
        var n: Int
        var flag: Bool
        var tags: [String]
        var d: Double
        var added: [Int]?
    }

    /// Reads its fields in a different order for even and odd ids, and reads one field
    /// twice, so a driver that remembers the order of requests must also cope when it changes.
    struct Shuffled: Model, Equatable {
        static let collectionName = "shuffled"
        var id: Int64
        var a: Int
        var b: String
        var c: Bool?
        enum CodingKeys: String, CodingKey { case id, a, b, c }
        init(id: Int64, a: Int, b: String, c: Bool?) { (self.id, self.a, self.b, self.c) = (id, a, b, c) }
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decode(Int64.self, forKey: .id)
            if id % 2 == 0 {
                c = try container.decodeIfPresent(Bool.self, forKey: .c)
                b = try container.decode(String.self, forKey: .b)
                a = try container.decode(Int.self, forKey: .a)
            } else {
                a = try container.decode(Int.self, forKey: .a)
                _ = try container.decode(Int.self, forKey: .a)
                b = try container.decode(String.self, forKey: .b)
                c = try container.decodeIfPresent(Bool.self, forKey: .c)
            }
        }
    }

    /// The fields a ``FieldSource`` offers, as a record.
    static func materialize(_ source: any FieldSource) throws -> Record {
        var fields: [String: FieldValue] = [:]
        for name in try source.fieldNames() { fields[name] = try source.value(forField: name) }
        return Record(id: source.recordID, fields: fields)
    }

    static func sample(id: Int64) -> Everything {
        Everything(
            id: id, flag: true, int: -42, int8: .min, int64Min: .min, int64Max: .max, uint32: .max, uint64: UInt64(Int64.max),
            negativeZero: -0.0, greatest: .greatestFiniteMagnitude, tiniest: .leastNonzeroMagnitude, infinity: .infinity, minusInfinity: -.infinity,
            float: 0.1, nul: "a\u{0}b", emoji: "👩‍👩‍👧‍👦🇫🇷", combining: "e\u{301}a\u{300}", jsonLike: "{}", empty: "",
            emptyData: Data(), data: Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }),
            date: Date(timeIntervalSinceReferenceDate: 786_000_000.000_123_4), oldDate: Date(timeIntervalSince1970: -1_234_567_890.5),
            uuid: UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)),
            url: URL(string: "https://example.com/a%20b/c?q=1&r=%C3%A9#frag") ?? URL(fileURLWithPath: "/"),
            decimal: Decimal(string: "12345678901234567890.123456789") ?? 0,
            color: .green, level: .high,
            inner: Inner(label: "in", weights: [0.5, -0.0, 1e300], child: ["x": 1]),
            list: [3, 1, 2], nested: [["a"], [], ["b", "c"]], holes: [1, nil, 3], dictionary: ["pi": .pi, "neg": -1],
            optionalValues: ["some": "v", "none": nil], tags: ["x", "y"], missing: nil, present: "here", doubleOptional: .some(.some(3)),
            schemaless: ["any": [1, "two", 3.0, .null, true]])
    }

    static let all: [ConformanceCheck] = [
        .driver("codec.everyMappedTypeRoundTrips") { driver, expect in
            let store = try await Store(driver: driver)
            let repository = try await store.repository(Everything.self)
            let model = sample(id: 1)
            try await repository.save(model)
            let found = try await repository.find(id: 1)
            try expect.that(found == model, "model read back equals the model saved")
            try expect.equal(found.map { $0.negativeZero.sign }, .minus, "-0.0 keeps its sign")
            try expect.equal(found.map { $0.date.timeIntervalSinceReferenceDate.bitPattern }, model.date.timeIntervalSinceReferenceDate.bitPattern, "date exact to the bit")
            let stored = try await driver.record(1, in: try Everything.collection())
            let (_, fields) = try RecordEncoder().encodeRecord(model)
            try expect.sameRecord(stored, Record(id: 1, fields: fields), "record stored by the driver")
        },
        .driver("codec.queriedAndStreamedModelsEqual") { driver, expect in
            let store = try await Store(driver: driver)
            let repository = try await store.repository(Everything.self)
            let models = (1...3).map { sample(id: Int64($0)) }
            try await repository.save(models)
            let all = try await repository.all()
            try expect.that(all == models, "all() gives the saved models in id order")
            var streamed: [Everything] = []
            for try await model in try repository.query().sort("id", descending: true).stream() { streamed.append(model) }
            try expect.that(streamed == models.reversed(), "stream() gives the saved models, id descending")
        },
        .driver("codec.optionalsAtTheTopLevel") { driver, expect in
            let store = try await Store(driver: driver)
            let repository = try await store.repository(Everything.self)
            var model = sample(id: 1)
            model.present = nil
            model.doubleOptional = .some(nil)
            try await repository.save(model)
            let found = try await repository.find(id: 1)
            try expect.that(found?.present == nil, "nil optional comes back nil")
            try expect.that(found.map { $0.doubleOptional == nil } ?? false, ".some(nil) at the top level comes back nil (null is absent)")
            let record = try await driver.record(1, in: try Everything.collection())
            try expect.that(record?.fields["present"] == nil || record?.fields["present"] == .null, "nil optional is not stored as a value")
            try expect.equal(try await repository.query().filter(Field("present").isNull).count(), 1, "isNull finds the nil optional")
        },
        .driver("codec.untypedRecordsRoundTrip") { driver, expect in
            let store = try await Store(driver: driver)
            let people = try store.collection("people")
            let record = Record(id: "ada", fields: [
                "flag": true, "one": 1, "oneDouble": 1.0, "braces": "{}", "object": ["k": ["n": .null]], "array": [[], [:], ""],
                "bytes": .bytes(Data([0, 255])), "negZero": -0.0, "big": .int(.max),
            ])
            try await people.save(record)
            try expect.equal(try await people.get("ada"), record, "untyped record read back")
            try expect.equal(try await people.query(), [record], "untyped record queried")
        },
        .driver("codec.fieldsReadInPlaceEqualRecords") { driver, expect in
            // ReadTransaction.forEachFields / withFields (what Repository decodes from) must
            // offer exactly what forEach / get return, in the same order.
            let people = try CollectionName("people")
            let records = [
                Record(id: 1, fields: ["flag": true, "n": 1, "d": 1.5, "s": "{}", "o": ["k": [1, .null]], "a": [[], [:]], "b": .bytes(Data([0, 255]))]),
                Record(id: 2, fields: ["n": 2, "other": "only here"]),
                Record(id: 3, fields: [:]),
                Record(id: 4, fields: ["flag": false, "n": .int(.min), "s": ""]),
            ]
            try await driver.write { tx in for record in records { try tx.save(record, into: people) } }
            for query in [Query(), Query(filter: Field("n") > 1, sort: [SortKey("n", descending: true)]), Query(offset: 1, limit: 2)] {
                let (viaRecords, viaFields) = try await driver.read { tx in
                    var viaFields: [Record] = []
                    try tx.forEachFields(query, in: people) { viaFields.append(try materialize($0)); return true }
                    return (try tx.query(query, in: people), viaFields)
                }
                try expect.sameRecords(viaFields, viaRecords, "forEachFields vs forEach for \(query)")
            }
            for record in records {
                let found = try await driver.read { tx in try tx.withFields(of: record.id, from: people) { try materialize($0) } }
                try expect.sameRecord(found, record, "withFields(of: \(record.id))")
                let absent = try await driver.read { tx in try tx.withFields(of: record.id, from: people) { try $0.value(forField: "absent") } }
                try expect.that(absent == .some(nil), "an absent field reads as nil in \(record.id)")
            }
            // Names asked with strings made apart from the stored keys (a model's literals):
            // short and long names (a long name is not stored inside its string), records of
            // up to 16 fields and wider ones, and absent names of both lengths.
            let wide = try CollectionName("wide")
            for count in [1, 15, 16, 17, 40] {
                var fields: [String: FieldValue] = [:]
                for i in 0..<count {
                    let name = i.isMultiple(of: 3) ? "a_field_name_longer_than_fifteen_bytes_\(i)" : "f\(i)"
                    fields[name] = i.isMultiple(of: 2) ? .int(Int64(i) * 7) : .string("value \(i)")
                }
                let record = Record(id: .int(Int64(count)), fields: fields)
                try await driver.write { tx in try tx.save(record, into: wide) }
                let asked = (0..<count).map { i in i.isMultiple(of: 3) ? "a_field_name_longer_than_fifteen_bytes_\(i)" : "f\(i)" }
                    + ["f\(count)", "a_field_name_longer_than_fifteen_bytes_\(count + 3)"]
                let answers = try await driver.read { tx in
                    try tx.withFields(of: record.id, from: wide) { source in try asked.map { try source.value(forField: $0) } }
                }
                try expect.that(answers?.count == asked.count, "withFields of the \(count)-field record")
                for (name, answer) in zip(asked, answers ?? []) {
                    try expect.that(answer == fields[name], "field \(name) of the \(count)-field record read by a name made apart: \(String(describing: answer))")
                }
            }
            let missing = try await driver.read { tx in try tx.withFields(of: 99, from: people) { _ in true } }
            try expect.that(missing == nil, "withFields of a missing id gives nil without calling the body")
            // A driver may reuse one source for its point reads; a read nested in another's
            // body must not change what the outer source offers, in a read or a write.
            for writable in [false, true] {
                let nest: @Sendable (any ReadTransaction) throws -> (Record?, Record?, Record?) = { tx in
                    var inner: Record?
                    var outerAfter: Record?
                    let outerBefore = try tx.withFields(of: 1, from: people) { outer -> Record in
                        let before = try materialize(outer)
                        inner = try tx.withFields(of: 2, from: people) { try materialize($0) }
                        outerAfter = try materialize(outer)
                        return before
                    }
                    return (outerBefore, inner, outerAfter)
                }
                let (before, inner, after) = writable ? try await driver.write { try nest($0) } : try await driver.read { try nest($0) }
                let kind = writable ? "write" : "read"
                try expect.sameRecord(before, records[0], "outer withFields in a \(kind)")
                try expect.sameRecord(inner, records[1], "withFields nested in another's body in a \(kind)")
                try expect.sameRecord(after, records[0], "the outer source after a nested withFields in a \(kind)")
            }
            let stopped = try await driver.read { tx in
                var seen = 0
                try tx.forEachFields(Query(), in: people) { _ in seen += 1; return seen < 2 }
                return seen
            }
            try expect.equal(stopped, 2, "forEachFields stops when the body returns false")
        },
        .driver("codec.modelWritesStoreWhatTheCodecEncodes") { driver, expect in
            // Repository writes go through WriteTransaction.write (fields handed to a
            // FieldSink as encoded); the stored record must be exactly encodeRecord's.
            let store = try await Store(driver: driver)
            let repository = try await store.repository(Written.self)
            let name = try Written.collection()
            func stored(_ id: String) async throws -> Record? { try await driver.read { tx in try tx.get(.string(id), from: name) } }
            func expected<M: Model>(_ model: M) throws -> Record {
                let (id, fields) = try RecordEncoder().encodeRecord(model)
                return Record(id: id ?? .int(0), fields: fields)
            }
            var models: [Written] = []
            for i in 0..<6 {
                let s: String? = i % 3 == 0 ? nil : "s\(i)"
                let nested: [String: Int]? = i % 4 == 0 ? nil : ["k": i]
                let tags = [String](repeating: "t", count: i % 3)
                models.append(Written(id: "w\(i)", n: i, s: s, flag: i % 2 == 0, tags: tags, nested: nested, d: Double(i) / 4))
            }
            for model in models {
                _ = try await repository.insert(model)
                try expect.sameRecord(try await stored(model.id), try expected(model), "inserted model \(model.id)")
                try expect.equal(try await repository.find(id: model.id), model, "model \(model.id) read back")
            }
            try await expect.throwsCode(.alreadyExists, "a second insert of w1") { try await repository.insert(models[1]) }
            try await expect.throwsCode(.notFound, "an update of a missing model") {
                try await repository.update(Written(id: "nobody", n: 1, s: nil, flag: true, tags: [], nested: nil, d: 0))
            }
            var changed = models[2]
            changed.s = nil
            changed.nested = nil
            changed.n = 7
            try await repository.update(changed)
            try expect.sameRecord(try await stored(changed.id), try expected(changed), "updated model, two fields now absent")
            try expect.equal(try await repository.save(models[2]), .updated, "save of an existing model")
            try expect.sameRecord(try await stored(models[2].id), try expected(models[2]), "saved back")
            let fresh = Written(id: "w9", n: 9, s: "x", flag: true, tags: ["a"], nested: ["z": 0], d: -0.5)
            try expect.equal(try await repository.save(fresh), .inserted, "save of a new model")
            try expect.sameRecord(try await stored(fresh.id), try expected(fresh), "saved new model")
            // The model gains a field: a driver with columns adds one.
            let later = try await store.repository(WrittenLater.self)
            let grown = WrittenLater(id: "w1", n: 1, flag: false, tags: [], d: 0.25, added: [1, 2])
            try await later.save(grown)
            try expect.sameRecord(try await stored("w1"), try expected(grown), "a model with a new field")
            try expect.equal(try await later.find(id: "w1"), grown, "the grown model read back")
            let again = WrittenLater(id: "w10", n: 10, flag: true, tags: ["b"], d: 1, added: nil)
            _ = try await later.insert(again)
            try expect.sameRecord(try await stored("w10"), try expected(again), "the new field left absent")
            try expect.equal(try await repository.count(), models.count + 2, "every model stored once")
        },
        .driver("codec.modelsDecodeWhateverOrderFieldsAreRead") { driver, expect in
            let store = try await Store(driver: driver)
            let repository = try await store.repository(Shuffled.self)
            let models = (1...6).map { Shuffled(id: Int64($0), a: $0 * 10, b: "b\($0)", c: $0 % 3 == 0 ? nil : $0 % 2 == 0) }
            try await repository.save(models)
            try expect.that(try await repository.all() == models, "all() with fields read in changing orders")
            for model in models { try expect.that(try await repository.find(id: model.id) == model, "find(id: \(model.id))") }
            let inside = try await store.read { tx in try tx.repository(Shuffled.self).all(Query(sort: [SortKey("a", descending: true)])) }
            try expect.that(inside == models.reversed(), "a transaction repository's all(), sorted")
        },
        .driver("codec.storeRejectsNaN") { driver, expect in
            let store = try await Store(driver: driver)
            let people = try store.collection("people")
            try await expect.throwsCode(.invalidValue, "a NaN field through the store") {
                try await people.save(Record(id: 1, fields: ["x": .double(.nan)]))
            }
            try await expect.throwsCode(.invalidValue, "a NaN nested in an array through the store") {
                try await people.insert(fields: ["x": [1, .double(.nan)]])
            }
            let repository = try await store.repository(WithNaN.self)
            try await expect.throwsCode(.invalidValue, "a model holding NaN") { try await repository.save(WithNaN(id: 1, value: .nan)) }
            try expect.equal(try await people.count(), 0, "nothing stored")
            try expect.equal(try await repository.count(), 0, "no model stored")
        },
        .driver("codec.storeRejectsInvalidFieldNames") { driver, expect in
            let store = try await Store(driver: driver)
            let people = try store.collection("people")
            for bad in ["a;b", "id", "_depot_x", "é", "a b", ""] {
                try await expect.throwsCode(.invalidName, "field \(bad.debugDescription) through the store") {
                    try await people.save(Record(id: 1, fields: [bad: 1]))
                }
            }
            try await expect.throwsCode(.invalidName, "a hostile collection name through the store") { try store.collection("x; DROP TABLE y") }
            try expect.equal(try await people.count(), 0, "nothing stored")
        },
        .driver("codec.storeDropsTopLevelNulls") { driver, expect in
            let store = try await Store(driver: driver)
            let people = try store.collection("people")
            try await people.save(Record(id: 1, fields: ["a": 1, "gone": .null, "inner": ["kept": .null]]))
            let stored = try await driver.record(1, in: try CollectionName("people"))
            try expect.equal(stored, Record(id: 1, fields: ["a": 1, "inner": ["kept": .null]]), "record as the driver stored it")
        },
        .driver("codec.assignedIdsForModels", requires: .assignedIDs) { driver, expect in
            let store = try await Store(driver: driver)
            let notes = try await store.repository(Note.self)
            let first = try await notes.insert(Note(id: nil, text: "a"))
            let second = try await notes.insert(Note(id: nil, text: "b"))
            try expect.equal(first.id, 1, "first assigned id")
            try expect.equal(second.id, 2, "second assigned id")
            try expect.equal(try await notes.find(id: 2), Note(id: 2, text: "b"), "found by its assigned id")
        },
        .driver("codec.queryByExample") { driver, expect in
            let store = try await Store(driver: driver)
            let people = try await store.repository(Person.self)
            try await people.save([Person(id: "a", city: "Oslo", age: 30), Person(id: "b", city: "Oslo", age: 40), Person(id: "c", city: "Rome", age: 30)])
            let found = try await people.find(matching: Person(id: "ignored", city: "Oslo", age: nil))
            try expect.equal(found.map(\.id), ["a", "b"], "people in Oslo")
            let both = try await people.find(matching: Person(id: "", city: "Oslo", age: 30))
            try expect.equal(both.map(\.id), ["a"], "people in Oslo aged 30")
        },
    ]
}
