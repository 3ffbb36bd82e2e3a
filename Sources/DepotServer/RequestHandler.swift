import DepotCore
import DepotWire
import Foundation

/// Turns one request into one answer over the store. Every failure becomes a 4xx/5xx
/// answer with a JSON error body; nothing here touches the file system.
struct RequestHandler: Sendable {
    let store: Store
    let configuration: DepotServer.Configuration
    /// Single write requests that arrive together share transactions (``WriteGroup``).
    let writeGroup = WriteGroup()

    func handle(_ request: WireRequest) async -> WireResponse {
        do {
            return try await route(request)
        } catch {
            return Self.failureResponse(error)
        }
    }

    /// Handles `POST /_batch` applying at most `limit` entries (the `.loseResponseMidBatch`
    /// test fault; its answer is never sent).
    func handleBatch(_ request: WireRequest, applyingAtMost limit: Int) async -> WireResponse {
        do {
            return try await batch(request, applyingAtMost: limit)
        } catch {
            return Self.failureResponse(error)
        }
    }

    /// Maps a store error to an HTTP answer; the message is the error's user-safe message.
    static func answer(for error: DepotError) -> WireResponse {
        let status: Int
        switch error.code {
        case .notFound: status = 404
        case .alreadyExists, .uniqueViolation, .conflict: status = 409
        case .invalidName, .invalidValue, .invalidQuery, .decoding, .encoding, .schemaMismatch: status = 400
        case .locked: status = 503
        case .unsupported: status = 501
        case .closed: status = 503
        default: return WireResponse.internalFailure
        }
        return WireResponse.failure(status, error.code.name, error.message)
    }

    // MARK: Routing

    func route(_ request: WireRequest) async throws -> WireResponse {
        switch try await resolve(request, inBatch: false) {
        case .answer(let response): return response
        case .write(let write):
            let handler = self
            return await writeGroup.submit(write) { writes in await handler.applyAll(writes) }
        case .batch: return try await batch(request)
        }
    }

    /// What a request resolves to before anything is written.
    enum Resolved: Sendable {
        /// A read (or a failure found early): the answer itself.
        case answer(WireResponse)
        /// A write, checked as far as it can be without the store; a single request's runs
        /// through ``WriteGroup`` (alone or beside others that arrived with it).
        case write(PlannedWrite)
        /// `POST /_batch` (RequestHandler+Batch.swift).
        case batch
    }

    /// Resolves a request: reads are answered, writes are parsed and checked into a
    /// ``PlannedWrite`` that a single request runs in its own transaction and a batch runs
    /// beside other entries (Docs/Server.md, "Batched writes"). `inBatch` refuses the
    /// routes a batch entry may not take (reads, the change feed, a nested batch).
    func resolve(_ request: WireRequest, inBatch: Bool) async throws -> Resolved {
        var segments: [String] = []
        for raw in request.path.split(separator: "/", omittingEmptySubsequences: true) {
            // A segment without `%` is its own decoding (no Foundation call per request).
            if !raw.utf8.contains(UInt8(ascii: "%")) {
                segments.append(String(raw))
                continue
            }
            guard let decoded = String(raw).removingPercentEncoding, !decoded.isEmpty else {
                throw HTTPFailure.badRequest("The request path is not valid percent-encoded text.")
            }
            segments.append(decoded)
        }
        let params = try QueryParameters(request.query)
        let method = request.method
        if inBatch, !Self.writeMethods.contains(method) { throw methodNotAllowed(method) }
        switch segments.count {
        case 0:
            guard method == "GET" else { throw methodNotAllowed(method) }
            return .answer(try await listCollections())
        case 1 where segments[0] == "_changes":
            guard method == "GET" else { throw methodNotAllowed(method) }
            return .answer(try await changes(params))
        case 1 where segments[0] == Self.batchSegment:
            guard !inBatch else { throw methodNotAllowed(method) }
            switch method {
            case "GET": return .answer(batchLimits())
            case "POST": return .batch
            default: throw methodNotAllowed(method)
            }
        case 1:
            let collection = try collectionName(segments[0])
            switch method {
            case "GET": return .answer(try await list(collection, params: params, link: nil))
            case "POST": return .write(try create(collection, request: request, link: nil))
            default: throw methodNotAllowed(method)
            }
        case 2:
            let collection = try collectionName(segments[0])
            return try await item(collection, idText: segments[1], request: request, link: nil)
        case 3, 4:
            let parent = try collectionName(segments[0])
            let child = try collectionName(segments[2])
            let link = try Link(field: Self.linkField(for: parent), value: QueryParameters.literal(segments[1]))
            if segments.count == 4 {
                return try await item(child, idText: segments[3], request: request, link: link)
            }
            switch method {
            case "GET": return .answer(try await list(child, params: params, link: link))
            case "POST": return .write(try create(child, request: request, link: link))
            default: throw methodNotAllowed(method)
            }
        default:
            throw HTTPFailure.notFound("No resource at this path.")
        }
    }

