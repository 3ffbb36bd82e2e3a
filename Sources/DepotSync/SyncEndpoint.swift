import DepotCore
import Foundation

/// Where and how one collection syncs with a REST server.
///
/// ```swift
/// var endpoint = SyncEndpoint(baseURL: URL(string: "https://api.example.com")!, path: "/posts")
/// endpoint.fieldMapping = ["title": "post_title"]      // model field -> server JSON key
/// endpoint.envelope = "data.list"                       // lists arrive as {"data":{"list":[...]}}
/// endpoint.requestHook = { request in
///     request.headers["Authorization"] = "Bearer \(token)"
///     request.sensitiveHeaders.insert("Authorization")
/// }
/// ```
public struct SyncEndpoint: Sendable {
    /// How the server pages a list.
    public enum Paging: Sendable, Hashable {
        /// `_page` (from 1) and `_per_page`.
        case page
        /// `_start` and `_limit`.
        case range
    }

    /// Whether to read a change feed (`GET /_changes?since=...`) for pulls.
    public enum ChangeFeed: Sendable, Hashable {
        /// Try `/_changes` once; fall back to full listings when the server answers 404.
        case automatic
        /// Never: always page through the listing and reconcile deletions.
        case none
    }

    /// Who chooses the id of a new record.
    public enum IDAssignment: Sendable, Hashable {
        /// The client: POST carries the local id (string UUIDs are typical).
        case client
        /// The server: POST carries no id; the answer's id replaces the local one (the local
        /// record is re-keyed, never duplicated).
        case server
    }

    /// The server's base URL, for example `http://127.0.0.1:8080`.
    public var baseURL: URL
    /// The resource path, for example `/posts` or `/posts/1/comments`.
    public var path: String
    /// Model field name -> server JSON key, for the fields whose names differ.
    public var fieldMapping: [String: String]
    /// The server's id key (`id`; `_id` for some servers).
    public var idField: String
    /// A dotted path to the array inside list answers (`data.list`); `nil` for a bare array.
    public var envelope: String?
    /// Records per page when pulling.
    public var pageSize: Int
    /// The paging parameters the server understands.
    public var paging: Paging
    /// Whether to use a change feed.
    public var changeFeed: ChangeFeed
    /// Who assigns ids to new records.
    public var idAssignment: IDAssignment
    /// Allows plain `http://` to a host other than loopback. Off by default: credentials
    /// and data would cross the network unencrypted.
    public var allowInsecureHTTP: Bool
    /// Called on every request before it is sent: add auth headers (and list them in
    /// `sensitiveHeaders`) or parameters. Its headers never reach logs or error messages.
    public var requestHook: (@Sendable (inout HTTPRequestSpec) -> Void)?

    /// Makes an endpoint with json-server defaults.
    public init(baseURL: URL, path: String, idAssignment: IDAssignment = .client) {
        self.baseURL = baseURL
        self.path = path
        self.fieldMapping = [:]
        self.idField = "id"
        self.envelope = nil
        self.pageSize = 100
        self.paging = .page
        self.changeFeed = .automatic
        self.idAssignment = idAssignment
        self.allowInsecureHTTP = false
        self.requestHook = nil
    }

    /// The name of the collection on the server: the last path segment (`comments` for
    /// `/posts/1/comments`).
    public var remoteCollection: String { path.split(separator: "/").last.map(String.init) ?? "" }

    /// Checks the URL and path.
    /// - Throws: ``DepotError`` `.invalidStore` for a non-HTTP URL, a path that does not
    ///   start with `/`, or plain HTTP to a non-loopback host without ``allowInsecureHTTP``.
    public func validate() throws {
        guard let scheme = baseURL.scheme?.lowercased(), scheme == "http" || scheme == "https", baseURL.host != nil else {
            throw DepotError(.invalidStore, "The remote must be an http:// or https:// URL with a host.")
        }
        guard path.hasPrefix("/"), !path.contains(".."), !path.contains("?"), !path.contains("#") else {
            throw DepotError(.invalidStore, "The resource path must start with '/' and hold no '..', '?' or '#'.")
        }
        guard Self.isAllowed(baseURL, allowInsecureHTTP: allowInsecureHTTP) else {
            throw DepotError(.invalidStore, "Plain http:// to a host other than loopback needs allowInsecureHTTP (--allow-insecure-http).")
        }
        guard pageSize >= 1 else { throw DepotError(.invalidStore, "The page size must be 1 or more.") }
    }

