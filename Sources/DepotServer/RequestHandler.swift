import DepotCore
import DepotWire
import Foundation

/// Turns one request into one answer over the store. Every failure becomes a 4xx/5xx
/// answer with a JSON error body; nothing here touches the file system.
struct RequestHandler: Sendable {
    let store: Store
    let configuration: DepotServer.Configuration

    func handle(_ request: WireRequest) async -> WireResponse {
        do {
            return try await route(request)
        } catch let failure as HTTPFailure {
            return failure.response
        } catch let error as DepotError {
            return Self.answer(for: error)
        } catch {
            return WireResponse.failure(500, "internal", "The server failed to handle the request.")
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
        default: return WireResponse.failure(500, "internal", "The server failed to handle the request.")
        }
        return WireResponse.failure(status, error.code.name, error.message)
    }

    // MARK: Routing

    func route(_ request: WireRequest) async throws -> WireResponse {
        var segments: [String] = []
        for raw in request.path.split(separator: "/", omittingEmptySubsequences: true) {
            guard let decoded = String(raw).removingPercentEncoding, !decoded.isEmpty else {
                throw HTTPFailure.badRequest("The request path is not valid percent-encoded text.")
            }
            segments.append(decoded)
        }
        let params = try QueryParameters(request.query)
        let method = request.method
        switch segments.count {
        case 0:
            guard method == "GET" else { throw methodNotAllowed(method) }
            return try await listCollections()
        case 1 where segments[0] == "_changes":
            guard method == "GET" else { throw methodNotAllowed(method) }
            return try await changes(params)
        case 1:
            let collection = try collectionName(segments[0])
            switch method {
            case "GET": return try await list(collection, params: params, link: nil)
            case "POST": return try await create(collection, request: request, link: nil)
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
            case "GET": return try await list(child, params: params, link: link)
            case "POST": return try await create(child, request: request, link: link)
            default: throw methodNotAllowed(method)
            }
        default:
            throw HTTPFailure.notFound("No resource at this path.")
        }
    }

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
        for (n, record) in records.enumerated() {
            if n > 0 { bytes.append(0x2C) }
            JSONText.write(record.jsonObject, into: &bytes)
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

    func item(_ collection: CollectionName, idText: String, request: WireRequest, link: Link?) async throws -> WireResponse {
        let kind = try await store.read { tx in try tx.schema(of: collection)?.idKind }
        guard let kind else { throw HTTPFailure.notFound("No collection \(Self.quoted(collection.rawValue)).") }
        let id: RecordID
        switch kind {
        case .int:
            guard let i = Int64(idText) else { throw HTTPFailure.notFound("No record \(Self.quoted(idText)) in \(collection.rawValue).") }
            id = .int(i)
        case .string:
            id = .string(idText)
        }
        switch request.method {
        case "GET": return try await get(collection, id: id, request: request, link: link)
        case "PUT", "PATCH": return try await replace(collection, id: id, request: request, merge: request.method == "PATCH", link: link)
        case "DELETE": return try await delete(collection, id: id, request: request)
        default: throw methodNotAllowed(request.method)
        }
    }

    func get(_ collection: CollectionName, id: RecordID, request: WireRequest, link: Link?) async throws -> WireResponse {
        let record = try await store.read { tx in try tx.get(id, from: collection) }
        guard let record, link.map({ record[$0.field] == $0.value }) ?? true else {
            throw HTTPFailure.notFound("No record \(id) in \(collection.rawValue).")
        }
        let etag = WireETag.of(record)
        if let none = request.headers["if-none-match"], WireETag.ifMatch(none, admits: etag) {
            return WireResponse(status: 304, headers: [("ETag", etag)], body: "")
        }
        return .json(200, record.jsonText, [("ETag", etag)])
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
        if !keepNulls { fields = fields.filter { !$0.value.isNull } }
        return (id, fields)
    }

    func create(_ collection: CollectionName, request: WireRequest, link: Link?) async throws -> WireResponse {
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
        let newUUID = UUID().canonicalText
        return try await performWrite(request) { tx in
            let id: RecordID
            if let givenID {
                if try tx.get(givenID, from: collection) != nil {
                    throw HTTPFailure(status: 409, code: "alreadyExists", message: "A record with id \(givenID) exists in \(collection.rawValue).")
                }
                try tx.insert(Record(id: givenID, fields: fieldsToWrite), into: collection)
                id = givenID
            } else if try tx.schema(of: collection)?.idKind == .string {
                id = .string(newUUID)
                try tx.insert(Record(id: id, fields: fieldsToWrite), into: collection)
            } else {
                id = try tx.insert(fields: fieldsToWrite, into: collection)
            }
            let record = Record(id: id, fields: fieldsToWrite)
            let etag = WireETag.of(record)
            let location = "/" + collection.rawValue + "/" + Self.pathText(id)
            return .json(201, record.jsonText, [("ETag", etag), ("Location", location)])
        }
    }

    static func pathText(_ id: RecordID) -> String {
        switch id {
        case .int(let i): return String(i)
        case .string(let s): return s.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? s
        }
    }

    func replace(_ collection: CollectionName, id: RecordID, request: WireRequest, merge: Bool, link: Link?) async throws -> WireResponse {
        var (idValue, fields) = try Self.parseBody(request.body, keepNulls: merge)
        if let idValue, !idValue.isNull, RecordID(idValue) != id {
            throw HTTPFailure.badRequest("The body's 'id' differs from the id in the path.")
        }
        if let link, !merge, fields[link.field] == nil { fields[link.field] = link.value }
        let ifMatch = request.headers["if-match"]
        let changes = fields
        return try await performWrite(request) { tx in
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
            let etag = WireETag.of(record)
            return .json(200, record.jsonText, [("ETag", etag)])
        }
    }

    func delete(_ collection: CollectionName, id: RecordID, request: WireRequest) async throws -> WireResponse {
        let ifMatch = request.headers["if-match"]
        return try await performWrite(request) { tx in
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

    /// Runs a write through the store with its idempotency record in one transaction; the
    /// change log is written by the store's ``ChangeLogRecorder`` in the same transaction.
    ///
    /// With an `Idempotency-Key`, a key seen before with the same request replays the stored
    /// answer; the same key with a different request is a 422. Only successful answers are
    /// stored: a failed write rolls back and may be retried with the same key.
    func performWrite(
        _ request: WireRequest,
        _ body: @escaping @Sendable (StoreWriteTransaction) throws -> WireResponse
    ) async throws -> WireResponse {
        let key = request.headers["idempotency-key"]
        if let key {
            guard !key.isEmpty, key.utf8.count <= 255, key.unicodeScalars.allSatisfy({ $0.value >= 0x21 && $0.value < 0x7F }) else {
                throw HTTPFailure.badRequest("Idempotency-Key must be 1 to 255 printable ASCII characters.")
            }
        }
        let fingerprint = request.method + " " + request.path + " " + WireETag.hash(request.body) + " " + (request.headers["if-match"] ?? "")
        do {
            return try await store.write { tx in
                if let key, let seen = try tx.get(.string(key), from: WireCollections.idempotency) {
                    guard seen["fingerprint"].stringValue == fingerprint else {
                        throw HTTPFailure(status: 422, code: "idempotencyKeyReused", message: "This Idempotency-Key was used with a different request.")
                    }
                    var headers: [(String, String)] = [("Idempotent-Replayed", "true")]
                    if let etag = seen["etag"].stringValue { headers.append(("ETag", etag)) }
                    if let location = seen["location"].stringValue { headers.append(("Location", location)) }
                    return WireResponse(status: Int(seen["status"].intValue ?? 200), headers: headers, body: seen["body"].stringValue ?? "")
                }
                let response = try body(tx)
                if let key {
                    var fields: [String: FieldValue] = [
                        "fingerprint": .string(fingerprint), "status": .int(Int64(response.status)), "body": .string(response.body),
                    ]
                    for (name, value) in response.headers {
                        if name == "ETag" { fields["etag"] = .string(value) }
                        if name == "Location" { fields["location"] = .string(value) }
                    }
                    try tx.insert(Record(id: .string(key), fields: fields), into: WireCollections.idempotency)
                }
                return response
            }
        } catch let failure as HTTPFailure {
            throw failure
        }
    }
}
