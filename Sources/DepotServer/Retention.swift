import DepotCore
import DepotWire
import Foundation

/// Expiry of what the server remembers: idempotency records and change-log tombstones older
/// than ``DepotServer/Configuration/retention`` (Docs/Server.md, "Retention").
///
/// Live records' change-log entries never expire (there is one per record, the latest); a
/// tombstone does, and the change log's horizon moves past it, so a feed request from a
/// cursor before the horizon is answered 410 `cursorExpired` and the client lists again.
public struct RetentionReport: Sendable, Hashable {
    /// Idempotency records removed.
    public var idempotencyRecords = 0
    /// Change-log tombstones removed.
    public var tombstones = 0
    /// The change log's horizon after the purge (0: nothing ever expired).
    public var horizon: Int64 = 0
}

enum Retention {
    /// The id of the one horizon record.
    static let horizonKey = RecordID.string("horizon")

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }

    /// Removes idempotency records and tombstones stamped before `cutoff` (milliseconds
    /// since 1970) in one transaction, and moves the horizon past the tombstones removed.
    /// Entries without a stamp (written before stamps existed) are stamped `now` instead, so
    /// they expire one window later.
    static func purge(_ store: Store, cutoff: Int64, now: Int64) async throws -> RetentionReport {
        try await store.write { tx in
            var report = RetentionReport()
            for record in try tx.query(Query(), in: WireCollections.idempotency) {
                guard let at = record["at"].intValue else {
                    var stamped = record
                    stamped.fields["at"] = .int(now)
                    try tx.update(stamped, in: WireCollections.idempotency)
                    continue
                }
                if at < cutoff, try tx.delete(record.id, from: WireCollections.idempotency) { report.idempotencyRecords += 1 }
            }
            var horizon = try tx.get(horizonKey, from: WireCollections.changeHorizon)?["seq"].intValue ?? 0
            for entry in try tx.query(Query(filter: Field("op") == "delete"), in: WireCollections.changes) {
                guard let at = entry["at"].intValue else {
                    var stamped = entry
                    stamped.fields["at"] = .int(now)
                    try tx.update(stamped, in: WireCollections.changes)
                    continue
                }
                guard at < cutoff, case .int(let seq) = entry.id, let name = entry["collection"].stringValue, let id = RecordID(entry["recordId"]) else { continue }
                try tx.delete(entry.id, from: WireCollections.changes)
                _ = try tx.delete(.string(WireCollections.recordKey(name, id)), from: WireCollections.changeIndex)
                horizon = max(horizon, seq)
                report.tombstones += 1
            }
            if report.tombstones > 0 { try tx.save(Record(id: horizonKey, fields: ["seq": .int(horizon)]), into: WireCollections.changeHorizon) }
            report.horizon = horizon
            return report
        }
    }
}

extension DepotServer {
    /// Removes the idempotency records and change-log tombstones older than
    /// ``Configuration/retention`` as of `now` (Docs/Server.md, "Retention"). A running
    /// server does this by itself every ``Configuration/retentionSweepInterval``; call it
    /// to purge at a moment of your choosing (tests pass a later `now`).
    /// - Returns: what was removed, and the change log's horizon.
    /// - Throws: store errors; ``DepotError`` `.invalidStore` when `retention` is `nil`.
    public func purgeExpired(now: Date = Date()) async throws -> RetentionReport {
        guard let retention = configuration.retention else {
            throw DepotError(.invalidStore, "This server keeps idempotency records and tombstones forever (retention is nil).")
        }
        let millis = Retention.milliseconds(now)
        let (seconds, attoseconds) = retention.components
        let window = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return try await Retention.purge(store, cutoff: millis - window, now: millis)
    }
}
