import DepotCore
import DepotWire
import Foundation

extension SyncCoordinator {
    /// Drains the outbox of `collections` (rounds repeat while conflicts or merges add entries).
    ///
    /// Batches are pipelined (Docs/Sync.md, "Batched push"): while batches are on the wire
    /// or being acknowledged, the next is read, encoded and sent, up to ``batchesInFlight``.
    /// Batches in flight never share a record (``OutboxDrain/nextBatch(maxCount:inFlight:)``),
    /// so a record's entries still go out one after the other. A server's limits are asked
    /// once, before its first batch, so batches pipeline from the start.
    func pushCollections(_ collections: [String], _ report: inout SyncReport) async throws {
        let names = Set(collections)
        // Base URLs whose limits question was refused for this push only (credentials).
        var noBatches: Set<String> = []
        for _ in 0..<3 {
            // Without their fields: each batch reads its entries again, whole, to send them.
            let entries = try await localRead { tx in try Outbox.entriesWithoutFields(in: tx) }.filter { names.contains($0.collection) && endpoints[$0.collection] != nil }
            var drain = OutboxDrain(entries: entries)
            guard entries.contains(where: { $0.state == .pending }) else { return }
            // The batches on the wire or being acknowledged, oldest first.
            var inFlight: [BatchInFlight] = []
            do {
                while !drain.halted {
                    let batch = drain.nextBatch(maxCount: pushBatchSize, inFlight: inFlight.flatMap(\.batch))
                    guard let first = batch.first else {
                        // What is left may wait for the batches in flight: finish the oldest, look again.
                        guard !inFlight.isEmpty else { break }
                        try await finish(inFlight.removeFirst(), &drain, &report)
                        continue
                    }
                    try Task.checkCancellation()
                    guard let endpoint = endpoints[first.collection], let collection = try? CollectionName(first.collection) else { continue }
                    let base = endpoint.baseURL.absoluteString
                    if batch.count > 1, batchCapacities[base] == nil, !batchMissing.contains(base), !noBatches.contains(base) {
                        do {
                            if try await batchCapacity(endpoint, &report) == nil { noBatches.insert(base) }
                        } catch let error as DepotError where error.code == .remote {
                            // Unanswered after its retries: as for a batch that got no answer.
                            try await recordUnanswered(batch.map(\.seq), error.message, &report)
                            for entry in batch { drain.finish(entry, .unreachable) }
                            continue
                        }
                    }
                    if batch.count > 1, !batchMissing.contains(base), !noBatches.contains(base) {
                        let started = BatchInFlight(batch: batch, collection: collection, endpoint: endpoint, task: Task {
                            var part = SyncReport()
                            let outcomes = try await self.pushBatch(batch, collection, endpoint, &part)
                            return BatchResult(outcomes: outcomes, report: part)
                        })
                        inFlight.append(started)
                        if inFlight.count >= Self.batchesInFlight { try await finish(inFlight.removeFirst(), &drain, &report) }
                        continue
                    }
                    // One request per entry (a batch of one, or a peer without the batch
                    // route), after the batches in flight.
                    while !inFlight.isEmpty { try await finish(inFlight.removeFirst(), &drain, &report) }
                    for entry in batch where !drain.halted {
                        try Task.checkCancellation()
                        drain.finish(entry, try await pushEntry(entry, collection, endpoint, &report))
                    }
                }
                while !inFlight.isEmpty { try await finish(inFlight.removeFirst(), &drain, &report) }
            } catch {
                // Nothing runs on after the sync returns: the batches still in flight are
                // cancelled and awaited. Their own outcomes are dropped (the first error is the
                // one thrown); their entries stay in the outbox unless their acknowledgement
                // committed.
                for left in inFlight { left.task.cancel() }
                for left in inFlight { _ = await left.task.result }
                throw error
            }
            if drain.halted { return }
        }
    }

    /// Batches on the wire or being acknowledged at once, at most (Docs/Sync.md, "Batched
    /// push"): with three, the server applies one while the client encodes the next and
    /// acknowledges the last (`depot bench-sync`, 10-field records: 16,916 and 17,008
    /// entries/s with two, 18,252 and 18,157 with three, 17,361 and 18,571 with four).
    static let batchesInFlight = 3

    /// A batch being pushed by its own task (``pushCollections(_:_:)``).
    struct BatchInFlight {
        var batch: [OutboxEntry]
        var collection: CollectionName
        var endpoint: SyncEndpoint
        var task: Task<BatchResult, any Error>
    }

    /// What a batch's task returns: each entry's outcome (`nil`: the server has no batch
    /// route, push them one by one) and what it counted.
    struct BatchResult: Sendable {
        var outcomes: [OutboxDrain.Outcome]?
        var report: SyncReport
    }

