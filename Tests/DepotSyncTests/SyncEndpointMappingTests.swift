import DepotCore
import Foundation
import Testing
@testable import DepotSync

/// How a server's JSON object becomes a local record (`SyncEndpoint.fromServer`): the object
/// as it is when every member is a usable field, and member by member otherwise.
@Suite struct SyncEndpointMappingTests {
    private func endpoint(idField: String = "id", mapping: [String: String] = [:]) throws -> SyncEndpoint {
        var endpoint = SyncEndpoint(baseURL: try #require(URL(string: "http://127.0.0.1:1")), path: "/items")
        endpoint.idField = idField
        endpoint.fieldMapping = mapping
        return endpoint
    }

    @Test func everyMemberAFieldIsKeptWhole() throws {
        let record = try endpoint().fromServer(["id": 7, "name": "x", "n": 1.5, "tags": ["a"]])
        #expect(record == Record(id: 7, fields: ["name": "x", "n": 1.5, "tags": ["a"]]))
    }

    @Test func nullsAndUnusableNamesAreDropped() throws {
        let record = try endpoint().fromServer(["id": "a", "name": "x", "gone": .null, "1bad": 2, "_depotsys_x": 3, "with space": 4])
        #expect(record == Record(id: "a", fields: ["name": "x"]))
    }

    @Test func anotherIDFieldLeavesAMemberNamedIDOut() throws {
        let record = try endpoint(idField: "_id").fromServer(["_id": 3, "id": 9, "name": "x"])
        #expect(record == Record(id: 3, fields: ["name": "x"]))
    }

    @Test func mappedNamesAreRenamed() throws {
        let record = try endpoint(mapping: ["name": "item_name"]).fromServer(["id": 1, "item_name": "x", "other": .null])
        #expect(record == Record(id: 1, fields: ["name": "x"]))
    }

    /// Local fields become the server's object: as they are plus the id under the id field,
    /// renamed where a mapping says so, and without an id when none is given.
    @Test func fieldsGoToTheServerUnderTheirNames() throws {
        let fields: [String: FieldValue] = ["name": "x", "n": 1.5, "gone": .null, "tags": ["a"]]
        #expect(try endpoint().toServer(fields, id: 7) == ["id": 7, "name": "x", "n": 1.5, "gone": .null, "tags": ["a"]])
        #expect(try endpoint(idField: "_id").toServer(fields, id: "k") == ["_id": "k", "name": "x", "n": 1.5, "gone": .null, "tags": ["a"]])
        #expect(try endpoint().toServer(fields, id: nil) == .object(fields))
        #expect(try endpoint(mapping: ["name": "item_name"]).toServer(fields, id: 2) == ["id": 2, "item_name": "x", "n": 1.5, "gone": .null, "tags": ["a"]])
    }

    @Test func withoutAUsableIDThereIsNoRecord() throws {
        #expect(try endpoint().fromServer(["name": "x"]) == nil)
        #expect(try endpoint().fromServer(["id": 1.5, "name": "x"]) == nil)
        #expect(try endpoint().fromServer(["a", "b"]) == nil)
    }
}
