import Foundation
import DepotCore

/// Strong entity tags computed from a record's canonical content.
///
/// The tag is a 64-bit FNV-1a hash of the record's canonical JSON (``DepotCore/JSONText``,
/// keys sorted, the id included), written as 16 hex digits in quotes: `"9f3a…"`. Equal
/// content gives an equal tag on every server process, so several servers over one store
/// agree without sharing state.
public enum WireETag {
    /// The strong ETag of `record`, quotes included. Every record has one.
    public static func of(_ record: Record) -> String {
        of(jsonText: record.jsonText)
    }

    /// The strong ETag of the record whose canonical JSON is `jsonText` (its
    /// ``DepotCore/Record/jsonText``), for a caller that needs the text too and serializes once.
    public static func of(jsonText: String) -> String {
        "\"" + hash(jsonText.utf8) + "\""
    }

    /// The 64-bit FNV-1a hash of `bytes` as 16 hex digits (not a security hash: it detects
    /// change, it does not resist forgery). Contiguous bytes (`Data`, a native string's UTF-8)
    /// are read in place.
    public static func hash(_ bytes: some Sequence<UInt8>) -> String {
        let hash = bytes.withContiguousStorageIfAvailable(fnv1a) ?? {
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in bytes {
                hash ^= UInt64(byte)
                hash = hash &* 0x0000_0100_0000_01B3
            }
            return hash
        }()
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// FNV-1a, 64 bits, over `buffer`.
    private static func fnv1a(_ buffer: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in buffer {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return hash
    }

    /// `true` when an `If-Match` header value admits `current` (the record's tag, or `nil`
    /// when there is no record): `*` matches any existing record; otherwise one of the
    /// comma-separated tags must equal it by strong comparison (weak tags never match).
    public static func ifMatch(_ header: String, admits current: String?) -> Bool {
        let trimmed = header.trimmingCharacters(in: .whitespaces)
        if trimmed == "*" { return current != nil }
        guard let current else { return false }
        for part in trimmed.split(separator: ",") {
            let tag = part.trimmingCharacters(in: .whitespaces)
            if tag.hasPrefix("W/") { continue }
            if tag == current { return true }
        }
        return false
    }
}

/// The reserved collections DepotServer and DepotSync keep in a store.
public enum WireCollections {
    /// Idempotency records of the server: string id = the client's key.
    public static let idempotency = reserved("_depot_idempotency")
    /// The server's change log: int ids in commit order, one entry per record (the latest).
    public static let changes = reserved("_depot_changes")
    /// Index of the change log: string id = `collection/kind:id`, field `seq`.
    public static let changeIndex = reserved("_depot_change_index")
    /// The change log's horizon (one record, id `horizon`, field `seq`): tombstones up to it
    /// have expired, so a cursor older than it is refused (Docs/Server.md, "Retention").
    public static let changeHorizon = reserved("_depot_change_horizon")
    /// Sync attachments: string id = the attached collection's name.
    public static let sync = reserved("_depot_sync")
    /// The outbox the store records for attached collections (int ids in commit order).
    public static let outbox = reserved("_depot_outbox")
    /// Per-record sync state of a client: string id = `collection/kind:id`.
    public static let syncRecords = reserved("_depot_sync_records")

    static func reserved(_ name: String) -> CollectionName {
        // The names above are literals that satisfy the reserved-name rule; the fallback is unreachable.
        (try? CollectionName(reserved: name)) ?? (try? CollectionName(reserved: "_depot_invalid"))!
    }

    /// A string key naming one record of one collection, safe as a string id:
    /// `posts/i:12` or `posts/s:abc`.
    public static func recordKey(_ collection: String, _ id: RecordID) -> String {
        switch id {
        case .int(let i): return collection + "/i:" + String(i)
        case .string(let s): return collection + "/s:" + s
        }
    }
}
