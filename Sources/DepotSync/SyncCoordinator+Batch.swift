import DepotCore
import DepotWire
import Foundation

/// Batched push: many outbox entries in one `POST /_batch` to a DepotServer, each answered
/// as its own request would be (Docs/Sync.md, "Batched push"; the wire format is in
/// Docs/Server.md, "Batched writes").
extension SyncCoordinator {
    /// The default of ``pushBatchSize``: 512 entries (Docs/Sync.md, "Batched push": with
    /// 20,000 entries of 10-field records each, four alternated runs of
    /// `depot bench-sync` pushed 19,323–22,035 entries/s in batches of 256 and
    /// 21,740–23,151 in batches of 512). A DepotServer takes up to 1,000 by default.
    public static let defaultPushBatchSize = 512
    /// A batch whose encoded body is larger than this goes one request per entry instead
    /// (DepotServer's default limit is 16 MiB).
    static let maxBatchBytes = 8 << 20
    /// Entries whose outbox entry and sync state one read of ``pushChunk(_:_:_:_:)`` loads.
    static let entriesPerLoad = 48

    /// Pushes `batch` (entries of one collection, at most one per record) in batches the
    /// server accepts, and returns each entry's outcome, in order; `nil` when the server has
    /// no batch route (the entries then go one request per entry).
    ///
    /// Before the first batch to a server, `GET /_batch` asks for its limits: a safe request,
    /// because a plain json-server stores a POST to an unknown path as a new record (the
    /// json-server clone simple-json-server does). Any answer but DepotServer's limits means
    /// no batch route, remembered for the base URL, as is a 404 or 405 to `POST /_batch`;
    /// except a refusal of credentials (401, 403, 407), which a refreshed token may lift:
    /// that push goes one request per entry and the next asks again.
    /// - Throws: store errors, `CancellationError`, ``DepotError`` `.remote` for an answer
    ///   that is not JSON.
    func pushBatch(_ batch: [OutboxEntry], _ collection: CollectionName, _ endpoint: SyncEndpoint, _ report: inout SyncReport) async throws -> [OutboxDrain.Outcome]? {
        let capacity: Int?
        do {
            capacity = try await batchCapacity(endpoint, &report)
        } catch let error as DepotError where error.code == .remote {
            try await recordUnanswered(batch.map(\.seq), error.message, &report)
            return batch.map { _ in .unreachable }
        }
        guard let capacity else { return nil }
        var outcomes: [OutboxDrain.Outcome] = []
        var start = 0
        while start < batch.count {
            let chunk = Array(batch[start..<min(batch.count, start + capacity)])
            start += chunk.count
            var result: [OutboxDrain.Outcome]
            if !batchMissing.contains(endpoint.baseURL.absoluteString), let sent = try await pushChunk(chunk, collection, endpoint, &report) {
                result = sent
            } else {
                result = []
                for entry in chunk {
                    if result.last == .unreachable {
                        result.append(.unreachable)
                        continue
                    }
                    try Task.checkCancellation()
                    result.append(try await pushEntry(entry, collection, endpoint, &report))
                }
            }
            outcomes += result
            if result.contains(.unreachable) {
                outcomes += Array(repeating: .unreachable, count: batch.count - outcomes.count)
                break
            }
        }
        return outcomes
    }

    /// The most entries per batch the server of `endpoint` accepts, `nil` when it has no
    /// batch route; asked once per base URL (``pushBatch(_:_:_:_:)``).
    /// - Throws: ``DepotError`` `.remote` when the question got no answer.
    func batchCapacity(_ endpoint: SyncEndpoint, _ report: inout SyncReport) async throws -> Int? {
        let base = endpoint.baseURL.absoluteString
        if batchMissing.contains(base) { return nil }
        if let known = batchCapacities[base] { return known }
        let answer = try await send(endpoint, "GET", endpoint.batchURL(), report: &report)
        var capacity: Int?
        if (200..<300).contains(answer.status) {
            do {
                if case .object(let limits)? = try Self.json(answer), let most = limits["maxEntries"]?.intValue, most >= 1 { capacity = Int(most) }
            } catch let error as DepotError where error.code == .remote {
                capacity = nil  // not JSON: not DepotServer's answer, so no batch route
            }
        }
        guard let capacity else {
            if !Self.refusesCredentials(answer.status) { batchMissing.insert(base) }
            return nil
        }
        batchCapacities[base] = capacity
        return capacity
    }