    /// Waits for `flight`, adds what it counted to `report` and its outcomes to `drain`; when
    /// the server turned out to have no batch route, pushes its entries one request each.
    private func finish(_ flight: BatchInFlight, _ drain: inout OutboxDrain, _ report: inout SyncReport) async throws {
        // The batch runs in a task of its own: cancelling the sync cancels it too.
        let task = flight.task
        let result = try await withTaskCancellationHandler { try await task.value } onCancel: { task.cancel() }
        report.add(result.report)
        if let outcomes = result.outcomes {
            for (entry, outcome) in zip(flight.batch, outcomes) { drain.finish(entry, outcome) }
            return
        }
        for entry in flight.batch where !drain.halted {
            try Task.checkCancellation()
            drain.finish(entry, try await pushEntry(entry, flight.collection, flight.endpoint, &report))
        }
    }

    /// Pushes one entry, settling conflicts through the policy (a few rounds at most).
    ///
    /// `firstAnswer` is the answer the entry already got inside a batch
    /// (SyncCoordinator+Batch.swift): it stands for the first round's request, so a conflict
    /// or a retryable status is handled exactly as if this request had got it.
    func pushEntry(
        _ first: OutboxEntry, _ collection: CollectionName, _ endpoint: SyncEndpoint, _ report: inout SyncReport, firstAnswer: HTTPAnswer? = nil
    ) async throws -> OutboxDrain.Outcome {
        let name = collection.rawValue
        let seq = first.seq
        let policy = conflictPolicy
        let assigns = endpoint.idAssignment == .server
        var firstAnswer = firstAnswer
        for _ in 0..<4 {
            let loaded = try await localRead { tx -> (OutboxEntry?, RecordSyncState?) in
                guard let entry = try Outbox.entry(seq, in: tx) else { return (nil, nil) }
                return (entry, try RecordSyncState.load(tx, name, entry.recordID))
            }
            guard let entry = loaded.0, let state = loaded.1, entry.state == .pending else { return .pushed }  // settled elsewhere
            let id = entry.recordID
            guard let request = Self.pushRequest(entry, state, endpoint) else {
                // The server never had it: nothing to send.
                _ = try await localWrite { tx in try Outbox.remove(seq, in: tx) }
                return .pushed
            }
            let method = request.method
            if method == "POST", assigns, !entry.sent {
                // From here until its answer is recorded the POST is in doubt (see
                // OutboxEntry.sent): the server may create the record and the answer be lost.
                try await localWrite { tx in try Outbox.modify(seq, in: tx) { $0.sent = true } }
            }
            let prior = firstAnswer
            firstAnswer = nil
            let answer: HTTPAnswer
            do {
                answer = try await send(endpoint, method, request.url(endpoint), body: request.body, headers: request.headers, prior: prior, report: &report)
            } catch let error as DepotError where error.code == .remote {
                let message = error.message
                try await localWrite { tx in
                    try Outbox.modify(seq, in: tx) { stored in
                        stored.attempts += 1
                        stored.lastError = message
                    }
                }
                report.failures.append(message)
                return .unreachable
            }
            switch Self.pushVerdict(answer, entry.operation, method) {
            case .success:
                try await acknowledge(entry, method: method, answer: answer, collection, endpoint, &report)
                return .pushed
            case .conflict:
                let (server, etag) = try await fetchCurrent(endpoint, id, &report)
                let outcome = try await localWrite { tx in
                    try SyncLocal.applyRemote(tx, collection: collection, id: id, server: server, etag: etag, seen: nil, policy: policy, serverAssignsIDs: assigns)
                }
                count(outcome, collection, id, &report)
                continue
            case .permanent, .notFound, .retry:
                let message = Self.describe(answer)
                try await localWrite { tx in
                    try Outbox.modify(seq, in: tx) { stored in
                        stored.state = .dead
                        stored.attempts += 1
                        stored.lastError = message
                    }
                }
                report.deadLettered += 1
                emit(.deadLettered(collection: name, id: id, status: answer.status))
                return .deadLettered
            }
        }
        return .blocked
    }

