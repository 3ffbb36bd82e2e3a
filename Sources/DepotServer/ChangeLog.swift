import DepotCore
import DepotWire
import Foundation

/// Writes the server's change log (`_depot_changes`, indexed by `_depot_change_index`) for
/// every change made through the store, in the change's own transaction: the store's write
/// observer behind `GET /_changes`.
///
/// A ``DepotServer`` installs one on its store, so a record changed by a repository in the
/// serving process reaches the feed exactly like one changed over HTTP. Writes made while
/// no server exists in the process, or by another process, reach clients through the
/// paged listing instead (Docs/Server.md, "Change feed").
public final class ChangeLogRecorder: StoreWriteObserver {
    private init() {}

    /// The recorder of `store`, installed now if the store has none.
    public static func installed(on store: Store) -> ChangeLogRecorder {
        store.writeObserver(ChangeLogRecorder.self) { ChangeLogRecorder() }
    }

    /// The changes of the user's collections (reserved collections are not served).
    public func wantsChanges(of collection: CollectionName, in transaction: StoreWriteTransaction) throws -> Bool {
        !collection.isReserved
    }

    /// Logs a change to a collection of the user's (reserved collections are not served).
    public func record(_ change: RecordChange, in transaction: StoreWriteTransaction) throws {
        guard !change.collection.isReserved else { return }
        try Self.append(transaction, collection: change.collection, id: change.id, op: change.kind == .deleted ? "delete" : "upsert")
    }

    /// Records that `id` changed: the change log keeps one entry per record, the latest,
    /// under a new sequence number greater than every earlier one.
    static func append(_ tx: StoreWriteTransaction, collection: CollectionName, id: RecordID, op: String) throws {
        let key = RecordID.string(WireCollections.recordKey(collection.rawValue, id))
        let index = try tx.get(key, from: WireCollections.changeIndex)
        if let old = index?["seq"].intValue {
            try tx.delete(.int(old), from: WireCollections.changes)
        }
        let seq = try tx.insert(
            fields: ["collection": .string(collection.rawValue), "recordId": id.fieldValue, "op": .string(op), "at": .int(Retention.milliseconds(Date()))],
            into: WireCollections.changes
        )
        // Whether the index entry exists was read above: no second lookup (a save's).
        let entry = Record(id: key, fields: ["seq": seq.fieldValue])
        if index == nil { try tx.insert(entry, into: WireCollections.changeIndex) } else { try tx.update(entry, in: WireCollections.changeIndex) }
    }
}
