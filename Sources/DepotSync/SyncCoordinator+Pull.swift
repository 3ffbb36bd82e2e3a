import DepotCore
import DepotWire
import Foundation

extension SyncCoordinator {
    /// Pulls `collection` only.
    /// - Throws: as ``sync(_:pull:push:)``.
    public func pull(_ collection: CollectionName) async throws -> SyncReport {
        try await sync(collection, pull: true, push: false)
    }

    /// Pushes the outbox of `collection` only.
    /// - Throws: as ``sync(_:pull:push:)``.
    public func push(_ collection: CollectionName) async throws -> SyncReport {
        try await sync(collection, pull: false, push: true)
    }

    func pullCollection(_ collection: CollectionName, _ endpoint: SyncEndpoint, _ report: inout SyncReport) async throws {
        emit(.pullStarted(collection: collection.rawValue))
        try await settleInDoubtPosts(collection, endpoint, &report)
        // A nested resource (`/posts/1/comments`) is a slice of its server collection: the
        // feed would bring every comment, so nested paths always page through the listing.
        let nested = endpoint.path.split(separator: "/").count > 1
        if endpoint.changeFeed == .automatic, !nested, !feedMissing.contains(collection.rawValue) {
            // The feed lists the writes made through the server; records written to the
            // server's store some other way (loaded, migrated, served later) are only in its
            // listing. So a collection's first pull lists everything, then follows the feed.
            let key = RecordID.string(collection.rawValue)
            let hasCursor = try await localRead { tx in try tx.get(key, from: WireCollections.sync)?["cursor"].stringValue } != nil
            if !hasCursor { try await pullListing(collection, endpoint, &report) }
            do {
                if try await pullFeed(collection, endpoint, &report) { return }
            } catch is FeedCursorExpired {
                // The server forgot tombstones after our cursor: list everything again (the
                // listing's reconciliation finds the deletions), then follow the feed anew.
                try await pullListing(collection, endpoint, &report)
                if try await pullFeed(collection, endpoint, &report) { return }
            }
            feedMissing.insert(collection.rawValue)
            if !hasCursor { return }
        }
        try await pullListing(collection, endpoint, &report)
    }

    func count(_ outcome: ApplyOutcome, _ collection: CollectionName, _ id: RecordID, _ report: inout SyncReport) {
        switch outcome {
        case .applied: report.pulled += 1
        case .deleted:
            report.remoteDeletions += 1
            emit(.remoteDeleted(collection: collection.rawValue, id: id))
        case .echo, .unchanged: break
        case .conflict(let resolution):
            report.conflicts += 1
            emit(.conflict(collection: collection.rawValue, id: id, resolution: resolution))
        }
    }

    /// Reads the change feed from the checkpoint; `false` when the server has no feed.
    ///
    /// The page after the one being applied is fetched, parsed and hashed meanwhile by its
    /// own task (its cursor is in the answer, so it can go before the page commits); the
    /// checkpoint still moves only when a page commits (Docs/Sync.md, "Pull").
    func pullFeed(_ collection: CollectionName, _ endpoint: SyncEndpoint, _ report: inout SyncReport) async throws -> Bool {
        let key = RecordID.string(collection.rawValue)
        let cursor = try await localRead { tx in try tx.get(key, from: WireCollections.sync)?["cursor"].stringValue } ?? "0"
        let policy = conflictPolicy
        let assigns = endpoint.idAssignment == .server
        var seen = 0
        var ahead: Task<FeedPage, any Error>? = fetchFeedPage(endpoint, since: cursor)
        do {
            while let current = ahead {
                try Task.checkCancellation()
                let fetched = try await current.value
                report.add(fetched.report)
                ahead = nil
                let batch: [(RecordID, [String: FieldValue]?, String?)]
                let hashes: [String]
                let next: String
                switch fetched.content {
                case .missing: return false
                case .expired:
                    // 410 `cursorExpired` (Docs/Server.md, "Retention"): forget the cursor.
                    try await localWrite { tx in
                        var state = try tx.get(key, from: WireCollections.sync)?.fields ?? [:]
                        state["cursor"] = nil
                        try tx.save(Record(id: key, fields: state), into: WireCollections.sync)
                    }
                    emit(.feedCursorExpired(collection: collection.rawValue))
                    throw FeedCursorExpired()
                case .changes(let items, let itemHashes, let nextCursor, let hasMore):
                    batch = items
                    hashes = itemHashes
                    next = nextCursor
                    if hasMore { ahead = fetchFeedPage(endpoint, since: nextCursor) }
                }
                let outcomes = try await localWrite { tx -> [ApplyOutcome] in
                    var outcomes: [ApplyOutcome] = []
                    let outboxEmpty = try !Outbox.hasEntries(of: collection.rawValue, in: tx)
                    for (n, (id, fields, etag)) in batch.enumerated() {
                        outcomes.append(try SyncLocal.applyRemote(
                            tx, collection: collection, id: id, server: fields, etag: etag, seen: nil, policy: policy,
                            serverAssignsIDs: assigns, outboxEmpty: outboxEmpty, serverHash: hashes[n]
                        ))
                    }
                    var state = try tx.get(key, from: WireCollections.sync)?.fields ?? [:]
                    state["cursor"] = .string(next)
                    try tx.save(Record(id: key, fields: state), into: WireCollections.sync)
                    return outcomes
                }
                for (n, outcome) in outcomes.enumerated() { count(outcome, collection, batch[n].0, &report) }
                seen += batch.count
                emit(.pulled(collection: collection.rawValue, count: seen, total: nil))
            }
        } catch {
            // Nothing runs on after the pull returns: a page fetched ahead is cancelled and
            // awaited.
            if let ahead {
                ahead.cancel()
                _ = await ahead.result
            }
            throw error
        }
        return true
    }

