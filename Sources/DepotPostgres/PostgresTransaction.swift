import DepotCore
import Foundation
import NIOCore
import PostgresNIO

/// A read or write transaction on one pooled connection (Docs/PostgresDriver.md,
/// "Transactions"). Valid only inside the closure it was given to.
final class PostgresTransaction: WriteTransaction {
    private let driver: PostgresDriver
    let session: PGSession
    let writable: Bool
    /// The catalog as this transaction changed it (a `nil` value: dropped here).
    private(set) var changed: [CollectionName: CollectionMeta?] = [:]
    /// Collections whose catalog entry this transaction read from the server.
    private var loaded: [CollectionName: CollectionMeta] = [:]
    var isOpen = true
    /// The record changes made, for the change feed (``PostgresChangeFeed``).
    private(set) var events: [ChangeEvent] = []
    /// How many of ``events`` the statement that made them announced itself
    /// (``announcingFirstChange(_:_:event:)``); ``notify(_:)`` sends the rest before `COMMIT`.
    private var announced = 0
    /// Set by a write of one record whose statement announced its change, until the change
    /// is in ``events``.
    private var announcedByStatement = false
    /// The first failure that another run of the transaction may not meet (a serialization
    /// failure, or a catalog another process changed): the driver runs the closure again.
    private(set) var retryable: DepotError?
    /// Set when the connection broke: it goes back to the pool closed.
    private(set) var connectionLost = false
    /// Set when the transaction created, altered or dropped a table.
    private(set) var changedCatalog = false
    /// Set when this transaction read the whole catalog (``loadCatalog()``): a collection it
    /// did not list does not exist in this transaction's snapshot.
    private var catalogComplete = false

    /// Set for a read transaction started without `BEGIN` (Docs/PostgresDriver.md,
    /// "Transactions"): its first statement runs on its own, as one snapshot, which is all a
    /// point read needs. A second statement is not sent: ``needsBegin`` is set and the
    /// statement throws, and the driver runs the closure again inside `BEGIN … COMMIT`.
    let deferredBegin: Bool
    /// How many statements a ``deferredBegin`` transaction has sent (0 or 1).
    private var statementsSent = 0
    /// Set when a ``deferredBegin`` transaction asked for a second statement: whatever the
    /// closure returned or threw is discarded, and it runs again in a real transaction.
    private(set) var needsBegin = false

    /// The `BEGIN` this transaction sends before its first statement (``admit()``); `nil`
    /// for a ``deferredBegin`` one. Sent when needed, so that a write whose statement can
    /// run on its own never sends it (``nextCallEndsTransaction()``).
    private let beginSQL: String?
    /// Set once `BEGIN` has been sent: the driver ends the transaction with `COMMIT` or
    /// `ROLLBACK` only then.
    private(set) var begun = false
    /// Set by ``nextCallEndsTransaction()``: the store's next call is its last.
    private var lastCallComing = false
    /// Set by ``nextCallEndsTransaction(sameOnEveryRun:)``: every run of the closure makes
    /// that last call with the same values, so a write without a thread may send what one
    /// run asks for and give the answer to the next (``FirstStatement``).
    private var sameOnEveryRun = false
    /// Set while a statement runs on its own, outside `BEGIN` (``runsAlone()``).
    private var runningAlone = false
    /// Set when a statement that ran on its own changed a row: it committed by itself
    /// (Docs/PostgresDriver.md, "Transactions"), and the transaction may send nothing else.
    private(set) var committedAlone = false

    private var schemaName: String { PostgresSQL.quote(driver.settings.schema) }
    private var catalog: String { schemaName + "." + PostgresSQL.quote(PostgresSQL.catalogTable) }

    /// Set for a read or a write run from an async caller without a thread
    /// (``FirstStatement``): its statements are not sent but taken from, or given to, the
    /// capture. Of a write, only a statement that runs on its own (``runsAlone()``), of a
    /// closure the store vouches for (``sameOnEveryRun``), is captured; anything else is
    /// refused before it is sent.
    let capture: FirstStatement?

    /// A transaction on `session`; it sends `begin` before its first statement (none for a
    /// ``deferredBegin`` read). With `capture`, a ``deferredBegin`` read or a write sends
    /// nothing (``FirstStatement``).
    init(driver: PostgresDriver, session: PGSession, writable: Bool, begin: String?, deferredBegin: Bool = false, capture: FirstStatement? = nil) {
        self.driver = driver
        self.session = session
        self.writable = writable
        self.deferredBegin = deferredBegin && !writable
        self.beginSQL = self.deferredBegin ? nil : begin
        self.capture = self.deferredBegin || writable ? capture : nil
    }

    private func table(_ name: CollectionName) -> String { schemaName + "." + PostgresSQL.quote(name.rawValue) }

    private func checkOpen() throws {
        guard isOpen else { throw DepotError(.closed, "The transaction has ended; use it only inside its closure.") }
    }

    /// Lets a statement be sent: in a transaction begun with `BEGIN` (sent now if it has not
    /// been, unless the statement runs on its own); in a ``deferredBegin`` one only the
    /// first, as the statement's own snapshot.
    /// - Throws: for a second statement of a ``deferredBegin`` transaction, after setting
    ///   ``needsBegin`` (the closure's outcome is then discarded whatever it does); `.internal`
    ///   for any statement after one that ran on its own and committed.
    private func admit() throws {
        guard !committedAlone else {
            throw DepotError(.internal, "The transaction's last write ran on its own and committed; nothing may follow it.")
        }
        // A write without a thread sends only a statement that runs on its own, of a closure
        // that asks for it with the same values on every run.
        if let capture, writable, !runningAlone || !sameOnEveryRun { throw capture.refuse() }
        guard deferredBegin else {
            if let beginSQL, !begun, !runningAlone {
                session.send(beginSQL)
                begun = true
            }
            return
        }
        guard statementsSent == 0, !needsBegin else {
            needsBegin = true
            throw DepotError(.internal, "A read of more than one statement runs again inside BEGIN and COMMIT.")
        }
        statementsSent = 1
    }

