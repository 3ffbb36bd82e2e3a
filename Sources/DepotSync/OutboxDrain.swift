import DepotCore
import DepotWire
import Foundation

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

    /// The entries in commit order; those before `position` are handed out (or skipped).
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
        nextBatch(maxCount: 1).first
    }

    /// The next entries to push together, at most `maxCount`, in commit order: all of the
    /// collection of the first one, and at most one per record (a record's later entry is
    /// built on the answer to its earlier one, so it waits for a later batch; entries of one
    /// record never overtake each other). Empty when the drain is over.
    ///
    /// Entries that wait are looked at again by the next call; the scan stops after passing
    /// over `maxCount` of them, so a long run of one record's edits costs little per batch.
    ///
    /// `inFlight` is a batch handed out earlier and not finished yet (a pipelined push):
    /// entries of its records wait too, so a record never has two entries on the wire.
    public mutating func nextBatch(maxCount: Int, inFlight: [OutboxEntry] = []) -> [OutboxEntry] {
        guard !halted else { return [] }
        var batch: [OutboxEntry] = []
        var inBatch: Set<String> = []
        let busy = Set(inFlight.map(Self.key))
        var waiting: [OutboxEntry] = []
        var index = position
        while index < queue.count, batch.count < max(1, maxCount), waiting.count <= maxCount {
            let entry = queue[index]
            index += 1
            let key = Self.key(entry)
            if entry.state == .dead || blockedRecords.contains(key) { continue }
            if inBatch.contains(key) || busy.contains(key) || (batch.first.map { $0.collection != entry.collection } ?? false) {
                waiting.append(entry)
                continue
            }
            inBatch.insert(key)
            batch.append(entry)
        }
        if waiting.isEmpty {
            position = index
        } else {
            // What waits stays, in order, just before what was not looked at yet.
            queue.replaceSubrange(position..<index, with: waiting)
        }
        return batch
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