    /// A page of the change feed fetched ahead of its transaction (``fetchFeedPage(_:since:)``).
    struct FeedPage: Sendable {
        enum Content: Sendable {
            /// The server has no feed (asked from the start).
            case missing
            /// 410: the server forgot tombstones after the cursor.
            case expired
            /// The changes after the cursor: each record's id, fields (`nil`: deleted) and
            /// ETag, its state hash, the next cursor, and whether more follow.
            case changes([(RecordID, [String: FieldValue]?, String?)], [String], next: String, hasMore: Bool)
        }
        var content: Content
        /// What the page's request counted (retries, failures).
        var report: SyncReport
    }

    /// Starts fetching the feed's page after `cursor` in a task of its own, which also reads
    /// and hashes its changes.
    func fetchFeedPage(_ endpoint: SyncEndpoint, since cursor: String) -> Task<FeedPage, any Error> {
        Task {
            var part = SyncReport()
            var feed = endpoint
            feed.path = "/_changes"
            let url = feed.url(query: [("since", cursor), ("limit", String(endpoint.pageSize)), ("collection", endpoint.remoteCollection)])
            let answer = try await self.send(endpoint, "GET", url, report: &part)
            if answer.status == 404 || answer.status == 400 || answer.status == 405, cursor == "0" { return FeedPage(content: .missing, report: part) }
            if answer.status == 410, cursor != "0" { return FeedPage(content: .expired, report: part) }
            guard (200..<300).contains(answer.status), let body = try Self.json(answer)?.objectValue,
                let changes = body["changes"]?.arrayValue, let next = body["next"]?.stringValue
            else { throw DepotError(.remote, "The change feed answered \(answer.status) with an unexpected body.") }
            var items: [(RecordID, [String: FieldValue]?, String?)] = []
            var hashes: [String] = []
            items.reserveCapacity(changes.count)
            hashes.reserveCapacity(changes.count)
            for change in changes {
                guard let object = change.objectValue, let id = object["id"].flatMap(RecordID.init) else {
                    throw DepotError(.remote, "The change feed sent an entry without a record id; the pull stops at cursor \(cursor).")
                }
                if object["op"]?.stringValue == "delete" {
                    items.append((id, nil, nil))
                    hashes.append(SyncLocal.stateHash(id, nil))
                } else {
                    guard let raw = object["record"], let record = endpoint.fromServer(raw) else {
                        throw DepotError(.remote, "The change feed sent record \(id) without a readable record; the pull stops at cursor \(cursor).")
                    }
                    items.append((record.id, record.fields, object["etag"]?.stringValue))
                    hashes.append(SyncLocal.stateHash(record.id, record.fields))
                }
            }
            return FeedPage(content: .changes(items, hashes, next: next, hasMore: body["hasMore"]?.boolValue == true), report: part)
        }
    }

