import DepotCore
import Foundation

/// How a server pages a list: the query parameters asking for page `pageIndex` (from 0) of
/// `pageSize` items.
///
/// ```swift
/// resource.paging = .range                        // ?_start=40&_limit=20
/// resource.paging = .page                         // ?_page=3&_per_page=20
/// resource.paging = .custom { index, size in      // ?offset=40&count=20
///     [("offset", String(index * size)), ("count", String(size))]
/// }
/// ```
public struct RemotePaging: Sendable {
    /// The parameters for page `pageIndex` (from 0) of `pageSize` items.
    public var parameters: @Sendable (_ pageIndex: Int, _ pageSize: Int) -> [(String, String)]

    /// Paging by any parameters `parameters` returns.
    public init(_ parameters: @escaping @Sendable (_ pageIndex: Int, _ pageSize: Int) -> [(String, String)]) {
        self.parameters = parameters
    }

    /// json-server's `_start` (an offset from 0) and `_limit`.
    public static var range: RemotePaging {
        RemotePaging { index, size in [("_start", String(index * size)), ("_limit", String(size))] }
    }

    /// json-server's `_page` (from 1) and `_per_page`.
    public static var page: RemotePaging {
        RemotePaging { index, size in [("_page", String(index + 1)), ("_per_page", String(size))] }
    }

    /// Any other scheme.
    public static func custom(_ parameters: @escaping @Sendable (_ pageIndex: Int, _ pageSize: Int) -> [(String, String)]) -> RemotePaging {
        RemotePaging(parameters)
    }
}

/// Where the payload sits inside the server's answers: dotted paths, `nil` for the answer
/// itself. `{"data": {"items": [...], "total": 52}}` is `list: "data.items"`, `total: "data.total"`.
public struct RemoteEnvelope: Sendable, Hashable {
    /// The path to the object in single-object answers (`data`), or `nil`.
    public var single: String?
    /// The path to the array in list answers (`data.items`), or `nil`.
    public var list: String?
    /// The path to the total count in list answers, when the server sends one there; the
    /// `X-Total-Count` header is read either way.
    public var total: String?

    /// An envelope; the default is none (bare objects and arrays).
    public init(single: String? = nil, list: String? = nil, total: String? = nil) {
        self.single = single
        self.list = list
        self.total = total
    }

    static func dig(_ value: FieldValue, _ path: String?) -> FieldValue? {
        guard let path else { return value }
        var current = value
        for key in path.split(separator: ".") {
            guard let next = current.objectValue?[String(key)] else { return nil }
            current = next
        }
        return current
    }
}

/// Which kind of answer a ``RemoteResource/preprocess`` closure is given.
public enum RemoteAnswerShape: Sendable, Hashable {
    /// An answer holding one object (fetch, create, replace, patch).
    case single
    /// An answer holding a list.
    case list
}

/// One page of a list.
public struct RemotePage<Item: Sendable>: Sendable {
    /// The items, in the server's order.
    public var items: [Item]
    /// The page's index, from 0.
    public var index: Int
    /// The total number of items, when the server said (`X-Total-Count`, or the envelope).
    public var total: Int?
    /// `false` when this page is the last: the total is reached, or the page is not full.
    public var hasMore: Bool
}

