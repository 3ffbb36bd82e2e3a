import DepotCore
import DepotWire
import Foundation

/// `POST /_batch`: many writes in one request, each answered as its own request would be
/// (Docs/Server.md, "Batched writes").
extension RequestHandler {
    /// The path segment of the batch route; names starting with `_` are never collections.
    static let batchSegment = "_batch"

    /// Answers `GET /_batch`: `{"maxEntries": N, "maxBytes": M}`, the limits of a batch.
    /// A client asks this (a safe request) before its first batch: a server that answers
    /// anything else has no batch route, and a POST there might even store the batch as a
    /// record (Docs/Server.md, "Batched writes").
    func batchLimits() -> WireResponse {
        let body: FieldValue = .object([
            "maxEntries": .int(Int64(configuration.maxBatchEntries)), "maxBytes": .int(Int64(configuration.maxBatchBodySize)),
        ])
        return .json(200, JSONText.serialize(body))
    }

    /// Answers `POST /_batch`: parses the entries, resolves each through the single-request
    /// routes, applies the writes in as few transactions as their failures allow, and
    /// answers `{"results": [...]}` in entry order.
    ///
    /// `applyingAtMost` cuts the batch after that many entries (the rest neither applied nor
    /// answered): only the `.loseResponseMidBatch` test fault asks for it, and its answer is
    /// thrown away.
    func batch(_ request: WireRequest, applyingAtMost limit: Int? = nil) async throws -> WireResponse {
        var entries = try parseBatch(request.body)
        if let limit { entries = Array(entries.prefix(limit)) }
        var answers = [WireResponse?](repeating: nil, count: entries.count)
        var writes: [(Int, PlannedWrite)] = []
        for (index, entry) in entries.enumerated() {
            guard entry.body.count <= configuration.maxBodySize else {
                answers[index] = WireResponse.failure(413, "tooLarge", "The request body is larger than \(configuration.maxBodySize) bytes.")
                continue
            }
            do {
                switch try await resolve(entry, inBatch: true) {
                case .write(let write): writes.append((index, write))
                case .answer(let response): answers[index] = response
                case .batch: answers[index] = methodNotAllowed("POST").response
                }
            } catch {
                answers[index] = Self.failureResponse(error)
            }
        }
        for (index, response) in await applyAll(writes.map(\.1)).enumerated() { answers[writes[index].0] = response }
        var writer = JSONWriter(pretty: false, capacity: 256 * answers.count + 16)
        writer.raw("{\"results\":[")
        for (n, answer) in answers.enumerated() {
            if n > 0 { writer.byte(UInt8(ascii: ",")) }
            Self.writeAnswer(answer ?? WireResponse.internalFailure, into: &writer)
        }
        writer.raw("]}")
        return .json(200, String(decoding: writer.bytes, as: UTF8.self))
    }

    /// One entry's answer as the batch carries it, `{"body":…,"headers":{…},"status":…}`:
    /// the text of that object written as a ``FieldValue`` (keys in byte order, a header
    /// named twice keeping its last value), without building it.
    static func writeAnswer(_ response: WireResponse, into writer: inout JSONWriter) {
        var headers: [(prefix: UInt64, name: String, value: String)] = []
        headers.reserveCapacity(response.headers.count)
        for (name, value) in response.headers { headers.append((BinaryText.prefix(name), name, value)) }
        // Stable: of one name's values the last one given stays last.
        headers.sort { BinaryText.precedes($0.prefix, $0.name, $1.prefix, $1.name) }
        var kept: [(name: String, value: String)] = []
        kept.reserveCapacity(headers.count)
        for (n, header) in headers.enumerated() where n + 1 == headers.count || !BinaryText.equal(header.name, headers[n + 1].name) {
            kept.append((header.name, header.value))
        }
        writer.raw("{\"body\":")
        writer.string(response.body)
        writer.raw(",\"headers\":")
        if kept.count == 1, JSONWriter.isTag(kept[0].name) {
            // A lone header named like a tag is wrapped, as the object's writer does.
            writer.value(.object([kept[0].name: .string(kept[0].value)]), level: 1)
        } else {
            writer.byte(UInt8(ascii: "{"))
            for (n, header) in kept.enumerated() {
                if n > 0 { writer.byte(UInt8(ascii: ",")) }
                writer.string(header.name)
                writer.colon()
                writer.string(header.value)
            }
            writer.byte(UInt8(ascii: "}"))
        }
        writer.raw(",\"status\":")
        writer.int(Int64(response.status))
        writer.byte(UInt8(ascii: "}"))
    }

