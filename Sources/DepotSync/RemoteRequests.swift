import DepotCore
import Foundation

extension RemoteResource {
    /// Sends one request with the hook applied, retrying what ``RetryPolicy`` allows, and
    /// returns the first 2xx answer.
    ///
    /// A retryable failure (no answer; 408, 425, 429, 5xx) is retried only for `GET`, `PUT`
    /// and `DELETE`, or with an idempotency key: a `POST` or `PATCH` that may have reached
    /// the server is never repeated blindly. Any other status is thrown at once.
    /// - Throws: ``DepotError`` with a ``RemoteFailure`` cause; `.cancelled`.
    func send(_ method: String, _ path: String, query: [(String, String)] = [], body: FieldValue? = nil, idempotencyKey: String? = nil) async throws -> HTTPAnswer {
        let request = method + " " + path
        guard let url = url(path, query) else {
            throw RemoteFailure(kind: .invalidRequest, request: request, serverMessage: "no URL can be made of the base URL and path", isRetryable: false).error()
        }
        var spec = HTTPRequestSpec(method: method, url: url)
        spec.headers["Accept"] = "application/json"
        if let body {
            spec.body = Data(JSONText.serialize(body).utf8)
            spec.headers["Content-Type"] = "application/json"
        }
        if let idempotencyKey { spec.headers["Idempotency-Key"] = idempotencyKey }
        var secrets: [String] = []
        if let requestHook {
            let headersBefore = spec.headers
            let itemsBefore = Set(URLComponents(url: spec.url, resolvingAgainstBaseURL: false)?.queryItems?.map { "\($0.name)=\($0.value ?? "")" } ?? [])
            requestHook(&spec)
            for (name, value) in spec.headers where headersBefore[name] != value { spec.sensitiveHeaders.insert(name) }
            for item in URLComponents(url: spec.url, resolvingAgainstBaseURL: false)?.queryItems ?? [] where !itemsBefore.contains("\(item.name)=\(item.value ?? "")") {
                if let value = item.value { secrets.append(value) }
            }
        }
        for name in spec.headers.keys where ["authorization", "cookie", "proxy-authorization"].contains(name.lowercased()) {
            spec.sensitiveHeaders.insert(name)
        }
        for (name, value) in spec.headers where spec.sensitiveHeaders.contains(name) {
            secrets.append(value)
            // "Bearer abc": the token alone may come back in a message too.
            if let token = value.split(separator: " ").last, token.count != value.count { secrets.append(String(token)) }
        }
        // Longest first, so a token inside a longer header value is not half-replaced.
        secrets.sort { $0.count > $1.count }
        guard SyncEndpoint.isAllowed(spec.url, allowInsecureHTTP: allowInsecureHTTP) else {
            throw RemoteFailure(kind: .invalidRequest, request: request, serverMessage: "plain http:// to a host other than loopback needs allowInsecureHTTP", isRetryable: false).error()
        }
        let mayRetry = ["GET", "HEAD", "PUT", "DELETE"].contains(method) || idempotencyKey != nil
        var retry = RetryState(policy: retryPolicy)
        while true {
            if Task.isCancelled { throw Self.cancelled(request) }
            var failure: RemoteFailure
            var retryAfter: Duration?
            do {
                let answer = try await transport.send(spec)
                switch RequestVerdict.classify(status: answer.status, retryAfter: answer.header("retry-after")) {
                case .success:
                    return answer
                case .retry(let after):
                    retryAfter = after
                    failure = RemoteFailure(kind: .status, request: request, status: answer.status, serverMessage: RemoteFailure.serverMessage(answer, redacting: secrets), isRetryable: true, attempts: retry.attempts + 1)
                case .conflict, .notFound, .permanent:
                    let failure = RemoteFailure(kind: .status, request: request, status: answer.status, serverMessage: RemoteFailure.serverMessage(answer, redacting: secrets), isRetryable: false, attempts: retry.attempts + 1)
                    throw failure.error(collection: M.collectionName)
                }
            } catch let error as DepotError where error.remoteFailure != nil {
                throw error
            } catch {
                if Task.isCancelled || error is CancellationError || (error as? DepotError)?.code == .cancelled { throw Self.cancelled(request) }
                failure = RemoteFailure(kind: .noAnswer, request: request, isRetryable: true, attempts: retry.attempts + 1)
            }
            guard mayRetry, let wait = retry.failed(unit: random.nextUnit(), retryAfter: retryAfter) else {
                throw failure.error(collection: M.collectionName)
            }
            do {
                try await sleeper.sleep(for: wait)
            } catch {
                throw Self.cancelled(request)
            }
        }
    }

    static func cancelled(_ request: String) -> DepotError {
        DepotError(.cancelled, "\(request) was cancelled.")
    }

    /// ``baseURL`` + `path` + the query.
    func url(_ path: String, _ query: [(String, String)]) -> URL? {
        var text = baseURL.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        guard var components = URLComponents(string: text + path) else { return nil }
        if !query.isEmpty { components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) } }
        return components.url
    }
}
