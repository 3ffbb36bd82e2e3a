import DepotCore
import DepotSync
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// An ``HTTPTransport`` over SwiftNIO for plain-HTTP servers (a DepotServer on the same
/// machine or a private network), with kept-alive connections; `https` requests go to a
/// ``URLSessionTransport``.
///
/// Why it exists: on Linux, URLSession (FoundationNetworking over libcurl) spent a quarter of
/// the whole machine's CPU of a loopback push in its dispatch sources, event-fd wake-ups
/// and thread switches (Docs/Sync.md, "Transports"). This transport writes a request and
/// reads its answer on one NIO event loop, with no other thread involved.
///
/// Behaviour is the one of ``URLSessionTransport``: redirects by ``RedirectRule`` (at most
/// 5; credentials never follow to another host), `timeout` per request (connect, send and
/// answer together), cancellation closes the connection, and any failure to get an answer is
/// a ``DepotError`` `.remote` that names the method and path only. Answers are read whole
/// (at most ``maxAnswerBytes``). A connection is reused while the server keeps it alive;
/// a reused one found closed before any answer arrived is replaced and the request sent
/// once more only when that is safe (``maySendAgain(_:)``); otherwise that is a `.remote`
/// failure, as a lost answer is.
public final class NIOHTTPTransport: HTTPTransport {
    /// The largest answer body read (an answer past it fails with `.remote`).
    public static let maxAnswerBytes = 256 << 20
    /// Idle connections kept per host and port.
    static let idleLimit = 8
    /// An idle connection older than this is closed instead of reused.
    static let idleLifetime: TimeAmount = .seconds(4)

    private let group: any EventLoopGroup
    private let timeout: TimeAmount
    private let allowInsecureHTTP: Bool
    private let fallback: URLSessionTransport
    private let maxRedirects = 5
    private let idle = NIOLockedValueBox([String: [IdleConnection]]())

    private struct IdleConnection {
        var channel: any Channel
        var since: NIODeadline
    }

    /// Makes a transport on NIO's shared event loops; `timeout` applies to each request.
    public init(timeout: TimeInterval = 30, allowInsecureHTTP: Bool = false) {
        group = MultiThreadedEventLoopGroup.singleton
        self.timeout = .nanoseconds(Int64(max(0.001, timeout) * 1_000_000_000))
        self.allowInsecureHTTP = allowInsecureHTTP
        fallback = URLSessionTransport(timeout: timeout, allowInsecureHTTP: allowInsecureHTTP)
    }

    deinit {
        for (_, connections) in idle.withLockedValue({ $0 }) {
            for connection in connections { connection.channel.close(promise: nil) }
        }
    }

    /// Sends `request`, following redirects by ``RedirectRule``.
    /// - Throws: `.remote` when no answer came, `CancellationError`.
    public func send(_ request: HTTPRequestSpec) async throws -> HTTPAnswer {
        try await RedirectRule.send(request, maxRedirects: maxRedirects, allowInsecureHTTP: allowInsecureHTTP) { spec in
            // Past a redirect to https the URLSession transport goes on, redirects included.
            guard spec.url.scheme?.lowercased() == "http" else { return try await fallback.send(spec) }
            return try await sendOnce(spec)
        }
    }

    private func sendOnce(_ spec: HTTPRequestSpec) async throws -> HTTPAnswer {
        guard let host = spec.url.host, !host.isEmpty else {
            throw DepotError(.remote, "No host in the URL of \(spec.safeDescription).")
        }
        let port = spec.url.port ?? 80
        let key = "\(host):\(port)"
        let (head, body) = Self.encode(spec, host: host, port: port)
        let deadline = NIODeadline.now() + timeout
        if let reused = takeIdle(key) {
            do {
                return try await exchange(reused, head: head, body: body, key: key, deadline: deadline, spec: spec)
            } catch is ClosedBeforeAnswer where Self.maySendAgain(spec) {
                // The server closed the kept-alive connection first: once more on a new one.
            } catch is ClosedBeforeAnswer {
                throw DepotError(.remote, "No answer for \(spec.safeDescription): the connection closed.")
            }
        }
        let channel = try await connect(host: host, port: port, deadline: deadline, spec: spec)
        do {
            return try await exchange(channel, head: head, body: body, key: key, deadline: deadline, spec: spec)
        } catch is ClosedBeforeAnswer {
            throw DepotError(.remote, "No answer for \(spec.safeDescription): the connection closed.")
        }
    }

    private func takeIdle(_ key: String) -> (any Channel)? {
        let now = NIODeadline.now()
        var stale: [any Channel] = []
        let found = idle.withLockedValue { idle -> (any Channel)? in
            while var list = idle[key], let last = list.popLast() {
                idle[key] = list
                if last.channel.isActive, now - last.since < Self.idleLifetime { return last.channel }
                stale.append(last.channel)
            }
            return nil
        }
        for channel in stale { channel.close(promise: nil) }
        return found
    }

    private func putIdle(_ channel: any Channel, _ key: String) {
        let kept = idle.withLockedValue { idle -> Bool in
            var list = idle[key] ?? []
            guard list.count < Self.idleLimit else { return false }
            list.append(IdleConnection(channel: channel, since: .now()))
            idle[key] = list
            return true
        }
        if !kept { channel.close(promise: nil) }
    }