/// A REST resource of typed models: fetch one by id, fetch a page of a list, create,
/// replace, patch and delete, each answering models or a typed error.
///
/// What goes on the wire is the model's record, as the store keeps it: `encodeRecord(into:)`
/// and `init(record:)`, which apply a `@Model`'s transformers, so a date stored as integer
/// milliseconds or an encrypted field is the same on the wire as in the store. Field names
/// then go through ``keyMapping``; the JSON is Depot's one dialect (`JSONText`).
///
/// ```swift
/// var posts = RemoteResource<Post>(baseURL: server, path: "/posts")
/// posts.keyMapping = ["title": "post_title"]          // model field -> server key
/// posts.envelope = RemoteEnvelope(single: "data", list: "data.items")
/// posts.paging = .range
/// posts.requestHook = { request in
///     request.headers["Authorization"] = "Bearer \(token)"   // never logged, never in errors
/// }
/// let first = try await posts.list(page: 0, size: 20)
/// let created = try await posts.create(Post(id: nil, userId: 1, title: "Hello"))
/// ```
///
/// Requests are sent through an ``HTTPTransport`` (URLSession by default). Timeouts,
/// connection failures, 408, 425, 429 and 5xx are retried by ``retryPolicy`` (exponential
/// backoff with full jitter, `Retry-After` honoured) for `GET`, `PUT` and `DELETE`, and for
/// `POST` and `PATCH` only when they carry an idempotency key. Cancelling the task stops
/// the request and any wait between attempts (``DepotError`` `.cancelled`).
public struct RemoteResource<M: StoredModel>: Sendable {
    /// The server's base URL, for example `https://api.example.com/v1`.
    public var baseURL: URL
    /// The path of the list, for example `/posts` or `/users/7/posts`; items are at
    /// `path/ID`. Checked on every request: it must start with `/` and hold only letters,
    /// digits, `/` and `-._~%@:+,;=`, never `..`.
    public var path: String
    /// The list's path computed from a model at request time, for the writes that have one
    /// (`{ "/users/\($0.userId)/posts" }`); ``path`` when `nil`.
    public var modelPath: (@Sendable (M) throws -> String)?
    /// Model field name -> server JSON key, for the fields whose names differ.
    public var keyMapping: [String: String]
    /// The server's key for the id (`id`; `_id` for some servers).
    public var idKey: String
    /// Where the payload sits in answers.
    public var envelope: RemoteEnvelope
    /// Runs on every parsed answer before the envelope is unwrapped, for any other shape.
    public var preprocess: (@Sendable (FieldValue, RemoteAnswerShape) throws -> FieldValue)?
    /// The paging parameters of lists.
    public var paging: RemotePaging
    /// The parameter carrying the sort order of lists (`_sort=a,-b`); `nil` sends none.
    public var sortParameter: String?
    /// Called on every request before it is sent: add headers (auth tokens) and parameters
    /// (`request.setQueryItem("device", id)`). Headers it sets or changes are treated as
    /// sensitive: never logged, dropped on a redirect to another host, and, with the values
    /// of parameters it adds, redacted from error messages.
    public var requestHook: (@Sendable (inout HTTPRequestSpec) -> Void)?
    /// Sends the requests.
    public var transport: any HTTPTransport
    /// How failed requests are retried.
    public var retryPolicy: RetryPolicy
    /// Waits between retries (inject one in tests).
    public var sleeper: any SyncSleeper
    /// Jitter for retries (inject a seeded one in tests).
    public var random: any SyncRandomSource
    /// Allows plain `http://` to a host other than loopback. Off by default.
    public var allowInsecureHTTP: Bool

    /// A resource at `path` of `baseURL`, with json-server defaults: ids under `id`, no
    /// envelope, `_page`/`_per_page` paging, `_sort`.
    public init(
        baseURL: URL, path: String, transport: any HTTPTransport = URLSessionTransport(),
        retryPolicy: RetryPolicy = RetryPolicy(), sleeper: any SyncSleeper = TaskSleeper(),
        random: any SyncRandomSource = SystemRandomSource()
    ) {
        self.baseURL = baseURL
        self.path = path
        self.modelPath = nil
        self.keyMapping = [:]
        self.idKey = "id"
        self.envelope = RemoteEnvelope()
        self.preprocess = nil
        self.paging = .page
        self.sortParameter = "_sort"
        self.requestHook = nil
        self.transport = transport
        self.retryPolicy = retryPolicy
        self.sleeper = sleeper
        self.random = random
        self.allowInsecureHTTP = false
    }

    /// This resource at another list path (`/users/\(id)/posts`), everything else kept.
    public func at(_ path: String) -> RemoteResource<M> {
        var copy = self
        copy.path = path
        copy.modelPath = nil
        return copy
    }