    /// The methods that write; the only ones a batch entry may use.
    static let writeMethods: Set<String> = ["POST", "PUT", "PATCH", "DELETE"]

    /// A nested resource `/posts/1/comments` means comments whose link field `postId` is 1.
    struct Link {
        var field: String
        var value: FieldValue
    }

    /// `posts` → `postId`: the parent's name without a final `s`, then `Id`.
    static func linkField(for parent: CollectionName) throws -> String {
        var base = parent.rawValue
        if base.count > 1, base.hasSuffix("s") { base.removeLast() }
        let field = base + "Id"
        guard FieldName.isValid(field) else { throw HTTPFailure.badRequest("No link field can be derived from this parent collection.") }
        return field
    }

    func collectionName(_ text: String) throws -> CollectionName {
        guard let name = try? CollectionName(text) else {
            throw HTTPFailure.notFound("No collection \(Self.quoted(text)).")
        }
        return name
    }

    func methodNotAllowed(_ method: String) -> HTTPFailure {
        HTTPFailure(status: 405, code: "methodNotAllowed", message: "This method is not allowed on this path.")
    }

    static func quoted(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(40) {
            if scalar.value < 0x20 || scalar.value == 0x7F { out += "?" } else { out.unicodeScalars.append(scalar) }
        }
        return "'" + out + (text.unicodeScalars.count > 40 ? "…'" : "'")
    }

    // MARK: Reading

    func listCollections() async throws -> WireResponse {
        let names = try await store.collectionNames().map(\.rawValue)
        let body = JSONText.serialize(.object(["collections": .array(names.map { .string($0) })]))
        return .json(200, body)
    }

    func list(_ collection: CollectionName, params: QueryParameters, link: Link?) async throws -> WireResponse {
        var query = try params.query(maxPageSize: configuration.maxPageSize)
        if let link { query.filter = query.filter && .equal(link.field, link.value) }
        let q = query
        let result = try await store.read { tx -> (Int, [Record])? in
            guard try tx.schema(of: collection) != nil else { return nil }
            return (try tx.count(q.filter, in: collection), try tx.query(q, in: collection))
        }
        guard let (total, records) = result else { throw HTTPFailure.notFound("No collection \(Self.quoted(collection.rawValue)).") }
        var bytes: [UInt8] = [0x5B]
        bytes.reserveCapacity(records.count * 128 + 2)
        for (n, record) in records.enumerated() {
            if n > 0 { bytes.append(0x2C) }
            JSONText.appendRecord(id: record.id, fields: record.fields, to: &bytes)
        }
        bytes.append(0x5D)
        let body = String(decoding: bytes, as: UTF8.self)
        return .json(200, body, [("X-Total-Count", String(total)), ("Access-Control-Expose-Headers", "X-Total-Count, ETag")])
    }

    func changes(_ params: QueryParameters) async throws -> WireResponse {
        let since = try params.int("since") ?? 0
        let limit = min(try params.int("limit") ?? 100, configuration.maxPageSize)
        guard since >= 0, limit >= 1 else { throw HTTPFailure.badRequest("'since' must be 0 or more and 'limit' 1 or more.") }

        var filter: Filter = Field.id > since
        if let name = params.single("collection") { filter = filter && .equal("collection", .string(try collectionName(name).rawValue)) }
        let query = Query(filter: filter, sort: [SortKey("id")], limit: limit + 1)
        let page = try await store.read { tx -> ([FieldValue], Int64, Bool) in
            // Tombstones up to the horizon have expired: from an older cursor a deletion could
            // be missed, so the client must list the collection again (Docs/Server.md, "Retention").
            if since > 0, let horizon = try tx.get(Retention.horizonKey, from: WireCollections.changeHorizon)?["seq"].intValue, Int64(since) < horizon {
                throw HTTPFailure(
                    status: 410, code: "cursorExpired",
                    message: "The cursor is older than the server's retention window; list the collection again, then follow the feed from its new cursor.")
            }
            let entries = try tx.query(query, in: WireCollections.changes)
            var items: [FieldValue] = []
            var last = Int64(since)
            for entry in entries.prefix(limit) {
                guard case .int(let seq) = entry.id, let name = entry["collection"].stringValue,
                    let id = RecordID(entry["recordId"]), let op = entry["op"].stringValue
                else {
                    throw DepotError(.corrupted, "Change-log entry \(entry.id) is damaged.", collection: WireCollections.changes.rawValue, id: entry.id)
                }
                let collection = try CollectionName(name)
                last = seq
                var item: [String: FieldValue] = ["seq": .int(seq), "collection": .string(name), "id": id.fieldValue, "op": .string(op)]
                if op == "upsert" {
                    guard let record = try tx.get(id, from: collection) else { continue }
                    item["record"] = record.jsonObject
                    item["etag"] = .string(WireETag.of(record))
                }
                items.append(.object(item))
            }
            return (items, last, entries.count > limit)
        }
        let body = JSONText.serialize(.object(["changes": .array(page.0), "next": .string(String(page.1)), "hasMore": .bool(page.2)]))
        return .json(200, body)
    }

