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
/// let sync = SyncCoordinator(driver: driver, conflictPolicy: .lastWriterWins(field: "updatedAt"))
/// try await sync.attach(posts, to: SyncEndpoint(baseURL: server, path: "/posts"))
/// for await event in await sync.events() { print(event) }   // in another task
/// let report = try await sync.sync(posts)
/// ```
///
/// Everything the coordinator remembers between runs is in the store: the attachment
/// (`_depot_sync`), per-record sync state (`_depot_sync_records`), pull checkpoints and the
/// outbox. Cancel the task running a sync at any point; the next sync resumes.
public actor SyncCoordinator {
    /// The local store's driver.
    public nonisolated let driver: any StorageDriver
    /// The local store, when the coordinator was made over one: local writes then go
    /// through it (change events, read caches, attachments) with `recordingOutbox: false`.
    public nonisolated let store: Store?
    let transport: any HTTPTransport
    let sleeper: any SyncSleeper
    let random: any SyncRandomSource
    /// How conflicts are settled.
    public var conflictPolicy: ConflictPolicy
    /// How failed requests are retried.
    public var retryPolicy: RetryPolicy

    var endpoints: [String: SyncEndpoint] = [:]
    var feedMissing: Set<String> = []
    var subscribers: [UUID: AsyncStream<SyncEvent>.Continuation] = [:]

    /// Makes a coordinator over a local store: the way apps and the CLI use it. Attaching
    /// through it makes the store record outbox entries for the collection's writes.
    ///
    /// - Parameters:
    ///   - transport: how requests are sent (URLSession by default).
    ///   - sleeper, random: the clock and random source of retries (inject fakes in tests).
    public init(
        store: Store,
        transport: any HTTPTransport = URLSessionTransport(),
        conflictPolicy: ConflictPolicy = .serverWins,
        retryPolicy: RetryPolicy = RetryPolicy(),
        sleeper: any SyncSleeper = TaskSleeper(),
        random: any SyncRandomSource = SystemRandomSource()
    ) {
        self.driver = store.driver
        self.store = store
        self.transport = transport
        self.conflictPolicy = conflictPolicy
        self.retryPolicy = retryPolicy
        self.sleeper = sleeper
        self.random = random
    }

    /// Makes a coordinator over a bare driver (no `Store`): local writes go straight to the
    /// driver, and whoever writes to attached collections must record outbox entries
    /// (``OutboxEntry/record(_:collection:id:fields:in:)``).
    ///
    /// - Parameters:
    ///   - transport: how requests are sent (URLSession by default).
    ///   - sleeper, random: the clock and random source of retries (inject fakes in tests).
    public init(
        driver: any StorageDriver,
        transport: any HTTPTransport = URLSessionTransport(),
        conflictPolicy: ConflictPolicy = .serverWins,
        retryPolicy: RetryPolicy = RetryPolicy(),
        sleeper: any SyncSleeper = TaskSleeper(),
        random: any SyncRandomSource = SystemRandomSource()
    ) {
        self.driver = driver
        self.store = nil
        self.transport = transport
        self.conflictPolicy = conflictPolicy
        self.retryPolicy = retryPolicy
        self.sleeper = sleeper
        self.random = random
    }

    /// Runs a local write: through the store without outbox recording when there is one.
    func localWrite<T: Sendable>(_ body: @escaping @Sendable (any WriteTransaction) throws -> T) async throws -> T {
        if let store {
            return try await store.write(recordingOutbox: false) { tx in try body(StoreBackedTransaction(tx)) }
        }
        return try await driver.write(body)
    }

    /// Sets the conflict policy.
    public func setConflictPolicy(_ policy: ConflictPolicy) { conflictPolicy = policy }

    /// Attaches `collection` to `endpoint`: records the attachment in the store (so every
    /// later write to it records an outbox entry) and keeps the endpoint's hooks for this
    /// coordinator. Attaching again with the same remote and path keeps the pull checkpoint.
    ///
    /// It also declares ``outboxRecordIndex`` on the outbox (once per store), so finding a
    /// record's pending entries, which every pulled record and every push does, is an index
    /// lookup on drivers with indexes instead of a scan of the whole outbox.
    /// - Throws: ``DepotError`` `.invalidStore` for a bad endpoint (see ``SyncEndpoint/validate()``).
    public func attach(_ collection: CollectionName, to endpoint: SyncEndpoint) async throws {
        try endpoint.validate()
        endpoints[collection.rawValue] = endpoint
        let remote = endpoint.baseURL.absoluteString
        let path = endpoint.path
        try await localWrite { tx in
            var outbox = try tx.schema(of: WireCollections.outbox) ?? CollectionSchema(name: WireCollections.outbox, idKind: .int)
            if !outbox.indexes.contains(SyncCoordinator.outboxRecordIndex) {
                outbox.indexes.append(SyncCoordinator.outboxRecordIndex)
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

    /// The outbox index that ``attach(_:to:)`` declares: entries by collection and record id.
    public static let outboxRecordIndex = IndexDefinition(["collection", "recordId"], name: "depot_outbox_record")

    /// Removes the attachment: later writes record no outbox entries. Pending entries stay.
    /// - Throws: what the store throws.
    public func detach(_ collection: CollectionName) async throws {
        endpoints[collection.rawValue] = nil
        try await localWrite { tx in _ = try tx.delete(.string(collection.rawValue), from: WireCollections.sync) }
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
            if push { try await pushCollections([collection.rawValue], &report) }
        } catch is CancellationError {
            throw DepotError(.cancelled, "The sync was cancelled; it resumes from its checkpoint next time.")
        } catch let error as DepotError where error.code == .remote {
            report.failures.append(error.message)
        }
        let name = collection.rawValue
        let counts = try await driver.read { tx -> (Int, Int) in
            let entries = try tx.query(Query(filter: Field("collection") == name), in: WireCollections.outbox)
            let dead = entries.filter { $0["state"].stringValue == "dead" }.count
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
        return try await driver.read { tx in
            try tx.query(Query(filter: Field("collection") == name, sort: [SortKey("id")]), in: WireCollections.outbox).compactMap(OutboxEntry.init)
        }
    }

    /// Puts dead-lettered entries of `collection` back in the queue (after fixing the cause).
    /// - Throws: store errors.
    public func retryDeadLetters(_ collection: CollectionName) async throws {
        let name = collection.rawValue
        try await localWrite { tx in
            for record in try tx.query(Query(filter: Field("collection") == name && Field("state") == "dead"), in: WireCollections.outbox) {
                var fields = record.fields
                fields["state"] = "pending"
                try tx.update(Record(id: record.id, fields: fields), in: WireCollections.outbox)
            }
        }
    }

    // MARK: Requests

    /// Sends a request with hooks applied and retries for timeouts, connection errors,
    /// 408/429/5xx. Returns the first answer that is not retryable.
    /// - Throws: ``DepotError`` `.remote` after the last attempt; `CancellationError`.
    func send(_ endpoint: SyncEndpoint, _ method: String, _ url: URL?, body: FieldValue? = nil, headers: [String: String] = [:], report: inout SyncReport) async throws -> HTTPAnswer {
        guard let url else { throw DepotError(.invalidStore, "Could not build a URL for the endpoint \(endpoint.path).") }
        var spec = HTTPRequestSpec(method: method, url: url, headers: headers)
        spec.headers["Accept"] = "application/json"
        if let body {
            spec.body = Data(try WireJSON.encode(body).utf8)
            spec.headers["Content-Type"] = "application/json"
        }
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
                let answer = try await transport.send(spec)
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

    static func json(_ answer: HTTPAnswer) -> FieldValue? {
        answer.body.isEmpty ? nil : try? WireJSON.decode(answer.body)
    }

    static func describe(_ answer: HTTPAnswer) -> String {
        let text = String(decoding: answer.body.prefix(500), as: UTF8.self)
        return "HTTP \(answer.status): \(text)"
    }
}