    /// Settles the in-doubt POSTs of a collection whose server assigns ids, before a pull.
    ///
    /// A POST that may have reached the server without its answer being recorded (the
    /// answer was lost, the retries ran out, or the process died) left the record on the
    /// server under an id the client does not know. A pull would bring it back as a second
    /// local record beside the local one — shown twice, and left behind when the user then
    /// deletes the local one. So the POST is sent again first with its idempotency key: the
    /// server replays the original answer (or creates the record now) and the local record
    /// is re-keyed to the server's id. Only an entry that is still the first pending entry of
    /// its record is sent, so entries of one record keep their order.
    /// - Throws: ``DepotError`` `.remote` when a POST could not be settled (the pull waits
    ///   for the next sync), store errors, `CancellationError`.
    func settleInDoubtPosts(_ collection: CollectionName, _ endpoint: SyncEndpoint, _ report: inout SyncReport) async throws {
        guard endpoint.idAssignment == .server else { return }
        let name = collection.rawValue
        let inDoubt = try await localRead { tx -> [OutboxEntry] in
            var out: [OutboxEntry] = []
            for entry in try Outbox.sentPending(of: name, in: tx) where entry.operation == .upsert {
                if try SyncLocal.pendingEntries(tx, name, entry.recordID).first?.seq == entry.seq { out.append(entry) }
            }
            return out
        }
        for entry in inDoubt {
            try Task.checkCancellation()
            if try await pushEntry(entry, collection, endpoint, &report) == .unreachable {
                throw DepotError(.remote, "POST \(endpoint.path) may have created a record whose id is not known yet; the pull waits until it is settled.")
            }
        }
    }

    /// The server's current state of one record: its fields (`nil` when it has none) and ETag.
    func fetchCurrent(_ endpoint: SyncEndpoint, _ id: RecordID, _ report: inout SyncReport) async throws -> ([String: FieldValue]?, String?) {
        let answer = try await send(endpoint, "GET", endpoint.itemURL(id), report: &report)
        if answer.status == 404 || answer.status == 410 { return (nil, nil) }
        guard (200..<300).contains(answer.status), let body = try Self.json(answer), let record = endpoint.fromServer(body) else {
            throw DepotError(.remote, "GET \(endpoint.path)/… answered \(answer.status) while settling a conflict.")
        }
        return (record.fields, answer.header("etag"))
    }

    /// What an answer to a push request means: a 404 to a DELETE is done, a 404 to a PUT a
    /// conflict (the record went away on the server).
    static func pushVerdict(_ answer: HTTPAnswer, _ operation: OutboxEntry.Operation, _ method: String) -> RequestVerdict {
        var verdict = RequestVerdict.classify(status: answer.status)
        if verdict == .notFound {
            if operation == .delete { verdict = .success } else if method == "PUT" { verdict = .conflict }
        }
        return verdict
    }

    /// The request that pushes `entry`, or `nil` for the delete of a record the server never
    /// had (nothing to send). An upsert of a record the server has is a PUT with `If-Match`;
    /// otherwise a POST (with the id for `.client` assignment); a delete is a DELETE with
    /// `If-Match`. Every request carries the entry's `Idempotency-Key`.
    static func pushRequest(_ entry: OutboxEntry, _ state: RecordSyncState, _ endpoint: SyncEndpoint) -> PushRequest? {
        let id = entry.recordID
        var headers = ["Idempotency-Key": entry.idempotencyKey]
        switch entry.operation {
        case .upsert:
            let fields = entry.fields ?? [:]
            if state.remote {
                if let etag = state.etag { headers["If-Match"] = etag }
                return PushRequest(method: "PUT", item: id, body: endpoint.toServer(fields, id: id), headers: headers)
            }
            return PushRequest(method: "POST", item: nil, body: endpoint.toServer(fields, id: endpoint.idAssignment == .client ? id : nil), headers: headers)
        case .delete:
            guard state.remote else { return nil }
            if let etag = state.etag { headers["If-Match"] = etag }
            return PushRequest(method: "DELETE", item: id, body: nil, headers: headers)
        }
    }

    /// Records a successful push: removes the entry, remembers the server's ETag and state,
    /// re-keys a record the server gave its own id, and stores the server's answer locally
    /// when no later local edit waits (a replayed answer is never stored: it may be old).
    func acknowledge(_ entry: OutboxEntry, method: String, answer: HTTPAnswer, _ collection: CollectionName, _ endpoint: SyncEndpoint, _ report: inout SyncReport) async throws {
        let success = try PushSuccess(entry, method: method, answer: answer, endpoint)
        let assignment = endpoint.idAssignment
        let moves = try await localWrite { tx in try success.record(in: tx, collection, assignment) }
        announce(success, moves, collection, &report)
    }

    /// Reports one recorded push: its re-keys and the `.pushed` event.
    func announce(_ success: PushSuccess, _ moves: [(RecordID, RecordID)], _ collection: CollectionName, _ report: inout SyncReport) {
        let name = collection.rawValue
        for (from, to) in moves { emit(.rekeyed(collection: name, from: from, to: to)) }
        report.pushed += 1
        emit(.pushed(collection: name, id: moves.last?.1 ?? success.entry.recordID, operation: success.entry.operation.rawValue))
    }
}

/// One push request, before hooks and retries (``SyncCoordinator/pushRequest(_:_:_:)``).
struct PushRequest: Sendable {
    var method: String
    /// The record the request names in its path (`PUT`, `DELETE`); `nil` for a `POST` to
    /// the collection.
    var item: RecordID?
    var body: FieldValue?
    var headers: [String: String]