    private func connect(host: String, port: Int, deadline: NIODeadline, spec: HTTPRequestSpec) async throws -> any Channel {
        let remaining = deadline - .now()
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(remaining > .zero ? remaining : .milliseconds(1))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(AnswerHandler())
                }
            }
        do {
            return try await bootstrap.connect(host: host, port: port).get()
        } catch {
            throw DepotError(.remote, "No answer for \(spec.safeDescription): could not connect.", cause: error)
        }
    }

    /// Writes the request on `channel` and waits for the whole answer; gives the channel back
    /// to the idle list when the server keeps it alive, closes it otherwise.
    private func exchange(_ channel: any Channel, head: HTTPRequestHead, body: ByteBuffer?, key: String, deadline: NIODeadline, spec: HTTPRequestSpec) async throws -> HTTPAnswer {
        let promise = channel.eventLoop.makePromise(of: AnswerHandler.Answer.self)
        channel.eventLoop.execute {
            // On the channel's loop: a close from here on reaches the handler, which fails the
            // promise; a close before it (a kept-alive connection the server dropped) is seen now.
            guard channel.isActive else {
                promise.fail(ClosedBeforeAnswer())
                return
            }
            do {
                let handler = try channel.pipeline.syncOperations.handler(type: AnswerHandler.self)
                handler.expect(promise)
            } catch {
                promise.fail(error)
                return
            }
            let timeout = channel.eventLoop.scheduleTask(deadline: deadline) {
                promise.fail(TimedOut())
                channel.close(promise: nil)
            }
            promise.futureResult.whenComplete { _ in timeout.cancel() }
            channel.write(HTTPClientRequestPart.head(head), promise: nil)
            if let body { channel.write(HTTPClientRequestPart.body(.byteBuffer(body)), promise: nil) }
            channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        }
        let answer: AnswerHandler.Answer
        do {
            answer = try await withTaskCancellationHandler {
                try await promise.futureResult.get()
            } onCancel: {
                channel.close(promise: nil)
            }
        } catch let closed as ClosedBeforeAnswer {
            channel.close(promise: nil)
            try Task.checkCancellation()
            throw closed
        } catch is TimedOut {
            throw DepotError(.remote, "No answer for \(spec.safeDescription) in time.")
        } catch {
            channel.close(promise: nil)
            try Task.checkCancellation()
            throw DepotError(.remote, "No answer for \(spec.safeDescription).", cause: error)
        }
        if answer.keepAlive { putIdle(channel, key) } else { channel.close(promise: nil) }
        return answer.answer
    }

    /// Whether `spec` may go out again after a connection closed without an answer (the
    /// server may have run it): an idempotent method, or a request with an `Idempotency-Key`.
    static func maySendAgain(_ spec: HTTPRequestSpec) -> Bool {
        ["GET", "HEAD", "PUT", "DELETE", "OPTIONS"].contains(spec.method.uppercased())
            || spec.headers.keys.contains { $0.lowercased() == "idempotency-key" }
    }

    /// The request head and body of `spec`.
    static func encode(_ spec: HTTPRequestSpec, host: String, port: Int) -> (HTTPRequestHead, ByteBuffer?) {
        var target = spec.url.path.isEmpty ? "/" : spec.url.path
        if let components = URLComponents(url: spec.url, resolvingAgainstBaseURL: false) {
            target = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
            if let query = components.percentEncodedQuery { target += "?" + query }
        }
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: port == 80 ? host : "\(host):\(port)")
        for (name, value) in spec.headers where name.lowercased() != "host" && name.lowercased() != "content-length" {
            headers.add(name: name, value: value)
        }
        var body: ByteBuffer?
        if let data = spec.body {
            headers.add(name: "Content-Length", value: String(data.count))
            body = ByteBuffer(bytes: data)
        } else if ["POST", "PUT", "PATCH"].contains(spec.method.uppercased()) {
            headers.add(name: "Content-Length", value: "0")
        }
        let head = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: spec.method.uppercased()), uri: target, headers: headers)
        return (head, body)
    }
}

/// The kept-alive connection was closed before any part of the answer arrived.
struct ClosedBeforeAnswer: Error {}
/// The request's deadline passed.
struct TimedOut: Error {}

/// Collects one answer at a time on its channel's event loop.
final class AnswerHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart

    struct Answer: Sendable {
        var answer: HTTPAnswer
        var keepAlive: Bool
    }

    private var promise: EventLoopPromise<Answer>?
    private var head: HTTPResponseHead?
    private var body = ByteBuffer()

    func expect(_ promise: EventLoopPromise<Answer>) {
        self.promise = promise
        head = nil
        body.clear()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body(var part):
            guard body.readableBytes + part.readableBytes <= NIOHTTPTransport.maxAnswerBytes else {
                fail(AnswerTooLarge())
                context.close(promise: nil)
                return
            }
            body.writeBuffer(&part)
        case .end:
            guard let head, let promise else { return }
            var headers: [String: String] = [:]
            for (name, value) in head.headers {
                let lowered = name.lowercased()
                if let earlier = headers[lowered] { headers[lowered] = earlier + ", " + value } else { headers[lowered] = value }
            }
            let answer = HTTPAnswer(status: Int(head.status.code), headers: headers, body: Data(body.readableBytesView))
            self.promise = nil
            self.head = nil
            body.clear()
            promise.succeed(Answer(answer: answer, keepAlive: head.isKeepAlive))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if head == nil { fail(ClosedBeforeAnswer()) } else { fail(ConnectionLost()) }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(error)
        context.close(promise: nil)
    }

    private func fail(_ error: any Error) {
        guard let promise else { return }
        self.promise = nil
        promise.fail(error)
    }
}

/// The connection closed in the middle of an answer.
struct ConnectionLost: Error {}
/// The answer body passed ``NIOHTTPTransport/maxAnswerBytes``.
struct AnswerTooLarge: Error {}
