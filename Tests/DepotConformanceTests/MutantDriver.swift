import DepotCore
import DepotMemory
import Foundation

/// One deliberate contract violation, each the kind of mistake a real backend makes.
enum Mutation: String, CaseIterable, Sendable {
    /// A JSON-ish encoding that turns `1.0` into `1`.
    case integralDoubleBecomesInt
    /// Results without sort keys come back in reverse id order.
    case reverseDefaultOrder
    /// `insert` of an existing id overwrites it instead of failing.
    case insertOverwrites
    /// Integer operands compared as doubles (loses precision past 2^53).
    case intOperandsAsDoubles
    /// `hasPrefix` ignores case (SQLite's LIKE).
    case caseInsensitivePrefix
    /// `!=` does not match missing fields (SQL three-valued logic).
    case notEqualSkipsMissing
    /// A throwing write closure still commits what it did.
    case noRollback
    /// Unique constraints are accepted but not enforced.
    case uniqueIgnored
    /// `count` ignores its filter.
    case countIgnoresFilter
    /// Streams yield records in reverse order.
    case streamReversed
    /// Assigned ids reuse the id of a deleted maximum.
    case assignedIdReused
    /// Offsets are ignored.
    case offsetIgnored
    /// Field names are lower-cased on write (`Name` and `name` collide).
    case fieldNamesFolded
    /// `close` does nothing.
    case closeIgnored
    /// Top-level string values lose a trailing NUL and everything after an embedded NUL (C strings).
    case stringsTruncatedAtNUL
}

/// A ``MemoryDriver`` with one ``Mutation``: the conformance library must notice it.
final class MutantDriver: StorageDriver {
    let inner = MemoryDriver()
    let mutation: Mutation

    init(_ mutation: Mutation) { self.mutation = mutation }

    var backendName: String { "mutant" }
    var capabilities: DriverCapabilities { inner.capabilities }

    func read<T: Sendable>(_ body: @escaping @Sendable (any ReadTransaction) throws -> T) async throws -> T {
        let mutation = self.mutation
        return try await inner.read { tx in try body(MutantTransaction(base: tx, writer: nil, mutation: mutation)) }
    }

    func write<T: Sendable>(_ body: @escaping @Sendable (any WriteTransaction) throws -> T) async throws -> T {
        let mutation = self.mutation
        if mutation == .noRollback {
            let outcome = try await inner.write { tx -> Result<T, DepotError> in
                do {
                    return .success(try body(MutantTransaction(base: tx, writer: tx, mutation: mutation)))
                } catch {
                    return .failure(DepotError.wrap(error))
                }
            }
            return try outcome.get()
        }
        return try await inner.write { tx in try body(MutantTransaction(base: tx, writer: tx, mutation: mutation)) }
    }

    func stream(_ query: Query, from collection: CollectionName) -> RecordStream {
        guard mutation == .streamReversed || mutation == .reverseDefaultOrder || mutation == .offsetIgnored || mutation == .intOperandsAsDoubles
            || mutation == .caseInsensitivePrefix || mutation == .notEqualSkipsMissing
        else { return inner.stream(query, from: collection) }
        let mutation = self.mutation
        let inner = self.inner
        return RecordStream { sink in
            let records = try await inner.read { tx in try MutantTransaction(base: tx, writer: nil, mutation: mutation).query(query, in: collection) }
            let ordered = mutation == .streamReversed ? Array(records.reversed()) : records
            // `send` blocks while the buffer is full: never on the cooperative pool.
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                DispatchQueue.global().async {
                    do {
                        for record in ordered { try sink.send(record) }
                        continuation.resume()
                    } catch {
                        continuation.resume(throwing: error)
                    }
                }
            }
        }
    }

    func integrityCheck() async throws -> [String] { try await inner.integrityCheck() }

    func close() async throws {
        if mutation != .closeIgnored { try await inner.close() }
    }
}

/// Applies the mutation around the memory driver's transaction.
final class MutantTransaction: WriteTransaction {
    let base: any ReadTransaction
    let writer: (any WriteTransaction)?
    let mutation: Mutation

    init(base: any ReadTransaction, writer: (any WriteTransaction)?, mutation: Mutation) {
        self.base = base
        self.writer = writer
        self.mutation = mutation
    }

    private var w: any WriteTransaction {
        get throws {
            guard let writer else { throw DepotError(.unsupported, "read-only") }
            return writer
        }
    }

