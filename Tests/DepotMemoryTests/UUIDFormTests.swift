import Depot
import Foundation
import Testing

/// One canonical text for UUIDs (upper case) wherever Depot writes one, and records stored
/// under the lower-case text still found by id.
@Suite struct UUIDFormTests {
    struct Note: Model, Equatable {
        var id: UUID
        var text: String
        var ref: UUID?
    }

    @Test func uuidsAreWrittenUpperCaseAndLowerCaseIDsAreStillFound() async throws {
        let store = try await Store.open("memory:")
        let notes = try await store.repository(Note.self)
        let stored = Note(id: UUID(), text: "new", ref: UUID())
        try await notes.save(stored)
        let record = try #require(try await store.collection("Note").get(.string(stored.id.uuidString)))
        #expect(record.fields["ref"] == .string(try #require(stored.ref).uuidString))
        #expect(stored.id.canonicalText == stored.id.uuidString.uppercased())

        // A record an older server stored under the lower-case text.
        let older = UUID()
        try await store.collection("Note").save(Record(id: .string(older.uuidString.lowercased()), fields: ["text": "old"]))
        #expect(try await notes.find(id: older) == Note(id: older, text: "old", ref: nil))
        let inTransaction = try await store.read { tx in try tx.repository(Note.self).find(id: older) }
        #expect(inTransaction?.text == "old")
        let blocking = try await Task.detached { try notes.blocking.find(id: older) }.value
        #expect(blocking?.text == "old")
        // An id stored in neither form is not found.
        #expect(try await notes.find(id: UUID()) == nil)
        try await store.close()
    }
}
