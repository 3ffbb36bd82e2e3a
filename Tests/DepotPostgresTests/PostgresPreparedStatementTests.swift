import DepotCore
@testable import DepotPostgres
import Foundation
import Testing

/// The driver's prepared statements (Docs/PostgresDriver.md, "Prepared statements"): a
/// catalog change, made by this driver or another one (as another process would), never
/// runs a statement prepared for the table's old shape with a wrong result or an error, and
/// a connection keeps a bounded number of them.
@Suite struct PostgresPreparedStatementTests {
    /// Another driver adds a column: `SELECT *` prepared before it would change its result
    /// type (SQLSTATE 0A000); the read runs again with the statement prepared anew.
    @Test func anotherDriversNewColumnReachesPreparedReads() async throws {
        let settings = try PostgresTestServer.settings(for: "prepared-column-\(UUID().uuidString)")
        let a = try await PostgresDriver(settings: settings), b = try await PostgresDriver(settings: settings)
        let items = try CollectionName("items")
        try await a.write { tx in try tx.insert(Record(id: 1, fields: ["n": 1]), into: items) }
        // Prepared on a's connections: a point read, a query, a read-modify-write.
        #expect(try await a.read { tx in try tx.get(1, from: items) } == Record(id: 1, fields: ["n": 1]))
        #expect(try await a.read { tx in try tx.query(Query(), in: items) } == [Record(id: 1, fields: ["n": 1])])
        try await a.write { tx in
            guard var record = try tx.get(1, from: items) else { throw DepotError(.notFound, "record 1") }
            record.fields["n"] = 2
            try tx.update(record, in: items)
        }
        try await b.write { tx in try tx.update(Record(id: 1, fields: ["n": 3, "extra": "x"]), in: items) }
        let expected = Record(id: 1, fields: ["n": 3, "extra": "x"])
        #expect(try await a.read { tx in try tx.get(1, from: items) } == expected)
        #expect(try await a.read { tx in try tx.query(Query(), in: items) } == [expected])
        // A read-modify-write whose update's column check fails (b added a column a's cache
        // does not list): the update runs again with the catalog read anew and clears it.
        try await b.write { tx in try tx.update(Record(id: 1, fields: ["n": 4, "extra": "y", "more": true]), in: items) }
        try await a.write { tx in
            guard var record = try tx.get(1, from: items) else { throw DepotError(.notFound, "record 1") }
            record.fields["n"] = 5
            record.fields["more"] = nil
            try tx.update(record, in: items)
        }
        #expect(try await b.read { tx in try tx.get(1, from: items) } == Record(id: 1, fields: ["n": 5, "extra": "y"]))
        try await a.close()
        try await b.close()
    }

    /// This driver adds a column inside a transaction that already ran `SELECT *` on the
    /// table: the statement is prepared again after the change, so the same transaction
    /// reads the new field.
    @Test func ownNewColumnInsideOneTransaction() async throws {
        let settings = try PostgresTestServer.settings(for: "prepared-own-\(UUID().uuidString)")
        let driver = try await PostgresDriver(settings: settings)
        let items = try CollectionName("items")
        try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["n": 1]), into: items) }
        let seen = try await driver.write { tx -> [Record?] in
            let before = try tx.get(1, from: items)
            try tx.insert(Record(id: 2, fields: ["n": 2, "added": "a"]), into: items)
            return [before, try tx.get(1, from: items), try tx.get(2, from: items)]
        }
        #expect(seen == [Record(id: 1, fields: ["n": 1]), Record(id: 1, fields: ["n": 1]), Record(id: 2, fields: ["n": 2, "added": "a"])])
        // A rolled-back column: statements prepared inside that transaction are not reused.
        do {
            try await driver.write { tx in
                try tx.insert(Record(id: 3, fields: ["gone": 1]), into: items)
                _ = try tx.query(Query(), in: items)
                throw DepotError(.invalidValue, "roll back")
            }
            Issue.record("the closure's error did not reach the caller")
        } catch let error as DepotError {
            #expect(error.code == .invalidValue && error.message == "roll back", "the closure's own error: \(error)")
        }
        #expect(try await driver.read { tx in try tx.query(Query(), in: items).map(\.id) } == [1, 2])
        try await driver.close()
    }

    /// Another driver drops the collection and creates it again with string ids: a
    /// statement prepared for the integer table never answers for the new one.
    @Test func collectionCreatedAgainWithOtherIDKind() async throws {
        let settings = try PostgresTestServer.settings(for: "prepared-recreate-\(UUID().uuidString)")
        let a = try await PostgresDriver(settings: settings), b = try await PostgresDriver(settings: settings)
        let items = try CollectionName("items")
        try await a.write { tx in try tx.insert(Record(id: 1, fields: ["n": 1]), into: items) }
        #expect(try await a.read { tx in try tx.query(Query(), in: items).map(\.id) } == [1])
        try await b.write { tx in _ = try tx.dropCollection(items) }
        try await b.write { tx in try tx.insert(Record(id: "x", fields: ["s": "new"]), into: items) }
        #expect(try await a.read { tx in try tx.query(Query(), in: items) } == [Record(id: "x", fields: ["s": "new"])])
        #expect(try await a.read { tx in try tx.get("x", from: items) } == Record(id: "x", fields: ["s": "new"]))
        try await a.close()
        try await b.close()
    }

    /// A connection keeps at most ``PGSession/statementLimit`` prepared statements, and
    /// answers correctly after evicting some.
    @Test func preparedStatementsAreBounded() async throws {
        let settings = try PostgresTestServer.settings(for: "prepared-bound-\(UUID().uuidString)")
        var one = settings
        one.poolSize = 2
        let driver = try await PostgresDriver(settings: one)
        let items = try CollectionName("items")
        try await driver.write { tx in
            for i in 1...20 { try tx.insert(Record(id: .int(Int64(i)), fields: ["n": .int(Int64(i))]), into: items) }
        }
        let limit = PGSession.statementLimit
        let counts = try await driver.write { tx -> [Int] in
            guard let tx = tx as? PostgresTransaction else { throw DepotError(.internal, "not a PostgreSQL transaction") }
            var counts: [Int] = []
            for shape in 1...(limit + 20) {
                // A different text each time: an OR of `shape` comparisons.
                let filter = Filter.or((1...shape).map { Filter.equal("n", .int(Int64($0))) })
                let found = try tx.count(filter, in: items)
                guard found == min(shape, 20) else { throw DepotError(.internal, "shape \(shape) counted \(found)") }
                counts.append(tx.session.preparedCount)
            }
            return counts
        }
        #expect(counts.max() == limit)
        #expect(counts.last == limit)
        try await driver.close()
    }
}

/// Identifiers in the statements' text (Docs/PostgresDriver.md, "Layout").
@Suite struct PostgresIdentifierTests {
    /// A name is put in double quotes as it is, and a quote inside it doubled, so that no
    /// name can end the identifier early.
    @Test func namesAreQuotedWithInnerQuotesDoubled() {
        #expect(PostgresSQL.quote("users") == "\"users\"")
        #expect(PostgresSQL.quote("Order") == "\"Order\"")
        #expect(PostgresSQL.quote("a\"b") == "\"a\"\"b\"")
        #expect(PostgresSQL.quote("\"; DROP TABLE x; --") == "\"\"\"; DROP TABLE x; --\"")
        #expect(PostgresSQL.quote("é\"") == "\"é\"\"\"")
    }
}