    /// `true` for https, and for http to loopback (or anywhere when allowed).
    public static func isAllowed(_ url: URL, allowInsecureHTTP: Bool) -> Bool {
        if url.scheme?.lowercased() == "https" { return true }
        guard url.scheme?.lowercased() == "http" else { return false }
        if allowInsecureHTTP { return true }
        let host = (url.host ?? "").lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        return host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    // MARK: URLs and field mapping

    /// The URL of the resource path followed by `suffix` (already percent-encoded, as
    /// ``pathSegment(_:)`` writes), with `query`.
    ///
    /// The characters of ``path`` a URL cannot hold (a space, `é`) are escaped here and its
    /// own `%XX` escapes are kept: the text handed to `URLComponents` is then a valid URL, so
    /// nothing is escaped a second time (an id's `%F0` sent as `%25F0` named another record).
    func url(_ suffix: String = "", query: [(String, String)] = []) -> URL? {
        var text = baseURL.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        guard let resource = (path + suffix).addingPercentEncoding(withAllowedCharacters: Self.pathCharacters) else { return nil }
        text += resource
        guard var components = URLComponents(string: text) else { return nil }
        if !query.isEmpty { components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) } }
        return components.url
    }

    /// What a path may hold as it is: `%` too, since a path's escapes are kept.
    static let pathCharacters = CharacterSet.urlPathAllowed.union(CharacterSet(charactersIn: "%"))

    func itemURL(_ id: RecordID) -> URL? {
        url("/" + Self.pathSegment(id))
    }

    /// `id` as the last segment of an item's path: only unreserved characters and `%XX`
    /// escapes, so it reads the same in a URL's text and in its percent-encoded path.
    static func pathSegment(_ id: RecordID) -> String {
        switch id {
        case .int(let i): return String(i)
        case .string(let s) where URLText.isUnreserved(s): return s
        case .string(let s): return s.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? s
        }
    }

    /// `POST /_batch` on the server (Docs/Server.md, "Batched writes").
    func batchURL() -> URL? {
        var text = baseURL.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        return URL(string: text + "/_batch")
    }

    /// The base URL's own percent-encoded path without its trailing `/`: what
    /// ``wirePath(_:base:)`` removes (computed once for a whole batch).
    func wireBase() -> String? {
        guard var base = URLComponents(url: baseURL, resolvingAgainstBaseURL: false)?.percentEncodedPath else { return nil }
        while base.hasSuffix("/") { base.removeLast() }
        return base
    }

    /// The path of `url` as a batch entry carries it: percent-encoded, as sent on the wire,
    /// and relative to the server root the batch is posted to (`base`, the base URL's own
    /// path from ``wireBase()``, removed). `nil` for a URL outside the base URL.
    func wirePath(_ url: URL, base: String) -> String? {
        guard let full = URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedPath else { return nil }
        guard full.hasPrefix(base) else { return nil }
        let path = String(full.dropFirst(base.count))
        return path.hasPrefix("/") ? path : nil
    }

    /// The wire path (``wirePath(_:base:)``) of a push request, from `collectionPath`, the
    /// wire path of ``url(_:query:)`` computed once for a batch: an item's path adds
    /// `/` and ``pathSegment(_:)``, whose characters a URL keeps as they are, so no URL is
    /// built and parsed per entry.
    func wirePath(of request: PushRequest, collectionPath: String) -> String {
        guard let item = request.item else { return collectionPath }
        return collectionPath + "/" + Self.pathSegment(item)
    }

    /// Model fields -> server JSON object (the id under ``idField`` when given).
    func toServer(_ fields: [String: FieldValue], id: RecordID?) -> FieldValue {
        if fieldMapping.isEmpty {
            // Every field keeps its name: a copy of the fields' table and the id added,
            // instead of a new table built member by member.
            var out = fields
            if let id { out[idField] = id.fieldValue }
            return .object(out)
        }
        var out: [String: FieldValue] = [:]
        for (name, value) in fields { out[fieldMapping[name] ?? name] = value }
        if let id { out[idField] = id.fieldValue }
        return .object(out)
    }

    /// Server JSON object -> a local record; `nil` when it has no usable id. Keys that are
    /// not valid field names are dropped.
    func fromServer(_ value: FieldValue) -> Record? {
        guard case .object(let object) = value, let idValue = object[idField], let id = RecordID(idValue) else { return nil }
        if fieldMapping.isEmpty, object.allSatisfy({ $0.key == idField || (!$0.value.isNull && FieldName.isValid($0.key)) }) {
            // The usual answer: every member is a field as it is. A copy of the object's
            // table without the id, instead of a new table built member by member.
            var fields = object
            fields.removeValue(forKey: idField)
            return Record(id: id, fields: fields)
        }
        var reverse: [String: String] = [:]
        for (model, server) in fieldMapping { reverse[server] = model }
        var fields: [String: FieldValue] = [:]
        fields.reserveCapacity(object.count)
        for (key, value) in object where key != idField {
            let name = reverse[key] ?? key
            guard FieldName.isValid(name), !value.isNull else { continue }
            fields[name] = value
        }
        return Record(id: id, fields: fields)
    }

    /// The array inside a list answer.
    func unwrap(_ value: FieldValue) -> [FieldValue]? {
        var current = value
        if let envelope {
            for key in envelope.split(separator: ".") {
                guard case .object(let object) = current, let next = object[String(key)] else { return nil }
                current = next
            }
        }
        return current.arrayValue
    }
}
