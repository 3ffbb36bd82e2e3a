import DepotCore
import DepotMemory
import Foundation
import Testing
@testable import DepotJSONFile

/// Random transactions against the JSON driver and the reference memory driver: after each,
/// the file holds exactly the reference's records, in the canonical form (so the bytes a
/// commit reuses for untouched records are never stale).
@Suite struct JSONDifferentialTests {
    static func snapshot(_ driver: any StorageDriver) async throws -> [String: [Record]] {
        try await driver.read { tx in
            var out: [String: [Record]] = [:]
            for name in try tx.collectionNames() { out[name.rawValue] = try tx.query(Query(), in: name) }
            return out
        }
    }

    @Test(arguments: [true, false])
    func randomTransactionsMatchTheReference(pretty: Bool) async throws {
        let dir = TestDirectory()
        let json = try await JSONFileDriver(path: dir.store, configuration: .init(durability: .normal, pretty: pretty))
        let memory = MemoryDriver()
        var random = SplitMix64(seed: pretty ? 7 : 8)
        let names = try ["a", "b", "c"].map { try CollectionName($0) }
        for step in 0..<150 {
            let ops: [(Int, Int, Int64, Int64)] = (0..<Int(random.next() % 4 + 1)).map { _ in
                (Int(random.next() % 100), Int(random.next() % 3), Int64(random.next() % 12), Int64(random.next() % 5))
            }
            let body: @Sendable (any WriteTransaction) throws -> Void = { tx in
                for (kind, c, id, value) in ops {
                    let name = names[c]
                    switch kind {
                    case 0..<40: try tx.save(Record(id: .int(id), fields: ["v": .int(value), "s": .string("x\(value)")]), into: name)
                    case 40..<55: try tx.delete(.int(id), from: name)
                    case 55..<65: _ = try tx.insert(fields: ["v": .double(Double(value) / 2)], into: name)
                    case 65..<72: try tx.dropCollection(name)
                    case 72..<80: try tx.delete(matching: Field("v") == value, from: name)
                    case 80..<88:
                        try tx.prepare(CollectionSchema(name: name, idKind: .int, uniqueConstraints: value % 2 == 0 ? [] : [UniqueConstraint(["s"])]))
                    default:
                        do { try tx.update(Record(id: .int(id), fields: ["v": .int(value)]), in: name) } catch let e as DepotError where e.code == .notFound {}
                    }
                }
                if ops.count == 4 { throw DepotError(.conflict, "roll back") }
            }
            var outcomes: [String] = []
            for driver in [json, memory] as [any StorageDriver] {
                do { try await driver.write(body); outcomes.append("ok") } catch let e as DepotError { outcomes.append(e.code.name) }
            }
            #expect(outcomes[0] == outcomes[1], "step \(step)")
            // Now and then the file is changed behind the driver's back (reload, cache dropped).
            if step % 37 == 36, let text = dir.contents() {
                try dir.write(text + "\n")
            }
            let expected = try await Self.snapshot(memory)
            #expect(try await Self.snapshot(json) == expected, "step \(step)")
            guard let data = dir.bytes() else {
                #expect(expected.isEmpty, "step \(step): no file yet")
                continue
            }
            let bytes = Array(data)
            let decoded = try JSONDocument.decode(bytes)
            var fromFile: [String: [Record]] = [:]
            for (name, collection) in decoded.collections {
                fromFile[name.rawValue] = collection.records.keys.sorted().map { Record(id: $0, fields: collection.records[$0] ?? [:]) }
            }
            #expect(fromFile == expected, "step \(step): the file holds the reference's records")
            // (An external edit above appended a newline; it lasts until the next commit.)
            func trimmed(_ b: [UInt8]) -> ArraySlice<UInt8> { b[..<(b.lastIndex { $0 != 0x0A }.map { $0 + 1 } ?? 0)] }
            let canonical = JSONDocument.encode(decoded, pretty: pretty)
            let isCanonical = trimmed(bytes) == trimmed(canonical)
            #expect(isCanonical, "step \(step): the file is in canonical form")
        }
        try await json.close()
    }
}
