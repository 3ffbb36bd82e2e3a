import DepotCore
import DepotWire
import Foundation

/// What the client last knew of one record on the server (`_depot_sync_records`).
struct RecordSyncState: Sendable {
    var collection: String
    var id: RecordID
    /// The server's ETag, for `If-Match`.
    var etag: String?
    /// A hash of the server's content as last seen (or "deleted"), to tell a server change
    /// from an old state coming back.
    var base: String?
    /// `true` when the record exists on the server as far as the client knows.
    var remote: Bool
    /// The listing generation that last saw the record (deletion reconciliation).
    var seen: Int64
    /// `true` when ``load(_:_:_:)`` found no stored state in this transaction: ``store(_:)``
    /// then inserts instead of saving (which looks the record up first).
    var knownAbsent = false

    var key: RecordID { .string(WireCollections.recordKey(collection, id)) }

    var fields: [String: FieldValue] {
        var out: [String: FieldValue] = ["collection": .string(collection), "recordId": id.fieldValue, "remote": .bool(remote), "seen": .int(seen)]
        if let etag { out["etag"] = .string(etag) }
        if let base { out["base"] = .string(base) }
        return out
    }

    static func load(_ tx: StoreReadTransaction, _ collection: String, _ id: RecordID) throws -> RecordSyncState {
        let key = RecordID.string(WireCollections.recordKey(collection, id))
        guard let record = try tx.get(key, from: WireCollections.syncRecords) else {
            return RecordSyncState(collection: collection, id: id, etag: nil, base: nil, remote: false, seen: 0, knownAbsent: true)
        }
        return RecordSyncState(
            collection: collection, id: id, etag: record["etag"].stringValue, base: record["base"].stringValue,
            remote: record["remote"].boolValue ?? false, seen: record["seen"].intValue ?? 0
        )
    }

    mutating func store(_ tx: StoreWriteTransaction) throws {
        if knownAbsent {
            try tx.insert(Record(id: key, fields: fields), into: WireCollections.syncRecords)
            knownAbsent = false
        } else {
            try tx.save(Record(id: key, fields: fields), into: WireCollections.syncRecords)
        }
    }
}

/// How a remote state met the local one.
enum ApplyOutcome: Sendable, Equatable {
    case applied
    case deleted
    case unchanged
    case echo
    case conflict(String)
}

/// The local side of sync: applying server states, settling conflicts, re-keying. All of it
/// runs inside one write transaction of the caller.
enum SyncLocal {
    /// A hash of a record state (`nil` fields: deleted): the hash of its canonical JSON
    /// text (Docs/Sync.md, "Conflicts"). Every value has a JSON form, so every state has
    /// its own hash.
    static func stateHash(_ id: RecordID, _ fields: [String: FieldValue]?) -> String {
        guard let fields else { return "deleted" }
        return WireETag.hash(JSONText.recordBytes(id: id, fields: fields, droppingNulls: true))
    }

    /// Whether two record states have the same ``stateHash(_:_:)``, without writing their
    /// JSON: both deleted, or equal fields once what the hash leaves out (null fields, a
    /// field named `id`) is left out. Equal values have equal canonical JSON and, since that
    /// JSON reads back exactly, different values have different JSON.
    static func sameState(_ a: [String: FieldValue]?, _ b: [String: FieldValue]?) -> Bool {
        guard let a, let b else { return a == nil && b == nil }
        func hashed(_ fields: [String: FieldValue]) -> [String: FieldValue] {
            guard fields["id"] != nil || fields.values.contains(where: \.isNull) else { return fields }
            return fields.filter { $0.key != "id" && !$0.value.isNull }
        }
        return hashed(a) == hashed(b)
    }

    static func pendingEntries(_ tx: StoreReadTransaction, _ collection: String, _ id: RecordID) throws -> [OutboxEntry] {
        try Outbox.entries(of: collection, id: id, in: tx)
    }

    /// Writes the server's state of a record locally (`nil`: deletes it). `absent`: the
    /// caller read the record in `tx` and found none, so it is inserted without the lookup
    /// a save makes.
    static func writeLocal(_ tx: StoreWriteTransaction, _ collection: CollectionName, _ id: RecordID, _ fields: [String: FieldValue]?, absent: Bool = false) throws {
        if let fields {
            if absent {
                try tx.insert(Record(id: id, fields: fields).withoutNulls, into: collection)
            } else {
                try tx.save(Record(id: id, fields: fields).withoutNulls, into: collection)
            }
        } else {
            try tx.delete(id, from: collection)
        }
    }