    /// The resource of `parent`'s related models, following a has-many relation:
    /// `posts.nested(Post.comments, of: post)` is `/posts/1/comments`. The segment is the
    /// relation's name unless `segment` says otherwise. The connection (base URL, transport,
    /// hooks, retries, paging, envelope, pre-processing) is this resource's; the key mapping
    /// starts empty (set the child's own).
    /// - Throws: ``DepotError`` `.invalidValue` when `parent` has no id or the path is not valid.
    public func nested<Child: StoredModel>(_ relation: HasMany<M, Child>, of parent: M, segment: String? = nil) throws -> RemoteResource<Child> {
        let parentPath = try itemPath(for: parent, method: "GET")
        var child = RemoteResource<Child>(baseURL: baseURL, path: parentPath + "/" + (segment ?? relation.descriptor.name), transport: transport, retryPolicy: retryPolicy, sleeper: sleeper, random: random)
        child.idKey = idKey
        child.envelope = envelope
        child.preprocess = preprocess
        child.paging = paging
        child.sortParameter = sortParameter
        child.requestHook = requestHook
        child.allowInsecureHTTP = allowInsecureHTTP
        _ = try Self.checkedPath(child.path, request: "GET " + child.path)
        return child
    }

    // MARK: Operations

    /// The model with `id`.
    /// - Throws: ``DepotError`` `.notFound` for a 404, `.remote`, `.decoding`, `.cancelled`
    ///   (see ``RemoteFailure``).
    public func fetch(id: M.ID) async throws -> M {
        let recordID = try requireID(id.recordID, "GET")
        let itemPath = try checkedItemPath(path, recordID, "GET")
        let answer = try await send("GET", itemPath)
        return try decode(try single(answer, "GET " + itemPath), answer)
    }

    /// Page `page` (from 0) of `size` models, in `sort` order (model field names; the id
    /// when empty), with extra `parameters` (filters).
    /// - Throws: as ``fetch(id:)``; a 404 is an error, not an empty page.
    public func list(page: Int = 0, size: Int = 20, sort: [SortKey] = [], parameters: [(String, String)] = []) async throws -> RemotePage<M> {
        let (records, total, hasMore, answer) = try await listRecords(page: page, size: size, sort: sort, parameters: parameters)
        return RemotePage(items: try records.map { try decode($0, answer) }, index: page, total: total, hasMore: hasMore)
    }

    /// Creates `model` with `POST` to its list path, and returns the server's record (with
    /// the id it assigned). A model whose id is `nil` is sent without one.
    ///
    /// `POST` is not idempotent, so it is retried only with an `idempotencyKey`, sent as
    /// the `Idempotency-Key` header of every attempt.
    /// - Throws: ``DepotError`` `.conflict` for a 409, and as ``fetch(id:)``.
    public func create(_ model: M, idempotencyKey: String? = nil) async throws -> M {
        let (id, fields) = try encode(model)
        let listPath = try Self.checkedPath(try modelPath?(model) ?? path, request: "POST")
        let answer = try await send("POST", listPath, body: wire(fields, id: id), idempotencyKey: idempotencyKey)
        return try decode(try single(answer, "POST " + listPath), answer)
    }

    /// Replaces the server's record of `model` with `PUT` and returns the server's record.
    /// - Throws: as ``fetch(id:)``; `.invalidValue` when the model has no id.
    public func replace(_ model: M) async throws -> M {
        let (id, fields) = try encode(model)
        let target = try itemPath(for: model, method: "PUT")
        let answer = try await send("PUT", target, body: wire(fields, id: requireID(id, "PUT")))
        return try decode(try single(answer, "PUT " + target), answer)
    }

    /// Sends only `fields` (model field names) of `model` with `PATCH`, a field that is
    /// `nil` in the model as `null`, and returns the server's record. Retried only with an
    /// `idempotencyKey`.
    /// - Throws: as ``replace(_:)``.
    public func patch(_ model: M, fields names: [String], idempotencyKey: String? = nil) async throws -> M {
        let (_, fields) = try encode(model)
        var changes: [String: FieldValue] = [:]
        for name in names { changes[name] = fields[name] ?? .null }
        let target = try itemPath(for: model, method: "PATCH")
        let answer = try await send("PATCH", target, body: wire(changes, id: nil), idempotencyKey: idempotencyKey)
        return try decode(try single(answer, "PATCH " + target), answer)
    }

