import DepotCore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One HTTP request as the sync coordinator sends it.
public struct HTTPRequestSpec: Sendable {
    /// `GET`, `POST`, `PUT`, `PATCH`, `DELETE`.
    public var method: String
    /// The full URL, query included.
    public var url: URL
    /// Header values by name.
    public var headers: [String: String]
    /// The body, if any.
    public var body: Data?
    /// Names of headers that carry credentials (set by request hooks, `Authorization`,
    /// `Cookie`): they are never logged and never follow a redirect to another host.
    public var sensitiveHeaders: Set<String>

    /// Makes a request.
    public init(method: String, url: URL, headers: [String: String] = [:], body: Data? = nil, sensitiveHeaders: Set<String> = []) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.sensitiveHeaders = sensitiveHeaders
    }

    /// Adds (or replaces) a query parameter, for request hooks that add a parameter to every request.
    public mutating func setQueryItem(_ name: String, _ value: String) {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return }
        var items = (components.queryItems ?? []).filter { $0.name != name }
        items.append(URLQueryItem(name: name, value: value))
        components.queryItems = items
        if let newURL = components.url { url = newURL }
    }

    /// A description safe for messages and logs: method and path only (no query, no headers).
    public var safeDescription: String { method + " " + url.path }
}

/// One HTTP answer.
public struct HTTPAnswer: Sendable {
    /// The status code.
    public var status: Int
    /// Header values by lowercased name.
    public var headers: [String: String]
    /// The body.
    public var body: Data

    /// Makes an answer; header names are lowercased.
    public init(status: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.status = status
        var lowered: [String: String] = [:]
        for (name, value) in headers { lowered[name.lowercased()] = value }
        self.headers = lowered
        self.body = body
    }

    /// A header value by case-insensitive name.
    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// Sends HTTP requests for the sync coordinator. Small on purpose: tests and apps can
/// substitute their own (a fault layer, a mock, another HTTP client).
///
/// A transport throws only when no answer arrived (timeout, refused or dropped
/// connection); any status code, 5xx included, is an answer.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the answer.
    /// - Throws: when no answer arrived; `CancellationError` when the task was cancelled.
    func send(_ request: HTTPRequestSpec) async throws -> HTTPAnswer
}

/// What to do with a redirect: a pure rule, testable without I/O.
public enum RedirectRule {
    /// The request to send for a 301/302/303/307/308 answer with `location`, or `nil` when
    /// the redirect must not be followed (no location, a non-HTTP scheme, or plain HTTP to a
    /// non-loopback host without `allowInsecureHTTP`). A redirect to another host, port or
    /// scheme drops `Authorization`, `Cookie`, `Proxy-Authorization` and every sensitive
    /// header. A 303 (and a 301/302 after POST) becomes a GET without a body.
    public static func follow(_ request: HTTPRequestSpec, status: Int, location: String?, allowInsecureHTTP: Bool) -> HTTPRequestSpec? {
        guard [301, 302, 303, 307, 308].contains(status), let location,
            let target = URL(string: location, relativeTo: request.url)?.absoluteURL,
            let scheme = target.scheme?.lowercased(), scheme == "http" || scheme == "https", target.host != nil
        else { return nil }
        guard SyncEndpoint.isAllowed(target, allowInsecureHTTP: allowInsecureHTTP) else { return nil }
        var next = request
        next.url = target
        let sameOrigin = target.scheme?.lowercased() == request.url.scheme?.lowercased()
            && target.host?.lowercased() == request.url.host?.lowercased() && target.port == request.url.port
        if !sameOrigin {
            let drop = Set(["authorization", "cookie", "proxy-authorization"]).union(request.sensitiveHeaders.map { $0.lowercased() })
            next.headers = next.headers.filter { !drop.contains($0.key.lowercased()) }
            next.sensitiveHeaders = []
        }
        if status == 303 || ((status == 301 || status == 302) && request.method == "POST") {
            next.method = "GET"
            next.body = nil
        }
        return next
    }
}