    /// Pages through the listing, checkpointing the page, then reconciles deletions: a
    /// record the client knew on the server that the full listing no longer holds was
    /// deleted there.
    func pullListing(_ collection: CollectionName, _ endpoint: SyncEndpoint, _ report: inout SyncReport) async throws {
        let key = RecordID.string(collection.rawValue)
        let (startPage, generation) = try await localRead { tx -> (Int, Int64) in
            let state = try tx.get(key, from: WireCollections.sync)
            return (Int(state?["pullPage"].intValue ?? 1), state?["generation"].intValue ?? 1)
        }
        let policy = conflictPolicy
        let assigns = endpoint.idAssignment == .server
        var page = max(1, startPage)
        var seen = 0
        // The page after the one being applied is fetched, parsed and hashed meanwhile by
        // its own task; the cursor still moves only when a page commits (Docs/Sync.md, "Pull").
        var ahead: Task<ListingPage, any Error>? = fetchListingPage(endpoint, page: page)
        do {
            while let current = ahead {
                try Task.checkCancellation()
                let fetched = try await current.value
                report.add(fetched.report)
                ahead = fetched.full ? fetchListingPage(endpoint, page: page + 1) : nil
                let batch = fetched.records
                let hashes = fetched.hashes
                let nextPage = page + 1
                let outcomes = try await localWrite { tx -> [ApplyOutcome] in
                    var outcomes: [ApplyOutcome] = []
                    let outboxEmpty = try !Outbox.hasEntries(of: collection.rawValue, in: tx)
                    for (n, record) in batch.enumerated() {
                        outcomes.append(try SyncLocal.applyRemote(
                            tx, collection: collection, id: record.id, server: record.fields, etag: nil, seen: generation, policy: policy,
                            serverAssignsIDs: assigns, outboxEmpty: outboxEmpty, serverHash: hashes[n]
                        ))
                    }
                    var state = try tx.get(key, from: WireCollections.sync)?.fields ?? [:]
                    state["pullPage"] = .int(Int64(nextPage))
                    state["generation"] = .int(generation)
                    try tx.save(Record(id: key, fields: state), into: WireCollections.sync)
                    return outcomes
                }
                for (n, outcome) in outcomes.enumerated() { count(outcome, collection, batch[n].id, &report) }
                seen += batch.count
                emit(.pulled(collection: collection.rawValue, count: seen, total: fetched.total))
                page += 1
            }
        } catch {
            // Nothing runs on after the pull returns: a page fetched ahead is cancelled and
            // awaited.
            if let ahead {
                ahead.cancel()
                _ = await ahead.result
            }
            throw error
        }
        let name = collection.rawValue
        let outcomes = try await localWrite { tx -> [(RecordID, ApplyOutcome)] in
            // Only the states this listing did not stamp are read (`seen` is always written as
            // an integer, so `!=` in the query leaves out exactly the stamped ones; the check
            // below stays): a full listing decodes none of its own states again.
            let known = try tx.query(
                Query(filter: Field("collection") == name && Field("remote") == true && Field("seen") != generation), in: WireCollections.syncRecords
            )
            var outcomes: [(RecordID, ApplyOutcome)] = []
            for state in known where state["seen"].intValue != generation {
                guard let id = RecordID(state["recordId"]) else {
                    throw DepotError(.corrupted, "Sync state \(state.id) has no record id.", collection: WireCollections.syncRecords.rawValue, id: state.id)
                }
                outcomes.append((id, try SyncLocal.applyRemote(tx, collection: collection, id: id, server: nil, etag: nil, seen: nil, policy: policy, serverAssignsIDs: assigns)))
            }
            var state = try tx.get(key, from: WireCollections.sync)?.fields ?? [:]
            state["pullPage"] = nil
            state["generation"] = .int(generation + 1)
            try tx.save(Record(id: key, fields: state), into: WireCollections.sync)
            return outcomes
        }
        for (id, outcome) in outcomes { count(outcome, collection, id, &report) }
    }

    /// A page of the listing fetched ahead of its transaction (``fetchListingPage(_:page:)``).
    struct ListingPage: Sendable {
        var records: [Record]
        /// `SyncLocal.stateHash` of each record, computed outside the transaction.
        var hashes: [String]
        var total: Int?
        var full: Bool
        /// What the page's requests counted (retries, failures).
        var report: SyncReport
    }

    /// Starts fetching `page` of the listing in a task of its own, which also hashes the
    /// records' states: the next page is on the wire and parsed while the current one is
    /// applied.
    func fetchListingPage(_ endpoint: SyncEndpoint, page: Int) -> Task<ListingPage, any Error> {
        Task {
            var part = SyncReport()
            let (records, total, full) = try await self.fetchPage(endpoint, page: page, size: endpoint.pageSize, sort: nil, report: &part)
            let hashes = records.map { SyncLocal.stateHash($0.id, $0.fields) }
            return ListingPage(records: records, hashes: hashes, total: total, full: full, report: part)
        }
    }