    // MARK: Items

    func item(_ collection: CollectionName, idText: String, request: WireRequest, link: Link?) async throws -> Resolved {
        switch request.method {
        case "GET":
            // One read transaction: the id's kind and the record.
            let (id, record) = try await store.read { tx in
                let id = try Self.recordID(idText, in: collection, tx)
                return (id, try tx.get(id, from: collection))
            }
            return .answer(try get(collection, id: id, found: record, request: request, link: link))
        case "PUT", "PATCH": return .write(try replace(collection, idText: idText, request: request, merge: request.method == "PATCH", link: link))
        case "DELETE": return .write(try delete(collection, idText: idText, request: request))
        default: throw methodNotAllowed(request.method)
        }
    }

    /// The id an item path names, parsed by the collection's id kind: a missing collection,
    /// or `/posts/abc` on an integer collection, is a 404.
    static func recordID(_ idText: String, in collection: CollectionName, _ tx: StoreReadTransaction) throws -> RecordID {
        guard let kind = try tx.schema(of: collection)?.idKind else { throw HTTPFailure.notFound("No collection \(quoted(collection.rawValue)).") }
        switch kind {
        case .int:
            guard let i = Int64(idText) else { throw HTTPFailure.notFound("No record \(quoted(idText)) in \(collection.rawValue).") }
            return .int(i)
        case .string:
            return .string(idText)
        }
    }

    /// The answer to `GET` of the record with `id`, read as `found`: a 404 when there is
    /// none (or it is not the link's), a 304 when the request's `If-None-Match` admits its tag.
    func get(_ collection: CollectionName, id: RecordID, found record: Record?, request: WireRequest, link: Link?) throws -> WireResponse {
        guard let record, link.map({ record[$0.field] == $0.value }) ?? true else {
            throw HTTPFailure.notFound("No record \(id) in \(collection.rawValue).")
        }
        let text = record.jsonText
        let etag = WireETag.of(jsonText: text)
        if let none = request.headers["if-none-match"], WireETag.ifMatch(none, admits: etag) {
            return WireResponse(status: 304, headers: [("ETag", etag)], body: "")
        }
        return .json(200, text, [("ETag", etag)])
    }

    // MARK: Writing

    /// Parses a JSON object body into an optional id and validated fields. The body is
    /// Depot's JSON text; `{"$base64": ...}` from clients of the older wire is read as bytes
    /// (Docs/Server.md, "JSON on the wire").
    static func parseBody(_ bytes: [UInt8], keepNulls: Bool) throws -> (FieldValue?, [String: FieldValue]) {
        let value: FieldValue
        do { value = try JSONText.parse(bytes, acceptingLegacyBase64: true) } catch let error as DepotError {
            throw HTTPFailure.badRequest("The body is not valid JSON: \(error.message)")
        }
        guard case .object(var fields) = value else { throw HTTPFailure.badRequest("The body must be a JSON object.") }
        let id = fields.removeValue(forKey: "id")
        for (name, field) in fields {
            guard FieldName.isValid(name) else { throw HTTPFailure.badRequest("Field name \(quoted(name)) is not allowed.") }
            do { try field.validate(field: name) } catch let error as DepotError { throw HTTPFailure.badRequest(error.message) }
        }
        // A new table only when there is a null to drop.
        if !keepNulls, fields.values.contains(where: \.isNull) { fields = fields.filter { !$0.value.isNull } }
        return (id, fields)
    }