    /// 401, 403 or 407: the server (or a proxy) refused the request's credentials, which
    /// says nothing about whether it has a batch route.
    static func refusesCredentials(_ status: Int) -> Bool {
        status == 401 || status == 403 || status == 407
    }

    /// Pushes one chunk in one `POST /_batch` and returns each entry's outcome, in order;
    /// `nil` when the server refused the batch as a whole (a 4xx such as 413; 404 and 405,
    /// no batch route, are remembered), and the entries must go one request per entry.
    ///
    /// Each entry's request is the one ``pushEntry(_:_:_:_:firstAnswer:)`` would send (same
    /// method, path, body bytes, `Idempotency-Key` and `If-Match`), so the server's
    /// idempotency records agree whichever way an entry went. The answers are handled as
    /// that path handles them: the successes and dead letters of the batch are recorded in
    /// one local transaction; a conflict or a retryable status continues in
    /// ``pushEntry(_:_:_:_:firstAnswer:)`` with that answer as its first. When the batch
    /// gets no answer after its retries, every entry sent counts a failed attempt and the
    /// drain halts, as for one request.
    func pushChunk(_ batch: [OutboxEntry], _ collection: CollectionName, _ endpoint: SyncEndpoint, _ report: inout SyncReport) async throws -> [OutboxDrain.Outcome]? {
        let name = collection.rawValue
        let assigns = endpoint.idAssignment == .server
        var loaded: [(OutboxEntry, RecordSyncState)?] = []
        loaded.reserveCapacity(batch.count)
        var next = 0
        while next < batch.count {
            // Short reads of a few dozen entries each (an entry and its record's state read
            // together): a store may run a short transaction on the calling thread, where one
            // read of a whole batch would outgrow what it runs there and be read twice
            // (Docs/SQLiteDriver.md, "Where transactions run").
            let seqs = batch[next..<min(batch.count, next + Self.entriesPerLoad)].map(\.seq)
            next += seqs.count
            loaded += try await localRead { tx -> [(OutboxEntry, RecordSyncState)?] in
                try seqs.map { seq in
                    guard let entry = try Outbox.entry(seq, in: tx), entry.state == .pending else { return nil }
                    return (entry, try RecordSyncState.load(tx, name, entry.recordID))
                }
            }
        }
        var outcomes = [OutboxDrain.Outcome](repeating: .pushed, count: batch.count)  // settled elsewhere: done
        var sending: [(index: Int, entry: OutboxEntry, request: PushRequest)] = []
        var nothingToSend: [Int64] = []
        var inDoubt: [Int64] = []
        for (index, item) in loaded.enumerated() {
            guard let (entry, state) = item else { continue }
            guard let request = Self.pushRequest(entry, state, endpoint) else {
                nothingToSend.append(entry.seq)  // the server never had it
                continue
            }
            if request.method == "POST", assigns, !entry.sent { inDoubt.append(entry.seq) }
            sending.append((index, entry, request))
        }
        var sentBodies: [String?] = []
        sentBodies.reserveCapacity(sending.count)
        guard let base = endpoint.wireBase(), let collectionURL = endpoint.url(),
              let collectionPath = endpoint.wirePath(collectionURL, base: base) else { return nil }
        // `{"requests":[{"body":…,"headers":{…},"method":…,"path":…},…]}`, written member by
        // member in the byte order of the keys, the text serializing that value would give.
        var writer = JSONWriter(pretty: false, capacity: 512 * sending.count + 16)
        writer.raw("{\"requests\":[")
        for (n, item) in sending.enumerated() {
            if n > 0 { writer.byte(UInt8(ascii: ",")) }
            writer.byte(UInt8(ascii: "{"))
            var sentBody: String?
            if let body = item.request.body {
                let text = JSONText.serialize(body)
                writer.raw("\"body\":")
                writer.string(text)
                writer.byte(UInt8(ascii: ","))
                sentBody = text
            }
            sentBodies.append(sentBody)
            writer.raw("\"headers\":")
            Self.writeHeaders(item.request.headers, into: &writer)
            writer.raw(",\"method\":")
            writer.string(item.request.method)
            writer.raw(",\"path\":")
            writer.string(endpoint.wirePath(of: item.request, collectionPath: collectionPath))
            writer.byte(UInt8(ascii: "}"))
        }
        writer.raw("]}")
        let body = Data(writer.bytes)
        guard body.count <= Self.maxBatchBytes else { return nil }
        if !nothingToSend.isEmpty || !inDoubt.isEmpty {
            // As for one request: POSTs to a server that assigns ids are in doubt from here on.
            let removals = nothingToSend
            let marks = inDoubt
            try await localWrite { tx in
                for seq in removals { try Outbox.remove(seq, in: tx) }
                for seq in marks { try Outbox.modify(seq, in: tx) { $0.sent = true } }
            }
        }
        guard !sending.isEmpty else { return outcomes }

        let answer: HTTPAnswer
        do {
            answer = try await send(endpoint, "POST", endpoint.batchURL(), bodyData: body, report: &report)
        } catch let error as DepotError where error.code == .remote {
            try await recordUnanswered(sending.map(\.entry.seq), error.message, &report)
            for item in sending { outcomes[item.index] = .unreachable }
            return outcomes
        }
        if answer.status == 404 || answer.status == 405 {
            batchMissing.insert(endpoint.baseURL.absoluteString)
            return nil
        }
        if (400..<500).contains(answer.status) { return nil }
        guard (200..<300).contains(answer.status), let results = Self.batchResults(answer), results.count == sending.count else {
            // Not a batch answer: the entries may or may not have been applied. Like a lost
            // answer; their idempotency keys settle it at the next attempt.
            let message = "POST /_batch answered \(answer.status) without one result per request; will retry at the next sync."
            try await recordUnanswered(sending.map(\.entry.seq), message, &report)
            for item in sending { outcomes[item.index] = .unreachable }
            return outcomes
        }

        var successes: [PushSuccess] = []
        var dead: [(entry: OutboxEntry, status: Int, message: String)] = []
        var oneByOne: [(index: Int, entry: OutboxEntry, answer: HTTPAnswer)] = []
        for (n, (item, result)) in zip(sending, results).enumerated() {
            switch Self.pushVerdict(result, item.entry.operation, item.request.method) {
            case .success:
                var sent: (text: String, value: FieldValue)?
                if let text = sentBodies[n], let value = item.request.body { sent = (text, value) }
                successes.append(try PushSuccess(item.entry, method: item.request.method, answer: result, endpoint, sent: sent))
            case .permanent, .notFound:
                dead.append((item.entry, result.status, Self.describe(result)))
                outcomes[item.index] = .deadLettered
            case .conflict, .retry:
                oneByOne.append((item.index, item.entry, result))
            }
        }
        if !successes.isEmpty || !dead.isEmpty {
            let assignment = endpoint.idAssignment
            let recorded = successes
            let refused = dead
            let moves = try await localWrite { tx -> [[(RecordID, RecordID)]] in
                var moves: [[(RecordID, RecordID)]] = []
                for success in recorded { moves.append(try success.record(in: tx, collection, assignment)) }
                for item in refused {
                    try Outbox.modify(item.entry.seq, in: tx) { stored in
                        stored.state = .dead
                        stored.attempts += 1
                        stored.lastError = item.message
                    }
                }
                return moves
            }
            for (success, moved) in zip(successes, moves) { announce(success, moved, collection, &report) }
            for item in dead {
                report.deadLettered += 1
                emit(.deadLettered(collection: name, id: item.entry.recordID, status: item.status))
            }
        }
        var halted = false
        for item in oneByOne {
            if halted {
                outcomes[item.index] = .unreachable
                continue
            }
            try Task.checkCancellation()
            let outcome = try await pushEntry(item.entry, collection, endpoint, &report, firstAnswer: item.answer)
            outcomes[item.index] = outcome
            halted = outcome == .unreachable
        }
        return outcomes
    }

