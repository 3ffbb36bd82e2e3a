import DepotCore
import Foundation

/// The answer of ``RemoteCollection/firstPage(_:)``.
public struct RemoteReadResult<M: StoredModel>: Sendable {
    /// The models of the first page.
    public var models: [M]
    /// Where they came from.
    public var source: ReadResult.Source
    /// With ``ReadPolicy/localThenRefresh``: the first page after the background refresh
    /// (a pull-to-refresh, ``RemoteCollection/refresh()``).
    public var refreshed: Task<[M], any Error>?
}

/// What a pull-to-refresh did.
public struct RemoteRefreshReport<M: StoredModel>: Sendable {
    /// The server's first page, now stored.
    public var firstPage: [M]
    /// Records stored or replaced with the server's version (the first page, and the
    /// records beyond it that the server still has).
    public var updated: Int
    /// Ids removed locally because the server no longer has them.
    public var removed: [RecordID]
}

/// An offline-first list of typed models: a collection of a local ``Store`` that caches
/// one list of a ``RemoteResource`` (Docs/Remote.md, "Offline-first reads").
///
/// ```swift
/// let feed = try RemoteCollection(store: store, resource: posts, pageSize: 20, sort: [SortKey("createdAt", descending: true)])
/// let screen = try await feed.firstPage(.localElseRemote)   // the store; the network only when empty
/// let more = try await feed.page(1)                          // "load more": the store first
/// let fresh = try await feed.refresh()                       // pull-to-refresh: replaces page 0 only
/// ```
///
/// The store keeps the server's whole records (every key the server sent, mapped back to
/// field names), deduplicated by the server's id, so a model that gains a property needs no
/// migration. Local reads use ``filter`` and ``sort`` (the id breaks ties); requests use
/// ``parameters`` and the same sort: they must select the same records. The collection is a
/// cache: write through ``create(_:)``, ``replace(_:)`` and ``delete(_:)``, which change the
/// server first and then the store; do not attach it to a ``SyncCoordinator`` as well.
public struct RemoteCollection<M: StoredModel>: Sendable {
    /// How ``RemoteCollection/refresh()`` asks whether the server still has a record.
    public enum ExistenceCheck: Sendable, Hashable {
        /// One `GET path/ID` per record (404 or 410: gone). Works with any server.
        case byID
        /// One list request per ``RemoteCollection/pageSize`` ids, repeating the parameter
        /// (`?id=3&id=9`), as json-server and DepotServer filter; an id the answer lacks is gone.
        case idFilter(parameter: String)
    }

    /// The local store.
    public let store: Store
    /// The remote list.
    public var resource: RemoteResource<M>
    /// The local collection; the model's by default.
    public var collection: CollectionName
    /// Models per page, locally and on the server.
    public var pageSize: Int
    /// The order of the list (model field names), locally and on the server.
    public var sort: [SortKey]
    /// Which local records belong to the list (`.all` by default).
    public var filter: Filter
    /// The request parameters selecting the same records on the server.
    public var parameters: [(String, String)]
    /// How a refresh checks the records beyond the first page.
    public var existenceCheck: ExistenceCheck

    /// A list of `resource` cached in `store`.
    /// - Throws: ``DepotError`` `.invalidName` for a model whose collection name is not
    ///   valid, `.invalidValue` for a page size below 1.
    public init(store: Store, resource: RemoteResource<M>, pageSize: Int = 20, sort: [SortKey] = [], existenceCheck: ExistenceCheck = .byID) throws {
        guard pageSize >= 1 else { throw DepotError(.invalidValue, "The page size must be 1 or more.") }
        self.store = store
        self.resource = resource
        self.collection = try M.collection()
        self.pageSize = pageSize
        self.sort = sort
        self.filter = .all
        self.parameters = []
        self.existenceCheck = existenceCheck
    }

    // MARK: Reads

    /// The first page by a read policy:
    /// - `.localOnly`: the store only.
    /// - `.remoteOnly`: a ``refresh()``; its first page. Fails when the server fails.
    /// - `.localElseRemote`: the store; a refresh only when the store has none of the list.
    /// - `.remoteElseLocal`: a refresh; the store when it fails with a retryable failure
    ///   (no answer, 5xx...). Other failures (401, 404) are thrown.
    /// - `.localThenRefresh`: the store now, and ``RemoteReadResult/refreshed`` runs a refresh.
    /// - Throws: store errors and, by the policy, the refresh's.
    public func firstPage(_ policy: ReadPolicy) async throws -> RemoteReadResult<M> {
        switch policy {
        case .localOnly:
            return RemoteReadResult(models: try await localPage(0), source: .local)
        case .remoteOnly:
            return RemoteReadResult(models: try await refresh().firstPage, source: .remote)
        case .localElseRemote:
            let local = try await localPage(0)
            if !local.isEmpty { return RemoteReadResult(models: local, source: .local) }
            return RemoteReadResult(models: try await refresh().firstPage, source: .remote)
        case .remoteElseLocal:
            do {
                return RemoteReadResult(models: try await refresh().firstPage, source: .remote)
            } catch let error as DepotError where error.remoteFailure?.isRetryable == true {
                return RemoteReadResult(models: try await localPage(0), source: .local)
            }
        case .localThenRefresh:
            let local = try await localPage(0)
            let task = Task<[M], any Error> { try await self.refresh().firstPage }
            return RemoteReadResult(models: local, source: .local, refreshed: task)
        }
    }

