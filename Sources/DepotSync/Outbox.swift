import DepotCore
import DepotWire
import Foundation

/// One entry of the transactional outbox (`_depot_outbox`), written by ``OutboxRecorder``
/// in the same transaction as the local write it describes.
///
/// This type is the outbox's only format: every read and write of `_depot_outbox` goes
/// through it and ``Outbox`` (Docs/Sync.md, "The outbox").
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

    /// The stored field names, in one place.
    enum Key {
        static let collection = "collection"
        static let recordID = "recordId"
        static let operation = "op"
        static let idempotencyKey = "idempotencyKey"
        static let state = "state"
        static let attempts = "attempts"
        static let fields = "record"
        static let lastError = "lastError"
        static let sent = "sent"
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
    /// The key sent as `Idempotency-Key`, so a retried request is applied once. New keys
    /// are UUIDs in their canonical, upper-case text (``Outbox/newIdempotencyKey()``); a key
    /// stored in lower case (by Depot before 2026-11-25) is sent exactly as stored.
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

    /// Reads an entry from its stored record.
    /// - Throws: ``DepotError`` `.corrupted` naming the entry when a required field is
    ///   missing or of the wrong kind.
    public init(_ record: Record) throws {
        try self.init(id: record.id, withFields: true) { record[$0] }
    }

    /// Reads an entry from `source` without its ``fields`` (`nil`), which a driver that
    /// reads fields in place then never decodes (``Outbox/entriesWithoutFields(in:)``).
    /// - Throws: as ``init(_:)``, and what `source` throws.
    init(withoutFields source: any FieldSource) throws {
        try self.init(id: source.recordID, withFields: false) { try source.value(forField: $0) ?? .null }
    }

    /// The one reading of a stored entry: `field` gives each stored field's value (`.null`
    /// when absent); the entry's fields are read only `withFields`.
    private init(id recordID: RecordID, withFields: Bool, _ field: (String) throws -> FieldValue) throws {
        func corrupt(_ what: String) -> DepotError {
            DepotError(.corrupted, "Outbox entry \(recordID) is damaged: \(what).", collection: WireCollections.outbox.rawValue, id: recordID)
        }
        guard case .int(let seq) = recordID else { throw corrupt("its id is not an integer") }
        guard let collection = try field(Key.collection).stringValue else { throw corrupt("no collection") }
        guard let id = RecordID(try field(Key.recordID)) else { throw corrupt("no record id") }
        guard let op = try field(Key.operation).stringValue.flatMap(Operation.init(rawValue:)) else { throw corrupt("no operation") }
        guard let key = try field(Key.idempotencyKey).stringValue else { throw corrupt("no idempotency key") }
        let state: State
        switch try field(Key.state) {
        case .null: state = .pending
        case .string(let text):
            guard let known = State(rawValue: text) else { throw corrupt("unknown state '\(text)'") }
            state = known
        default: throw corrupt("a state that is not text")
        }
        var fields: [String: FieldValue]?
        if withFields {
            let stored = try field(Key.fields)
            guard stored.isNull || stored.objectValue != nil else { throw corrupt("fields that are not an object") }
            fields = stored.objectValue
        }
        self.init(
            seq: seq, collection: collection, recordID: id, operation: op, fields: fields, idempotencyKey: key,
            state: state, attempts: Int(try field(Key.attempts).intValue ?? 0), lastError: try field(Key.lastError).stringValue,
            sent: try field(Key.sent).boolValue ?? false
        )
    }

    /// The stored form.
    public var fieldsForStorage: [String: FieldValue] {
        var out: [String: FieldValue] = [
            Key.collection: .string(collection), Key.recordID: recordID.fieldValue, Key.operation: .string(operation.rawValue),
            Key.idempotencyKey: .string(idempotencyKey), Key.state: .string(state.rawValue), Key.attempts: .int(Int64(attempts)),
        ]
        if let fields { out[Key.fields] = .object(fields) }
        if let lastError { out[Key.lastError] = .string(lastError) }
        if sent { out[Key.sent] = true }
        return out
    }
}

/// Typed access to the outbox (`_depot_outbox`) inside a store transaction: the only code
/// that knows how entries are stored and found.
public enum Outbox {
    /// The index ``SyncCoordinator/attach(_:to:)`` declares: entries by collection and record id.
    public static let recordIndex = IndexDefinition([OutboxEntry.Key.collection, OutboxEntry.Key.recordID], name: "depot_outbox_record")