    /// Fetches one page of the listing: the records, the total when the server said, and
    /// whether the page was full (so more may follow). A 404 is an empty collection.
    func fetchPage(_ endpoint: SyncEndpoint, page: Int, size: Int, sort: [SortKey]?, report: inout SyncReport) async throws -> ([Record], Int?, Bool) {
        var query: [(String, String)]
        switch endpoint.paging {
        case .page: query = [("_page", String(page)), ("_per_page", String(size))]
        case .range: query = [("_start", String((page - 1) * size)), ("_limit", String(size))]
        }
        let sortText = (sort ?? [SortKey(endpoint.idField)]).map { key -> String in
            let name = key.field == "id" ? endpoint.idField : (endpoint.fieldMapping[key.field] ?? key.field)
            return (key.descending ? "-" : "") + name
        }.joined(separator: ",")
        query.append(("_sort", sortText))
        let answer = try await send(endpoint, "GET", endpoint.url(query: query), report: &report)
        if answer.status == 404 { return ([], 0, false) }
        guard (200..<300).contains(answer.status), let body = try Self.json(answer), let items = endpoint.unwrap(body) else {
            throw DepotError(.remote, "GET \(endpoint.path) answered \(answer.status) without the expected list.")
        }
        let total = answer.header("x-total-count").flatMap { Int($0) }
        let records = try items.enumerated().map { n, item in
            guard let record = endpoint.fromServer(item) else {
                throw DepotError(.remote, "GET \(endpoint.path) answered a list whose item \(n) has no usable '\(endpoint.idField)'.")
            }
            return record
        }
        return (records, total, items.count >= size)
    }

    // MARK: Reads

    /// Reads `collection` by a read policy.
    /// - Throws: store errors; with `.remoteOnly`, ``DepotError`` `.remote` when the server
    ///   cannot be reached.
    public func read(_ collection: CollectionName, query: Query = Query(), policy: ReadPolicy) async throws -> ReadResult {
        let local = { [store] in try await store.read { tx in try tx.query(query, in: collection) } }
        switch policy {
        case .localOnly:
            return ReadResult(records: try await local(), source: .local)
        case .remoteOnly:
            _ = try await refresh(collection)
            return ReadResult(records: try await local(), source: .remote)
        case .localElseRemote:
            let records = try await local()
            if !records.isEmpty { return ReadResult(records: records, source: .local) }
            _ = try await refresh(collection)
            return ReadResult(records: try await local(), source: .remote)
        case .remoteElseLocal:
            do {
                _ = try await refresh(collection)
                return ReadResult(records: try await local(), source: .remote)
            } catch let error as DepotError where error.code == .remote {
                return ReadResult(records: try await local(), source: .local)
            }
        case .localThenRefresh:
            let records = try await local()
            let task = Task<[Record], any Error> {
                _ = try await self.refresh(collection)
                return try await local()
            }
            return ReadResult(records: records, source: .local, refreshed: task)
        }
    }

    /// Pulls, and throws when the server could not be reached.
    func refresh(_ collection: CollectionName) async throws -> SyncReport {
        let report = try await sync(collection, pull: true, push: false)
        if let failure = report.failures.first { throw DepotError(.remote, failure) }
        return report
    }

    /// Paged "load more": page `pageIndex` (from 0) of `pageSize` records in `sort` order.
    /// The local pages are served first; the server is asked only when the local store
    /// holds less than a full page there, and what it returns is stored locally.
    /// - Throws: store errors, ``DepotError`` `.remote`.
    public func loadMore(_ collection: CollectionName, pageIndex: Int, pageSize: Int, sort: [SortKey] = []) async throws -> [Record] {
        let query = Query(sort: sort, offset: pageIndex * pageSize, limit: pageSize)
        let local = try await localRead { tx in try tx.query(query, in: collection) }
        guard local.count < pageSize, let endpoint = endpoints[collection.rawValue] else { return local }
        var report = SyncReport()
        try await settleInDoubtPosts(collection, endpoint, &report)
        let (records, _, _) = try await fetchPage(endpoint, page: pageIndex + 1, size: pageSize, sort: sort.isEmpty ? nil : sort, report: &report)
        let policy = conflictPolicy
        let assigns = endpoint.idAssignment == .server
        let outcomes = try await localWrite { tx -> [ApplyOutcome] in
            try records.map { try SyncLocal.applyRemote(tx, collection: collection, id: $0.id, server: $0.fields, etag: nil, seen: nil, policy: policy, serverAssignsIDs: assigns) }
        }
        for (n, outcome) in outcomes.enumerated() { count(outcome, collection, records[n].id, &report) }
        return try await localRead { tx in try tx.query(query, in: collection) }
    }
}

/// The change feed answered 410: the cursor is older than the server's retention window.
struct FeedCursorExpired: Error {}