    /// Applies the server's state of one record (`server == nil`: deleted on the server).
    ///
    /// Without local unpushed entries the server state is written. With them: if the server
    /// state equals one of them, the server already has it (our own write echoing back: the
    /// entries up to it are done); if it equals the state the client last knew, nothing
    /// changed on the server; otherwise it is a conflict for the policy.
    ///
    /// `outboxEmpty`: the caller checked, in `tx`, that the collection has no outbox entry at
    /// all (``Outbox/hasEntries(of:in:)``), so the per-record lookup is skipped. Applying
    /// server states never adds an entry while none is pending, so the check holds for a
    /// whole page applied in one transaction. `serverHash`: `stateHash(id, server)`, when the
    /// caller computed it outside the transaction (a pull hashes the next page while this
    /// one is applied).
    static func applyRemote(
        _ tx: StoreWriteTransaction, collection: CollectionName, id: RecordID, server: [String: FieldValue]?, etag: String?,
        seen: Int64?, policy: ConflictPolicy, serverAssignsIDs: Bool = false, outboxEmpty: Bool = false, serverHash knownHash: String? = nil
    ) throws -> ApplyOutcome {
        let name = collection.rawValue
        var state = try RecordSyncState.load(tx, name, id)
        let serverHash = knownHash ?? stateHash(id, server)
        if let seen { state.seen = seen }
        var pending = outboxEmpty ? [] : try pendingEntries(tx, name, id)
        if serverAssignsIDs, !state.remote, state.base == nil, !pending.isEmpty {
            // This client never saw a server record with this id, yet it has unpushed local
            // writes under it: a local record holds the id by coincidence and is another
            // record. A tombstone for the id is not about it; a server record moves it (with
            // its entries) to a fresh local id first.
            guard server != nil else { return .unchanged }
            _ = try displace(tx, collection, id)
            state = RecordSyncState(collection: name, id: id, etag: nil, base: nil, remote: false, seen: seen ?? 0)
            pending = []
        }
        func settle() throws {
            state.etag = server == nil ? nil : etag
            state.base = serverHash
            state.remote = server != nil
            try state.store(tx)
        }
        if pending.isEmpty {
            let local = try tx.get(id, from: collection)
            let changed = !sameState(local?.fields, server)
            if changed { try writeLocal(tx, collection, id, server, absent: local == nil) }
            try settle()
            if !changed { return .unchanged }
            return server == nil ? .deleted : .applied
        }
        if let index = pending.lastIndex(where: { stateHash(id, $0.fields) == serverHash && ($0.operation == .delete) == (server == nil) }) {
            for entry in pending[...index] { try Outbox.remove(entry.seq, in: tx) }
            try settle()
            return .echo
        }
        if state.base == serverHash {
            if state.etag == nil, let etag { state.etag = etag }
            try state.store(tx)
            return .unchanged
        }
        let local = try tx.get(id, from: collection)
        let resolution: String
        var takeServer: Bool
        var merged: [String: FieldValue]?? = nil
        switch policy {
        case .serverWins: takeServer = true
        case .clientWins: takeServer = false
        case .lastWriterWins(let field):
            if server == nil { takeServer = true } else if local == nil { takeServer = false } else {
                takeServer = !isGreater(local?[field] ?? .null, than: server?[field] ?? .null)
            }
        case .merge(let closure):
            let result = closure(SyncConflict(collection: name, id: id, local: local, server: server.map { Record(id: id, fields: $0) }))
            takeServer = stateHash(id, result) == serverHash
            if !takeServer { merged = .some(result) }
        }
        if takeServer {
            for entry in pending { try Outbox.remove(entry.seq, in: tx) }
            try writeLocal(tx, collection, id, server)
            resolution = "server"
        } else if let mergedFields = merged {
            for entry in pending { try Outbox.remove(entry.seq, in: tx) }
            try writeLocal(tx, collection, id, mergedFields)
            try Outbox.append(mergedFields == nil ? .delete : .upsert, collection: name, id: id, fields: mergedFields, in: tx)
            resolution = "merged"
        } else {
            // The local edit stays; its next request is a new one (new If-Match), so it gets a new key.
            if let head = pending.first {
                var renewed = head
                renewed.idempotencyKey = Outbox.newIdempotencyKey()
                try Outbox.update(renewed, in: tx)
            }
            resolution = "client"
        }
        try settle()
        return .conflict(resolution)
    }