    /// Runs a statement, noting failures that decide what happens to the transaction.
    @discardableResult
    func run(_ query: PostgresQuery) throws -> PostgresQueryResult {
        try admit()
        if let capture { throw capture.refuse() }
        do {
            return try session.run(query)
        } catch let error as DepotError {
            note(error)
            throw error
        }
    }

    @discardableResult
    private func run(_ sql: String) throws -> PostgresQueryResult { try run(PostgresQuery(unsafeSQL: sql)) }

    /// Runs a statement as one of the connection's prepared statements
    /// (``PGSession/runPrepared(_:)``), noting failures like ``run(_:)``.
    @discardableResult
    private func run(_ statement: BoundStatement) throws -> [PostgresRow] {
        try admit()
        if let capture { return try answered(statement, capture) }
        do {
            return try session.runPrepared(statement)
        } catch let error as DepotError {
            note(error)
            throw error
        }
    }

    /// Runs a statement through ``PGSession/streamPrepared(_:_:)``, `body` called with each
    /// row as it arrives, noting failures like ``run(_:)``. A statement whose answer is
    /// `small` (a few rows: a query with a low limit) may be answered whole instead, to a
    /// read without a thread (``FirstStatement``); any other one makes that read run on a
    /// thread, where rows become records while the rest are still arriving.
    private func stream(_ statement: BoundStatement, small: Bool = false, _ body: (PostgresRow) throws -> Bool) throws {
        try admit()
        if let capture {
            guard small else { throw capture.refuse() }
            for row in try answered(statement, capture) {
                guard try body(row) else { break }
            }
            return
        }
        do {
            try session.streamPrepared(statement, body)
        } catch let error as DepotError {
            note(error)
            throw error
        }
    }

    /// Runs catalog-changing SQL (CREATE, ALTER, DROP TABLE): the connection's prepared
    /// statements may name the table with its old shape, so they are all retired, and the
    /// driver retires the other connections' ones when the transaction ends.
    private func runChangingCatalog(_ sql: String) throws {
        if let capture { throw capture.refuse() }
        changedCatalog = true
        session.retireAll()
        try run(sql)
    }

    /// The answer to `statement` from `capture` (``FirstStatement/rows(for:)``), its failure
    /// noted like that of a statement sent.
    private func answered(_ statement: BoundStatement, _ capture: FirstStatement) throws -> [PostgresRow] {
        do {
            return try capture.rows(for: statement)
        } catch let error as DepotError {
            note(error)
            throw error
        }
    }

    private func note(_ error: DepotError) {
        if PostgresErrors.isRetryable(error), retryable == nil { retryable = error }
        if PostgresErrors.isConnectionLost(error) { connectionLost = true }
    }

    /// Runs `body` inside a savepoint, so that an error the caller may catch (a unique
    /// violation) leaves the transaction usable, as the contract asks.
    private func guarded<T>(_ body: () throws -> T) throws -> T {
        try admit()
        session.send("SAVEPOINT depot_statement")
        do {
            let result = try body()
            session.send("RELEASE SAVEPOINT depot_statement")
            return result
        } catch {
            if retryable == nil, !connectionLost {
                try run("ROLLBACK TO SAVEPOINT depot_statement")
                session.send("RELEASE SAVEPOINT depot_statement")
            }
            throw error
        }
    }

    // MARK: Catalog

    /// The collection's catalog entry: as this transaction changed it, else the driver's
    /// cache, else read from the server. `fresh` reads it from the server once per
    /// transaction (another process may have added a column). The first lookup of a driver
    /// whose cache holds nothing reads every entry in one statement (``loadCatalog()``);
    /// a collection that read did not list does not exist for the rest of the transaction.
    func meta(_ name: CollectionName, fresh: Bool = false) throws -> CollectionMeta? {
        if let entry = changed[name] { return entry }
        if let entry = loaded[name] { return entry }
        if catalogComplete, !fresh { return nil }
        if !fresh, let cached = driver.cachedMeta(name) { return cached }
        if !fresh, driver.catalogNeverRead, try loadCatalog() { return loaded[name] }
        return try reloadMeta(name)
    }

    /// The collection's catalog entry read from the server now, whatever this transaction
    /// read before, and kept for the rest of it and in the driver's cache.
    private func reloadMeta(_ name: CollectionName) throws -> CollectionMeta? {
        let meta = try loadMeta(name)
        if let meta {
            loaded[name] = meta
            driver.cache(name, meta)
        }
        return meta
    }

    /// A catalog query's columns after the entry's name, and its `FROM`: the id kind,
    /// definition, column names, and the table's shape (``TableShape``). The names and the
    /// column count come from one scan of pg_attribute, so they agree; the count is relnatts
    /// (attnums run from 1 to it, dropped columns included). `regclass` is SQL giving the
    /// table's name.
    private func metaColumns(regclass: String) -> String {
        """
        c.id_kind, c.definition, COALESCE(a.names, '{}'), r.oid::bigint, a.natts \
        FROM \(catalog) c CROSS JOIN LATERAL (SELECT to_regclass(\(regclass)) AS oid) r \
        LEFT JOIN LATERAL (SELECT array_agg(x.attname::text) FILTER (WHERE NOT x.attisdropped) AS names, max(x.attnum)::bigint AS natts \
        FROM pg_attribute x WHERE x.attrelid = r.oid AND x.attnum > 0) a ON true
        """
    }

    private func loadMeta(_ name: CollectionName) throws -> CollectionMeta? {
        let sql = SQLBuilder()
        let nameBind = sql.text(name.rawValue)
        let regclass = sql.text(table(name))
        let result = try run(sql.statement("SELECT \(metaColumns(regclass: regclass)) WHERE c.name = \(nameBind)"))
        // Counted once answered: a run of the closure that only learns its statement
        // (``FirstStatement``) sends nothing.
        driver.catalogReads.add()
        guard let row = result.first else { return nil }
        return try decodeMeta(name, row, from: 0)
    }