extension RedirectRule {
    /// Sends `request` through `sendOnce`, then each redirect ``follow(_:status:location:allowInsecureHTTP:)``
    /// allows, at most `maxRedirects`: what a transport's `send` does around its single request.
    /// - Throws: what `sendOnce` throws; `.remote` after too many redirects.
    public static func send(
        _ request: HTTPRequestSpec, maxRedirects: Int, allowInsecureHTTP: Bool, _ sendOnce: (HTTPRequestSpec) async throws -> HTTPAnswer
    ) async throws -> HTTPAnswer {
        var current = request
        for _ in 0...maxRedirects {
            let answer = try await sendOnce(current)
            guard let next = follow(current, status: answer.status, location: answer.header("location"), allowInsecureHTTP: allowInsecureHTTP) else {
                return answer
            }
            current = next
        }
        throw DepotError(.remote, "Too many redirects for \(request.safeDescription).")
    }
}

/// The default transport: URLSession (FoundationNetworking on Linux), with redirects
/// handled by ``RedirectRule`` so credentials never reach another host.
public final class URLSessionTransport: HTTPTransport {
    private let session: URLSession
    private let allowInsecureHTTP: Bool
    private let maxRedirects = 5

    /// Makes a transport with its own session; `timeout` applies to each request.
    public init(timeout: TimeInterval = 30, allowInsecureHTTP: Bool = false) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        configuration.httpShouldSetCookies = false
        configuration.urlCache = nil
        session = URLSession(configuration: configuration, delegate: NoRedirects(), delegateQueue: nil)
        self.allowInsecureHTTP = allowInsecureHTTP
    }

    deinit { session.finishTasksAndInvalidate() }

    /// Sends `request` with URLSession, following up to `maxRedirects` redirects by
    /// ``RedirectRule`` (credentials never follow to another host).
    /// - Throws: `.remote` when no answer came, `CancellationError`.
    public func send(_ request: HTTPRequestSpec) async throws -> HTTPAnswer {
        try await RedirectRule.send(request, maxRedirects: maxRedirects, allowInsecureHTTP: allowInsecureHTTP) { try await sendOnce($0) }
    }

    private func sendOnce(_ spec: HTTPRequestSpec) async throws -> HTTPAnswer {
        var request = URLRequest(url: spec.url)
        request.httpMethod = spec.method
        for (name, value) in spec.headers { request.setValue(value, forHTTPHeaderField: name) }
        request.httpBody = spec.body
        let session = self.session
        let box = TaskBox()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPAnswer, any Error>) in
                let task = session.dataTask(with: request) { data, response, error in
                    if let error {
                        continuation.resume(throwing: DepotError(.remote, "No answer for \(spec.safeDescription).", cause: URLErrorBox(code: (error as? URLError)?.code.rawValue ?? -1)))
                        return
                    }
                    guard let http = response as? HTTPURLResponse else {
                        continuation.resume(throwing: DepotError(.remote, "No HTTP answer for \(spec.safeDescription)."))
                        return
                    }
                    var headers: [String: String] = [:]
                    for (key, value) in http.allHeaderFields {
                        if let key = key as? String, let value = value as? String { headers[key] = value }
                    }
                    continuation.resume(returning: HTTPAnswer(status: http.statusCode, headers: headers, body: data ?? Data()))
                }
                box.set(task)
                task.resume()
            }
        } onCancel: {
            box.cancel()
        }
    }
}

/// The URL error code of a failed request (the error itself is not Sendable).
public struct URLErrorBox: Error, Sendable {
    /// `URLError.Code.rawValue`.
    public var code: Int
}

/// Holds the running task so cancellation can reach it.
private final class TaskBox: @unchecked Sendable {
    // @unchecked Sendable: `task` is only read and written while `lock` is held, and
    // URLSessionDataTask.cancel() may be called from any thread.
    private let lock = NSLock()
    private var task: URLSessionDataTask?
    private var cancelled = false
    func set(_ t: URLSessionDataTask) {
        lock.lock()
        task = t
        let wasCancelled = cancelled
        lock.unlock()
        if wasCancelled { t.cancel() }
    }
    func cancel() {
        lock.lock()
        cancelled = true
        let t = task
        lock.unlock()
        t?.cancel()
    }
}

/// Refuses automatic redirects so ``RedirectRule`` decides (and strips credentials).
private final class NoRedirects: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    // @unchecked Sendable: the object has no stored state at all.
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
