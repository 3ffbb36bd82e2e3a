import DepotCore
import DepotMemory
import DepotServer
import DepotWire
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One answer from the server under test.
struct Answer {
    var status: Int
    var headers: [String: String]
    var body: Data

    /// The body as JSON; a body that is not JSON is `.null` here, and the tests that read
    /// it then fail on the value they expect.
    var json: FieldValue { (try? JSONText.parse([UInt8](body))) ?? .null }
    var errorCode: String? { json.objectValue?["error"]?.objectValue?["code"]?.stringValue }
    func header(_ name: String) -> String? {
        headers.first { $0.key.lowercased() == name.lowercased() }?.value
    }
}

/// A real DepotServer on loopback over a MemoryDriver, with a tiny URLSession client.
struct LiveServer {
    let server: DepotServer
    /// The served store's driver, for writes made behind the server's back.
    let driver: MemoryDriver
    /// The served store, as the serving process's own code uses it.
    var store: Store { server.store }
    let base: String

    static func start(faults: ServerFaults? = nil) async throws -> LiveServer {
        let driver = MemoryDriver()
        let server = DepotServer(store: try await Store(driver: driver), configuration: .init(faults: faults))
        let port = try await server.start()
        return LiveServer(server: server, driver: driver, base: "http://127.0.0.1:\(port)")
    }

    func stop() async { await server.stop() }

    func send(_ method: String, _ path: String, json: String? = nil, headers: [String: String] = [:]) async throws -> Answer {
        guard let url = URL(string: base + path) else { throw DepotError(.invalidValue, "bad url \(path)") }
        var request = URLRequest(url: url)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if let json {
            request.httpBody = Data(json.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw DepotError(.remote, "not http") }
        var fields: [String: String] = [:]
        for (key, value) in http.allHeaderFields {
            if let key = key as? String, let value = value as? String { fields[key] = value }
        }
        return Answer(status: http.statusCode, headers: fields, body: data)
    }
}

/// Runs `body` with a started server and always stops it.
func withServer(faults: ServerFaults? = nil, _ body: (LiveServer) async throws -> Void) async throws {
    let live = try await LiveServer.start(faults: faults)
    do {
        try await body(live)
    } catch {
        await live.stop()
        throw error
    }
    await live.stop()
}
