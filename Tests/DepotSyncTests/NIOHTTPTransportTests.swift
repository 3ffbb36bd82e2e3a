import DepotCore
import DepotHTTPClient
import DepotMemory
import DepotServer
import DepotSync
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// ``NIOHTTPTransport``: answers as ``URLSessionTransport`` gives them, failures as `.remote`
/// errors, and no answer made up from a cut one.
@Suite("NIO transport")
struct NIOHTTPTransportTests {
    @Test("requests and answers against a DepotServer: status, headers, bodies, many requests over kept-alive connections")
    func roundTripsAgainstADepotServer() async throws {
        try await withSyncServer { _, _, url in
            let transport = NIOHTTPTransport(timeout: 10)
            let base = url.appendingPathComponent("notes")
            let body = Data(#"{"id":"a","text":"héllo","n":1}"#.utf8)
            let created = try await transport.send(HTTPRequestSpec(method: "POST", url: base, headers: ["Content-Type": "application/json"], body: body))
            #expect(created.status == 201)
            let etag = try #require(created.header("etag"))
            #expect(created.header("location") == "/notes/a")
            // Many requests one after the other, and some at once.
            for _ in 0..<50 {
                let got = try await transport.send(HTTPRequestSpec(method: "GET", url: base.appendingPathComponent("a")))
                #expect(got.status == 200 && got.header("etag") == etag)
                #expect(try JSONText.parse(String(decoding: got.body, as: UTF8.self)) == .object(["id": "a", "text": "héllo", "n": 1]))
            }
            try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<12 { group.addTask { try await transport.send(HTTPRequestSpec(method: "GET", url: base.appendingPathComponent("a"))).status } }
                for try await status in group { #expect(status == 200) }
            }
            let missing = try await transport.send(HTTPRequestSpec(method: "GET", url: base.appendingPathComponent("zz")))
            #expect(missing.status == 404)
            // A body of a few megabytes, both ways.
            let big = String(repeating: "x", count: 3 << 20)
            let bigBody = Data(JSONText.serialize(.object(["id": "big", "text": .string(big)])).utf8)
            #expect(try await transport.send(HTTPRequestSpec(method: "POST", url: base, body: bigBody)).status == 201)
            let bigAnswer = try await transport.send(HTTPRequestSpec(method: "GET", url: base.appendingPathComponent("big")))
            #expect(bigAnswer.status == 200 && bigAnswer.body.count > 3 << 20)
        }
    }

    @Test("a 500 is an answer; a body cut short by a closed connection is a .remote error, never a short answer")
    func serverErrorsAndCutAnswers() async throws {
        let peer = try RawHTTPPeer(responses: [
            "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\nConnection: close\r\n\r\noops!",
            "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part of it",
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        ])
        defer { peer.stop() }
        let transport = NIOHTTPTransport(timeout: 5)
        let url = peer.url.appendingPathComponent("things")
        let failed = try await transport.send(HTTPRequestSpec(method: "GET", url: url))
        #expect(failed.status == 500 && String(decoding: failed.body, as: UTF8.self) == "oops!")
        await #expect(throws: DepotError.self) { try await transport.send(HTTPRequestSpec(method: "GET", url: url)) }
        do {
            _ = try await transport.send(HTTPRequestSpec(method: "GET", url: url, headers: ["Authorization": "Bearer s3cret"], sensitiveHeaders: ["Authorization"]))
        } catch let error as DepotError {
            Issue.record("the third answer is whole: \(error)")
        }
        // The peer closes each connection after its answer; an answer that says nothing of
        // the connection ends with the close, and the next request opens a new one.
        let ok = try await transport.send(HTTPRequestSpec(method: "GET", url: url))
        #expect(ok.status == 200 && String(decoding: ok.body, as: UTF8.self) == "ok")
        #expect(peer.count == 4)
    }

    @Test("a server that never answers: a .remote error after the timeout; cancellation ends the wait at once")
    func silenceTimesOutAndCancels() async throws {
        let listener = try LoopbackListener()  // accepts into its backlog, never answers
        defer { listener.close() }
        guard let url = URL(string: "http://127.0.0.1:\(listener.port)/x") else { throw DepotError(.internal, "url") }
        let transport = NIOHTTPTransport(timeout: 0.3)
        let start = ContinuousClock.now
        do {
            _ = try await transport.send(HTTPRequestSpec(method: "POST", url: url, headers: ["Authorization": "Bearer s3cret"], body: Data("{}".utf8), sensitiveHeaders: ["Authorization"]))
            Issue.record("no answer cannot succeed")
        } catch let error as DepotError {
            #expect(error.code == .remote)
            #expect(!"\(error)".contains("s3cret") && !"\(String(reflecting: error))".contains("s3cret"))
        }
        #expect(ContinuousClock.now - start < .seconds(5))

        let patient = NIOHTTPTransport(timeout: 60)
        let waiting = Task { try await patient.send(HTTPRequestSpec(method: "GET", url: url)) }
        try await Task.sleep(for: .milliseconds(100))
        let cancelledAt = ContinuousClock.now
        waiting.cancel()
        let result = await waiting.result
        #expect(ContinuousClock.now - cancelledAt < .seconds(5))
        #expect(throws: CancellationError.self) { try result.get() }
    }

    @Test("nothing listening: a .remote error")
    func refusedConnection() async throws {
        let port = try freeLoopbackPort()
        guard let url = URL(string: "http://127.0.0.1:\(port)/x") else { throw DepotError(.internal, "url") }
        await #expect(throws: DepotError.self) { try await NIOHTTPTransport(timeout: 2).send(HTTPRequestSpec(method: "GET", url: url)) }
    }

    @Test("redirects are followed by RedirectRule, at most five")
    func redirects() async throws {
        let target = try RawHTTPPeer(responses: ["HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nhere"])
        defer { target.stop() }
        let hop = try RawHTTPPeer(responses: ["HTTP/1.1 307 Temporary Redirect\r\nLocation: \(target.url.absoluteString)/end\r\nContent-Length: 0\r\n\r\n"])
        defer { hop.stop() }
        let transport = NIOHTTPTransport(timeout: 5)
        let answer = try await transport.send(HTTPRequestSpec(method: "GET", url: hop.url.appendingPathComponent("start")))
        #expect(answer.status == 200 && String(decoding: answer.body, as: UTF8.self) == "here")
        #expect(target.requests.withLock { $0 } == ["GET /end HTTP/1.1"])

        let loop = try RawHTTPPeer(responses: ["HTTP/1.1 302 Found\r\nLocation: /again\r\nContent-Length: 0\r\n\r\n"])
        defer { loop.stop() }
        await #expect(throws: DepotError.self) { try await transport.send(HTTPRequestSpec(method: "GET", url: loop.url.appendingPathComponent("again"))) }
        #expect(loop.count == 6)
    }
}