    /// The request's URL at `endpoint`: built only for a request sent alone (a batch entry
    /// carries its path, ``SyncEndpoint/wirePath(of:collectionPath:)``).
    func url(_ endpoint: SyncEndpoint) -> URL? {
        guard let item else { return endpoint.url() }
        return endpoint.itemURL(item)
    }
}

/// A successful answer to a push, read before the local transaction that records it.
struct PushSuccess: Sendable {
    var entry: OutboxEntry
    var method: String
    /// The record the server answered with, mapped to local fields.
    var returned: Record?
    var replayed: Bool
    var etag: String?
    /// `SyncLocal.stateHash` of ``returned``, when the answer echoed the body sent and that
    /// body is already the state's canonical text (no field mapping, the id under `id`,
    /// every member a field): hashed from the bytes sent instead of written again.
    var echoHash: String?

    /// Reads `answer`. `sent` is the request's body, as sent and as the value it was
    /// serialized from: an answer whose body is those same bytes (a server that echoes the
    /// record it stored, as DepotServer does) is not parsed, since Depot's JSON reads back
    /// exactly the value it was written from (Docs/TypeMapping.md, "JSON text"; Docs/Sync.md,
    /// "Batched push").
    /// - Throws: ``DepotError`` `.remote` for a body that is not JSON.
    init(_ entry: OutboxEntry, method: String, answer: HTTPAnswer, _ endpoint: SyncEndpoint, sent: (text: String, value: FieldValue)? = nil) throws {
        self.entry = entry
        self.method = method
        if let sent, Self.same(answer.body, sent.text) {
            returned = endpoint.fromServer(sent.value)
            // The text sent is `{"id":…, fields…}` with keys in byte order, the text the
            // state hash is taken of, when nothing was renamed or left out on the way.
            if let returned, endpoint.fieldMapping.isEmpty, endpoint.idField == "id",
               case .object(let members) = sent.value, members.count == returned.fields.count + 1 {
                echoHash = WireETag.hash(sent.text.utf8)
            }
        } else {
            returned = try SyncCoordinator.json(answer).flatMap(endpoint.fromServer)
        }
        replayed = answer.header("idempotent-replayed") == "true"
        etag = answer.header("etag")
    }

    /// Whether `body` holds exactly the UTF-8 bytes of `text`.
    static func same(_ body: Data, _ text: String) -> Bool {
        var text = text
        return text.withUTF8 { expected in
            body.count == expected.count && body.withUnsafeBytes { $0.elementsEqual(UnsafeRawBufferPointer(expected)) }
        }
    }

    /// Removes the entry and records the server's state inside `tx` (see
    /// ``SyncCoordinator/acknowledge(_:method:answer:_:_:_:)``); returns the re-keys made.
    ///
    /// For a collection whose server assigns ids, the record id is read again from the stored
    /// entry: an earlier re-key in the same transaction may have moved this record aside
    /// (Docs/Sync.md, "Server-assigned ids").
    func record(in tx: StoreWriteTransaction, _ collection: CollectionName, _ assignment: SyncEndpoint.IDAssignment) throws -> [(RecordID, RecordID)] {
        let name = collection.rawValue
        // Only a re-key moves a record aside, and only a collection whose server assigns ids
        // re-keys: with client ids the entry's record id is the one the request was built from.
        var id = assignment == .server ? (try Outbox.entry(entry.seq, in: tx)?.recordID ?? entry.recordID) : entry.recordID
        try Outbox.remove(entry.seq, in: tx)
        var moves: [(RecordID, RecordID)] = []
        if method == "POST", assignment == .server, let newID = returned?.id, newID != id {
            if let displaced = try SyncLocal.rekey(tx, collection: collection, from: id, to: newID) { moves.append(displaced) }
            moves.append((id, newID))
            id = newID
        }
        var state = try RecordSyncState.load(tx, name, id)
        if entry.operation == .delete {
            state.remote = false
            state.etag = nil
            state.base = "deleted"
        } else {
            state.remote = true
            state.etag = etag
            let serverFields = returned?.fields ?? entry.fields
            if let echoHash, returned?.id == id { state.base = echoHash } else { state.base = SyncLocal.stateHash(id, serverFields) }
            // The local record is compared first: when it already is the server's state (the
            // usual answer echoes what was sent) the outbox is not searched for later edits.
            // States compare by their fields, as a pull compares them (`SyncLocal.sameState`).
            if !replayed, let serverFields, let local = try tx.get(id, from: collection),
               !SyncLocal.sameState(local.fields, serverFields),
               try SyncLocal.pendingEntries(tx, name, id).isEmpty {
                try SyncLocal.writeLocal(tx, collection, id, serverFields)
            }
        }
        try state.store(tx)
        return moves
    }
}
