import DepotCore
import DepotMemory
import Foundation

/// Seeded random sequences of writes and queries, run on the driver under test and on a
/// fresh ``MemoryDriver`` (the reference), compared after every step: each operation's
/// result (records, outcomes, error codes) and then the whole collection.
enum DifferentialChecks {
    static let all: [ConformanceCheck] = [
        check("differential.intIdsSeed1", seed: 1, idKind: .int),
        check("differential.intIdsSeed2", seed: 2, idKind: .int),
        check("differential.intIdsSeed3", seed: 3, idKind: .int),
        check("differential.stringIdsSeed4", seed: 4, idKind: .string),
        check("differential.stringIdsSeed5", seed: 5, idKind: .string),
        check("differential.uniqueConstraintSeed6", seed: 6, idKind: .int, unique: true, requires: .uniqueConstraints),
        check("differential.uniqueConstraintSeed7", seed: 7, idKind: .string, unique: true, requires: .uniqueConstraints),
        check("differential.transactionsSeed8", seed: 8, idKind: .int, batches: true, requires: .transactions),
        check("differential.everythingSeed9", seed: 9, idKind: .int, unique: true, batches: true, requires: [.transactions, .uniqueConstraints, .assignedIDs]),
    ]

    static let steps = 300

    static func check(_ name: String, seed: UInt64, idKind: IDKind, unique: Bool = false, batches: Bool = false, requires: DriverCapabilities = []) -> ConformanceCheck {
        .driver(name, requires: requires) { driver, expect in
            let reference = MemoryDriver()
            defer { Task { try? await reference.close() } }
            let items = try Fixture.items
            let schema = CollectionSchema(
                name: items, idKind: idKind,
                uniqueConstraints: unique ? [UniqueConstraint(["u"], name: "u_unique"), UniqueConstraint(["f", "g"], name: "f_g_unique")] : [])
            for target in [driver, reference as any StorageDriver] { try await target.write { tx in try tx.prepare(schema) } }
            var generator = OperationGenerator(seed: seed, idKind: idKind, unique: unique, batches: batches,
                                               assignedIDs: idKind == .int && driver.capabilities.contains(.assignedIDs))
            for step in 0..<steps {
                let operation = generator.next()
                let actual = await operation.apply(to: driver, in: items)
                let expected = await operation.apply(to: reference, in: items)
                if actual != expected {
                    throw expect.failure("seed \(seed), step \(step): \(operation)\n  driver: \(actual)\n  memory: \(expected)")
                }
                let state = try await driver.records(in: items)
                let referenceState = try await reference.records(in: items)
                if state != referenceState {
                    throw expect.failure("seed \(seed), after step \(step) (\(operation)): collection differs\n  driver: \(state)\n  memory: \(referenceState)")
                }
            }
        }
    }
}

/// What an operation gave: records, or a short text (an outcome or an error code).
enum DifferentialOutcome: Equatable, CustomStringConvertible {
    case records([Record])
    case text(String)

    var description: String {
        switch self {
        case .records(let records): "[" + records.map(\.description).joined(separator: ", ") + "]"
        case .text(let text): text
        }
    }
}

/// One random step of a differential check.
indirect enum DifferentialOperation: Sendable, CustomStringConvertible {
    case insert(Record)
    case update(Record)
    case save(Record)
    case delete(RecordID)
    case deleteMatching(Filter)
    case assign([String: FieldValue])
    case query(Query, streamed: Bool)
    case count(Filter)
    case get(RecordID)
    case batch([DifferentialOperation], commit: Bool)

    var description: String {
        switch self {
        case .insert(let r): "insert \(r)"
        case .update(let r): "update \(r)"
        case .save(let r): "save \(r)"
        case .delete(let id): "delete \(id)"
        case .deleteMatching(let f): "delete matching \(f)"
        case .assign(let fields): "insert assigning an id \(FieldValue.object(fields))"
        case .query(let q, let streamed): (streamed ? "stream " : "query ") + "\(q)"
        case .count(let f): "count \(f)"
        case .get(let id): "get \(id)"
        case .batch(let ops, let commit): "transaction (\(commit ? "commit" : "then throw")) [" + ops.map(\.description).joined(separator: "; ") + "]"
        }
    }

    func apply(to driver: any StorageDriver, in collection: CollectionName) async -> DifferentialOutcome {
        do {
            switch self {
            case .query(let query, true):
                return .records(try await driver.streamed(query, from: collection))
            case .query, .count, .get:
                return try await driver.read { tx in try self.read(tx, collection) }
            case .batch(let operations, let commit):
                let results = try await driver.write { tx -> [DifferentialOutcome] in
                    let results = try operations.map { try $0.write(tx, collection) }
                    if !commit { throw Fixture.Rollback() }
                    return results
                }
                return .text(results.map(\.description).joined(separator: "; "))
            default:
                return try await driver.write { tx in try self.write(tx, collection) }
            }
        } catch is Fixture.Rollback {
            return .text("rolled back")
        } catch let error as DepotError {
            return .text("error \(error.code)" + (error.constraint.map { " on \($0)" } ?? ""))
        } catch {
            return .text("error \(error)")
        }
    }

    func read(_ tx: any ReadTransaction, _ collection: CollectionName) throws -> DifferentialOutcome {
        switch self {
        case .query(let query, _): return .records(try tx.query(query, in: collection))
        case .count(let filter): return .text("count \(try tx.count(filter, in: collection)), exists \(try tx.exists(filter, in: collection))")
        case .get(let id): return .records(try tx.get(id, from: collection).map { [$0] } ?? [])
        default: return .text("not a read")
        }
    }

    func write(_ tx: any WriteTransaction, _ collection: CollectionName) throws -> DifferentialOutcome {
        switch self {
        case .insert(let record): try tx.insert(record, into: collection); return .text("inserted")
        case .update(let record): try tx.update(record, in: collection); return .text("updated")
        case .save(let record): return .text("saved: \(try tx.save(record, into: collection).rawValue)")
        case .delete(let id): return .text("deleted: \(try tx.delete(id, from: collection))")
        case .deleteMatching(let filter): return .text("deleted \(try tx.delete(matching: filter, from: collection))")
        case .assign(let fields): return .text("assigned \(try tx.insert(fields: fields, into: collection))")
        case .query, .count, .get: return try read(tx, collection)
        case .batch: return .text("nested batch")
        }
    }
}