    /// Reads every catalog entry into the driver's cache (``loadCatalog()``) unless a
    /// transaction has since the cache was last emptied: what the driver's opening does.
    func readWholeCatalog() throws {
        if driver.catalogNeverRead { _ = try loadCatalog() }
    }

    /// Reads every catalog entry into this transaction and the driver's cache in one
    /// statement; `true` when every entry could be read (the transaction then knows the
    /// whole catalog as of its snapshot), `false` when one could not (it is looked up on its
    /// own, which reports what is wrong with it). Either way the driver does not read the
    /// whole catalog again until its cache is emptied.
    private func loadCatalog() throws -> Bool {
        let sql = SQLBuilder()
        let schema = sql.text(driver.settings.schema)
        let result = try run(sql.statement("SELECT c.name, \(metaColumns(regclass: "format('%I.%I', \(schema), c.name)"))"))
        driver.catalogReads.add()
        var complete = true
        for row in result {
            guard let name = try? CollectionName(validating: row.binary(0, as: String.self)),
                  let meta = try? decodeMeta(name, row, from: 1)
            else {
                complete = false
                continue
            }
            loaded[name] = meta
            driver.cache(name, meta)
        }
        catalogComplete = complete
        driver.catalogWasRead()
        return complete
    }

    /// The catalog entry of `name` from the ``metaColumns(regclass:)`` of `row` starting
    /// at column `offset`.
    private func decodeMeta(_ name: CollectionName, _ row: PostgresRow, from offset: Int) throws -> CollectionMeta {
        let (kindText, definition, columns) = (try row.binary(offset, as: String.self), try row.binary(offset + 1, as: String.self), try row.binary(offset + 2, as: [String].self))
        let (oid, natts) = (try row.binaryUnlessNull(offset + 3, as: Int64.self), try row.binaryUnlessNull(offset + 4, as: Int64.self))
        guard let kind = IDKind(rawValue: kindText) else { throw DepotError(.corrupted, "The catalog entry of \(name) has an unknown id kind.") }
        let stored: StoredDefinition
        do { stored = try JSONDecoder().decode(StoredDefinition.self, from: Data(definition.utf8)) } catch {
            throw DepotError(.corrupted, "The catalog entry of \(name) is not Depot's.", collection: name.rawValue, cause: DepotError.wrap(error))
        }
        let fields = Set(columns).subtracting(["id", PostgresSQL.doublesColumn])
        return CollectionMeta(
            idKind: kind, columns: fields,
            schema: CollectionSchema(name: name, idKind: kind, uniqueConstraints: stored.unique, indexes: stored.indexes),
            shape: oid.flatMap { oid in natts.map { TableShape(oid: oid, natts: $0) } }
        )
    }

    /// The query needs columns the cached entry does not list: read the entry again.
    private func metaFor(_ name: CollectionName, fields: Set<String>) throws -> CollectionMeta? {
        guard let meta = try meta(name) else { return nil }
        let wanted = fields.subtracting(["id"])
        if wanted.isSubset(of: meta.columns) || loaded[name] != nil || changed[name] != nil { return meta }
        return try self.meta(name, fresh: true)
    }

    struct StoredDefinition: Codable {
        var unique: [UniqueConstraint]
        var indexes: [IndexDefinition]
    }

