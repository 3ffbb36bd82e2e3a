import DepotCore
import DepotWire
import Foundation

/// One entry of the transactional outbox (`_depot_outbox`), written by the store in the same
/// transaction as the local write it describes.
public struct OutboxEntry: Sendable, Hashable {
    /// What the write did.
    public enum Operation: String, Sendable, Hashable {
        /// The record was inserted or replaced; ``OutboxEntry/fields`` holds its fields.
        case upsert
        /// The record was deleted.
        case delete
    }

    /// Where the entry stands.
    public enum State: String, Sendable, Hashable {
        /// Waiting to be pushed.
        case pending
        /// Refused for good by the server (a permanent 4xx); ``lastError`` holds its answer.
        case dead
    }

    /// The entry's sequence number (commit order).
    public var seq: Int64
    /// The collection written.
    public var collection: String
    /// The record written.
    public var recordID: RecordID
    /// Upsert or delete.
    public var operation: Operation
    /// The record's fields after the write (`nil` for a delete).
    public var fields: [String: FieldValue]?
    /// The key sent as `Idempotency-Key`, so a retried request is applied once.
    public var idempotencyKey: String
    /// Pending or dead.
    public var state: State
    /// Failed attempts so far.
    public var attempts: Int
    /// The last failure (for a dead entry: the server's status and answer).
    public var lastError: String?
    /// `true` once a POST for this entry to a server that assigns ids may have reached the
    /// server (it is set just before sending). Until the POST's answer is recorded the entry
    /// is *in doubt*: the server may hold the record under an id the client does not know yet,
    /// so pulls first replay the POST (same idempotency key) to learn that id.
    public var sent: Bool

    /// Makes an entry.
    public init(
        seq: Int64, collection: String, recordID: RecordID, operation: Operation, fields: [String: FieldValue]?,
        idempotencyKey: String, state: State = .pending, attempts: Int = 0, lastError: String? = nil, sent: Bool = false
    ) {
        self.seq = seq
        self.collection = collection
        self.recordID = recordID
        self.operation = operation
        self.fields = fields
        self.idempotencyKey = idempotencyKey
        self.state = state
        self.attempts = attempts
        self.lastError = lastError
        self.sent = sent
    }

    /// Reads an entry from its stored record; `nil` when the record is malformed.
    public init?(_ record: Record) {
        guard case .int(let seq) = record.id, let collection = record["collection"].stringValue,
            let id = RecordID(record["recordId"]), let op = record["op"].stringValue.flatMap(Operation.init(rawValue:)),
            let key = record["idempotencyKey"].stringValue
        else { return nil }
        self.seq = seq
        self.collection = collection
        self.recordID = id
        self.operation = op
        self.fields = record["record"].objectValue
        self.idempotencyKey = key
        self.state = record["state"].stringValue.flatMap(State.init(rawValue:)) ?? .pending
        self.attempts = Int(record["attempts"].intValue ?? 0)
        self.lastError = record["lastError"].stringValue
        self.sent = record["sent"].boolValue ?? false
    }

    /// The stored form (the store's contract for `_depot_outbox`).
    public var fieldsForStorage: [String: FieldValue] {
        var out: [String: FieldValue] = [
            "collection": .string(collection), "recordId": recordID.fieldValue, "op": .string(operation.rawValue),
            "idempotencyKey": .string(idempotencyKey), "state": .string(state.rawValue), "attempts": .int(Int64(attempts)),
        ]
        if let fields { out["record"] = .object(fields) }
        if let lastError { out["lastError"] = .string(lastError) }
        if sent { out["sent"] = true }
        return out
    }

    /// Appends an entry to the outbox inside a write transaction, as the store does for a
    /// write to an attached collection. Returns the new entry.
    /// - Throws: what the transaction throws.
    @discardableResult
    public static func record(
        _ operation: Operation, collection: String, id: RecordID, fields: [String: FieldValue]?, in tx: any WriteTransaction
    ) throws -> OutboxEntry {
        var entry = OutboxEntry(
            seq: 0, collection: collection, recordID: id, operation: operation, fields: operation == .delete ? nil : fields,
            idempotencyKey: UUID().uuidString.lowercased()
        )
        let seq = try tx.insert(fields: entry.fieldsForStorage, into: WireCollections.outbox)
        if case .int(let s) = seq { entry.seq = s }
        return entry
    }
}

/// The order in which outbox entries are pushed: a plain state machine, no I/O.
///
/// Entries go out in commit order. Entries of one record never overtake each other: when
/// an entry of a record is dead-lettered or blocked, the later entries of that record wait
/// (they were written on top of a state the server never accepted). When a request gives
/// up after its retries (the server is unreachable or overloaded), the drain halts: the
/// rest stays pending for the next sync. Partial success is normal.
public struct OutboxDrain: Sendable {
    /// What happened to the entry last handed out.
    public enum Outcome: Sendable, Hashable {
        /// Pushed and removed from the outbox.
        case pushed
        /// Refused for good: the entry is dead; later entries of its record wait.
        case deadLettered
        /// Could not be settled now (conflict rounds exhausted): later entries of its record wait.
        case blocked
        /// Retries exhausted: stop the whole drain.
        case unreachable
    }

    private var queue: [OutboxEntry]
    private var position = 0
    private var blockedRecords: Set<String> = []
    /// `true` once the drain stopped because the server could not be reached.
    public private(set) var halted = false
    /// Entries pushed so far.
    public private(set) var pushed = 0
    /// Entries dead-lettered so far.
    public private(set) var deadLettered = 0

    /// Starts a drain over `entries` (any order; they are sorted by sequence number).
    public init(entries: [OutboxEntry]) {
        queue = entries.sorted { $0.seq < $1.seq }
        for entry in queue where entry.state == .dead { blockedRecords.insert(Self.key(entry)) }
    }

    static func key(_ entry: OutboxEntry) -> String { WireCollections.recordKey(entry.collection, entry.recordID) }

    /// The next entry to push, or `nil` when the drain is over.
    public mutating func next() -> OutboxEntry? {
        guard !halted else { return nil }
        while position < queue.count {
            let entry = queue[position]
            position += 1
            if entry.state == .dead || blockedRecords.contains(Self.key(entry)) { continue }
            return entry
        }
        return nil
    }

    /// Records what happened to `entry`.
    public mutating func finish(_ entry: OutboxEntry, _ outcome: Outcome) {
        switch outcome {
        case .pushed: pushed += 1
        case .deadLettered:
            deadLettered += 1
            blockedRecords.insert(Self.key(entry))
        case .blocked: blockedRecords.insert(Self.key(entry))
        case .unreachable: halted = true
        }
    }
}

/// The retry loop of one request as a state machine: feed it each failure, it answers how
/// long to wait or that it is time to give up.
public struct RetryState: Sendable {
    /// The policy in force.
    public let policy: RetryPolicy
    /// Attempts made so far.
    public private(set) var attempts = 0

    /// Starts before the first attempt.
    public init(policy: RetryPolicy) { self.policy = policy }

    /// Records a failed attempt; returns the wait before the next one, or `nil` when
    /// ``RetryPolicy/maxAttempts`` attempts have been made.
    public mutating func failed(unit: Double, retryAfter: Duration? = nil) -> Duration? {
        attempts += 1
        guard attempts < policy.maxAttempts else { return nil }
        return policy.delay(beforeRetry: attempts - 1, unit: unit, retryAfter: retryAfter)
    }
}