    func mutate(_ record: Record) -> Record {
        var record = record
        switch mutation {
        case .integralDoubleBecomesInt:
            for (key, value) in record.fields {
                if case .double(let d) = value, d.rounded() == d, abs(d) < 1e15 { record.fields[key] = .int(Int64(d)) }
            }
        case .fieldNamesFolded:
            record.fields = Dictionary(record.fields.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { a, _ in a })
        case .stringsTruncatedAtNUL:
            for (key, value) in record.fields {
                if case .string(let s) = value, let nul = s.firstIndex(of: "\u{0}") { record.fields[key] = .string(String(s[..<nul])) }
            }
        default: break
        }
        return record
    }

    func mutate(_ filter: Filter) -> Filter {
        switch (mutation, filter) {
        case (.intOperandsAsDoubles, .equal(let f, .int(let i))): return .equal(f, .double(Double(i)))
        case (.intOperandsAsDoubles, .greater(let f, .int(let i))): return .greater(f, .double(Double(i)))
        case (.intOperandsAsDoubles, .less(let f, .int(let i))): return .less(f, .double(Double(i)))
        case (.caseInsensitivePrefix, .hasPrefix(let f, let p)): return .or([.hasPrefix(f, p.lowercased()), .hasPrefix(f, p.uppercased()), .hasPrefix(f, p)])
        case (.notEqualSkipsMissing, .notEqual(let f, let v)): return .and([.isNotNull(f), .notEqual(f, v)])
        case (_, .and(let fs)): return .and(fs.map(mutate))
        case (_, .or(let fs)): return .or(fs.map(mutate))
        case (_, .not(let inner)): return .not(mutate(inner))
        default: return filter
        }
    }

    func mutate(_ query: Query) -> Query {
        var query = query
        query.filter = mutate(query.filter)
        if mutation == .offsetIgnored { query.offset = 0 }
        return query
    }

    func collectionNames() throws -> [CollectionName] { try base.collectionNames() }
    func schema(of collection: CollectionName) throws -> CollectionSchema? { try base.schema(of: collection) }
    func get(_ id: RecordID, from collection: CollectionName) throws -> Record? { try base.get(id, from: collection) }

    func forEach(_ query: Query, in collection: CollectionName, _ body: (Record) throws -> Bool) throws {
        if mutation == .reverseDefaultOrder && query.sort.isEmpty {
            try query.validate()
            var all = try base.query(Query(filter: mutate(query.filter)), in: collection)
            all.reverse()
            for record in QueryEvaluator.page(all, offset: query.offset, limit: query.limit) where try !body(record) { break }
            return
        }
        try base.forEach(mutate(query), in: collection, body)
    }

    func count(_ filter: Filter, in collection: CollectionName) throws -> Int {
        if mutation == .countIgnoresFilter {
            try filter.validate()
            return try base.count(.all, in: collection)
        }
        return try base.count(mutate(filter), in: collection)
    }

    func explain(_ query: Query, in collection: CollectionName) throws -> QueryPlan {
        var plan = try base.explain(query, in: collection)
        plan.backend = "mutant"
        return plan
    }

    func prepare(_ schema: CollectionSchema) throws {
        var schema = schema
        if mutation == .uniqueIgnored { schema.uniqueConstraints = [] }
        try w.prepare(schema)
    }

    func dropCollection(_ collection: CollectionName) throws -> Bool { try w.dropCollection(collection) }

    func write(_ record: Record, as mode: RecordWriteMode, into collection: CollectionName) throws -> WriteOutcome {
        if mutation == .insertOverwrites, mode == .insert {
            _ = try w.save(mutate(record), into: collection)
            return .inserted
        }
        return try w.write(mutate(record), as: mode, into: collection)
    }

    func insert(fields: [String: FieldValue], into collection: CollectionName) throws -> RecordID {
        if mutation == .assignedIdReused {
            let top = try base.first(Query(sort: [SortKey("id", descending: true)]), in: collection)
            let next: Int64 = if case .int(let i)? = top?.id { i + 1 } else { 1 }
            try w.insert(Record(id: .int(next), fields: fields), into: collection)
            return .int(next)
        }
        return try w.insert(fields: mutate(Record(id: 0, fields: fields)).fields, into: collection)
    }

    func delete(_ id: RecordID, from collection: CollectionName) throws -> Bool { try w.delete(id, from: collection) }
    func deleteReturningIDs(matching filter: Filter, from collection: CollectionName) throws -> [RecordID] {
        try w.deleteReturningIDs(matching: mutate(filter), from: collection)
    }
}

/// The reference driver, named for the tests that contrast it with the mutants.
typealias MemoryReference = MemoryDriver
