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

    /// A batch entry's path is built from the collection's wire path and the id's segment,
    /// without a URL per entry: it must be what parsing the entry's own URL gives, for
    /// base URLs with and without a path, resource paths that need encoding, and ids that
    /// need escaping.
    @Test func batchPathsAreTheWirePathsOfTheEntriesURLs() throws {
        let bases = ["http://127.0.0.1:1", "http://127.0.0.1:1/", "http://127.0.0.1:1/api/v1/", "http://127.0.0.1:1/a%20b"]
        let paths = ["/items", "/posts/1/comments", "/my items", "/caf\u{E9}s", "/a%2Fb"]
        let ids: [RecordID] = [
            .int(0), .int(-42), .int(Int64.max), .string("plain-id_1.x~"), .string("a/b"), .string("a b?c#d"),
            .string("100%"), .string("\u{1F600}\u{E9}"), .string(".."), .string("%2F"),
        ]
        for base in bases {
            for path in paths {
                let endpoint = SyncEndpoint(baseURL: try #require(URL(string: base)), path: path)
                let wireBase = try #require(endpoint.wireBase())
                let collectionPath = try #require(endpoint.url().flatMap { endpoint.wirePath($0, base: wireBase) })
                for id in ids {
                    let request = PushRequest(method: "PUT", item: id, body: nil, headers: [:])
                    let url = try #require(request.url(endpoint))
                    let expected = try #require(endpoint.wirePath(url, base: wireBase))
                    #expect(endpoint.wirePath(of: request, collectionPath: collectionPath) == expected, "\(base) \(path) \(id)")
                    // The URL names the record: its decoded path ends with the id, escaped once.
                    let decoded = try #require(URLComponents(url: url, resolvingAgainstBaseURL: false)?.path)
                    let idText = switch id { case .int(let i): String(i); case .string(let s): s }
                    #expect(decoded.hasSuffix("/" + idText), "\(base) \(path) \(id): \(decoded)")
                }
                let post = PushRequest(method: "POST", item: nil, body: nil, headers: [:])
                let expected = try #require(post.url(endpoint).flatMap { endpoint.wirePath($0, base: wireBase) })
                #expect(endpoint.wirePath(of: post, collectionPath: collectionPath) == expected)
            }
        }
    }

    /// A push answer whose body is the bytes the entry sent is read from the value sent,
    /// not parsed (`PushSuccess`): for values JSON says with tags (doubles, infinities,
    /// bytes, a user object shaped like a tag, the wire's legacy `$base64`) the record must be
    /// the one parsing gives. An answer with other bytes is parsed.
    @Test func anEchoedAnswerReadsAsTheValueSent() throws {
        let endpoint = try endpoint()
        let bodies: [FieldValue] = [
            ["id": 7, "title": "x", "n": 1, "d": 1.0, "z": .double(-0.0), "big": .int(Int64.max)],
            ["id": "a/b", "inf": .double(.infinity), "raw": .bytes(Data([0, 1, 255])), "nested": ["$base64": "AAE="]],
            ["id": 1, "tagLike": ["$bytes": "AA=="], "list": [1, "two", 3.5, ["$double": "x"]], "empty": [:]],
        ]
        for body in bodies {
            let text = JSONText.serialize(body)
            let entry = OutboxEntry(seq: 1, collection: "items", recordID: .int(7), operation: .upsert, fields: [:], idempotencyKey: "k")
            let echoed = HTTPAnswer(status: 200, headers: ["ETag": "\"e\""], body: Data(text.utf8))
            let read = try PushSuccess(entry, method: "PUT", answer: echoed, endpoint, sent: (text, body))
            let parsed = try PushSuccess(entry, method: "PUT", answer: echoed, endpoint)
            #expect(read.returned != nil)
            #expect(read.returned == parsed.returned, "\(text)")
            #expect(read.etag == "\"e\"")
            // The state hash taken of the bytes sent is the hash of the returned state.
            let returned = try #require(read.returned)
            #expect(read.echoHash == SyncLocal.stateHash(returned.id, returned.fields), "\(text)")
        }
        // Other bytes (the server changed a field): the answer is parsed, not the value sent.
        let sent: FieldValue = ["id": 7, "title": "x"]
        let entry = OutboxEntry(seq: 1, collection: "items", recordID: .int(7), operation: .upsert, fields: [:], idempotencyKey: "k")
        let changed = HTTPAnswer(status: 200, body: Data(#"{"id":7,"title":"y"}"#.utf8))
        let read = try PushSuccess(entry, method: "PUT", answer: changed, endpoint, sent: (JSONText.serialize(sent), sent))
        #expect(read.returned?.fields == ["title": "y"])
        #expect(read.echoHash == nil)
        // Sent with a null or under a mapping: the text sent is not the state's text.
        let withNull: FieldValue = ["id": 7, "title": "x", "gone": .null]
        let nullText = JSONText.serialize(withNull)
        let echoedNull = HTTPAnswer(status: 200, body: Data(nullText.utf8))
        let readNull = try PushSuccess(entry, method: "PUT", answer: echoedNull, endpoint, sent: (nullText, withNull))
        #expect(readNull.returned?.fields == ["title": "x"])
        #expect(readNull.echoHash == nil)
        let mapped = try self.endpoint(mapping: ["title": "t"])
        let mappedValue: FieldValue = ["id": 7, "t": "x"]
        let mappedText = JSONText.serialize(mappedValue)
        let readMapped = try PushSuccess(entry, method: "PUT", answer: HTTPAnswer(status: 200, body: Data(mappedText.utf8)), mapped, sent: (mappedText, mappedValue))
        #expect(readMapped.returned?.fields == ["title": "x"])
        #expect(readMapped.echoHash == nil)
        #expect(!PushSuccess.same(Data(#"{"id":7}"#.utf8), #"{"id":8}"#))
        #expect(!PushSuccess.same(Data(#"{"id":7}"#.utf8), #"{"id":7} "#))
        #expect(PushSuccess.same(Data(), ""))
    }

    /// A batch entry's headers are written without building their object: the text must be
    /// the object's serialization, for no header, several, a name that sorts by bytes (not
    /// by case or locale), and a lone name shaped like a tag.
    @Test func batchHeadersAreTheirObjectsText() {
        let cases: [[String: String]] = [
            [:], ["Idempotency-Key": "k-1"], ["Idempotency-Key": "k", "If-Match": "\"e\\\"1\""],
            ["b": "1", "B": "2", "\u{E9}": "3", "a\u{0}": "4", "Z": "\n"], ["$bytes": "x"], ["$object": "y", "z": "w"],
        ]
        for headers in cases {
            var writer = JSONWriter(pretty: false, capacity: 64)
            SyncCoordinator.writeHeaders(headers, into: &writer)
            #expect(String(decoding: writer.bytes, as: UTF8.self) == JSONText.serialize(.object(headers.mapValues { .string($0) })), "\(headers)")
        }
    }

    /// The batch answer's reading (`SyncCoordinator.batchResults`) streams over the text and
    /// reads the parsed value only when the stream does not take the text: it must give what
    /// the parsed value gives (the reference below), for well-formed answers, odd members
    /// and broken ones; and the stream alone must take the plain answers a server writes.
    @Test func batchAnswersReadAsTheirParsedValue() {
        func reference(_ body: String) -> [(Int, [String: String], String)]? {
            guard let value = try? JSONText.parse(Array(body.utf8), acceptingLegacyBase64: true, maximumDepth: JSONText.maximumDepth + 4),
                  case .object(let object) = value, case .array(let items)? = object["results"] else { return nil }
            var out: [(Int, [String: String], String)] = []
            for item in items {
                guard case .object(let result) = item, let status = result["status"]?.intValue else { return nil }
                var headers: [String: String] = [:]
                if case .object(let given)? = result["headers"] {
                    for (name, value) in given { if let text = value.stringValue { headers[name] = text } }
                }
                out.append((Int(status), headers, result["body"]?.stringValue ?? ""))
            }
            return out
        }
        let bodies = [
            #"{"results":[]}"#,
            #"{"results":[{"body":"{\"id\":1}","headers":{"ETag":"\"a\"","Location":"/x/1"},"status":201}]}"#,
            #" {"other":[1,{"a":null}],"results":[{"status":200},{"status":409,"body":"","headers":{"N":5,"S":"t"}}]} "#,
            #"{"results":[{"status":200,"extra":{"deep":[[[]]]},"body":7}]}"#,
            #"{"results":[{"status":200.0}]}"#, #"{"results":[{"body":"x"}]}"#, #"{"results":[1]}"#, #"{"results":{}}"#,
            #"{"results":[{"status":200}],"results":[]}"#, #"{"results":[{"status":200,"status":201}]}"#,
            #"{"results":[{"status":200}]} x"#, #"{"results":[{"status":200}"#, #"[]"#, "", #"{"#, #"{"res":[]}"#,
            #"{"results":[{"status":200,"headers":{"$bytes":"AA=="}}]}"#, #"{"results":[{"status":200,"headers":{"$base64":"AA=="}}]}"#,
            #"{"results":[{"$object":{"status":200}}]}"#, #"{"$object":{"results":[]}}"#,
            #"{"results":[{"status":200,"body":"\u00e9\ud83d\ude00"}]}"#, #"{"results":[{"status":200,"body":"\ud800"}]}"#,
            "{\"results\":[{\"status\":200,\"x\":" + String(repeating: "[", count: 40) + String(repeating: "]", count: 40) + "}]}",
        ]
        for body in bodies[..<4] {
            #expect(SyncCoordinator.streamedBatchResults(HTTPAnswer(status: 200, body: Data(body.utf8))) != nil, "\(body)")
        }
        for body in bodies {
            let read = SyncCoordinator.batchResults(HTTPAnswer(status: 200, body: Data(body.utf8)))
            let expected = reference(body)
            #expect((read == nil) == (expected == nil), "\(body)")
            guard let read, let expected else { continue }
            #expect(read.map(\.status) == expected.map(\.0), "\(body)")
            #expect(read.map(\.headers) == expected.map { $0.1.reduce(into: [:]) { $0[$1.key.lowercased()] = $1.value } }, "\(body)")
            #expect(read.map { String(decoding: $0.body, as: UTF8.self) } == expected.map(\.2), "\(body)")
        }
    }

    /// A pull compares states by their fields (`SyncLocal.sameState`) where it compared
    /// their hashes: the answer must be the hashes' for every pair, including the values
    /// whose JSON differs though Swift's `==` on the raw numbers would not (`0.0`, `-0.0`),
    /// kinds that print alike (`1`, `1.0`), nulls (left out of the hash, kept when nested)
    /// and a field named `id` (left out of the hash).
    @Test func statesCompareAsTheirHashes() {
        let states: [[String: FieldValue]?] = [
            nil, [:], ["a": 1], ["a": 1.0], ["a": .double(0.0)], ["a": .double(-0.0)], ["a": 1, "b": .null], ["a": 1, "id": 9],
            ["a": ["x": .null]], ["a": ["x": 1]], ["a": [:]], ["a": "1"], ["a": .bytes(Data([1]))], ["a": 1, "b": 2], ["b": 2, "a": 1],
        ]
        for a in states {
            for b in states {
                let byHash = SyncLocal.stateHash(.int(1), a) == SyncLocal.stateHash(.int(1), b)
                #expect(SyncLocal.sameState(a, b) == byHash, "\(String(describing: a)) \(String(describing: b))")
            }
        }
    }
}
