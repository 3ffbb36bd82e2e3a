import DepotCore
import DepotMemory
import DepotServer
import DepotWire
import Foundation
import Testing

/// What an idempotency record keeps, and that a replay answers the same bytes either way
/// (Docs/Server.md, "Idempotency keys").
@Suite("DepotServer idempotency records")
struct IdempotencyRecordTests {
    /// The stored idempotency record of `key`.
    static func record(_ key: String, _ live: LiveServer) async throws -> Record {
        let found = try await live.driver.read { tx in try tx.get(.string(key), from: WireCollections.idempotency) }
        return try #require(found)
    }

    /// Status, the headers a replay repeats, and the body.
    static func summary(_ answer: Answer) -> String {
        let headers = ["ETag", "Location"].map { "\($0)=\(answer.header($0) ?? "-")" }
        return "\(answer.status) \(headers.joined(separator: " ")) \(String(decoding: answer.body, as: UTF8.self))"
    }

    @Test("a create that names its id keeps no copy of its answer and replays the same bytes; other writes keep theirs")
    func answersFromTheRequest() async throws {
        try await withServer { live in
            let body = #"{"id":"a","title":"naïve \"quoted\"","n":3,"tags":["x","y"]}"#
            let first = try await live.send("POST", "/notes", json: body, headers: ["Idempotency-Key": "k-created"])
            #expect(first.status == 201)
            let kept = try await Self.record("k-created", live)
            #expect(kept["answer"].stringValue == "request")
            #expect(kept["body"].isNull && kept["etag"].isNull && kept["location"].isNull)

            let again = try await live.send("POST", "/notes", json: body, headers: ["Idempotency-Key": "k-created"])
            #expect(again.header("Idempotent-Replayed") == "true")
            #expect(Self.summary(again) == Self.summary(first))
            #expect(first.header("ETag") != nil && first.header("Location") == "/notes/a")

            // The same key with another body is still refused: the fingerprint decides.
            let other = try await live.send("POST", "/notes", json: #"{"id":"a","title":"other"}"#, headers: ["Idempotency-Key": "k-created"])
            #expect(other.status == 422 && other.errorCode == "idempotencyKeyReused")

            // A create whose id the server picks, and an update: the answer is kept.
            let assigned = try await live.send("POST", "/posts", json: #"{"title":"p"}"#, headers: ["Idempotency-Key": "k-assigned"])
            let updated = try await live.send("PUT", "/notes/a", json: #"{"title":"new"}"#, headers: ["Idempotency-Key": "k-updated"])
            #expect(assigned.status == 201 && updated.status == 200)
            for (key, answer) in [("k-assigned", assigned), ("k-updated", updated)] {
                let record = try await Self.record(key, live)
                #expect(record["answer"].isNull)
                #expect(record["body"].stringValue == String(decoding: answer.body, as: UTF8.self))
            }
            let assignedAgain = try await live.send("POST", "/posts", json: #"{"title":"p"}"#, headers: ["Idempotency-Key": "k-assigned"])
            #expect(assignedAgain.header("Idempotent-Replayed") == "true" && Self.summary(assignedAgain) == Self.summary(assigned))
            let posts = try await live.driver.read { tx in try tx.count(.all, in: CollectionName("posts")) }
            #expect(posts == 1)
        }
    }
}
