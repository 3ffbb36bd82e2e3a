import DepotCore
import DepotMemory
import DepotServer
import DepotSync
import DepotWire
import Foundation
import Testing

/// Every value a store holds survives server → pull → edit → push unchanged: the test the
/// one-dialect rule (Docs/Server.md, "JSON on the wire") is held to.
@Suite("Values through a real server and back")
struct WireRoundTripTests {
    let notes = name("notes")

    /// Deep nesting at the largest depth a field may have.
    static func deep(_ levels: Int) -> FieldValue {
        var value: FieldValue = .string("bottom")
        for n in 0..<(levels - 1) { value = n % 2 == 0 ? .array([value]) : .object(["k": value]) }
        return value
    }

    /// Records whose values are awkward for JSON, one kind per record.
    static let hostile: [Record] = [
        Record(id: "tagLikeObjects", fields: [
            "shape": ["$base64": "aGk="], "bytesTag": ["$bytes": "aGk="], "doubleTag": ["$double": "Infinity"],
            "objectTag": ["$object": ["a": 1]], "nested": [["$base64": "aGk="]],
        ]),
        Record(id: "bytes", fields: ["b": .bytes(Data([0, 1, 0xFF, 0x80])), "empty": .bytes(Data()), "inArray": [.bytes(Data("hi".utf8))]]),
        Record(id: "doubles", fields: [
            "inf": .double(.infinity), "ninf": .double(-.infinity), "negZero": .double(-0.0), "one": .double(1.0),
            "tiny": .double(.leastNonzeroMagnitude), "huge": .double(.greatestFiniteMagnitude), "inObject": ["x": .double(-.infinity)],
        ]),
        Record(id: "ints", fields: ["past53": .int(9_007_199_254_740_993), "min": .int(.min), "max": .int(.max), "zero": 0]),
        Record(id: "text", fields: ["nul": "a\u{0}b", "astral": "😀𝄞", "controls": "\u{1}\u{1F}\u{7F}\"\\\n", "combining": "e\u{301}", "empty": ""]),
        Record(id: "nesting", fields: ["deep": deep(FieldValue.maximumDepth), "emptyArray": [], "emptyObject": [:], "mixed": [1, 2.0, "3", nil, true]]),
    ]

    /// The collection as `depot dump` prints it: one JSON line per record, in id order.
    static func dump(_ records: [Record]) -> [String] { records.map(\.jsonText) }

    @Test("server → pull (listing, then feed) → edit → push → pull elsewhere: every dump equal to the letter")
    func roundTrip() async throws {
        try await withSyncServer { server, serverDriver, url in
            // Loaded into the served store (as `depot load` does: through the store).
            let collection = notes
            try await server.store.write { tx in for record in Self.hostile { try tx.save(record, into: collection) } }
            let served = Self.dump(try await LocalWrites.all(serverDriver, notes))
            #expect(served == Self.dump(Self.hostile.sorted { $0.id < $1.id }))

            let a = try await clientStore()
            let syncA = SyncCoordinator(store: a, transport: URLSessionTransport(timeout: 10), sleeper: RecordingSleeper())
            try await syncA.attach(notes, to: SyncEndpoint(baseURL: url, path: "/notes"))
            let first = try await syncA.sync(notes)
            #expect(first.failures.isEmpty, "\(first.failures)")
            #expect(Self.dump(try await LocalWrites.all(a, notes)) == served)

            // Edit every record on the client (one field more) and push the edits.
            for record in Self.hostile {
                var edited = record
                edited.fields["edited"] = true
                try await LocalWrites.save(a, notes, edited)
            }
            let pushed = try await syncA.sync(notes)
            #expect(pushed.pushed == Self.hostile.count)
            #expect(pushed.deadLettered == 0 && pushed.conflicts == 0, "\(pushed)")
            let afterPush = Self.dump(try await LocalWrites.all(serverDriver, notes))
            #expect(afterPush == Self.dump(try await LocalWrites.all(a, notes)))
            #expect(afterPush.count == Self.hostile.count && afterPush.allSatisfy { $0.contains(#""edited":true"#) })

            // A second client: a first pull by listing, then the feed brings an edit of each record.
            let b = try await clientStore()
            let syncB = SyncCoordinator(store: b, transport: URLSessionTransport(timeout: 10), sleeper: RecordingSleeper())
            try await syncB.attach(notes, to: SyncEndpoint(baseURL: url, path: "/notes"))
            _ = try await syncB.sync(notes)
            for record in Self.hostile {
                var edited = record
                edited.fields["edited"] = false
                try await LocalWrites.save(a, notes, edited)
            }
            _ = try await syncA.sync(notes)
            let fed = try await syncB.sync(notes)
            #expect(fed.pulled == Self.hostile.count)
            let final = Self.dump(try await LocalWrites.all(serverDriver, notes))
            #expect(Self.dump(try await LocalWrites.all(b, notes)) == final)
            #expect(Self.dump(try await LocalWrites.all(a, notes)) == final)
            #expect(final.count == Self.hostile.count)
        }
    }
}
