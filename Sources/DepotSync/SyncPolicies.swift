import DepotCore

/// How a conflict is settled: a local edit not yet pushed meets a different server state
/// (during a pull, or as a 409/412 answer to a push). It is never settled silently: each
/// one is reported as a ``SyncEvent/conflict(collection:id:resolution:)`` event.
public enum ConflictPolicy: Sendable {
    /// The server's state replaces the local edit; the edit's outbox entries are dropped.
    case serverWins
    /// The local edit stays and is pushed over the server's state.
    case clientWins
    /// The side whose `field` is greater wins (numbers and strings compare; a missing value
    /// loses; a tie goes to the server). A deletion on either side wins over an edit.
    case lastWriterWins(field: String)
    /// A closure decides: it returns the merged fields, or `nil` to delete the record. The
    /// result is written locally and pushed.
    case merge(@Sendable (SyncConflict) -> [String: FieldValue]?)
}

/// The two sides of a conflict, given to a merge closure.
public struct SyncConflict: Sendable {
    /// The collection.
    public var collection: String
    /// The record id.
    public var id: RecordID
    /// The local record (`nil`: deleted locally).
    public var local: Record?
    /// The server's record (`nil`: deleted on the server).
    public var server: Record?
}

/// Where reads come from.
public enum ReadPolicy: Sendable, Hashable {
    /// The local store only; never the network.
    case localOnly
    /// The server (pulled into the local store first); fails when the server cannot be reached.
    case remoteOnly
    /// The local store; the server only when nothing is stored locally (offline cache).
    case localElseRemote
    /// The server; the local store when the server cannot be reached (network first).
    case remoteElseLocal
    /// The local store now, and a refresh from the server in the background
    /// (stale-while-revalidate): ``ReadResult/refreshed`` delivers the fresh answer.
    case localThenRefresh
}

/// The answer of ``SyncCoordinator/read(_:query:policy:)``.
public struct ReadResult: Sendable {
    /// Where ``records`` came from.
    public enum Source: Sendable, Hashable {
        /// The local store answered without asking the server.
        case local
        /// The server was asked (and its answer stored locally) first.
        case remote
    }

    /// The records.
    public var records: [Record]
    /// Where they came from.
    public var source: Source
    /// With ``ReadPolicy/localThenRefresh``: the records after the background refresh.
    public var refreshed: Task<[Record], any Error>?
}

/// Progress of a sync, as events.
public enum SyncEvent: Sendable, Hashable {
    /// A pull of `collection` began.
    case pullStarted(collection: String)
    /// `count` records (of `total`, when the server said) were pulled so far.
    case pulled(collection: String, count: Int, total: Int?)
    /// A remote deletion was applied locally.
    case remoteDeleted(collection: String, id: RecordID)
    /// An outbox entry reached the server.
    case pushed(collection: String, id: RecordID, operation: String)
    /// A request failed and will be retried after `delay`.
    case retrying(request: String, attempt: Int, delay: Duration)
    /// The server refused an entry for good; the entry is dead-lettered with its answer.
    case deadLettered(collection: String, id: RecordID, status: Int)
    /// A conflict was settled by the policy (`resolution`: "server", "client", "merged", "echo").
    case conflict(collection: String, id: RecordID, resolution: String)
    /// The change feed refused the pull's cursor as older than the server's retention
    /// window (410 `cursorExpired`): the collection is listed again, deletions included.
    case feedCursorExpired(collection: String)
    /// A record got the id the server assigned.
    case rekeyed(collection: String, from: RecordID, to: RecordID)
    /// A queued upload of the file `name` has sent `bytesDone` of `totalBytes` bytes.
    case fileProgress(name: String, bytesDone: Int64, totalBytes: Int64?)
    /// The sync ended.
    case finished(SyncReport)
}

/// What one sync did.
public struct SyncReport: Sendable, Hashable {
    /// Records pulled (upserted locally).
    public var pulled = 0
    /// Remote deletions applied locally.
    public var remoteDeletions = 0
    /// Outbox entries pushed.
    public var pushed = 0
    /// Entries dead-lettered in this sync.
    public var deadLettered = 0
    /// Conflicts settled.
    public var conflicts = 0
    /// Requests retried.
    public var retries = 0
    /// Outbox entries still pending for the synced collections.
    public var pendingLeft = 0
    /// Dead entries for the synced collections.
    public var deadLeft = 0
    /// Failures that stopped part of the work (safe to show: no secrets).
    public var failures: [String] = []

    /// `true` when everything asked for was done: no failure, nothing pending or dead.
    public var succeeded: Bool { failures.isEmpty && pendingLeft == 0 && deadLeft == 0 }

    /// Makes an empty report.
    public init() {}

    /// Adds what `other` counted (every count but ``pendingLeft`` and ``deadLeft``, which
    /// describe the outbox at the end) and its failures: the report of work done in parts.
    mutating func add(_ other: SyncReport) {
        pulled += other.pulled
        remoteDeletions += other.remoteDeletions
        pushed += other.pushed
        deadLettered += other.deadLettered
        conflicts += other.conflicts
        retries += other.retries
        failures += other.failures
    }
}
