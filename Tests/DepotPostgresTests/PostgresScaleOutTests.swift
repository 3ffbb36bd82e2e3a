import DepotConformance
import DepotCore
import DepotPostgres
import Foundation
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `depot serve postgres://…` run as two processes on one database (Docs/Server.md,
/// "Several processes"): idempotency keys, the change feed and conditional requests live in
/// the database, so a POST retried against the other process is not applied twice and both
/// processes give the same answers.
@Suite struct PostgresScaleOutTests {
    struct Answer {
        var status: Int
        var headers: [String: String]
        var body: String
    }

    static func send(_ port: Int, _ method: String, _ path: String, json: String? = nil, headers: [String: String] = [:]) async throws -> Answer {
        let url = try #require(URL(string: "http://127.0.0.1:\(port)\(path)"))
        var request = URLRequest(url: url)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if let json {
            request.httpBody = Data(json.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        var fields: [String: String] = [:]
        for (key, value) in http.allHeaderFields {
            if let key = key as? String, let value = value as? String { fields[key.lowercased()] = value }
        }
        return Answer(status: http.statusCode, headers: fields, body: String(decoding: data, as: UTF8.self))
    }

    /// A port no one listens on, below Linux's ephemeral range (32768–60999), where the
    /// kernel does not hand it to an outgoing connection meanwhile.
    static func freePort() throws -> Int {
        for _ in 0..<100 {
            let port = Int.random(in: 20_000...32_000)
            let probe = try ChildProcess.run("/bin/bash", ["-c", "exec 3<>/dev/tcp/127.0.0.1/\(port)"])
            if probe.status != .exited(0) { return port }
        }
        throw DepotError(.internal, "no free port found")
    }

    static func depotPath() throws -> String {
        var directory = URL(fileURLWithPath: CommandLine.arguments.first ?? ".").deletingLastPathComponent()
        for _ in 0..<6 {
            let candidate = directory.appendingPathComponent("depot").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        throw DepotError(.internal, "the depot executable was not found beside the test binary; run `swift build` first")
    }

    /// Starts `depot serve store` and waits until it answers. A port free when chosen can be
    /// taken before the server binds it (by an outgoing connection of a test beside this one),
    /// so a server that exits before answering is started again on another port, up to five
    /// times; a failure says how the last one ended and what it wrote to standard error.
    static func startServer(_ store: String) async throws -> (server: ChildProcess, port: Int) {
        var lastWords = ""
        for _ in 0..<5 {
            let port = try freePort()
            let server = try ChildProcess(path: try depotPath(), arguments: ["serve", store, "--port", String(port), "--quiet"])
            // Up to 60 s: the server opens the store (connects, reads the catalog) first.
            for _ in 0..<1200 where server.isRunning {
                if (try? await send(port, "GET", "/")) != nil { return (server, port) }  // not listening yet: try again
                try await Task.sleep(for: .milliseconds(50))
            }
            server.kill(SIGTERM)
            let result = await server.exit()
            lastWords = "port \(port): \(result.status), standard error: \(result.errorText.suffix(300))"
        }
        throw DepotError(.internal, "depot serve did not answer (\(lastWords))")
    }

    @Test func twoServeProcessesShareIdempotencyFeedAndETags() async throws {
        let store = try PostgresTestServer.storeString(for: "serve-\(UUID().uuidString)")
        let serverA = try await Self.startServer(store)
        defer { serverA.server.kill(SIGTERM) }
        let serverB = try await Self.startServer(store)
        defer { serverB.server.kill(SIGTERM) }
        let (a, b) = (serverA.port, serverB.port)

        // A POST retried against the other process is replayed, not applied twice.
        let key = ["Idempotency-Key": "order-\(UUID().uuidString)"]
        let first = try await Self.send(a, "POST", "/orders", json: #"{"item":"book","qty":1}"#, headers: key)
        #expect(first.status == 201, "\(first.body)")
        let retried = try await Self.send(b, "POST", "/orders", json: #"{"item":"book","qty":1}"#, headers: key)
        #expect(retried.status == 201, "\(retried.body)")
        #expect(retried.headers["idempotent-replayed"] == "true")
        #expect(retried.body == first.body)
        let list = try await Self.send(b, "GET", "/orders")
        #expect(list.headers["x-total-count"] == "1", "\(list.body)")

        // Writes through both processes land in one change feed, seen from either.
        let second = try await Self.send(b, "POST", "/orders", json: #"{"item":"pen","qty":2}"#)
        #expect(second.status == 201)
        let feedA = try await Self.send(a, "GET", "/_changes?since=0&limit=100"), feedB = try await Self.send(b, "GET", "/_changes?since=0&limit=100")
        #expect(feedA.body == feedB.body)
        #expect(feedA.body.contains("book") && feedA.body.contains("pen"))

        // A conditional write with the tag one process handed out fails on the other once the
        // record changed there.
        let record = try await Self.send(a, "GET", "/orders/1")
        let tag = try #require(record.headers["etag"])
        let changed = try await Self.send(a, "PATCH", "/orders/1", json: #"{"qty":3}"#, headers: ["If-Match": tag])
        #expect(changed.status == 200, "\(changed.body)")
        let stale = try await Self.send(b, "PATCH", "/orders/1", json: #"{"qty":4}"#, headers: ["If-Match": tag])
        #expect(stale.status == 412, "\(stale.body)")
        let final = try await Self.send(b, "GET", "/orders/1")
        #expect(final.body.contains(#""qty":3"#), "\(final.body)")
    }
}