    /// A fresh idempotency key: a UUID in its canonical text (``DepotCore/UUID/canonicalText``).
    public static func newIdempotencyKey() -> String { UUID.random().canonicalText }

    /// Appends an entry for a write to `collection` and returns it.
    /// - Throws: what the transaction throws.
    @discardableResult
    public static func append(
        _ operation: OutboxEntry.Operation, collection: String, id: RecordID, fields: [String: FieldValue]?, in tx: StoreWriteTransaction
    ) throws -> OutboxEntry {
        var entry = OutboxEntry(
            seq: 0, collection: collection, recordID: id, operation: operation, fields: operation == .delete ? nil : fields,
            idempotencyKey: newIdempotencyKey()
        )
        if case .int(let seq) = try tx.insert(fields: entry.fieldsForStorage, into: WireCollections.outbox) { entry.seq = seq }
        return entry
    }

    /// The entry with sequence number `seq`, `nil` when there is none.
    /// - Throws: `.corrupted` for a damaged entry, store errors.
    public static func entry(_ seq: Int64, in tx: StoreReadTransaction) throws -> OutboxEntry? {
        try tx.get(.int(seq), from: WireCollections.outbox).map(OutboxEntry.init)
    }

    /// Every entry (of `collection` when given; only `state` ones when given), in commit order.
    /// - Throws: `.corrupted` for a damaged entry, store errors.
    public static func entries(of collection: String? = nil, state: OutboxEntry.State? = nil, in tx: StoreReadTransaction) throws -> [OutboxEntry] {
        var filter = Filter.all
        if let collection { filter = filter && Field(OutboxEntry.Key.collection) == collection }
        if let state { filter = filter && Field(OutboxEntry.Key.state) == state.rawValue }
        return try tx.query(Query(filter: filter, sort: [SortKey("id")]), in: WireCollections.outbox).map(OutboxEntry.init)
    }

    /// Every entry without its fields (``OutboxEntry/fields`` is `nil`), in commit order: what
    /// a push orders its work by before it reads each entry again, whole, to send it. A
    /// driver that reads fields in place (SQLite) then never decodes the entries' records.
    /// - Throws: `.corrupted` for a damaged entry, store errors.
    public static func entriesWithoutFields(in tx: StoreReadTransaction) throws -> [OutboxEntry] {
        var out: [OutboxEntry] = []
        try tx.forEachFields(Query(sort: [SortKey("id")]), in: WireCollections.outbox) { source in
            out.append(try OutboxEntry(withoutFields: source))
            return true
        }
        return out
    }

    /// The entries of one record, in commit order (an index lookup where the driver has
    /// ``recordIndex``).
    /// - Throws: `.corrupted` for a damaged entry, store errors.
    public static func entries(of collection: String, id: RecordID, in tx: StoreReadTransaction) throws -> [OutboxEntry] {
        let filter = Field(OutboxEntry.Key.collection) == collection && .equal(OutboxEntry.Key.recordID, id.fieldValue)
        return try tx.query(Query(filter: filter, sort: [SortKey("id")]), in: WireCollections.outbox).map(OutboxEntry.init)
    }

    /// `true` when `collection` has at least one entry, pending or dead (one row read at most).
    /// - Throws: store errors.
    static func hasEntries(of collection: String, in tx: StoreReadTransaction) throws -> Bool {
        try !tx.query(Query(filter: Field(OutboxEntry.Key.collection) == collection, limit: 1), in: WireCollections.outbox).isEmpty
    }

    /// Entries whose POST may have reached a server that assigns ids (``OutboxEntry/sent``).
    /// - Throws: `.corrupted` for a damaged entry, store errors.
    static func sentPending(of collection: String, in tx: StoreReadTransaction) throws -> [OutboxEntry] {
        let filter = Field(OutboxEntry.Key.collection) == collection && Field(OutboxEntry.Key.sent) == true
            && Field(OutboxEntry.Key.state) == OutboxEntry.State.pending.rawValue
        return try tx.query(Query(filter: filter, sort: [SortKey("id")]), in: WireCollections.outbox).map(OutboxEntry.init)
    }

