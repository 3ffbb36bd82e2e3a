import DepotCore
import DepotWire
import Foundation

/// How a record refers to a file served at `/_files/NAME`: a string field holding the
/// file's path on the server, `"/_files/NAME"` (Docs/Remote.md, "Uploads queued offline, and records that refer to
/// files"). It is plain JSON, so any client and the server read it as text.
///
/// ```swift
/// try tx.insert(fields: ["title": "Holiday", "photo": FileReference.value(for: "beach.jpg")], into: posts)
/// FileReference.name(in: record.fields["photo"] ?? .null)   // "beach.jpg"
/// ```
public enum FileReference {
    /// The prefix of every reference.
    public static let prefix = "/_files/"

    /// The field value that refers to the file `name`.
    /// - Throws: ``DepotCore/DepotError`` `.invalidName` for a name the server would refuse.
    public static func value(for name: String) throws -> FieldValue {
        try FileClient.validate(name: name)
        return .string(prefix + name)
    }

    /// The file name a field value refers to, or `nil` when it is not a valid reference.
    public static func name(in value: FieldValue) -> String? {
        guard case .string(let text) = value, text.hasPrefix(prefix) else { return nil }
        let name = String(text.dropFirst(prefix.count))
        guard (try? FileClient.validate(name: name)) != nil else { return nil }
        return name
    }
}

extension SyncCoordinator {
    /// The outbox's name for queued uploads. It is not a valid collection name (it starts
    /// with `_`), so it never collides with a collection's entries.
    public static let fileUploads = "_files"

    /// Queues an upload of the file at `source` as `name` in the outbox, inside the caller's
    /// store transaction, so it commits or rolls back with the record changes beside it.
    ///
    /// Queued uploads are sent by the next ``sync(_:pull:push:)`` that pushes, before any
    /// record change, to the ``FileClient`` given to ``attachFiles(_:)``; they are retried
    /// and dead-lettered like record changes. The file must stay at `source` until then.
    ///
    /// ```swift
    /// try await store.write { tx in
    ///     try SyncCoordinator.enqueueUpload(from: photoURL, name: "beach.jpg", in: tx)
    ///     try tx.insert(fields: ["photo": FileReference.value(for: "beach.jpg")], into: posts)
    /// }
    /// ```
    /// - Throws: ``DepotCore/DepotError`` `.invalidName`, store errors.
    @discardableResult
    public nonisolated static func enqueueUpload(from source: URL, name: String, in tx: StoreWriteTransaction) throws -> OutboxEntry {
        try FileClient.validate(name: name)
        return try Outbox.append(.upsert, collection: fileUploads, id: .string(name), fields: ["path": .string(source.path)], in: tx)
    }

    /// Sets where queued uploads go; `nil` leaves them queued.
    public func attachFiles(_ client: FileClient?) { fileClient = client }

    /// The queued uploads (pending and dead), in commit order.
    /// - Throws: store errors.
    public func queuedUploads() async throws -> [OutboxEntry] {
        try await localRead { tx in try Outbox.entries(of: Self.fileUploads, in: tx) }
    }

    /// Sends the pending uploads in commit order. Returns `false` when the server could not
    /// be reached (the rest stays pending and no record change should be pushed now).
    func pushFileUploads(_ report: inout SyncReport) async throws -> Bool {
        guard let client = fileClient else { return true }
        var sender = client
        sender.retryPolicy = retryPolicy
        let entries = try await localRead { tx in try Outbox.entries(of: Self.fileUploads, state: .pending, in: tx) }
        for entry in entries {
            try Task.checkCancellation()
            let seq = entry.seq
            guard case .string(let name) = entry.recordID, let path = entry.fields?["path"]?.stringValue else {
                try await deadLetterUpload(seq, "The queued upload is malformed.", status: 0, entry.recordID, &report)
                continue
            }
            do {
                let transfer = sender.upload(from: URL(fileURLWithPath: path), name: name)
                for await step in transfer {
                    emit(.fileProgress(name: name, bytesDone: step.bytesDone, totalBytes: step.totalBytes))
                }
                _ = try await transfer.result()
                _ = try await localWrite { tx in try Outbox.remove(seq, in: tx) }
                report.pushed += 1
                emit(.pushed(collection: Self.fileUploads, id: entry.recordID, operation: "upload"))
            } catch let error as DepotError {
                if error.code == .cancelled { throw CancellationError() }
                let failure = error.cause as? FileTransferFailure
                if failure?.retryable ?? false {
                    let message = error.message
                    try await localWrite { tx in
                        try Outbox.modify(seq, in: tx) { stored in
                            stored.attempts += 1
                            stored.lastError = message
                        }
                    }
                    report.failures.append(message)
                    return false
                }
                // Refused for good (413, a bad name, the local file gone): dead-lettered.
                try await deadLetterUpload(seq, error.description, status: failure?.status ?? 0, entry.recordID, &report)
            }
        }
        return true
    }

    private func deadLetterUpload(_ seq: Int64, _ message: String, status: Int, _ id: RecordID, _ report: inout SyncReport) async throws {
        try await localWrite { tx in
            try Outbox.modify(seq, in: tx) { stored in
                stored.state = .dead
                stored.attempts += 1
                stored.lastError = message
            }
        }
        report.deadLettered += 1
        emit(.deadLettered(collection: Self.fileUploads, id: id, status: status))
    }
}
