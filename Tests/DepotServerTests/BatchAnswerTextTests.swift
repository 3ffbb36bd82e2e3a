import DepotCore
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