    /// Deletes `model` on the server.
    /// - Throws: `.notFound` when the server has no such record, and as ``fetch(id:)``.
    public func delete(_ model: M) async throws {
        _ = try await send("DELETE", try itemPath(for: model, method: "DELETE"))
    }

    /// Deletes the record with `id` at ``path``.
    /// - Throws: as ``delete(_:)``.
    public func delete(id: M.ID) async throws {
        _ = try await send("DELETE", try checkedItemPath(path, try requireID(id.recordID, "DELETE"), "DELETE"))
    }

    // MARK: Records (shared with RemoteCollection)

    /// One page as records (server keys mapped back to model fields), with the total and
    /// whether more may follow.
    func listRecords(page: Int, size: Int, sort: [SortKey], parameters: [(String, String)]) async throws -> ([Record], Int?, Bool, HTTPAnswer) {
        guard page >= 0, size >= 1 else {
            throw RemoteFailure(kind: .invalidRequest, request: "GET " + path, isRetryable: false).error()
        }
        var query = paging.parameters(page, size)
        if let sortParameter {
            let keys = sort.isEmpty ? [SortKey(idKey)] : sort
            let text = keys.map { key in (key.descending ? "-" : "") + serverKey(key.field) }.joined(separator: ",")
            query.append((sortParameter, text))
        }
        query += parameters
        let listPath = try Self.checkedPath(path, request: "GET")
        let answer = try await send("GET", listPath, query: query)
        let request = "GET " + listPath
        var body = try parse(answer, request)
        if let preprocess { body = try preprocessed(preprocess, body, .list, answer, request) }
        guard let items = RemoteEnvelope.dig(body, envelope.list)?.arrayValue else {
            throw RemoteFailure(kind: .invalidAnswer, request: request, status: answer.status, serverMessage: "no list at '\(envelope.list ?? "(the answer)")'", isRetryable: false).error()
        }
        let records = try items.enumerated().map { n, item in
            guard let record = record(fromServer: item) else {
                throw RemoteFailure(kind: .invalidAnswer, request: request, status: answer.status, serverMessage: "item \(n) has no usable '\(idKey)'", isRetryable: false).error()
            }
            return record
        }
        let total = answer.header("x-total-count").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            ?? RemoteEnvelope.dig(body, envelope.total).flatMap { $0.intValue }.map { Int($0) }
        let hasMore = total.map { (page + 1) * size < $0 } ?? (items.count >= size)
        return (records, total, hasMore, answer)
    }

    /// The record with `id` at ``path``, or `nil` when the server answers 404 or 410.
    func fetchRecord(_ id: RecordID) async throws -> Record? {
        do {
            let itemPath = try checkedItemPath(path, id, "GET")
            let answer = try await send("GET", itemPath)
            return try single(answer, "GET " + itemPath)
        } catch let error as DepotError where error.code == .notFound {
            return nil
        }
    }

    /// A server object as a record: the id from ``idKey``, keys mapped back to field names,
    /// nulls and keys that are no valid field name dropped. `nil` without a usable id.
    func record(fromServer value: FieldValue) -> Record? {
        guard case .object(var object) = value, let raw = object.removeValue(forKey: idKey), let id = RecordID(raw) else { return nil }
        var reverse: [String: String] = [:]
        for (model, server) in keyMapping { reverse[server] = model }
        var fields: [String: FieldValue] = [:]
        for (key, value) in object {
            let name = reverse[key] ?? key
            guard !value.isNull, FieldName.isValid(name) else { continue }
            fields[name] = value
        }
        return Record(id: id, fields: fields)
    }

    /// A record as the model.
    func decode(_ record: Record, _ answer: HTTPAnswer? = nil) throws -> M {
        do {
            return try M(record: RecordFieldSource(record))
        } catch let error as DepotError {
            let failure = RemoteFailure(kind: .decoding, request: "\(M.self) \(record.id)", status: answer?.status, serverMessage: error.message, isRetryable: false)
            throw failure.error(collection: M.collectionName, id: record.id)
        }
    }

    // MARK: Wire

    func serverKey(_ field: String) -> String { field == "id" ? idKey : (keyMapping[field] ?? field) }