    private func definitionText(_ schema: CollectionSchema) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let data: Data
        do { data = try encoder.encode(StoredDefinition(unique: schema.uniqueConstraints, indexes: schema.indexes)) } catch {
            throw DepotError(.internal, "A collection definition could not be encoded.", cause: DepotError.wrap(error))
        }
        return String(decoding: data, as: UTF8.self)
    }

    private func create(_ name: CollectionName, idKind: IDKind) throws -> CollectionMeta {
        let idType = idKind == .int ? "bigint" : "text COLLATE \"C\""
        try runChangingCatalog("CREATE TABLE \(table(name)) (\"id\" \(idType) PRIMARY KEY, \(PostgresSQL.quote(PostgresSQL.doublesColumn)) text)")
        let schema = CollectionSchema(name: name, idKind: idKind)
        let sql = SQLBuilder()
        try run(sql.statement("INSERT INTO \(catalog) (name, id_kind, definition) VALUES (\(sql.text(name.rawValue)), \(sql.text(idKind.rawValue)), \(sql.text(try definitionText(schema))))"))
        let meta = CollectionMeta(idKind: idKind, columns: [], schema: schema)
        changed[name] = meta
        return meta
    }

    private func addColumns(_ name: CollectionName, _ meta: inout CollectionMeta, _ fields: some Sequence<String>) throws {
        let missing = fields.filter { !meta.columns.contains($0) }.sorted()
        guard !missing.isEmpty else { return }
        let clauses = missing.map { "ADD COLUMN IF NOT EXISTS \(PostgresSQL.quote($0)) bytea" }
        try runChangingCatalog("ALTER TABLE \(table(name)) " + clauses.joined(separator: ", "))
        meta.columns.formUnion(missing)
        meta.shape = nil  // IF NOT EXISTS: how many were added is not known here
        changed[name] = meta
    }

    // MARK: ReadTransaction

    func collectionNames() throws -> [CollectionName] {
        try checkOpen()
        let result = try run("SELECT name FROM \(catalog) ORDER BY name COLLATE \"C\"")
        return try result.rows.map { row in
            let text = try row.decode(String.self)
            do { return try CollectionName(validating: text) } catch {
                throw DepotError(.corrupted, "The catalog lists a collection name Depot does not allow.", cause: DepotError.wrap(error))
            }
        }
    }

    func schema(of collection: CollectionName) throws -> CollectionSchema? {
        try checkOpen()
        return try meta(collection)?.schema
    }

    func get(_ id: RecordID, from collection: CollectionName) throws -> Record? {
        try checkOpen()
        guard let meta = try meta(collection), meta.idKind == id.kind else { return nil }
        let sql = SQLBuilder()
        let result = try run(sql.statement("SELECT * FROM \(table(collection)) WHERE \"id\" = \(sql.id(id))"))
        guard let row = result.first else { return nil }
        var rows = PostgresRowDecoder(idKind: meta.idKind, collection: collection)
        return try rows.record(row)
    }

    func forEach(_ query: Query, in collection: CollectionName, _ body: (Record) throws -> Bool) throws {
        try checkOpen()
        try query.validate()
        guard let meta = try metaFor(collection, fields: query.filter.fieldNames.union(query.sort.map(\.field))) else { return }
        var translator = PostgresQueryTranslator(meta: meta)
        let tail = translator.tail(query)
        // Rows become records while the rest of the answer is still arriving.
        var rows = PostgresRowDecoder(idKind: meta.idKind, collection: collection)
        let small = query.limit.map { $0 <= FirstStatement.smallAnswer } ?? false
        try stream(translator.sql.statement("SELECT * FROM \(table(collection))" + tail), small: small) { row in
            try body(try rows.record(row))
        }
    }

    /// Announces to other processes the transaction's changes that their statements did not
    /// announce themselves (``announcingFirstChange(_:_:event:)``); delivered only if it commits.
    func notify(_ feed: PostgresChangeFeed) throws {
        guard events.count > announced else { return }
        // Sent without waiting: COMMIT, which follows, waits for them.
        for payload in feed.payloads(Array(events[announced...])) {
            let sql = SQLBuilder()
            try session.sendPrepared(sql.statement("SELECT pg_notify(\(sql.text(feed.channel)), \(sql.text(payload))) WHERE \(feed.heardElsewhere(sql))"))
        }
    }

    /// Runs `query` through a server-side cursor, handing each record to `body` a batch at a
    /// time, so memory stays bounded (``PostgresDriver/stream(_:from:)``).
    func forEachStreamed(_ query: Query, in collection: CollectionName, batch: Int, _ body: (Record) throws -> Bool) throws {
        try checkOpen()
        try query.validate()
        guard let meta = try metaFor(collection, fields: query.filter.fieldNames.union(query.sort.map(\.field))) else { return }
        var translator = PostgresQueryTranslator(meta: meta)
        let tail = translator.tail(query)
        try run(translator.sql.query("DECLARE depot_stream NO SCROLL CURSOR FOR SELECT * FROM \(table(collection))" + tail))
        var rows = PostgresRowDecoder(idKind: meta.idKind, collection: collection)
        while true {
            let result = try run("FETCH FORWARD \(batch) FROM depot_stream")
            for row in result.rows {
                guard try body(try rows.record(row)) else {
                    try run("CLOSE depot_stream")
                    return
                }
            }
            if result.rows.count < batch { break }
        }
        try run("CLOSE depot_stream")
    }

    func count(_ filter: Filter, in collection: CollectionName) throws -> Int {
        try checkOpen()
        try filter.validate()
        guard let meta = try metaFor(collection, fields: filter.fieldNames) else { return 0 }
        var translator = PostgresQueryTranslator(meta: meta)
        let condition = translator.filter(filter)
        let result = try run(translator.sql.statement("SELECT count(*) FROM \(table(collection))" + (condition == "TRUE" ? "" : " WHERE " + condition)))
        guard let row = result.first else { throw DepotError(.internal, "count(*) returned no row.") }
        return Int(try row.binary(0, as: Int64.self))
    }

    func explain(_ query: Query, in collection: CollectionName) throws -> QueryPlan {
        try checkOpen()
        try query.validate()
        guard let meta = try metaFor(collection, fields: query.filter.fieldNames.union(query.sort.map(\.field))) else {
            return QueryPlan(backend: "postgres", filterInEngine: true, sortInEngine: true, pagingInEngine: true, detail: "collection \(collection) does not exist: no rows")
        }
        var translator = PostgresQueryTranslator(meta: meta)
        let sql = "SELECT * FROM \(table(collection))" + translator.tail(query)
        let result = try run(translator.sql.query("EXPLAIN " + sql))
        var steps: [String] = []
        var indexes: [String] = []
        for row in result.rows {
            let line = try row.decode(String.self)
            steps.append(line.trimmingCharacters(in: .whitespaces))
            for marker in [" using ", " on "] where line.contains("Index") {
                guard let range = line.range(of: marker) else { continue }
                let name = String(line[range.upperBound...].prefix { $0 != " " })
                let shown = name == collection.rawValue + "_pkey" ? "id" : constraintName(forIndex: name, meta: meta, collection: collection) ?? name
                if !indexes.contains(shown) { indexes.append(shown) }
            }
        }
        return QueryPlan(
            backend: "postgres", filterInEngine: true, sortInEngine: true, pagingInEngine: true, indexesUsed: indexes,
            detail: "SQL: \(sql); plan: \(steps.joined(separator: " | "))"
        )
    }

    private func constraintName(forIndex index: String, meta: CollectionMeta, collection: CollectionName) -> String? {
        for c in meta.schema.uniqueConstraints where PostgresSQL.indexName(collection: collection, unique: true, name: c.name, fields: c.fields) == index {
            return c.name
        }
        for i in meta.schema.indexes where PostgresSQL.indexName(collection: collection, unique: false, name: i.name, fields: i.fields) == index {
            return i.name
        }
        return nil
    }

    // MARK: WriteTransaction

    private func checkWritable() throws {
        try checkOpen()
        guard writable else { throw DepotError(.internal, "A read transaction cannot write.") }
    }

    func prepare(_ schema: CollectionSchema) throws {
        try checkWritable()
        try schema.validate()
        let name = schema.name
        try guarded {
            var meta: CollectionMeta
            if let existing = try self.meta(name, fresh: true) {
                guard existing.idKind == schema.idKind else {
                    throw DepotError(
                        .schemaMismatch, "Collection \(name) uses \(existing.idKind.rawValue) ids; the schema declares \(schema.idKind.rawValue) ids.",
                        collection: name.rawValue)
                }
                meta = existing
            } else {
                meta = try create(name, idKind: schema.idKind)
            }
            try addColumns(name, &meta, schema.uniqueConstraints.flatMap(\.fields) + schema.indexes.flatMap(\.fields))
            func names(_ s: CollectionSchema) -> [String: (unique: Bool, name: String, fields: [String])] {
                var out: [String: (Bool, String, [String])] = [:]
                for c in s.uniqueConstraints { out[PostgresSQL.indexName(collection: name, unique: true, name: c.name, fields: c.fields)] = (true, c.name, c.fields) }
                for i in s.indexes { out[PostgresSQL.indexName(collection: name, unique: false, name: i.name, fields: i.fields)] = (false, i.name, i.fields) }
                return out
            }
            let existing = names(meta.schema)
            let wanted = names(schema)
            for index in existing.keys.sorted() where wanted[index] == nil {
                try run("DROP INDEX IF EXISTS \(schemaName).\(PostgresSQL.quote(index))")
            }
            for index in wanted.keys.sorted() where existing[index] == nil {
                guard let definition = wanted[index] else { continue }
                let columns = definition.fields.map(PostgresSQL.quote).joined(separator: ", ")
                do {
                    try run("CREATE \(definition.unique ? "UNIQUE " : "")INDEX IF NOT EXISTS \(PostgresSQL.quote(index)) ON \(table(name)) (\(columns))")
                } catch let error as DepotError where error.code == .uniqueViolation {
                    throw DepotError(
                        .uniqueViolation, "Existing records break unique constraint '\(definition.name)'.",
                        collection: name.rawValue, constraint: definition.name, cause: error.cause)
                }
            }
            meta.schema = CollectionSchema(name: name, idKind: meta.idKind, uniqueConstraints: schema.uniqueConstraints, indexes: schema.indexes)
            let sql = SQLBuilder()
            try run(sql.statement("UPDATE \(catalog) SET definition = \(sql.text(try definitionText(meta.schema))) WHERE name = \(sql.text(name.rawValue))"))
            changed[name] = meta
        }
    }

    @discardableResult
    func dropCollection(_ collection: CollectionName) throws -> Bool {
        try checkWritable()
        guard try meta(collection, fresh: true) != nil else { return false }
        try runChangingCatalog("DROP TABLE IF EXISTS \(table(collection))")
        let sql = SQLBuilder()
        try run(sql.statement("DELETE FROM \(catalog) WHERE name = \(sql.text(collection.rawValue))"))
        changed[collection] = .some(nil)
        return true
    }

    @discardableResult
    func write(_ record: Record, as mode: RecordWriteMode, into collection: CollectionName) throws -> WriteOutcome {
        announcedByStatement = false
        let outcome = try writeRecord(record, as: mode, into: collection)
        events.append(ChangeEvent(collection: collection, kind: outcome == .inserted ? .inserted : .updated, id: record.id))
        if announcedByStatement { announced = events.count }
        return outcome
    }

    /// A statement that changes one record (and ends in `RETURNING` one column), made to
    /// announce the change itself when it is the transaction's first:
    /// `WITH w(r) AS (statement) SELECT w.r, pg_notify(channel, payload) FROM w`, so that a
    /// transaction of one write sends no `pg_notify` of its own before `COMMIT`
    /// (Docs/PostgresDriver.md, "Change events across processes"). Nothing is announced
    /// when the statement changes no row, and a notification is delivered only if the
    /// transaction commits. `event` is the change, its kind `nil` for a save: inserted when
    /// the statement's column is true. `nil` when the transaction already made a change.
    private func announcingFirstChange(_ statement: String, _ sql: SQLBuilder, event: (collection: CollectionName, id: RecordID, kind: ChangeEvent.Kind?)) -> String? {
        guard events.isEmpty else { return nil }
        let feed = driver.feed
        func payload(_ kind: ChangeEvent.Kind) -> String? {
            let payloads = feed.payloads([ChangeEvent(collection: event.collection, kind: kind, id: event.id)])
            return payloads.count == 1 ? payloads[0] : nil
        }
        let chosen: String
        if let kind = event.kind {
            guard let text = payload(kind) else { return nil }
            chosen = sql.text(text)
        } else {
            guard let inserted = payload(.inserted), let updated = payload(.updated) else { return nil }
            chosen = "CASE WHEN w.r THEN \(sql.text(inserted)) ELSE \(sql.text(updated)) END"
        }
        return "WITH w(r) AS (\(statement)) SELECT w.r, CASE WHEN \(feed.heardElsewhere(sql)) THEN pg_notify(\(sql.text(feed.channel)), \(chosen)) END FROM w"
    }

    private func writeRecord(_ record: Record, as mode: RecordWriteMode, into collection: CollectionName) throws -> WriteOutcome {
        try checkWritable()
        guard var meta = try meta(collection) else {
            if mode == .update {
                throw DepotError(.notFound, "No record with id \(record.id) in \(collection).", collection: collection.rawValue, id: record.id)
            }
            var created = try create(collection, idKind: record.id.kind)
            return try write(record, as: mode, meta: &created, into: collection)
        }
        return try write(record, as: mode, meta: &meta, into: collection)
    }

    /// An update or save sets every column the record lacks to NULL, so it must know every
    /// column: its statement also checks that the table has exactly the columns the catalog
    /// entry lists, and does nothing otherwise (another process added one); then the entry
    /// is read again and the write runs once more.
    private func write(_ record: Record, as mode: RecordWriteMode, meta: inout CollectionMeta, into collection: CollectionName) throws -> WriteOutcome {
        if mode != .insert, meta.shape == nil, changed[collection] == nil, loaded[collection] == nil, let read = try reloadMeta(collection) {
            // Made or changed by this process since its shape was read: read it once, so
            // that this write and the next ones check the cheap way.
            meta = read
        }
        if let outcome = try write(record, as: mode, meta: &meta, into: collection, checkingColumns: true) { return outcome }
        // The entry as this transaction changed it, else read anew (the check may have
        // failed because another process added a column).
        guard var fresh = try changed[collection] ?? reloadMeta(collection) else {
            throw DepotError(.notFound, "No record with id \(record.id) in \(collection).", collection: collection.rawValue, id: record.id)
        }
        // The same columns (and table, when its shape was checked): the check passed, and
        // the update found no row.
        if mode == .update, fresh.columns == meta.columns, meta.shape == nil || fresh.shape == meta.shape {
            throw DepotError(.notFound, "No record with id \(record.id) in \(collection).", collection: collection.rawValue, id: record.id)
        }
        if let outcome = try write(record, as: mode, meta: &fresh, into: collection, checkingColumns: false) { return outcome }
        throw DepotError(.notFound, "No record with id \(record.id) in \(collection).", collection: collection.rawValue, id: record.id)
    }

    /// One attempt of ``write(_:as:meta:into:)``; `nil` when an update found no row or the
    /// column check failed.
    private func write(_ record: Record, as mode: RecordWriteMode, meta: inout CollectionMeta, into collection: CollectionName, checkingColumns: Bool) throws -> WriteOutcome? {
        guard record.id.kind == meta.idKind else {
            throw DepotError(
                .invalidValue, "Collection \(collection) uses \(meta.idKind.rawValue) ids; record \(record.id) has a \(record.id.kind.rawValue) id.",
                collection: collection.rawValue, id: record.id)
        }
        let present = record.fields.filter { !$0.value.isNull }
        try addColumns(collection, &meta, present.keys)
        let sql = SQLBuilder()
        let idBind = sql.id(record.id)
        var names: [String] = []
        var values: [String] = []
        var forms: [(String, ValueKey.NumberForm)] = []
        for (name, value) in present.sorted(by: { $0.key < $1.key }) {
            let (key, form) = ValueKey.encode(value)
            if let form { forms.append((name, form)) }
            names.append(PostgresSQL.quote(name))
            values.append(sql.bytes(key))
        }
        let doublesBind = sql.optionalText(ValueKey.doublesText(forms))
        let doubles = PostgresSQL.quote(PostgresSQL.doublesColumn)
        let t = table(collection)
        // The table has the id, the doubles column and the field columns the entry lists:
        // the same table with the same relnatts as when they were read together (an index
        // lookup in pg_class), else, when this transaction made or changed it, exactly that
        // many live columns (a scan of its pg_attribute rows, 2-3 times the server's time).
        // Bound only by the statements that use it (an insert never does).
        let columnCheck: String
        if mode == .insert || !checkingColumns {
            columnCheck = ""
        } else if let shape = meta.shape {
            columnCheck = " AND (SELECT relnatts FROM pg_class WHERE oid = \(sql.int(shape.oid))::oid) = \(sql.int(shape.natts))"
        } else {
            columnCheck = " AND (SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass(\(sql.text(t))) AND attnum > 0 AND NOT attisdropped) = \(sql.int(Int64(meta.columns.count + 2)))"
        }
        let statement: String
        switch mode {
        case .insert:
            statement = "INSERT INTO \(t) (\"id\", \(doubles)\(names.map { ", " + $0 }.joined())) VALUES (\(idBind), \(doublesBind)\(values.map { ", " + $0 }.joined())) ON CONFLICT (\"id\") DO NOTHING RETURNING 1"
        case .update:
            var sets = ["\(doubles) = \(doublesBind)"]
            for (n, v) in zip(names, values) { sets.append("\(n) = \(v)") }
            for column in meta.columns.sorted() where present[column] == nil { sets.append("\(PostgresSQL.quote(column)) = NULL") }
            statement = "UPDATE \(t) SET " + sets.joined(separator: ", ") + " WHERE \"id\" = \(idBind)\(columnCheck) RETURNING 1"
        case .save:
            var sets = ["\(doubles) = EXCLUDED.\(doubles)"]
            for n in names { sets.append("\(n) = EXCLUDED.\(n)") }
            for column in meta.columns.sorted() where present[column] == nil { sets.append("\(PostgresSQL.quote(column)) = NULL") }
            statement = "INSERT INTO \(t) (\"id\", \(doubles)\(names.map { ", " + $0 }.joined())) VALUES (\(idBind), \(doublesBind)\(values.map { ", " + $0 }.joined())) ON CONFLICT (\"id\") DO UPDATE SET " + sets.joined(separator: ", ") + (checkingColumns ? " WHERE TRUE" + columnCheck : "") + " RETURNING (xmax = 0)"
        }
        let kind: ChangeEvent.Kind? = switch mode {
        case .insert: .inserted
        case .update: .updated
        case .save: nil
        }
        let announcing = announcingFirstChange(statement, sql, event: (collection, record.id, kind))
        let result = try runWrite(sql.statement(announcing ?? statement), meta: meta, collection: collection, id: record.id, alone: announcing != nil && runsAlone())
        if announcing != nil, !result.isEmpty { announcedByStatement = true }
        switch mode {
        case .insert:
            guard !result.isEmpty else {
                throw DepotError(.alreadyExists, "A record with id \(record.id) exists.", collection: collection.rawValue, id: record.id)
            }
            return .inserted
        case .update:
            return result.isEmpty ? nil : .updated
        case .save:
            guard let row = result.first else { return nil }
            return try row.binary(0, as: Bool.self) ? .inserted : .updated
        }
    }

    /// Notes that the store's next call is its last (``WriteTransaction/nextCallEndsTransaction()``):
    /// that write may then be sent alone (``runsAlone()``).
    func nextCallEndsTransaction() {
        lastCallComing = true
    }

    /// As ``nextCallEndsTransaction()``, noting the store's word that every run of the
    /// closure makes that call with the same values (``sameOnEveryRun``).
    func nextCallEndsTransaction(sameOnEveryRun: Bool) {
        lastCallComing = true
        self.sameOnEveryRun = sameOnEveryRun
    }

    /// Whether the write about to be sent may run on its own, outside `BEGIN`, as a
    /// transaction of its own (Docs/PostgresDriver.md, "Transactions"): the store said it is
    /// its last call (``nextCallEndsTransaction()``), nothing has been sent yet, the statement
    /// announces its own change (the caller's part), and the connection's default isolation
    /// is SERIALIZABLE (``PGPool``). When it changes a row, it has committed
    /// (``committedAlone``); when it changes none, nothing happened, and what the transaction
    /// sends next begins it as usual.
    private func runsAlone() -> Bool {
        lastCallComing && writable && beginSQL != nil && !begun && session.serializableDefault
    }

    /// Runs a statement that writes rows of `collection`: inside a savepoint when the
    /// collection has unique constraints (an error the closure catches leaves the transaction
    /// usable), a unique violation reported with the Depot constraint's name. With `alone`,
    /// outside `BEGIN` and without a savepoint (``runsAlone()``): a failure ends it.
    private func runWrite(_ query: BoundStatement, meta: CollectionMeta, collection: CollectionName, id: RecordID?, alone: Bool = false) throws -> [PostgresRow] {
        do {
            if alone {
                runningAlone = true
                defer { runningAlone = false }
                let rows = try run(query)
                if !rows.isEmpty { committedAlone = true }
                return rows
            }
            if meta.schema.uniqueConstraints.isEmpty { return try run(query) }
            return try guarded { try run(query) }
        } catch let error as DepotError where error.code == .uniqueViolation {
            let index = PostgresErrors.constraintName(of: error) ?? ""
            let constraint = constraintName(forIndex: index, meta: meta, collection: collection)
            let fields = constraint.flatMap { name in meta.schema.uniqueConstraints.first { $0.name == name }?.fields }
            throw DepotError(
                .uniqueViolation,
                "Another record already has these values for unique constraint '\(constraint ?? "?")'" + (fields.map { " (\($0.joined(separator: ", ")))." } ?? "."),
                collection: collection.rawValue, id: id, constraint: constraint, cause: error.cause)
        }
    }

    // MARK: Partial updates

    /// One `UPDATE … WHERE "id" = $1 RETURNING "id"`: the fields set and removed in place,
    /// without reading the record first (Docs/PostgresDriver.md, "Partial updates").
    func update(_ id: RecordID, applying change: FieldChange, in collection: CollectionName) throws -> Bool {
        try checkWritable()
        return try !runUpdate(change, where: .equal("id", id.fieldValue), id: id, in: collection).isEmpty
    }

    /// One `UPDATE … WHERE … RETURNING "id"`; the ids in id order.
    func updateReturningIDs(matching filter: Filter, applying change: FieldChange, in collection: CollectionName) throws -> [RecordID] {
        try checkWritable()
        try filter.validate()
        return try runUpdate(change, where: filter, id: nil, in: collection).sorted()
    }

    /// Runs the UPDATE of `change` (normalized: no `.null` in `set`) over the rows `filter`
    /// matches and returns their ids. Columns are added first for fields set that have
    /// none, only when a row matches; the doubles column loses the fields touched and gains
    /// the doubles set. `id` is the one record updated, for errors.
    private func runUpdate(_ change: FieldChange, where filter: Filter, id: RecordID?, in collection: CollectionName) throws -> [RecordID] {
        let touched = Set(change.set.keys).union(change.remove)
        // A field this entry has no column for may have one another process added: read
        // the entry again before deciding a removal has nothing to do.
        guard var meta = try metaFor(collection, fields: filter.fieldNames.union(touched)) else { return [] }
        if let id, id.kind != meta.idKind { return [] }
        let t = table(collection)
        if change.set.keys.contains(where: { !meta.columns.contains($0) }) {
            var probe = PostgresQueryTranslator(meta: meta)
            let condition = probe.filter(filter)
            guard try !run(probe.sql.statement("SELECT 1 FROM \(t) WHERE \(condition) LIMIT 1")).isEmpty else { return [] }
            try addColumns(collection, &meta, change.set.keys)
        }
        var translator = PostgresQueryTranslator(meta: meta)
        let condition = translator.filter(filter)
        let sql = translator.sql
        var assignments: [String] = []
        let doubles = PostgresSQL.quote(PostgresSQL.doublesColumn)
        var doublesText = "COALESCE(\(doubles), ',')"
        var added = ""
        for name in touched.sorted() where meta.columns.contains(name) {
            if let value = change.set[name] {
                let (key, form) = ValueKey.encode(value)
                assignments.append("\(PostgresSQL.quote(name)) = \(sql.bytes(key))")
                switch form {
                case .double?: added += name + ","
                case .negativeZero?: added += "-" + name + ","
                case .int?, nil: break
                }
            } else {
                assignments.append("\(PostgresSQL.quote(name)) = NULL")
            }
            doublesText = "replace(replace(\(doublesText), \(sql.text("," + name + ",")), ','), \(sql.text(",-" + name + ",")), ',')"
        }
        if !added.isEmpty { doublesText = "(\(doublesText) || \(sql.text(added)))" }
        if assignments.isEmpty {
            // Only fields without a column were removed: nothing changes, but the matching
            // records are still the ones updated.
            let result = try run(sql.statement("SELECT \"id\" FROM \(t) WHERE \(condition)"))
            return try result.map { try decodeID($0, meta) }
        }
        assignments.append("\(doubles) = NULLIF(\(doublesText), ',')")
        let statement = "UPDATE \(t) SET \(assignments.joined(separator: ", ")) WHERE \(condition) RETURNING \"id\""
        // An update by id changes one record at most: it may announce itself.
        let announcing = id.flatMap { announcingFirstChange(statement, sql, event: (collection, $0, .updated)) }
        let result = try runWrite(sql.statement(announcing ?? statement), meta: meta, collection: collection, id: id, alone: announcing != nil && runsAlone())
        let ids = try result.map { try decodeID($0, meta) }
        events += ids.map { ChangeEvent(collection: collection, kind: .updated, id: $0) }
        if announcing != nil, !ids.isEmpty { announced = events.count }
        return ids
    }

    private func decodeID(_ row: PostgresRow, _ meta: CollectionMeta) throws -> RecordID {
        meta.idKind == .int ? .int(try row.binary(0, as: Int64.self)) : .string(try row.binary(0, as: String.self))
    }

    @discardableResult
    func delete(_ id: RecordID, from collection: CollectionName) throws -> Bool {
        try checkWritable()
        guard let meta = try meta(collection), meta.idKind == id.kind else { return false }
        let sql = SQLBuilder()
        let condition = "\"id\" = \(sql.id(id))"
        let deleted = try deleting(condition, meta: meta, collection: collection, sql: sql)
        events += deleted.map { ChangeEvent(collection: collection, kind: .deleted, id: $0) }
        return !deleted.isEmpty
    }

    func deleteReturningIDs(matching filter: Filter, from collection: CollectionName) throws -> [RecordID] {
        try checkWritable()
        try filter.validate()
        guard let meta = try metaFor(collection, fields: filter.fieldNames) else { return [] }
        var translator = PostgresQueryTranslator(meta: meta)
        let condition = translator.filter(filter)
        let sql = translator.sql
        let deleted = try deleting(condition, meta: meta, collection: collection, sql: sql)
        events += deleted.map { ChangeEvent(collection: collection, kind: .deleted, id: $0) }
        return deleted
    }

    /// Deletes the rows matching `condition` and returns their ids in id order. For integer
    /// ids it also raises the catalog's high-water mark to the largest id deleted, so that an
    /// assigned id is never one the collection had (Docs/Semantics.md, "Ids").
    private func deleting(_ condition: String, meta: CollectionMeta, collection: CollectionName, sql: SQLBuilder) throws -> [RecordID] {
        let t = table(collection)
        let statement: String
        if meta.idKind == .int {
            let name = sql.text(collection.rawValue)
            statement = """
                WITH d AS (DELETE FROM \(t) WHERE \(condition) RETURNING "id"), \
                u AS (UPDATE \(catalog) SET high_water = GREATEST(high_water, (SELECT max("id") FROM d)) WHERE name = \(name) AND EXISTS (SELECT 1 FROM d)) \
                SELECT "id" FROM d ORDER BY "id"
                """
        } else {
            statement = "WITH d AS (DELETE FROM \(t) WHERE \(condition) RETURNING \"id\") SELECT \"id\" FROM d ORDER BY \"id\" COLLATE \"C\""
        }
        return try run(sql.statement(statement)).map { try decodeID($0, meta) }
    }

    func insert(fields: [String: FieldValue], into collection: CollectionName) throws -> RecordID {
        try checkWritable()
        if let meta = try meta(collection), meta.idKind != .int {
            throw DepotError(.invalidValue, "Collection \(collection) uses string ids; the store assigns only integer ids.", collection: collection.rawValue)
        }
        if try meta(collection) == nil { _ = try create(collection, idKind: .int) }
        let sql = SQLBuilder()
        let result = try run(sql.statement(
            "SELECT GREATEST(high_water, COALESCE((SELECT max(\"id\") FROM \(table(collection))), 0)) FROM \(catalog) WHERE name = \(sql.text(collection.rawValue))"
        ))
        guard let row = result.first else { throw DepotError(.internal, "The catalog has no entry for \(collection).") }
        let highest = try row.binary(0, as: Int64.self)
        guard highest < Int64.max else {
            throw DepotError(.invalidValue, "Collection \(collection) has no integer ids left to assign.", collection: collection.rawValue)
        }
        let id = RecordID.int(highest + 1)
        try write(Record(id: id, fields: fields), as: .insert, into: collection)
        return id
    }
}