    func create(_ collection: CollectionName, request: WireRequest, link: Link?) throws -> PlannedWrite {
        var (idValue, fields) = try Self.parseBody(request.body, keepNulls: false)
        if let link, fields[link.field] == nil { fields[link.field] = link.value }
        let givenID: RecordID?
        if let idValue, !idValue.isNull {
            guard let id = RecordID(idValue) else { throw HTTPFailure.badRequest("'id' must be an integer or a string.") }
            do { try id.validate() } catch let error as DepotError { throw HTTPFailure.badRequest(error.message) }
            givenID = id
        } else {
            givenID = nil
        }
        let fieldsToWrite = fields
        // With the id in the request the answer is known now: it is encoded here, not on the
        // store's writer inside the transaction.
        let known = givenID.map { Self.created(collection, $0, fieldsToWrite) }
        return try Self.plan(request, answer: known) { tx in
            if let givenID, let known {
                // The insert itself finds a taken id: no read of the record first.
                do {
                    try tx.insert(Record(id: givenID, fields: fieldsToWrite), into: collection)
                } catch let error as DepotError where error.code == .alreadyExists {
                    throw HTTPFailure(status: 409, code: "alreadyExists", message: "A record with id \(givenID) exists in \(collection.rawValue).")
                }
                return known
            }
            let id: RecordID
            if try tx.schema(of: collection)?.idKind == .string {
                // A new id per attempt: an attempt that does not commit leaves nothing behind.
                id = .string(UUID.random().canonicalText)
                try tx.insert(Record(id: id, fields: fieldsToWrite), into: collection)
            } else {
                id = try tx.insert(fields: fieldsToWrite, into: collection)
            }
            return Self.created(collection, id, fieldsToWrite)
        }
    }

    /// The 201 answer to a create: the record as sent, its ETag and its location.
    static func created(_ collection: CollectionName, _ id: RecordID, _ fields: [String: FieldValue]) -> WireResponse {
        let text = Record(id: id, fields: fields).jsonText
        let location = "/" + collection.rawValue + "/" + pathText(id)
        return .json(201, text, [("ETag", WireETag.of(jsonText: text)), ("Location", location)])
    }

    static func pathText(_ id: RecordID) -> String {
        switch id {
        case .int(let i): return String(i)
        case .string(let s):
            if URLText.isUnreserved(s) { return s }
            return s.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? s
        }
    }

    func replace(_ collection: CollectionName, idText: String, request: WireRequest, merge: Bool, link: Link?) throws -> PlannedWrite {
        var (idValue, fields) = try Self.parseBody(request.body, keepNulls: merge)
        if let link, !merge, fields[link.field] == nil { fields[link.field] = link.value }
        let ifMatch = request.headers["if-match"]
        let changes = fields
        let bodyID = idValue
        return try Self.plan(request) { tx in
            let id = try Self.recordID(idText, in: collection, tx)
            if let bodyID, !bodyID.isNull, RecordID(bodyID) != id {
                throw HTTPFailure.badRequest("The body's 'id' differs from the id in the path.")
            }
            guard let current = try tx.get(id, from: collection) else {
                throw HTTPFailure.notFound("No record \(id) in \(collection.rawValue).")
            }
            try Self.check(ifMatch: ifMatch, current: current)
            var record = Record(id: id, fields: changes)
            if merge {
                record.fields = current.fields
                for (name, value) in changes {
                    if value.isNull { record.fields.removeValue(forKey: name) } else { record.fields[name] = value }
                }
            }
            try tx.update(record, in: collection)
            let text = record.jsonText
            return .json(200, text, [("ETag", WireETag.of(jsonText: text))])
        }
    }

    func delete(_ collection: CollectionName, idText: String, request: WireRequest) throws -> PlannedWrite {
        let ifMatch = request.headers["if-match"]
        return try Self.plan(request) { tx in
            let id = try Self.recordID(idText, in: collection, tx)
            guard let current = try tx.get(id, from: collection) else {
                throw HTTPFailure.notFound("No record \(id) in \(collection.rawValue).")
            }
            try Self.check(ifMatch: ifMatch, current: current)
            try tx.delete(id, from: collection)
            return .json(200, "{}")
        }
    }

    static func check(ifMatch: String?, current: Record) throws {
        guard let ifMatch else { return }
        let etag = WireETag.of(current)
        guard WireETag.ifMatch(ifMatch, admits: etag) else {
            throw HTTPFailure(status: 412, code: "preconditionFailed", message: "The record changed: its ETag no longer matches If-Match.", headers: [("ETag", etag)])
        }
    }