    func encode(_ model: M) throws -> (RecordID?, [String: FieldValue]) {
        let sink = DictionaryFieldSink()
        let id = try model.encodeRecord(into: sink)
        return (id, sink.fields)
    }

    func wire(_ fields: [String: FieldValue], id: RecordID?) -> FieldValue {
        var object: [String: FieldValue] = [:]
        for (name, value) in fields { object[serverKey(name)] = value }
        if let id { object[idKey] = id.fieldValue }
        return .object(object)
    }

    func requireID(_ id: RecordID?, _ method: String) throws -> RecordID {
        guard let id else {
            throw RemoteFailure(kind: .invalidRequest, request: method + " " + path, serverMessage: "the model has no id", isRetryable: false).error()
        }
        return id
    }

    func itemPath(for model: M, method: String) throws -> String {
        let (id, _) = try encode(model)
        return try checkedItemPath(try modelPath?(model) ?? path, try requireID(id, method), method)
    }

    func checkedItemPath(_ listPath: String, _ id: RecordID, _ method: String) throws -> String {
        let segment: String
        switch id {
        case .int(let value): segment = String(value)
        case .string(let text): segment = text.addingPercentEncoding(withAllowedCharacters: RemotePathCharacters.unreserved) ?? ""
        }
        guard !segment.isEmpty, segment != ".", segment != ".." else {
            throw RemoteFailure(kind: .invalidRequest, request: method + " " + listPath, serverMessage: "the id cannot be a path segment", isRetryable: false).error()
        }
        return try Self.checkedPath(listPath, request: method) + "/" + segment
    }

    /// `path` when it starts with `/`, holds only path characters and no `..` or `//`
    /// segment; paths computed from models are checked here at request time.
    static func checkedPath(_ path: String, request method: String) throws -> String {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        guard path.hasPrefix("/"), path.unicodeScalars.allSatisfy(RemotePathCharacters.path.contains),
            !segments.contains(".."), !segments.contains("."), !segments.dropLast().contains("")
        else {
            let shown = String(path.prefix(80).unicodeScalars.map { RemotePathCharacters.path.contains($0) ? Character($0) : "?" })
            throw RemoteFailure(kind: .invalidRequest, request: method + " " + shown, serverMessage: "not a valid resource path", isRetryable: false).error()
        }
        return path
    }

    func single(_ answer: HTTPAnswer, _ request: String) throws -> Record {
        var body = try parse(answer, request)
        if let preprocess { body = try preprocessed(preprocess, body, .single, answer, request) }
        guard let object = RemoteEnvelope.dig(body, envelope.single), let record = record(fromServer: object) else {
            throw RemoteFailure(kind: .invalidAnswer, request: request, status: answer.status, serverMessage: "no object with a usable '\(idKey)' at '\(envelope.single ?? "(the answer)")'", isRetryable: false).error()
        }
        return record
    }

    func parse(_ answer: HTTPAnswer, _ request: String) throws -> FieldValue {
        do {
            return try JSONText.parse([UInt8](answer.body), acceptingLegacyBase64: true)
        } catch let error as DepotError {
            throw RemoteFailure(kind: .invalidAnswer, request: request, status: answer.status, serverMessage: "the body is not JSON: " + String(error.message.prefix(120)), isRetryable: false).error()
        }
    }

    func preprocessed(_ body: @Sendable (FieldValue, RemoteAnswerShape) throws -> FieldValue, _ value: FieldValue, _ shape: RemoteAnswerShape, _ answer: HTTPAnswer, _ request: String) throws -> FieldValue {
        do {
            return try body(value, shape)
        } catch {
            let message = (error as? DepotError)?.message ?? "the pre-processing closure failed"
            throw RemoteFailure(kind: .invalidAnswer, request: request, status: answer.status, serverMessage: String(message.prefix(RemoteFailure.maximumMessageLength)), isRetryable: false).error()
        }
    }
}

/// The characters a resource path may hold (RFC 3986's unreserved ones, `/`, `%` and a few
/// sub-delimiters), outside the generic type because a generic type has no stored statics.
enum RemotePathCharacters {
    static let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
    static let path = unreserved.union(CharacterSet(charactersIn: "/%@:+,;="))
}
