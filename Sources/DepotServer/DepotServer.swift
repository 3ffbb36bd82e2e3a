import DepotCore
import Foundation
import Hummingbird
import Logging
import NIOCore

/// Serves any store over HTTP with json-server conventions, plus ETags, conditional
/// requests, idempotency keys and a change feed.
///
/// The server is stateless over its store: everything it remembers (idempotency answers,
/// the change log) lives in reserved collections of the store, written in the same
/// transaction as the write they belong to. Every read and write goes through the
/// ``Store``, so a write over HTTP raises change events, invalidates read caches and wakes
/// observed queries in the serving process like any other. It binds to loopback unless
/// told otherwise.
///
/// ```swift
/// let server = DepotServer(store: try await Store.open("memory:"))
/// let port = try await server.start()      // port 0 picks a free port
/// // ... GET http://127.0.0.1:\(port)/posts
/// await server.stop()
/// ```
///
/// The routes are described in Docs/Server.md.
public final class DepotServer: Sendable {
    /// How the server listens and what it accepts.
    public struct Configuration: Sendable {
        /// The address to bind; loopback by default.
        public var host: String
        /// The port; 0 asks the system for a free one (read it back from ``DepotServer/start()``).
        public var port: Int
        /// The largest request body accepted, in bytes (larger bodies get 413).
        public var maxBodySize: Int
        /// The largest page a list or change-feed request may ask for.
        public var maxPageSize: Int
        /// The most entries one `POST /_batch` may carry (more get 413 `batchTooLarge`).
        public var maxBatchEntries: Int = 1_000
        /// The largest `POST /_batch` body accepted, in bytes (larger ones get 413
        /// `batchTooLarge`); each entry's own body is still held to ``maxBodySize``.
        public var maxBatchBodySize: Int = 16 << 20
        /// The folder `/_files/NAME` serves files from (created if missing); `nil` (the
        /// default) serves no files. Servers given the same folder serve the same files
        /// (Docs/Remote.md, "Files").
        public var filesDirectory: String? = nil
        /// The largest file accepted by `PUT /_files/NAME`, in bytes (larger ones get 413).
        public var maxFileSize: Int64 = 4 << 30
        /// How long idempotency records and change-log tombstones are kept (Docs/Server.md,
        /// "Retention"): 7 days by default; `nil` keeps them forever. A client whose feed
        /// cursor is older is told so (410 `cursorExpired`) and lists the collection again.
        public var retention: Duration? = .seconds(7 * 24 * 3600)
        /// How often a running server removes what is older than ``retention`` (1 hour).
        public var retentionSweepInterval: Duration = .seconds(3600)
        /// Faults to inject, for tests of clients; `nil` in production. Package-level: set
        /// through `init(faults:)` (ServerFaults.swift), never by users of the server.
        package var faults: ServerFaults? = nil

        /// Makes a configuration; the defaults bind 127.0.0.1 on a free port.
        public init(host: String = "127.0.0.1", port: Int = 0, maxBodySize: Int = 4 << 20, maxPageSize: Int = 10_000) {
            self.host = host
            self.port = port
            self.maxBodySize = maxBodySize
            self.maxPageSize = maxPageSize
        }
    }

    /// The store served.
    public let store: Store
    /// The configuration given at creation.
    public let configuration: Configuration

    private struct RunState {
        var task: Task<Void, any Error>?
        var sweeper: Task<Void, Never>?
        var port: Int?
    }
    private let state = Locked(RunState())

    /// Makes a server over `store` and installs the store's ``ChangeLogRecorder``; nothing
    /// listens until ``start()`` or ``run()``.
    public init(store: Store, configuration: Configuration = Configuration()) {
        self.store = store
        self.configuration = configuration
        _ = ChangeLogRecorder.installed(on: store)
    }

    /// The port the server listens on, once started.
    public var port: Int? { state.withLock { $0.port } }

    /// Starts listening in the background and returns the bound port.
    /// - Throws: ``DepotError`` `.io` when the address cannot be bound, `.invalidStore` when
    ///   the server already runs.
    public func start() async throws -> Int {
        let files = try prepareFiles()
        let (stream, continuation) = AsyncStream<Int?>.makeStream()
        let app = makeApplication(files: files) { port in continuation.yield(port) }
        let task = Task<Void, any Error> {
            defer { continuation.yield(nil) }
            try await app.run()
        }
        let started = state.withLock { s -> Bool in
            if s.task != nil { return false }
            s.task = task
            return true
        }
        guard started else {
            task.cancel()
            throw DepotError(.invalidStore, "The server is already running.")
        }
        var iterator = stream.makeAsyncIterator()
        guard let port = await iterator.next() ?? nil else {
            state.withLock { $0.task = nil }
            let failure = await task.result
            if case .failure(let error) = failure {
                throw DepotError(.io, "The server could not listen on \(configuration.host):\(configuration.port).", cause: DepotError.wrap(error))
            }
            throw DepotError(.io, "The server could not listen on \(configuration.host):\(configuration.port).")
        }
        let sweeper = startSweeping()
        state.withLock {
            $0.port = port
            $0.sweeper = sweeper
        }
        return port
    }

    /// Removes expired idempotency records and tombstones every
    /// ``Configuration/retentionSweepInterval`` until cancelled; `nil` without a retention.
    private func startSweeping() -> Task<Void, Never>? {
        guard configuration.retention != nil else { return nil }
        let interval = configuration.retentionSweepInterval
        return Task { [weak self] in
            while !Task.isCancelled {
                do { try await Task.sleep(for: interval) } catch { return }
                guard let self else { return }
                do {
                    _ = try await self.purgeExpired()
                } catch {
                    continue  // the store was busy or closing: the next sweep tries again
                }
            }
        }
    }

    /// Stops a server started with ``start()`` and waits until it no longer listens.
    public func stop() async {
        let (task, sweeper) = state.withLock { s -> (Task<Void, any Error>?, Task<Void, Never>?) in
            let t = (s.task, s.sweeper)
            s.task = nil
            s.sweeper = nil
            s.port = nil
            return t
        }
        sweeper?.cancel()
        task?.cancel()
        _ = await task?.result
    }

    /// Runs in the foreground until SIGINT or SIGTERM (what `depot serve` calls).
    /// `onListening` receives the bound port once the server accepts connections.
    /// - Throws: ``DepotError`` `.io` when the address cannot be bound.
    public func run(onListening: @escaping @Sendable (Int) -> Void = { _ in }) async throws {
        let files = try prepareFiles()
        let app = makeApplication(files: files) { port in if let port { onListening(port) } }
        let sweeper = startSweeping()
        defer { sweeper?.cancel() }
        do {
            try await app.runService()
        } catch {
            throw DepotError(.io, "The server stopped: it could not listen or failed.", cause: DepotError.wrap(error))
        }
    }

    /// The files folder, created if missing, or `nil` when none is configured.
    private func prepareFiles() throws -> FileRoot? {
        guard let directory = configuration.filesDirectory else { return nil }
        return FileRoot(path: try FileRoot.prepare(directory), maxFileSize: configuration.maxFileSize)
    }

    private func makeApplication(files: FileRoot?, onRunning: @escaping @Sendable (Int?) -> Void) -> some ApplicationProtocol {
        var logger = Logger(label: "depot.server")
        logger.logLevel = .critical  // shutdown noise is not news; requests are not logged (headers may hold secrets)
        let responder = DepotResponder(handler: RequestHandler(store: store, configuration: configuration), files: files)
        return Application(
            responder: responder,
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: nil),
            onServerRunning: { channel in onRunning(channel.localAddress?.port) },
            logger: logger
        )
    }
}