    /// Checks a write's `Idempotency-Key` and takes its fingerprint (method, path, body hash,
    /// `If-Match`); `body` is the write itself, run later by ``apply(_:in:)``. `answer` is
    /// what `body` answers when it succeeds, when the request alone decides it
    /// (``PlannedWrite/answer``).
    /// - Throws: ``HTTPFailure`` 400 for a malformed key.
    static func plan(
        _ request: WireRequest,
        answer: WireResponse? = nil,
        _ body: @escaping @Sendable (StoreWriteTransaction) throws -> WireResponse
    ) throws -> PlannedWrite {
        let key = request.headers["idempotency-key"]
        if let key {
            guard !key.isEmpty, key.utf8.count <= 255, key.unicodeScalars.allSatisfy({ $0.value >= 0x21 && $0.value < 0x7F }) else {
                throw HTTPFailure.badRequest("Idempotency-Key must be 1 to 255 printable ASCII characters.")
            }
        }
        // Only a keyed write is ever compared with an earlier one.
        let fingerprint = key == nil ? "" : request.method + " " + request.path + " " + WireETag.hash(request.body) + " " + (request.headers["if-match"] ?? "")
        return PlannedWrite(key: key, fingerprint: fingerprint, answer: answer, body: body)
    }

    /// Runs one write in its own transaction with its idempotency record; the change log is
    /// written by the store's ``ChangeLogRecorder`` in the same transaction.
    func perform(_ write: PlannedWrite) async throws -> WireResponse {
        try await store.write { tx in try Self.apply(write, in: tx) }
    }

    /// Applies one planned write inside `tx`, the one code path of single requests and batch
    /// entries.
    ///
    /// With an `Idempotency-Key`, a key seen before with the same request replays the stored
    /// answer; the same key with a different request is a 422. Only successful answers are
    /// stored: a failed write throws, its transaction rolls back, and it may be retried with
    /// the same key. An answer the request alone decides (``PlannedWrite/answer``) is not
    /// copied into the record, which says so (`"answer": "request"`): a replay carries the
    /// same request (the fingerprint hashes its body), so the answer is built again from it,
    /// the same bytes (Docs/Server.md, "Idempotency keys").
    static func apply(_ write: PlannedWrite, in tx: StoreWriteTransaction) throws -> WireResponse {
        if let key = write.key, let seen = try tx.get(.string(key), from: WireCollections.idempotency) {
            guard seen["fingerprint"].stringValue == write.fingerprint else {
                throw HTTPFailure(status: 422, code: "idempotencyKeyReused", message: "This Idempotency-Key was used with a different request.")
            }
            var headers: [(String, String)] = [("Idempotent-Replayed", "true")]
            if seen[Self.answerField].stringValue == Self.answerFromRequest {
                guard let answer = write.answer else {
                    throw DepotError(.internal, "The idempotency record of this key keeps no answer, and this request does not decide one.")
                }
                return WireResponse(status: answer.status, headers: headers + answer.headers, body: answer.body)
            }
            if let etag = seen["etag"].stringValue { headers.append(("ETag", etag)) }
            if let location = seen["location"].stringValue { headers.append(("Location", location)) }
            return WireResponse(status: Int(seen["status"].intValue ?? 200), headers: headers, body: seen["body"].stringValue ?? "")
        }
        let response = try write.body(tx)
        if let key = write.key {
            var fields: [String: FieldValue] = [
                "fingerprint": .string(write.fingerprint), "status": .int(Int64(response.status)), "at": .int(Retention.milliseconds(Date())),
            ]
            if let answer = write.answer, answer.status == response.status, answer.body == response.body {
                fields[Self.answerField] = .string(Self.answerFromRequest)
            } else {
                fields["body"] = .string(response.body)
                for (name, value) in response.headers {
                    if name == "ETag" { fields["etag"] = .string(value) }
                    if name == "Location" { fields["location"] = .string(value) }
                }
            }
            try tx.insert(Record(id: .string(key), fields: fields), into: WireCollections.idempotency)
        }
        return response
    }

    /// The field of an idempotency record that says where its answer is, and its one value:
    /// built again from the request (``apply(_:in:)``). A record without it holds the answer.
    static let answerField = "answer"
    static let answerFromRequest = "request"
}

/// A write resolved from its request and checked as far as it can be without the store:
/// what a single request runs in its own transaction and a batch runs beside other entries.
struct PlannedWrite: Sendable {
    /// The `Idempotency-Key`, already checked.
    var key: String?
    /// Method, path, body hash and `If-Match`: what a replayed key must match.
    var fingerprint: String
    /// What ``body`` answers when it succeeds, when the request alone decides it (a create
    /// that names its id): its idempotency record then keeps no copy of it.
    var answer: WireResponse?
    /// The write itself; throws ``HTTPFailure`` or ``DepotError`` to refuse it.
    var body: @Sendable (StoreWriteTransaction) throws -> WireResponse
}
