import DepotCore
import DepotWire
import Foundation

extension SyncCoordinator {
    /// Drains the outbox of `collections` (rounds repeat while conflicts or merges add entries).
    func pushCollections(_ collections: [String], _ report: inout SyncReport) async throws {
        let names = Set(collections)
        for _ in 0..<3 {
            let entries = try await localRead { tx in try Outbox.entries(in: tx) }.filter { names.contains($0.collection) && endpoints[$0.collection] != nil }
            var drain = OutboxDrain(entries: entries)
            guard entries.contains(where: { $0.state == .pending }) else { return }
            while let entry = drain.next() {
                try Task.checkCancellation()
                guard let endpoint = endpoints[entry.collection], let collection = try? CollectionName(entry.collection) else { continue }
                let outcome = try await pushEntry(entry, collection, endpoint, &report)
                drain.finish(entry, outcome)
            }
            if drain.halted { return }
        }
    }

    /// Pushes one entry, settling conflicts through the policy (a few rounds at most).
    func pushEntry(_ first: OutboxEntry, _ collection: CollectionName, _ endpoint: SyncEndpoint, _ report: inout SyncReport) async throws -> OutboxDrain.Outcome {
        let name = collection.rawValue
        let seq = first.seq
        let policy = conflictPolicy
        let assigns = endpoint.idAssignment == .server
        for _ in 0..<4 {
            let loaded = try await localRead { tx -> (OutboxEntry?, RecordSyncState?) in
                guard let entry = try Outbox.entry(seq, in: tx) else { return (nil, nil) }
                return (entry, try RecordSyncState.load(tx, name, entry.recordID))
            }
            guard let entry = loaded.0, let state = loaded.1, entry.state == .pending else { return .pushed }  // settled elsewhere
            let id = entry.recordID
            var headers = ["Idempotency-Key": entry.idempotencyKey]
            let method: String
            let url: URL?
            var body: FieldValue?
            switch entry.operation {
            case .upsert:
                let fields = entry.fields ?? [:]
                if state.remote {
                    method = "PUT"
                    url = endpoint.itemURL(id)
                    body = endpoint.toServer(fields, id: id)
                    if let etag = state.etag { headers["If-Match"] = etag }
                } else {
                    method = "POST"
                    url = endpoint.url()
                    body = endpoint.toServer(fields, id: endpoint.idAssignment == .client ? id : nil)
                }
            case .delete:
                if !state.remote {
                    // The server never had it: nothing to send.
                    _ = try await localWrite { tx in try Outbox.remove(seq, in: tx) }
                    return .pushed
                }
                method = "DELETE"
                url = endpoint.itemURL(id)
                if let etag = state.etag { headers["If-Match"] = etag }
            }
            if method == "POST", assigns, !entry.sent {
                // From here until its answer is recorded the POST is in doubt (see
                // OutboxEntry.sent): the server may create the record and the answer be lost.
                try await localWrite { tx in try Outbox.modify(seq, in: tx) { $0.sent = true } }
            }
            let answer: HTTPAnswer
            do {
                answer = try await send(endpoint, method, url, body: body, headers: headers, report: &report)
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
            var verdict = RequestVerdict.classify(status: answer.status)
            if verdict == .notFound {
                if entry.operation == .delete { verdict = .success } else if method == "PUT" { verdict = .conflict }
            }
            switch verdict {
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

    /// Records a successful push: removes the entry, remembers the server's ETag and state,
    /// re-keys a record the server gave its own id, and stores the server's answer locally
    /// when no later local edit waits (a replayed answer is never stored: it may be old).
    func acknowledge(_ entry: OutboxEntry, method: String, answer: HTTPAnswer, _ collection: CollectionName, _ endpoint: SyncEndpoint, _ report: inout SyncReport) async throws {
        let name = collection.rawValue
        let returned = try Self.json(answer).flatMap(endpoint.fromServer)
        let replayed = answer.header("idempotent-replayed") == "true"
        let etag = answer.header("etag")
        let assignment = endpoint.idAssignment
        let moves = try await localWrite { tx -> [(RecordID, RecordID)] in
            try Outbox.remove(entry.seq, in: tx)
            var id = entry.recordID
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
                state.base = SyncLocal.stateHash(id, serverFields)
                if !replayed, let serverFields, try SyncLocal.pendingEntries(tx, name, id).isEmpty {
                    let local = try tx.get(id, from: collection)
                    if local != nil, SyncLocal.stateHash(id, local?.fields) != state.base {
                        try SyncLocal.writeLocal(tx, collection, id, serverFields)
                    }
                }
            }
            try state.store(tx)
            return moves
        }
        for (from, to) in moves { emit(.rekeyed(collection: name, from: from, to: to)) }
        report.pushed += 1
        emit(.pushed(collection: name, id: moves.last?.1 ?? entry.recordID, operation: entry.operation.rawValue))
    }
}