    /// `true` when `a` is greater than `b` for last-writer-wins: numbers by value, strings
    /// by bytes; anything beats a missing value; otherwise not greater.
    static func isGreater(_ a: FieldValue, than b: FieldValue) -> Bool {
        switch (a, b) {
        case (.null, _): return false
        case (_, .null): return true
        case let (.string(x), .string(y)): return y.utf8.lexicographicallyPrecedes(x.utf8)
        default:
            if let x = a.doubleValue, let y = b.doubleValue, a.kind == .number, b.kind == .number {
                if case .int(let i) = a, case .int(let j) = b { return i > j }
                return x > y
            }
            return false
        }
    }

    /// Moves local record `from` to the server-assigned id `to`, with its outbox entries and
    /// sync state. A local record already at `to` that the server never saw is moved to a
    /// fresh local id first, so nothing is overwritten or duplicated. Returns that move, if any.
    static func rekey(_ tx: StoreWriteTransaction, collection: CollectionName, from: RecordID, to: RecordID) throws -> (RecordID, RecordID)? {
        guard from != to else { return nil }
        let name = collection.rawValue
        var displaced: (RecordID, RecordID)?
        // Written without `try` inside `||`: see Relations.fetch (a throw from an autoclosure
        // over-released what it captured).
        var occupied = false
        if !(try RecordSyncState.load(tx, name, to).remote) {
            occupied = try tx.get(to, from: collection) != nil
            if !occupied { occupied = !(try pendingEntries(tx, name, to).isEmpty) }
        }
        if occupied {
            displaced = (to, try displace(tx, collection, to))
        }
        if let local = try tx.get(from, from: collection) {
            try tx.delete(from, from: collection)
            try tx.save(Record(id: to, fields: local.fields), into: collection)
        } else if case .int = to, try tx.get(to, from: collection) == nil {
            // The record was deleted locally before its POST was answered: its outbox entries
            // and sync state move to `to`, but no local record does. Reserve `to` in the local
            // id sequence anyway (a placeholder saved and deleted), so no later local record
            // (a new insert, or a record moved aside by `displace`) is given this id and mixed
            // up with this record's pending DELETE and sync state.
            try tx.save(Record(id: to, fields: [:]), into: collection)
            try tx.delete(to, from: collection)
        }
        try moveBookkeeping(tx, name, from: from, to: to)
        return displaced
    }

    /// Moves the local record at `id` (if any) and its outbox entries and sync state to a
    /// fresh local id, which it returns: used when `id` turns out to be another record's on
    /// the server.
    ///
    /// The fresh id comes from the store's id sequence, but is skipped while the sync still
    /// tracks it (outbox entries or sync state under it, with no local record: a server id
    /// of a record deleted locally, or a server tombstone): moving this record's bookkeeping
    /// there would overwrite that record's sync state and mix their entries — its pending
    /// DELETE would then be dropped unsent, and the server's copy pulled back in.
    static func displace(_ tx: StoreWriteTransaction, _ collection: CollectionName, _ id: RecordID) throws -> RecordID {
        let name = collection.rawValue
        let occupant = try tx.get(id, from: collection)
        var fresh = try tx.insert(fields: occupant?.fields ?? [:], into: collection)
        while try isTracked(tx, name, fresh) {
            try tx.delete(fresh, from: collection)
            fresh = try tx.insert(fields: occupant?.fields ?? [:], into: collection)
        }
        if occupant == nil { try tx.delete(fresh, from: collection) } else { try tx.delete(id, from: collection) }
        try moveBookkeeping(tx, name, from: id, to: fresh)
        return fresh
    }

    /// `true` when the sync keeps outbox entries or sync state under `id`.
    static func isTracked(_ tx: StoreReadTransaction, _ collection: String, _ id: RecordID) throws -> Bool {
        if try tx.get(.string(WireCollections.recordKey(collection, id)), from: WireCollections.syncRecords) != nil { return true }
        return try !pendingEntries(tx, collection, id).isEmpty
    }

    static func moveBookkeeping(_ tx: StoreWriteTransaction, _ name: String, from: RecordID, to: RecordID) throws {
        for entry in try pendingEntries(tx, name, from) {
            var moved = entry
            moved.recordID = to
            try Outbox.update(moved, in: tx)
        }
        var state = try RecordSyncState.load(tx, name, from)
        try tx.delete(state.key, from: WireCollections.syncRecords)
        state.id = to
        try state.store(tx)
    }
}
