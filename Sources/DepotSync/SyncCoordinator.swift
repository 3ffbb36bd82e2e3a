import DepotCore
import DepotWire
import Foundation

/// Keeps collections of a local store and a REST server in step, offline-first.
///
/// Attach a collection to an endpoint once; from then on the store records an outbox
/// entry for every write to it, in the same transaction as the write. ``sync(_:pull:push:)``
/// pulls the server's changes (change feed, or paged listing with deletion reconciliation),
/// settles conflicts with local edits by the ``ConflictPolicy``, then drains the outbox
/// with idempotency keys, `If-Match`, retries with backoff and jitter, and dead-lettering.
///
/// ```swift
/// let sync = SyncCoordinator(store: store, conflictPolicy: .lastWriterWins(field: "updatedAt"))
/// try await sync.attach(posts, to: SyncEndpoint(baseURL: server, path: "/posts"))
/// for await event in await sync.events() { print(event) }   // in another task
/// let report = try await sync.sync(posts)
/// ```
///
/// Everything the coordinator remembers between runs is in the store: the attachment
/// (`_depot_sync`), per-record sync state (`_depot_sync_records`), pull checkpoints and the
/// outbox. Cancel the task running a sync at any point; the next sync resumes.
public actor SyncCoordinator {
    /// The local store. Every local read and write of the coordinator goes through it, so
    /// pulled records raise change events and invalidate read caches like any other write.
    public nonisolated let store: Store
    /// Records the outbox of the store's attached collections.
    nonisolated let recorder: OutboxRecorder
    let transport: any HTTPTransport
    let sleeper: any SyncSleeper
    let random: any SyncRandomSource
    /// How conflicts are settled.
    public var conflictPolicy: ConflictPolicy
    /// How failed requests are retried.
    public var retryPolicy: RetryPolicy
    /// The most outbox entries sent in one `POST /_batch` (Docs/Sync.md, "Batched push");
    /// 1 sends one request per entry.
    public var pushBatchSize: Int

    var endpoints: [String: SyncEndpoint] = [:]
    /// Where queued uploads go (SyncCoordinator+Files.swift); `nil` keeps them queued.
    var fileClient: FileClient?
    var feedMissing: Set<String> = []
    /// Base URLs whose server has no batch route: one request per entry there
    /// (SyncCoordinator+Batch.swift).
    var batchMissing: Set<String> = []
    /// Base URLs whose server takes batches, with the most entries it accepts in one.
    var batchCapacities: [String: Int] = [:]
    var subscribers: [UUID: AsyncStream<SyncEvent>.Continuation] = [:]

    /// Makes a coordinator over a local store, and installs the store's outbox recorder
    /// (``OutboxRecorder``) if it has none, so writes to attached collections are recorded.
    ///
    /// - Parameters:
    ///   - transport: how requests are sent (URLSession by default).
    ///   - sleeper, random: the clock and random source of retries (inject fakes in tests).
    ///   - pushBatchSize: the most outbox entries per `POST /_batch` (at least 1; 1 sends one
    ///     request per entry), ``defaultPushBatchSize`` by default.
    public init(
        store: Store,
        transport: any HTTPTransport = URLSessionTransport(),
        conflictPolicy: ConflictPolicy = .serverWins,
        retryPolicy: RetryPolicy = RetryPolicy(),
        sleeper: any SyncSleeper = TaskSleeper(),
        random: any SyncRandomSource = SystemRandomSource(),
        pushBatchSize: Int = SyncCoordinator.defaultPushBatchSize
    ) {
        self.store = store
        self.recorder = OutboxRecorder.installed(on: store)
        self.transport = transport
        self.conflictPolicy = conflictPolicy
        self.retryPolicy = retryPolicy
        self.pushBatchSize = max(1, pushBatchSize)
        self.sleeper = sleeper
        self.random = random
    }

    /// Runs a local write of the sync's own: through the store, without recording outbox
    /// entries (what sync writes came from the server or is bookkeeping), and without the
    /// end-of-transaction reference checks: a page of the server's records may hold a
    /// record before the one it refers to (Docs/Relations.md, "Referential integrity").
    func localWrite<T: Sendable>(_ body: @escaping @Sendable (StoreWriteTransaction) throws -> T) async throws -> T {
        try await store.write(excluding: [recorder]) { tx in
            tx.checksReferences = false
            return try body(tx)
        }
    }

    /// Runs a local read through the store.
    func localRead<T: Sendable>(_ body: @escaping @Sendable (StoreReadTransaction) throws -> T) async throws -> T {
        try await store.read(body)
    }

    /// Sets the conflict policy.
    public func setConflictPolicy(_ policy: ConflictPolicy) { conflictPolicy = policy }

    /// Sets the most outbox entries per `POST /_batch` (at least 1; 1 sends one request per entry).
    public func setPushBatchSize(_ size: Int) { pushBatchSize = max(1, size) }

    /// Attaches `collection` to `endpoint`: records the attachment in the store (so every
    /// later write to it records an outbox entry) and keeps the endpoint's hooks for this
    /// coordinator. Attaching again with the same remote and path keeps the pull checkpoint.
    ///
    /// It also declares ``Outbox/recordIndex`` on the outbox (once per store), so finding a
    /// record's pending entries, which every pulled record and every push does, is an index
    /// lookup on drivers with indexes instead of a scan of the whole outbox.
    /// - Throws: ``DepotError`` `.invalidStore` for a bad endpoint (see ``SyncEndpoint/validate()``).
    public func attach(_ collection: CollectionName, to endpoint: SyncEndpoint) async throws {
        try endpoint.validate()
        endpoints[collection.rawValue] = endpoint
        let remote = endpoint.baseURL.absoluteString
        let path = endpoint.path
        // Through the recorder too: it sees the change to `_depot_sync` and reads the
        // attachments again after the commit.
        try await store.write { tx in
            var outbox = try tx.schema(of: WireCollections.outbox) ?? CollectionSchema(name: WireCollections.outbox, idKind: .int)
            if !outbox.indexes.contains(Outbox.recordIndex) {
                outbox.indexes.append(Outbox.recordIndex)
                try tx.prepare(outbox)
            }
            let key = RecordID.string(collection.rawValue)
            var fields = try tx.get(key, from: WireCollections.sync)?.fields ?? [:]
            if fields["remote"]?.stringValue != remote || fields["path"]?.stringValue != path {
                fields = ["remote": .string(remote), "path": .string(path)]
            }
            try tx.save(Record(id: key, fields: fields), into: WireCollections.sync)
        }
    }

    /// Removes the attachment: later writes record no outbox entries. Pending entries stay.
    /// - Throws: what the store throws.
    public func detach(_ collection: CollectionName) async throws {
        endpoints[collection.rawValue] = nil
        try await store.write { tx in _ = try tx.delete(.string(collection.rawValue), from: WireCollections.sync) }
    }

    /// A stream of progress events for every later sync; it ends when the consumer stops.
    public func events() -> AsyncStream<SyncEvent> {
        let (stream, continuation) = AsyncStream<SyncEvent>.makeStream(bufferingPolicy: .bufferingNewest(1000))
        let id = UUID()
        subscribers[id] = continuation
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            Task { await self.unsubscribe(id) }
        }
        return stream
    }

    func unsubscribe(_ id: UUID) { subscribers[id] = nil }

    func emit(_ event: SyncEvent) {
        for continuation in subscribers.values { continuation.yield(event) }
    }

    /// Pulls then pushes `collection` (either alone when asked).
    ///
    /// Partial success is normal: the report says what was done and what is left.
    /// - Throws: ``DepotError`` `.notFound` when the collection is not attached here,
    ///   `.cancelled` when the task was cancelled (progress so far is kept), store errors.
    public func sync(_ collection: CollectionName, pull: Bool = true, push: Bool = true) async throws -> SyncReport {
        guard let endpoint = endpoints[collection.rawValue] else {
            throw DepotError(.notFound, "Collection '\(collection.rawValue)' is not attached to a remote in this coordinator.", collection: collection.rawValue)
        }
        var report = SyncReport()
        do {
            if pull { try await pullCollection(collection, endpoint, &report) }
            // Queued uploads first: record changes may refer to them (SyncCoordinator+Files.swift).
            if push, try await pushFileUploads(&report) { try await pushCollections([collection.rawValue], &report) }
        } catch is CancellationError {
            throw DepotError(.cancelled, "The sync was cancelled; it resumes from its checkpoint next time.")
        } catch let error as DepotError where error.code == .remote {
            report.failures.append(error.message)
        }
        let name = collection.rawValue
        let counts = try await localRead { tx -> (Int, Int) in
            let entries = try Outbox.entries(of: name, in: tx) + Outbox.entries(of: SyncCoordinator.fileUploads, in: tx)
            let dead = entries.filter { $0.state == .dead }.count
            return (entries.count - dead, dead)
        }
        report.pendingLeft = counts.0
        report.deadLeft = counts.1
        emit(.finished(report))
        return report
    }

    /// The outbox entries of `collection`, in commit order.
    /// - Throws: store errors.
    public func outbox(for collection: CollectionName) async throws -> [OutboxEntry] {
        let name = collection.rawValue
        return try await localRead { tx in try Outbox.entries(of: name, in: tx) }
    }

    /// Puts dead-lettered entries of `collection` back in the queue (after fixing the cause).
    /// - Throws: store errors.
    public func retryDeadLetters(_ collection: CollectionName) async throws {
        let name = collection.rawValue
        try await localWrite { tx in
            for var entry in try Outbox.entries(of: name, state: .dead, in: tx) {
                entry.state = .pending
                try Outbox.update(entry, in: tx)
            }
        }
    }

    // MARK: Requests

    /// Sends a request with hooks applied and retries for timeouts, connection errors,
    /// 408/429/5xx. Returns the first answer that is not retryable.
    /// - Throws: ``DepotError`` `.remote` after the last attempt; `CancellationError`.
    ///
    /// `bodyData` is a body already encoded (a batch); `prior` is an answer this request
    /// already got as an entry of a batch: it counts as the first attempt.
    func send(
        _ endpoint: SyncEndpoint, _ method: String, _ url: URL?, body: FieldValue? = nil, bodyData: Data? = nil,
        headers: [String: String] = [:], prior: HTTPAnswer? = nil, report: inout SyncReport
    ) async throws -> HTTPAnswer {
        guard let url else { throw DepotError(.invalidStore, "Could not build a URL for the endpoint \(endpoint.path).") }
        var spec = HTTPRequestSpec(method: method, url: url, headers: headers)
        spec.headers["Accept"] = "application/json"
        if let body {
            spec.body = Data(JSONText.serialize(body).utf8)
            spec.headers["Content-Type"] = "application/json"
        } else if let bodyData {
            spec.body = bodyData
            spec.headers["Content-Type"] = "application/json"
        }
        var prior = prior
        if let hook = endpoint.requestHook {
            let before = spec.headers
            hook(&spec)
            for (name, value) in spec.headers where before[name] != value { spec.sensitiveHeaders.insert(name) }
        }
        for name in spec.headers.keys where ["authorization", "cookie", "proxy-authorization"].contains(name.lowercased()) {
            spec.sensitiveHeaders.insert(name)
        }
        guard SyncEndpoint.isAllowed(spec.url, allowInsecureHTTP: endpoint.allowInsecureHTTP) else {
            throw DepotError(.invalidStore, "Plain http:// to a host other than loopback needs allowInsecureHTTP.")
        }
        var retry = RetryState(policy: retryPolicy)
        while true {
            try Task.checkCancellation()
            var retryAfter: Duration?
            var failure: String
            do {
                let answer: HTTPAnswer
                if let given = prior {
                    answer = given
                    prior = nil
                } else {
                    answer = try await transport.send(spec)
                }
                switch RequestVerdict.classify(status: answer.status, retryAfter: answer.header("retry-after")) {
                case .retry(let after):
                    retryAfter = after
                    failure = "\(spec.safeDescription) answered \(answer.status)"
                default:
                    return answer
                }
            } catch {
                if Task.isCancelled || error is CancellationError { throw CancellationError() }
                failure = "\(spec.safeDescription) got no answer"
            }
            guard let wait = retry.failed(unit: random.nextUnit(), retryAfter: retryAfter) else {
                throw DepotError(.remote, "\(failure) after \(retry.attempts) attempts; will retry at the next sync.")
            }
            report.retries += 1
            emit(.retrying(request: spec.safeDescription, attempt: retry.attempts, delay: wait))
            try await sleeper.sleep(for: wait)
        }
    }

    /// The JSON body of an answer (`nil` when it is empty), read as Docs/Server.md says:
    /// Depot's JSON text, with the older wire's `{"$base64": ...}` also read as bytes.
    /// - Throws: ``DepotError`` `.remote` when the body is not JSON.
    static func json(_ answer: HTTPAnswer) throws -> FieldValue? {
        if answer.body.isEmpty { return nil }
        do {
            // A change feed wraps each record in four levels: {"changes":[{"record":{...}}]}.
            return try JSONText.parse([UInt8](answer.body), acceptingLegacyBase64: true, maximumDepth: JSONText.maximumDepth + 4)
        } catch let error as DepotError {
            throw DepotError(.remote, "The server answered \(answer.status) with a body that is not JSON: \(error.message)")
        }
    }

    static func describe(_ answer: HTTPAnswer) -> String {
        let text = String(decoding: answer.body.prefix(500), as: UTF8.self)
        return "HTTP \(answer.status): \(text)"
    }
}
