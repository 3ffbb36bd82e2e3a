import DepotCore
@testable import DepotPostgres
import Foundation
import PostgresNIO
import Testing

/// Rows into records (``PostgresRowDecoder``, Docs/PostgresDriver.md, "Queries"): the first
/// row of a query is read by name, the others through the layout learned at the second, so
/// every check here reads several rows of differing shapes in one query and compares them
/// with what was written and with single-row reads.
@Suite struct PostgresRowDecoderTests {
    @Test func rowsOfDifferentShapesInOneQueryComeBackAsWritten() async throws {
        let settings = try PostgresTestServer.settings(for: "row-decoder-\(UUID().uuidString)")
        let driver = try await PostgresDriver(settings: settings)
        let items = try CollectionName("items")
        // Every kind of value, numbers in all three forms, fields missing in different
        // places, and a record that has none of the fields at all.
        let written: [Record] = [
            Record(id: 1, fields: ["a": 1, "b": "x", "c": .double(2.5)]),
            Record(id: 2, fields: ["a": 2, "b": "naïve – ✓", "c": .double(-0.0)]),
            Record(id: 3, fields: ["b": "no a", "c": 3]),
            Record(id: 4, fields: ["a": .double(4), "d": .bytes(Data([0, 0xff, 0x80])), "e": .array([1, "two", .null])]),
            Record(id: 5, fields: [:]),
            Record(id: 6, fields: ["a": 6, "b": "", "c": .bool(true), "e": .object(["k": .double(0.5)])]),
            Record(id: 7, fields: ["a": .int(Int64.max), "b": "12345678abcdefgh", "c": .int(Int64.min), "d": .bytes(Data())]),
        ]
        try await driver.write { tx in
            for record in written { try tx.insert(record, into: items) }
        }
        let queried = try await driver.read { tx in try tx.query(Query(sort: [SortKey("id")]), in: items) }
        #expect(queried == written)
        // The same rows read one at a time (the by-name path) agree.
        for record in written {
            #expect(try await driver.read { tx in try tx.get(record.id, from: items) } == record)
        }
        // A query whose rows all have every field, after the first: the template copies.
        let full = try await driver.read { tx in try tx.query(Query(filter: Field("a") >= 1, sort: [SortKey("id")]), in: items) }
        #expect(full.map(\.id) == [1, 2, 4, 6, 7])
        #expect(full == written.filter { [1, 2, 4, 6, 7].contains($0.id) })
    }

    @Test func aValueDepotDidNotWriteIsCorruptedInAQueryAndAPointRead() async throws {
        let settings = try PostgresTestServer.settings(for: "row-decoder-corrupt-\(UUID().uuidString)")
        let driver = try await PostgresDriver(settings: settings)
        let items = try CollectionName("items")
        try await driver.write { tx in
            for n in 1...3 { try tx.insert(Record(id: .int(Int64(n)), fields: ["s": .string("ok \(n)")]), into: items) }
        }
        // Record 3's string becomes bytes that are not UTF-8 (the string kind byte, then
        // an ASCII run longer than a word, then a lone continuation byte): the third row of
        // the query, so the layout path reads it.
        let table = "\(PostgresSQL.quote(settings.schema)).\(PostgresSQL.quote("items"))"
        try await driver.write { tx in
            let pg = try #require(tx as? PostgresTransaction)
            try pg.run(PostgresQuery(unsafeSQL: "UPDATE \(table) SET \"s\" = '\\x30616263646566676869806a'::bytea WHERE \"id\" = 3"))
        }
        let error = await #expect(throws: DepotError.self) {
            _ = try await driver.read { tx in try tx.query(Query(sort: [SortKey("id")]), in: items) }
        }
        #expect(error?.code == .corrupted)
        let single = await #expect(throws: DepotError.self) {
            _ = try await driver.read { tx in try tx.get(3, from: items) }
        }
        #expect(single?.code == .corrupted)
        #expect(try await driver.read { tx in try tx.get(2, from: items) } == Record(id: 2, fields: ["s": "ok 2"]))
    }

    @Test func stringValuesAreTakenOnlyWhenTheyAreUTF8() throws {
        func string(_ bytes: [UInt8]) throws -> FieldValue {
            try ([ValueKey.stringKind] + bytes).withUnsafeBytes { try ValueKey.decode($0, form: .int) }
        }
        func refused(_ bytes: [UInt8]) -> Bool {
            do {
                _ = try string(bytes)
                return false
            } catch let error as DepotError {
                return error.code == .corrupted
            } catch {
                return false
            }
        }
        // ASCII of every length around a word, and with a lone continuation byte in each
        // position of a word and of the tail.
        for length in 0...19 {
            let ascii = (0..<length).map { UInt8(0x61 + $0 % 26) }
            #expect(try string(ascii) == .string(String(decoding: ascii, as: UTF8.self)))
            for position in 0..<length {
                var broken = ascii
                broken[position] = 0x80
                #expect(refused(broken), "a lone continuation byte at \(position) of \(length)")
            }
        }
        #expect(try string(Array("naïve – ✓ 𝄞".utf8)) == .string("naïve – ✓ 𝄞"))
        // Overlong, surrogate, truncated: refused.
        #expect(refused([0xC0, 0xAF]))
        #expect(refused([0xED, 0xA0, 0x80]))
        #expect(refused([0x61, 0xE2, 0x82]))
    }
}