/// A read or a write run from an async caller without taking one of the driver's threads
/// (``PostgresDriver/read(_:)``, ``PostgresDriver/write(_:)``; Docs/PostgresDriver.md,
/// "Transactions"): the closure runs once on the caller's thread with nothing sent, to learn
/// its first statement; that statement is sent and its answer awaited without blocking a
/// thread; then the closure runs again and is given the answer. A closure that asks for
/// anything else (a second statement, a statement whose answer may be large, one sent as
/// text; for a write, any statement that does not run on its own, or any at all without the
/// store's word that every run asks for the same write, ``nextCallEndsTransaction(sameOnEveryRun:)``)
/// is run on a thread as before.
final class FirstStatement {
    /// Thrown inside the closure when its statement is not sent now; whatever the closure
    /// makes of it is discarded.
    struct NotSent: Error {}

    /// The most rows a query's limit may ask for and still be answered whole (``PostgresTransaction``'s `stream`).
    static let smallAnswer = 1000

    /// The closure's first statement, once the first run asked for it.
    private(set) var statement: BoundStatement?
    /// The answer to ``statement``, once sent.
    var answer: Result<[PostgresRow], DepotError>?
    /// Set when the run given the answer asked for it.
    private(set) var answered = false
    /// Set when the closure asked for something this way cannot give.
    private(set) var refused = false

    /// The rows of `statement`: the answer, in the run that has it and asks for the statement
    /// the first run asked for; otherwise nothing is sent and ``NotSent`` is thrown.
    func rows(for statement: BoundStatement) throws -> [PostgresRow] {
        if let answer {
            guard !answered, let first = self.statement, Self.same(first, statement) else { throw refuse() }
            answered = true
            return try answer.get()
        }
        guard self.statement == nil else { throw refuse() }
        self.statement = statement
        throw NotSent()
    }

    /// Notes that the closure asked for something this way cannot give; the error to throw.
    func refuse() -> NotSent {
        refused = true
        return NotSent()
    }

    /// Whether two statements are the same text with the same values.
    static func same(_ a: BoundStatement, _ b: BoundStatement) -> Bool {
        guard a.sql == b.sql, a.preparable == b.preparable, a.values.count == b.values.count else { return false }
        return zip(a.values, b.values).allSatisfy { $0.type == $1.type && $0.formatCode == $1.formatCode && $0.typeModifier == $1.typeModifier && $0.value == $1.value }
    }
}