    /// Applies `writes` in order, each with exactly its single-request answer, in as few
    /// transactions as their failures allow.
    ///
    /// A run of entries shares one transaction. When an entry fails inside it, the
    /// transaction rolls back (nothing of the run is kept) and the entries before the failed
    /// one run again in a new transaction; the failed entry, alone at the head of a run,
    /// fails exactly as its own request would (its transaction held nothing else), and the
    /// rest continue after it. A failure that belongs to no entry (the commit, or the
    /// end-of-transaction reference checks) sends each entry of the run through its own
    /// transaction. So one failed entry never takes the others with it, and nothing is
    /// applied twice: a run either commits whole or leaves no trace.
    func applyAll(_ writes: [PlannedWrite]) async -> [WireResponse] {
        var answers = [WireResponse?](repeating: nil, count: writes.count)
        var start = 0
        var end = writes.count
        while start < writes.count {
            let run = Array(writes[start..<end])
            do {
                let responses = try await store.write { tx in
                    var out: [WireResponse] = []
                    out.reserveCapacity(run.count)
                    for (offset, write) in run.enumerated() {
                        do { out.append(try Self.apply(write, in: tx)) } catch { throw EntryFailure(offset: offset, response: Self.failureResponse(error)) }
                    }
                    return out
                }
                for (offset, response) in responses.enumerated() { answers[start + offset] = response }
                start = end
            } catch let failure as EntryFailure {
                if failure.offset == 0 {
                    answers[start] = failure.response
                    start += 1
                } else {
                    end = start + failure.offset
                    continue
                }
            } catch {
                if run.count == 1 {
                    answers[start] = Self.failureResponse(error)
                } else {
                    for (offset, write) in run.enumerated() {
                        do { answers[start + offset] = try await perform(write) } catch { answers[start + offset] = Self.failureResponse(error) }
                    }
                }
                start = end
            }
            end = writes.count
        }
        return answers.map { $0 ?? WireResponse.internalFailure }
    }

    /// The answer a single request gets for `error` (what ``handle(_:)`` answers).
    static func failureResponse(_ error: any Error) -> WireResponse {
        if let failure = error as? HTTPFailure { return failure.response }
        if let error = error as? DepotError { return answer(for: error) }
        return WireResponse.internalFailure
    }

    /// Reads a batch body into one request per entry.
    /// - Throws: ``HTTPFailure`` 400 for a body that is not a batch, 413 `batchTooLarge`
    ///   for more than ``DepotServer/Configuration/maxBatchEntries`` entries.
    ///
    /// A well-formed batch is read over its text, without building its value; anything else
    /// is read through its parsed value (``parsedBatch(_:)``), which gives the error.
    func parseBatch(_ body: [UInt8]) throws -> [WireRequest] {
        if let requests = streamedBatch(body) { return requests }
        return try parsedBatch(body)
    }