/// Makes random operations over a small domain of mixed-kind values, so that collisions,
/// ties, nulls and cross-kind comparisons happen often. Deterministic for a seed.
struct OperationGenerator {
    var random: SplitMix64
    let idKind: IDKind
    let unique: Bool
    let batches: Bool
    let assignedIDs: Bool

    init(seed: UInt64, idKind: IDKind, unique: Bool, batches: Bool, assignedIDs: Bool) {
        random = SplitMix64(seed: seed)
        self.idKind = idKind
        self.unique = unique
        self.batches = batches
        self.assignedIDs = assignedIDs
    }

    static let values: [FieldValue] = [
        .null, true, false, 0, 1, 1.0, -1, 2.5, -0.0, .int(9_007_199_254_740_992), .int(9_007_199_254_740_993), .double(9_007_199_254_740_992.0),
        .int(.max), .int(.min), "", "a", "A", "ab", "a_b", "%", "1", "\u{E9}", "e\u{301}", .bytes(Data([0])), .bytes(Data([1, 2])),
        [1], [1, 2], ["a": 1], [:], [],
    ]
    static let uniqueValues: [FieldValue] = [.null, 1, 1.0, 2, -0.0, 0, "a", "A", true]
    static let intIDs: [Int64] = Array(1...24) + [0, -1, Int64.max, Int64.min]
    static let stringIDs = ["a", "b", "B", "aa", "a b", "\u{E9}", "e\u{301}", "1", "10", "9", "_", "%", "z", "Z", "😀", "\u{FFFD}"]
    static let fields = ["f", "g", "u", "id", "missing"]
    static let needles = ["", "a", "A", "%", "_", "1", "b", "e"]

    mutating func int(_ bound: Int) -> Int { Int(random.next() % UInt64(bound)) }
    mutating func chance(_ percent: Int) -> Bool { int(100) < percent }
    mutating func pick<T>(_ items: [T]) -> T { items[int(items.count)] }

    mutating func id() -> RecordID {
        idKind == .int ? .int(pick(Self.intIDs)) : .string(pick(Self.stringIDs))
    }

    mutating func fieldsForRecord() -> [String: FieldValue] {
        var fields: [String: FieldValue] = [:]
        if chance(80) { fields["f"] = pick(Self.values) }
        if chance(60) { fields["g"] = pick(Self.values) }
        if chance(50) { fields["u"] = pick(unique ? Self.uniqueValues : Self.values) }
        if chance(10) { fields["h"] = [pick(Self.values), ["n": pick(Self.values)]] }
        return fields.filter { !$0.value.isNull }
    }

    mutating func record() -> Record { Record(id: id(), fields: fieldsForRecord()) }

    mutating func filter(depth: Int = 0) -> Filter {
        let field = pick(Self.fields)
        switch int(depth < 2 ? 16 : 13) {
        case 0: return .equal(field, pick(Self.values))
        case 1: return .notEqual(field, pick(Self.values))
        case 2: return .less(field, pick(Self.values))
        case 3: return .lessOrEqual(field, pick(Self.values))
        case 4: return .greater(field, pick(Self.values))
        case 5: return .greaterOrEqual(field, pick(Self.values))
        case 6: return .isIn(field, (0..<int(4)).map { _ in pick(Self.values) })
        case 7: return .notIn(field, (0..<int(4)).map { _ in pick(Self.values) })
        case 8: return .isNull(field)
        case 9: return .isNotNull(field)
        case 10: return .hasPrefix(field, pick(Self.needles))
        case 11: return .contains(field, pick(Self.needles))
        case 12: return .equal("id", id().fieldValue)
        case 13: return .and((0..<(1 + int(3))).map { _ in filter(depth: depth + 1) })
        case 14: return .or((0..<(1 + int(3))).map { _ in filter(depth: depth + 1) })
        default: return .not(filter(depth: depth + 1))
        }
    }

    mutating func query() -> Query {
        let sort = (0..<int(3)).map { _ in SortKey(pick(["f", "g", "u", "h", "id"]), descending: chance(50)) }
        return Query(filter: chance(25) ? .all : filter(), sort: sort, offset: chance(70) ? 0 : int(6), limit: chance(60) ? nil : int(9))
    }

    mutating func write() -> DifferentialOperation {
        switch int(assignedIDs ? 100 : 92) {
        case 0..<28: return .insert(record())
        case 28..<48: return .update(record())
        case 48..<72: return .save(record())
        case 72..<86: return .delete(id())
        case 86..<92: return .deleteMatching(filter())
        default: return .assign(fieldsForRecord())
        }
    }

    mutating func next() -> DifferentialOperation {
        switch int(batches ? 100 : 88) {
        case 0..<50: return write()
        case 50..<70: return .query(query(), streamed: chance(20))
        case 70..<80: return .count(chance(20) ? .all : filter())
        case 80..<88: return .get(id())
        default: return .batch((0..<(2 + int(3))).map { _ in chance(80) ? write() : .query(query(), streamed: false) }, commit: chance(50))
        }
    }
}
