import DepotCore
import DepotWire
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// Adapts Hummingbird requests to ``RequestHandler`` and injects configured faults.
struct DepotResponder: HTTPResponder {
    typealias Context = BasicRequestContext
    let handler: RequestHandler
    /// The files folder of the `/_files` routes (DepotResponder+Files.swift), if any.
    var files: FileRoot? = nil

    func respond(to request: Request, context: BasicRequestContext) async throws -> Response {
        let path = request.uri.path
        let method = request.method.rawValue
        var fault: ServerFault?
        if let faults = handler.configuration.faults { fault = faults.decide(method, path) }
        switch fault {
        case .dropConnection?: return Self.dropped()
        case .status(let code)?:
            return Self.response(WireResponse.failure(code, "injected", "Injected fault: status \(code)."))
        case .delay(let ms)?: try? await Task.sleep(for: .milliseconds(ms))
        default: break
        }
        if Self.isFilesPath(path) { return await respondFiles(to: request, fault: fault) }
        var request = request
        let body: [UInt8]
        let isBatch = path == "/" + RequestHandler.batchSegment
        let limit = isBatch ? handler.configuration.maxBatchBodySize : handler.configuration.maxBodySize
        do {
            let buffer = try await request.collectBody(upTo: limit)
            body = Array(buffer.readableBytesView)
        } catch {
            if isBatch {
                return Self.response(WireResponse.failure(413, "batchTooLarge", "A batch body may hold at most \(limit) bytes."))
            }
            return Self.response(WireResponse.failure(413, "tooLarge", "The request body is larger than \(limit) bytes."))
        }
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName] = field.value }
        let wire = WireRequest(method: method, path: path, query: request.uri.query ?? "", headers: headers, body: body)
        if fault == .loseResponseMidBatch, isBatch, method == "POST" {
            // Apply the first half of the entries (commit them), then no answer at all.
            let count = (try? handler.parseBatch(body).count) ?? 0
            _ = await handler.handleBatch(wire, applyingAtMost: (count + 1) / 2)
            return Self.dropped()
        }
        let answer = await handler.handle(wire)
        if fault == .loseResponseAfterCommit || fault == .loseResponseMidBatch { return Self.dropped() }
        return Self.response(answer)
    }

    static func response(_ wire: WireResponse) -> Response {
        var fields = HTTPFields()
        fields[.contentType] = "application/json; charset=utf-8"
        for (name, value) in wire.headers {
            if let fieldName = HTTPField.Name(name) { fields[fieldName] = value }
        }
        let status = HTTPResponse.Status(code: wire.status)
        if wire.status == 304 { return Response(status: status, headers: fields) }
        return Response(status: status, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(string: wire.body)))
    }

    /// A response whose body fails: the head promises bytes that never come and the
    /// connection closes, which the client sees as a lost answer.
    static func dropped() -> Response {
        var fields = HTTPFields()
        fields[.contentType] = "application/json"
        return Response(status: .ok, headers: fields, body: ResponseBody(contentLength: 64) { _ in throw DroppedConnection() })
    }
}

struct DroppedConnection: Error {}

/// A request reduced to what the handler needs; no file-system path is ever derived from it.
struct WireRequest: Sendable {
    var method: String
    var path: String
    var query: String
    /// Header values by lowercased name.
    var headers: [String: String]
    var body: [UInt8]
}

/// An answer before it becomes an HTTP response.
struct WireResponse: Sendable {
    var status: Int
    var headers: [(String, String)]
    var body: String

    static func json(_ status: Int, _ body: String, _ headers: [(String, String)] = []) -> WireResponse {
        WireResponse(status: status, headers: headers, body: body)
    }

    /// The 500 of a failure that has no answer of its own (nothing of it reaches the client).
    static var internalFailure: WireResponse { failure(500, "internal", "The server failed to handle the request.") }

    static func failure(_ status: Int, _ code: String, _ message: String, _ headers: [(String, String)] = []) -> WireResponse {
        let text = JSONText.serialize(.object(["error": .object(["code": .string(code), "message": .string(message)])]))
        return WireResponse(status: status, headers: headers, body: text)
    }
}

/// A failure that becomes a 4xx/5xx answer with a JSON error body.
struct HTTPFailure: Error {
    var status: Int
    var code: String
    var message: String
    var headers: [(String, String)] = []

    var response: WireResponse { WireResponse.failure(status, code, message, headers) }

    static func notFound(_ message: String) -> HTTPFailure { HTTPFailure(status: 404, code: "notFound", message: message) }
    static func badRequest(_ message: String) -> HTTPFailure { HTTPFailure(status: 400, code: "badRequest", message: message) }
}