    /// A request's headers as a batch entry carries them: the JSON object of their string
    /// values, exactly as ``JSONText/serialize(_:pretty:)`` writes it (names in byte order,
    /// a lone name that looks like a tag wrapped), without building the object.
    static func writeHeaders(_ headers: [String: String], into writer: inout JSONWriter) {
        if headers.count == 1, let (name, value) = headers.first, JSONWriter.isTag(name) {
            writer.value(.object([name: .string(value)]), level: 0)
            return
        }
        writer.byte(UInt8(ascii: "{"))
        let names = headers.keys.sorted { BinaryText.precedes(BinaryText.prefix($0), $0, BinaryText.prefix($1), $1) }
        for (n, name) in names.enumerated() {
            if n > 0 { writer.byte(UInt8(ascii: ",")) }
            writer.string(name)
            writer.colon()
            writer.string(headers[name] ?? "")
        }
        writer.byte(UInt8(ascii: "}"))
    }

    /// Counts a failed attempt on each entry of a batch that got no usable answer.
    func recordUnanswered(_ seqs: [Int64], _ message: String, _ report: inout SyncReport) async throws {
        try await localWrite { tx in
            for seq in seqs {
                try Outbox.modify(seq, in: tx) { stored in
                    stored.attempts += 1
                    stored.lastError = message
                }
            }
        }
        report.failures.append(message)
    }

