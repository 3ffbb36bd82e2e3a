/// Work that must commit, or roll back, with every write made through a ``Store``.
///
/// The store calls an observer inside the driver's write transaction, after each record
/// change made through a ``StoreWriteTransaction``, so what the observer writes in
/// response (a sync outbox entry, a server change-log entry) is atomic with the change on
/// every driver. This is how the layers above the core attach their bookkeeping without
/// the core knowing its format: DepotSync records its outbox this way, DepotServer its
/// change feed. See Docs/Architecture.md, "One gateway".
///
/// ```swift
/// final class AuditLog: StoreWriteObserver {
///     func record(_ change: RecordChange, in tx: StoreWriteTransaction) throws {
///         guard !change.collection.isReserved else { return }
///         _ = try tx.insert(fields: ["what": .string("\(change.kind)")], into: try CollectionName(reserved: "_depot_audit"))
///     }
/// }
/// store.addWriteObserver(AuditLog())
/// ```
///
/// Rules:
/// - An observer also sees the changes other observers (and itself) make, reserved
///   collections included; it ignores what is not its business (most ignore every
///   collection whose ``CollectionName/isReserved`` is `true`).
/// - A throw from ``record(_:in:)`` rolls the whole transaction back and is what
///   ``Store/write(excluding:_:)`` throws.
/// - Calls come from the driver's transaction thread, one transaction at a time, never
///   concurrently for one store.
public protocol StoreWriteObserver: AnyObject, Sendable {
    /// `false` when no change to `collection` is this observer's business: the store then
    /// does not call ``record(_:in:)`` for them. A transaction asks once per collection of
    /// the user's and keeps the answer until it writes a reserved collection (asks again
    /// after that, and for every change to a reserved collection), so the answer may depend
    /// only on what the reserved collections hold. The default is `true`.
    /// - Throws: what reading the transaction throws; the write is then rolled back.
    func wantsChanges(of collection: CollectionName, in transaction: StoreWriteTransaction) throws -> Bool
    /// `true` when the changes to `collection` must reach ``record(_:in:)`` with the
    /// record's fields (``RecordChange/fields``). Asked with ``wantsChanges(of:in:)``, when
    /// that answers `true`; answering `false` (the default) spares the store a copy of the
    /// fields.
    /// - Throws: what reading the transaction throws; the write is then rolled back.
    func wantsFields(of collection: CollectionName, in transaction: StoreWriteTransaction) throws -> Bool

    /// Called inside the write transaction after each change made through it.
    /// - Throws: anything; the whole transaction is rolled back.
    func record(_ change: RecordChange, in transaction: StoreWriteTransaction) throws

    /// Called after a write transaction that made `batch` committed, before
    /// ``Store/write(excluding:_:)`` returns. Not called after a rollback.
    func didCommit(_ batch: ChangeBatch)
}

extension StoreWriteObserver {
    /// Every change is.
    public func wantsChanges(of collection: CollectionName, in transaction: StoreWriteTransaction) throws -> Bool { true }
    /// Fields are not needed.
    public func wantsFields(of collection: CollectionName, in transaction: StoreWriteTransaction) throws -> Bool { false }
    /// Nothing to do after a commit.
    public func didCommit(_ batch: ChangeBatch) {}
}

/// One change made through a ``StoreWriteTransaction``, as a ``StoreWriteObserver`` sees it.
public struct RecordChange: Sendable, Hashable {
    /// The collection changed.
    public var collection: CollectionName
    /// Inserted, updated or deleted.
    public var kind: ChangeEvent.Kind
    /// The record's id.
    public var id: RecordID
    /// The record's fields after the change, top-level nulls removed; `nil` for a deletion.
    /// A model written straight into the driver carries them only when some observer asked
    /// (``StoreWriteObserver/wantsFields(of:in:)``); record writes always carry them.
    public var fields: [String: FieldValue]?

    /// Makes a change description.
    public init(collection: CollectionName, kind: ChangeEvent.Kind, id: RecordID, fields: [String: FieldValue]?) {
        self.collection = collection
        self.kind = kind
        self.id = id
        self.fields = fields
    }
}