    /// Stores `entry` over the entry with its sequence number.
    /// - Throws: `.notFound` when there is no such entry, store errors.
    public static func update(_ entry: OutboxEntry, in tx: StoreWriteTransaction) throws {
        try tx.update(Record(id: .int(entry.seq), fields: entry.fieldsForStorage), in: WireCollections.outbox)
    }

    /// Changes the entry with sequence number `seq` with `change`, if it still exists.
    /// - Throws: what `change` throws, `.corrupted`, store errors.
    static func modify(_ seq: Int64, in tx: StoreWriteTransaction, _ change: (inout OutboxEntry) throws -> Void) throws {
        guard var entry = try entry(seq, in: tx) else { return }
        try change(&entry)
        try update(entry, in: tx)
    }

    /// Removes the entry with sequence number `seq`; `false` when there was none.
    @discardableResult
    public static func remove(_ seq: Int64, in tx: StoreWriteTransaction) throws -> Bool {
        try tx.delete(.int(seq), from: WireCollections.outbox)
    }
}

/// Records an outbox entry for every write to a collection attached to a remote, in the
/// write's own transaction: the store's write observer that makes sync transactional.
///
/// One recorder serves a store (``installed(on:)``); `import Depot`'s `Store.open` and every
/// ``SyncCoordinator`` install it, so a write to an attached collection is recorded whether
/// or not a coordinator exists in the process at that moment. Which collections are
/// attached is read from `_depot_sync` in the first write transaction that needs it and
/// kept until a committed write changes `_depot_sync`.
public final class OutboxRecorder: StoreWriteObserver {
    private struct State {
        /// The attached collections as last committed; `nil` until read.
        var attached: Set<String>?
        /// The transaction that changed `_depot_sync` and has not committed yet: it reads
        /// its own attachments afresh and does not cache them (it may roll back).
        var changedBy: ObjectIdentifier?
    }
    private let state = Locked(State())

    private init() {}

    /// The recorder of `store`, installed now if the store has none.
    public static func installed(on store: Store) -> OutboxRecorder {
        store.writeObserver(OutboxRecorder.self) { OutboxRecorder() }
    }

    /// Forgets the attachments read so far; the next write reads them again. Call it after
    /// changing `_depot_sync` in a transaction that excluded this recorder.
    public func attachmentsChanged() {
        state.withLock { $0.attached = nil }
    }

    private func attached(_ tx: StoreWriteTransaction) throws -> Set<String> {
        let (cached, ownChange) = state.withLock { ($0.attached, $0.changedBy == ObjectIdentifier(tx)) }
        if let cached, !ownChange { return cached }
        let names = try tx.query(Query(), in: WireCollections.sync).compactMap { record -> String? in
            if case .string(let name) = record.id { return name }
            return nil
        }
        let set = Set(names)
        if !ownChange { state.withLock { $0.attached = set } }
        return set
    }

    /// The changes of attached collections, and those to `_depot_sync` (which attach and
    /// detach collections).
    public func wantsChanges(of collection: CollectionName, in transaction: StoreWriteTransaction) throws -> Bool {
        guard !collection.isReserved else { return collection == WireCollections.sync }
        return try attached(transaction).contains(collection.rawValue)
    }

    /// Attached collections want the fields: the entry holds them.
    public func wantsFields(of collection: CollectionName, in transaction: StoreWriteTransaction) throws -> Bool {
        guard !collection.isReserved else { return false }
        return try attached(transaction).contains(collection.rawValue)
    }

    /// Appends an entry for a change to an attached collection; notes changes to `_depot_sync`.
    public func record(_ change: RecordChange, in transaction: StoreWriteTransaction) throws {
        if change.collection.isReserved {
            if change.collection == WireCollections.sync { state.withLock { $0.changedBy = ObjectIdentifier(transaction) } }
            return
        }
        guard try attached(transaction).contains(change.collection.rawValue) else { return }
        try Outbox.append(change.kind == .deleted ? .delete : .upsert, collection: change.collection.rawValue, id: change.id, fields: change.fields, in: transaction)
    }

    /// A committed change to `_depot_sync` makes the next write read the attachments again.
    public func didCommit(_ batch: ChangeBatch) {
        guard batch.changes.contains(where: { $0.collection == WireCollections.sync }) else { return }
        state.withLock { state in
            state.attached = nil
            state.changedBy = nil
        }
    }
}
