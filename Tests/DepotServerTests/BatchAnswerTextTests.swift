import DepotCore
import DepotMemory
import Foundation
import Testing

@testable import DepotServer

/// A batch answer's entries are written straight into the answer's text; each must be the
/// text of the object `{"status", "headers", "body"}` written as a `FieldValue`, which is
/// what clients of earlier servers read.
struct BatchAnswerTextTests {
    /// The entry's text the way it was written before: headers gathered into an object (a
    /// repeated name keeps its last value), the whole object written by `JSONText`.
    static func objectText(_ response: WireResponse) -> [UInt8] {
        var headers: [String: FieldValue] = [:]
        for (name, value) in response.headers { headers[name] = .string(value) }
        var out: [UInt8] = []
        JSONText.write(.object(["status": .int(Int64(response.status)), "headers": .object(headers), "body": .string(response.body)]), into: &out)
        return out
    }

    /// No headers, the usual ones, a name given twice, names sharing their first eight
    /// bytes, a lone header named like a tag, and texts that need escaping.
    @Test func entriesAreTheObjectsText() {
        let responses: [WireResponse] = [
            WireResponse(status: 204, headers: [], body: ""),
            WireResponse(status: 201, headers: [("ETag", "\"abc\""), ("Location", "/posts/7")], body: #"{"id":7,"title":"a \"b\"\n"}"#),
            WireResponse(status: 200, headers: [("X-A", "1"), ("X-A", "2"), ("Content-Type", "application/json")], body: "é\u{0}日本"),
            WireResponse(status: 409, headers: [("Access-Control-Expose-Headers", "x"), ("Access-Control-Allow-Origin", "*"), ("Retry-After", "3")], body: "{}"),
            WireResponse(status: 200, headers: [("$bytes", "AA==")], body: "x"),
            WireResponse(status: 200, headers: [("$object", "1"), ("$object", "2")], body: "y"),
            WireResponse.failure(500, "internal", "The server failed to handle the request."),
        ]
        for response in responses {
            var writer = JSONWriter(pretty: false, capacity: 0)
            RequestHandler.writeAnswer(response, into: &writer)
            #expect(writer.bytes == Self.objectText(response), "\(String(decoding: writer.bytes, as: UTF8.self))")
        }
    }
}

/// A batch's requests are read over its text; text that reading does not take is read
/// through its parsed value, which gives the error. Both must read a batch the same way.
struct BatchRequestTextTests {
    /// What the parsed reading gives, or its error's status and message.
    static func outcome(_ read: () throws -> [WireRequest]) -> String {
        do {
            return try read().map { r in
                r.method + " " + r.path + " " + r.headers.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
                    + " " + String(decoding: r.body, as: UTF8.self)
            }.joined(separator: "\n")
        } catch let failure as HTTPFailure {
            return "HTTP \(failure.response.status) \(failure.response.body)"
        } catch {
            return "\(error)"
        }
    }

    @Test func streamedBatchesReadAsTheirParsedValue() async throws {
        var configuration = DepotServer.Configuration()
        configuration.maxBatchEntries = 3
        let handler = RequestHandler(store: try await Store(driver: MemoryDriver()), configuration: configuration)
        let plain = [
            #"{"requests":[]}"#,
            #"{"requests":[{"body":"{\"id\":1,\"t\":\"x\"}","headers":{"Idempotency-Key":"k1","If-Match":"\"e\""},"method":"PUT","path":"/notes/1"}]}"#,
            #" {"other":{"a":[1]},"requests":[{"method":"DELETE","path":"/a/2","headers":null,"body":null},{"path":"/a","method":"POST","x":1}]} "#,
        ]
        let odd = [
            #"{"requests":[{"method":"PUT","path":"notes/1"}]}"#, #"{"requests":[{"method":5,"path":"/a"}]}"#,
            #"{"requests":[{"method":"PUT","path":"/a","headers":{"A":1}}]}"#, #"{"requests":[{"method":"PUT","path":"/a","headers":[]}]}"#,
            #"{"requests":[{"method":"PUT","path":"/a","body":{"id":1}}]}"#, #"{"requests":[{"method":"PUT","path":"/a","method":"GET"}]}"#,
            #"{"requests":[{"method":"PUT","path":"/a"}],"requests":[]}"#, #"{"requests":{}}"#, #"{"requests":[1]}"#, #"[]"#, "", "{",
            #"{"requests":[{"method":"PUT","path":"/a"}]} x"#, #"{"$object":{"requests":[{"method":"PUT","path":"/a"}]}}"#,
            #"{"requests":[{"$object":{"method":"PUT","path":"/a"}}]}"#,
            #"{"requests":[{"method":"P","path":"/a"},{"method":"P","path":"/b"},{"method":"P","path":"/c"},{"method":"P","path":"/d"}]}"#,
            #"{"requests":[{"method":"PUT","path":"/a","headers":{"$bytes":"AA=="}}]}"#, #"{"requests":[{"method":"PUT","path":"/a","body":"\ud800"}]}"#,
        ]
        for body in plain {
            #expect(handler.streamedBatch(Array(body.utf8)) != nil, "\(body)")
        }
        for body in plain + odd {
            let bytes = Array(body.utf8)
            #expect(Self.outcome { try handler.parseBatch(bytes) } == Self.outcome { try handler.parsedBatch(bytes) }, "\(body)")
        }
        #expect(Self.outcome { try handler.parseBatch(Array(odd[15].utf8)) }.hasPrefix("HTTP 413"))
    }
}