    /// The per-request answers of a batch answer, `nil` when it is not one:
    /// `{"results":[{"status":…,"headers":{…},"body":"…"},…]}` (other members skipped, a
    /// header that is not a string dropped, a missing body empty).
    ///
    /// Read member by member, without building the answer's value; text that this reading
    /// does not take (not JSON, a tag-wrapped result) is read again through its parsed value
    /// (``parsedBatchResults(_:)``), which decides.
    static func batchResults(_ answer: HTTPAnswer) -> [HTTPAnswer]? {
        streamedBatchResults(answer) ?? parsedBatchResults(answer)
    }

    /// The per-request answers of a batch answer from its parsed value.
    static func parsedBatchResults(_ answer: HTTPAnswer) -> [HTTPAnswer]? {
        guard case .object(let object)? = try? json(answer), case .array(let items)? = object["results"] else { return nil }
        var out: [HTTPAnswer] = []
        out.reserveCapacity(items.count)
        for item in items {
            guard case .object(let result) = item, let status = result["status"]?.intValue else { return nil }
            var headers: [String: String] = [:]
            if case .object(let given)? = result["headers"] {
                for (name, value) in given { if let text = value.stringValue { headers[name] = text } }
            }
            let body = result["body"]?.stringValue ?? ""
            out.append(HTTPAnswer(status: Int(status), headers: headers, body: Data(body.utf8)))
        }
        return out
    }

    /// The per-request answers of a plain batch answer read over its text; `nil` for any
    /// text it does not take, which ``parsedBatchResults(_:)`` then reads.
    static func streamedBatchResults(_ answer: HTTPAnswer) -> [HTTPAnswer]? {
        struct NotABatch: Error {}
        let bytes = [UInt8](answer.body)
        return bytes.withUnsafeBufferPointer { buffer -> [HTTPAnswer]? in
            // The levels of `json(_:)`: an envelope around records.
            var reader = JSONReader(buffer, maximumDepth: JSONText.maximumDepth + 4, reporting: .text, acceptsLegacyBase64: true)
            var results: [HTTPAnswer]?
            do {
                reader.skipWhitespace()
                guard reader.peek() == UInt8(ascii: "{") else { return nil }
                try reader.readObject { reader, key, _ in
                    guard key == "results" else { _ = try reader.readValue(depth: 1); return }
                    guard reader.peek() == UInt8(ascii: "[") else { throw NotABatch() }
                    var out: [HTTPAnswer] = []
                    try reader.readArray { reader, _ in
                        guard reader.peek() == UInt8(ascii: "{") else { throw NotABatch() }
                        var status: Int64?
                        var headers: [String: String] = [:]
                        var body = ""
                        try reader.readObject { reader, key, _ in
                            let value = try reader.readValue(depth: 3)
                            switch key {
                            case "status": status = value.intValue
                            case "headers":
                                if case .object(let given) = value {
                                    for (name, value) in given { if let text = value.stringValue { headers[name] = text } }
                                }
                            case "body": body = value.stringValue ?? ""
                            default: break
                            }
                        }
                        guard let status else { throw NotABatch() }
                        out.append(HTTPAnswer(status: Int(status), headers: headers, body: Data(body.utf8)))
                    }
                    results = out
                }
                guard reader.atEnd() else { return nil }
            } catch {
                return nil
            }
            return results
        }
    }
}