    /// Page `index` (from 0) from the store only.
    /// - Throws: store errors; `.decoding` for a stored record the model cannot read.
    public func localPage(_ index: Int) async throws -> [M] {
        let query = localQuery(offset: index * pageSize, limit: pageSize)
        let collection = self.collection
        let records = try await store.read { tx in try tx.query(query, in: collection) }
        return try records.map { try resource.decode($0) }
    }

    /// "Load more": page `index` (from 0) from the store when it holds a full page there;
    /// otherwise the server's page `index` is fetched, stored (deduplicated by id), and the
    /// page is read from the store again. Nothing else is removed or changed.
    /// - Throws: store errors; the request's ``DepotError`` (the store is left as it was).
    public func page(_ index: Int) async throws -> [M] {
        let local = try await localPage(index)
        if local.count >= pageSize { return local }
        let (records, _, _, _) = try await resource.listRecords(page: index, size: pageSize, sort: sort, parameters: parameters)
        try await write(upserting: records, removing: [])
        return try await localPage(index)
    }

    /// Pull-to-refresh: replaces the first page with the server's, and keeps what was
    /// loaded beyond it only while the server still has it.
    ///
    /// Precisely, with the local list before the refresh and the server's first page P:
    /// 1. every record of P is stored (replacing the local version, whole);
    /// 2. every other local record of the list (those that left the first page, and those
    ///    the user loaded beyond it) is checked by ``existenceCheck``: one the server still
    ///    has is stored in its fresh version and kept; one it no longer has is removed;
    /// 3. all of it is written in one transaction after every request succeeded, so a
    ///    failed refresh changes nothing.
    /// - Throws: store errors; the first failed request's ``DepotError``.
    public func refresh() async throws -> RemoteRefreshReport<M> {
        let (first, _, _, _) = try await resource.listRecords(page: 0, size: pageSize, sort: sort, parameters: parameters)
        let query = localQuery(offset: 0, limit: nil)
        let collection = self.collection
        let local = try await store.read { tx in try tx.query(query, in: collection) }
        let fresh = Set(first.map(\.id))
        let others = local.map(\.id).filter { !fresh.contains($0) }
        var kept: [Record] = []
        var removed: [RecordID] = []
        switch existenceCheck {
        case .byID:
            for id in others {
                if let record = try await resource.fetchRecord(id) { kept.append(record) } else { removed.append(id) }
            }
        case .idFilter(let parameter):
            var start = 0
            while start < others.count {
                let chunk = Array(others[start..<min(start + pageSize, others.count)])
                let (found, _, _, _) = try await resource.listRecords(page: 0, size: chunk.count, sort: sort, parameters: chunk.map { (parameter, Self.text($0)) })
                let foundIDs = Set(found.map(\.id))
                kept += found.filter { chunk.contains($0.id) }
                removed += chunk.filter { !foundIDs.contains($0) }
                start += chunk.count
            }
        }
        try await write(upserting: first + kept, removing: removed)
        return RemoteRefreshReport(firstPage: try first.map { try resource.decode($0) }, updated: first.count + kept.count, removed: removed)
    }

    // MARK: Writes (server first, then the store)

    /// Creates `model` on the server and stores the server's record.
    /// - Throws: as ``RemoteResource/create(_:idempotencyKey:)``; store errors.
    public func create(_ model: M, idempotencyKey: String? = nil) async throws -> M {
        let created = try await resource.create(model, idempotencyKey: idempotencyKey)
        try await keep(created)
        return created
    }

    /// Replaces `model` on the server and stores the server's record.
    /// - Throws: as ``RemoteResource/replace(_:)``; store errors.
    public func replace(_ model: M) async throws -> M {
        let replaced = try await resource.replace(model)
        try await keep(replaced)
        return replaced
    }

    /// Deletes `model` on the server, then from the store.
    /// - Throws: as ``RemoteResource/delete(_:)``; store errors.
    public func delete(_ model: M) async throws {
        try await resource.delete(model)
        let (id, _) = try resource.encode(model)
        try await write(upserting: [], removing: [try resource.requireID(id, "DELETE")])
    }

    // MARK: Store

    func keep(_ model: M) async throws {
        let (id, fields) = try resource.encode(model)
        try await write(upserting: [Record(id: try resource.requireID(id, "PUT"), fields: fields)], removing: [])
    }

    func localQuery(offset: Int, limit: Int?) -> Query {
        Query(filter: filter, sort: sort, offset: offset, limit: limit)
    }

    func write(upserting records: [Record], removing ids: [RecordID]) async throws {
        guard !records.isEmpty || !ids.isEmpty else { return }
        let collection = self.collection
        var schema = try M.schema()
        schema.name = collection
        // The cache holds what the server sent: a comment may be stored before its post.
        schema.references = []
        let prepared = schema
        try await store.write { tx in
            tx.checksReferences = false
            if try tx.schema(of: collection) == nil { try tx.prepare(prepared) }
            for record in records { _ = try tx.save(record, into: collection) }
            for id in ids { _ = try tx.delete(id, from: collection) }
        }
    }

    static func text(_ id: RecordID) -> String {
        switch id {
        case .int(let value): String(value)
        case .string(let text): text
        }
    }
}