    /// The requests of a well-formed batch within the limits, read over its text; `nil` for
    /// anything else (invalid JSON, a malformed entry, too many entries, a tag-wrapped
    /// value), which ``parsedBatch(_:)`` reads and refuses with its message.
    func streamedBatch(_ body: [UInt8]) -> [WireRequest]? {
        struct Refused: Error {}
        let limit = configuration.maxBatchEntries
        return body.withUnsafeBufferPointer { buffer -> [WireRequest]? in
            var reader = JSONReader(buffer, maximumDepth: JSONText.maximumDepth, reporting: .text)
            var requests: [WireRequest]?
            do {
                reader.skipWhitespace()
                guard reader.peek() == UInt8(ascii: "{") else { return nil }
                try reader.readObject { reader, key, _ in
                    guard key == "requests" else { _ = try reader.readValue(depth: 1); return }
                    guard reader.peek() == UInt8(ascii: "[") else { throw Refused() }
                    var out: [WireRequest] = []
                    try reader.readArray { reader, _ in
                        guard out.count < limit, reader.peek() == UInt8(ascii: "{") else { throw Refused() }
                        var method: String?
                        var path: String?
                        var headers: [String: String] = [:]
                        var bytes: [UInt8] = []
                        try reader.readObject { reader, key, _ in
                            let value = try reader.readValue(depth: 3)
                            switch (key, value) {
                            case ("method", .string(let text)): method = text
                            case ("path", .string(let text)): path = text
                            case ("headers", .null), ("body", .null): break
                            case ("headers", .object(let given)):
                                for (name, value) in given {
                                    guard let text = value.stringValue else { throw Refused() }
                                    headers[name.lowercased()] = text
                                }
                            case ("body", .string(let text)): bytes = Array(text.utf8)
                            case ("method", _), ("path", _), ("headers", _), ("body", _): throw Refused()
                            default: break
                            }
                        }
                        guard let method, let path, path.hasPrefix("/") else { throw Refused() }
                        out.append(WireRequest(method: method, path: path, query: "", headers: headers, body: bytes))
                    }
                    requests = out
                }
                guard reader.atEnd() else { return nil }
            } catch {
                return nil
            }
            return requests
        }
    }

    /// The requests of a batch read through its parsed value; the errors of ``parseBatch(_:)``.
    func parsedBatch(_ body: [UInt8]) throws -> [WireRequest] {
        let value: FieldValue
        do { value = try JSONText.parse(body) } catch let error as DepotError {
            throw HTTPFailure.badRequest("The batch is not valid JSON: \(error.message)")
        }
        guard case .object(let object) = value, case .array(let items)? = object["requests"] else {
            throw HTTPFailure.badRequest("A batch is an object with a 'requests' array.")
        }
        guard items.count <= configuration.maxBatchEntries else {
            throw HTTPFailure(status: 413, code: "batchTooLarge", message: "A batch may hold at most \(configuration.maxBatchEntries) requests; this one holds \(items.count).")
        }
        var requests: [WireRequest] = []
        requests.reserveCapacity(items.count)
        for (n, item) in items.enumerated() {
            guard case .object(let entry) = item, let method = entry["method"]?.stringValue, let path = entry["path"]?.stringValue, path.hasPrefix("/") else {
                throw HTTPFailure.badRequest("Batch request \(n) needs a 'method' and a 'path' starting with '/'.")
            }
            var headers: [String: String] = [:]
            switch entry["headers"] {
            case nil, .null?: break
            case .object(let given)?:
                for (name, value) in given {
                    guard let text = value.stringValue else { throw HTTPFailure.badRequest("Batch request \(n): header values must be strings.") }
                    headers[name.lowercased()] = text
                }
            default: throw HTTPFailure.badRequest("Batch request \(n): 'headers' must be an object.")
            }
            let bytes: [UInt8]
            switch entry["body"] {
            case nil, .null?: bytes = []
            case .string(let text)?: bytes = Array(text.utf8)
            default: throw HTTPFailure.badRequest("Batch request \(n): 'body' must be the body's JSON text, as a string.")
            }
            requests.append(WireRequest(method: method, path: path, query: "", headers: headers, body: bytes))
        }
        return requests
    }
}

/// An entry of a batch run failed: the run rolls back and `response` is that entry's answer
/// (see ``RequestHandler/applyAll(_:)``).
struct EntryFailure: Error {
    var offset: Int
    var response: WireResponse
}
