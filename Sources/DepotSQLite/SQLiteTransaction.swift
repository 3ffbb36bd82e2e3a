import CSQLite
import DepotCore
import Foundation

/// A read or write transaction on one connection, valid only inside its closure.
final class SQLiteTransaction: WriteTransaction {
    let connection: SQLiteConnection
    /// Any change to it forgets ``fieldSink``, whose collection metadata may be replaced.
    private(set) var catalog: Catalog {
        didSet { fieldSink = nil }
    }
    let writable: Bool
    var isValid = true
    /// `true` once this transaction changed the catalog (the driver publishes it on commit).
    private(set) var catalogChanged = false
    /// The sink of the last model written, kept for the next record of the same collection
    /// while the catalog is unchanged (so its metadata is the catalog's).
    private var fieldSink: SQLiteFieldSink?

    init(connection: SQLiteConnection, catalog: Catalog, writable: Bool) {
        self.connection = connection
        self.catalog = catalog
        self.writable = writable
    }

    func checkValid() throws {
        guard isValid else { throw DepotError(.closed, "A transaction was used after its closure returned.") }
    }

    func checkWritable() throws {
        try checkValid()
        guard writable else { throw DepotError(.unsupported, "Writes need a write transaction.") }
    }

    // MARK: Reading

    func collectionNames() throws -> [CollectionName] {
        try checkValid()
        return catalog.collections.keys.sorted()
    }

    func schema(of collection: CollectionName) throws -> CollectionSchema? {
        try checkValid()
        return catalog.collections[collection]?.schema
    }

    /// Runs `query` on `collection` and calls `row` with each result row (shaped like
    /// `meta.selectSQL`) until it returns `false`. A missing collection has no rows.
    private func eachRow(_ query: Query, in collection: CollectionName, _ row: (Statement, CollectionMeta) throws -> Bool) throws {
        try checkValid()
        try query.validate()
        guard let meta = catalog.collections[collection] else { return }
        var translator = SQLiteQueryTranslator(meta: meta)
        let sql = translator.select(query)
        try connection.query(sql, translator.parameters) { try row($0, meta) }
    }

    /// Calls `row` with the row of the record `id`, if there is one; returns its answer.
    private func rowByID<T>(_ id: RecordID, in collection: CollectionName, _ row: (Statement, CollectionMeta) throws -> T) throws -> T? {
        try checkValid()
        guard let meta = catalog.collections[collection], id.kind == meta.idKind else { return nil }
        let statement = try connection.statement(meta.getSQL)
        // An integer id is bound again by the next use; a text one is cleared.
        defer { statement.finish(clearing: id.kind != .int) }
        try statement.bind(Self.idValue(id), at: 1)
        guard try statement.step() else { return nil }
        return try row(statement, meta)
    }

    func get(_ id: RecordID, from collection: CollectionName) throws -> Record? {
        try rowByID(id, in: collection) { row, meta in try Self.decode(row, meta) }
    }

    func forEach(_ query: Query, in collection: CollectionName, _ body: (Record) throws -> Bool) throws {
        if writable {
            // The results as of the call, as in every driver, even if `body` writes to the
            // same table while we iterate.
            var records: [Record] = []
            try eachRow(query, in: collection) { row, meta in
                records.append(try Self.decode(row, meta))
                return true
            }
            for record in records where try !body(record) { break }
            return
        }
        try eachRow(query, in: collection) { row, meta in try body(try Self.decode(row, meta)) }
    }

    func forEachFields(_ query: Query, in collection: CollectionName, _ body: (any FieldSource) throws -> Bool) throws {
        // A write transaction reads a snapshot of records first (see forEach).
        if writable { return try forEachRecordAsFields(query, in: collection, body) }
        var fields: SQLiteRowFields?
        try eachRow(query, in: collection) { row, meta in
            let source = fields ?? SQLiteRowFields(meta: meta)
            fields = source
            try source.load(row)
            return try body(source)
        }
    }

    func withFields<T>(of id: RecordID, from collection: CollectionName, _ body: (any FieldSource) throws -> T) throws -> T? {
        if writable { return try getRecordAsFields(of: id, from: collection, body) }
        return try rowByID(id, in: collection) { row, meta in
            let fields: SQLiteRowFields
            if let kept = connection.pointReadFields, kept.meta === meta {
                fields = kept
                connection.pointReadFields = nil
            } else {
                fields = SQLiteRowFields(meta: meta)
            }
            try fields.load(row)
            defer {
                fields.unload()
                connection.pointReadFields = fields
            }
            return try body(fields)
        }
    }

    func count(_ filter: Filter, in collection: CollectionName) throws -> Int {
        try checkValid()
        try filter.validate()
        guard let meta = catalog.collections[collection] else { return 0 }
        var translator = SQLiteQueryTranslator(meta: meta)
        let condition = translator.filter(filter)
        var sql = "SELECT count(*) FROM \(meta.quotedTable)"
        if condition != "1" { sql += " WHERE " + condition }
        guard case .int(let n) = try connection.scalar(sql, translator.parameters) else { return 0 }
        return Int(n)
    }

    func explain(_ query: Query, in collection: CollectionName) throws -> QueryPlan {
        try checkValid()
        try query.validate()
        guard let meta = catalog.collections[collection] else {
            return QueryPlan(backend: "sqlite", filterInEngine: true, sortInEngine: true, pagingInEngine: true, detail: "collection \(collection) does not exist: no rows")
        }
        var translator = SQLiteQueryTranslator(meta: meta)
        let sql = translator.select(query)
        var steps: [String] = []
        var indexes: [String] = []
        try connection.query("EXPLAIN QUERY PLAN " + sql, translator.parameters) { row in
            if case .text(let step) = row.value(3) {
                steps.append(step)
                // A search of the primary key (`id` ranges, lists, equality) is the id index,
                // as GDBM reports its id lookups.
                if step.hasPrefix("SEARCH "), step.contains(" USING PRIMARY KEY ") || step.contains(" USING INTEGER PRIMARY KEY "), !indexes.contains("id") {
                    indexes.append("id")
                }
                for marker in ["USING INDEX ", "USING COVERING INDEX "] {
                    if let range = step.range(of: marker) {
                        let name = step[range.upperBound...].prefix { $0 != " " }
                        indexes.append(meta.constraintName(forSQLIndex: String(name)) ?? String(name))
                    }
                }
            }
            return true
        }
        return QueryPlan(
            backend: "sqlite", filterInEngine: true, sortInEngine: true, pagingInEngine: true, indexesUsed: indexes,
            detail: "SQL: \(sql); plan: \(steps.joined(separator: " | "))")
    }

    // MARK: Records

    static func idValue(_ id: RecordID) -> SQLValue {
        switch id {
        case .int(let i): .int(i)
        case .string(let s): .text(s)
        }
    }

    /// Decodes a row of `meta.selectSQL`.
    ///
    /// A row with a value in most columns copies ``CollectionMeta/recordTemplate`` and sets
    /// each value through its precomputed index (hashing no field name), then removes the
    /// fields whose column is NULL; a sparse row builds its dictionary field by field.
    static func decode(_ row: Statement, _ meta: CollectionMeta) throws -> Record {
        let id = try decodeID(row, meta)
        let tags = decodeTags(row)
        let count = meta.fields.count
        let handle = row.handle
        if count <= 64 {
            var nulls: UInt64 = 0
            var nullCount = 0
            for index in 0..<count where sqlite3_column_type(handle, Int32(index + 2)) == SQLITE_NULL {
                nulls |= 1 << UInt64(index)
                nullCount += 1
            }
            if nullCount * 4 <= count {
                var fields = meta.recordTemplate
                for index in 0..<count where nulls & (1 << UInt64(index)) == 0 {
                    guard let value = try decodeColumn(handle, meta, index: index, tags: tags) else {
                        nulls |= 1 << UInt64(index)
                        nullCount += 1
                        continue
                    }
                    fields.values[meta.templateIndex[index]] = value
                }
                if nullCount > 0 {
                    for index in 0..<count where nulls & (1 << UInt64(index)) != 0 {
                        fields.removeValue(forKey: meta.fields[index])
                    }
                }
                return Record(id: id, fields: fields)
            }
        }
        // minimumCapacity: reserveCapacity on an empty dictionary took an unspecialized path (~0.6 µs per 10-field record).
        var fields = [String: FieldValue](minimumCapacity: meta.fields.count)
        for index in meta.fields.indices {
            guard let value = try decodeColumn(row.handle, meta, index: index, tags: tags) else { continue }
            fields[meta.fields[index]] = value
        }
        return Record(id: id, fields: fields)
    }

    /// The id of a row of `meta.selectSQL`. - Throws: `.corrupted` when it is neither an integer nor text.
    static func decodeID(_ row: Statement, _ meta: CollectionMeta) throws -> RecordID {
        switch row.type(0) {
        case SQLITE_INTEGER: return .int(row.int(0))
        case SQLITE_TEXT: return .string(row.text(0))
        default: throw DepotError(.corrupted, "A row of '\(meta.name)' has an id that is neither an integer nor text.", collection: meta.name.rawValue)
        }
    }

    /// The type tags of a row (column → tag): `b` for a bool stored as an integer, `j` for an
    /// array or object stored as JSON text. Empty when the row has none.
    static func decodeTags(_ row: Statement) -> [String: UInt8] {
        guard row.type(1) == SQLITE_TEXT, let pointer = sqlite3_column_text(row.handle, 1) else { return [:] }
        let bytes = UnsafeBufferPointer(start: pointer, count: Int(sqlite3_column_bytes(row.handle, 1)))
        let connection = row.connection
        if let last = connection.lastTags, last.text.elementsEqual(bytes) { return last.tags }
        var tags: [String: UInt8] = [:]
        for entry in String(decoding: bytes, as: UTF8.self).split(separator: ",") {
            guard let colon = entry.lastIndex(of: ":"), let tag = entry[entry.index(after: colon)...].utf8.first else { continue }
            tags[String(entry[..<colon])] = tag
        }
        if bytes.count <= 4096 { connection.lastTags = (Array(bytes), tags) }
        return tags
    }

    /// The value of field `meta.fields[index]` in the current row of a `meta.selectSQL`
    /// statement; `nil` when NULL (a top-level null is an absent field).
    /// - Throws: `.corrupted` for unreadable nested JSON.
    @inline(__always)
    static func decodeColumn(_ handle: OpaquePointer, _ meta: CollectionMeta, index: Int, tags: [String: UInt8]) throws -> FieldValue? {
        let column = Int32(index + 2)
        switch sqlite3_column_type(handle, column) {
        case SQLITE_NULL: return nil
        case SQLITE_INTEGER:
            let i = sqlite3_column_int64(handle, column)
            if !tags.isEmpty, tags[meta.columns[index]] == UInt8(ascii: "b") { return .bool(i != 0) }
            return .int(i)
        case SQLITE_FLOAT: return .double(sqlite3_column_double(handle, column))
        case SQLITE_TEXT:
            let text = Statement.text(handle, column)
            if !tags.isEmpty, tags[meta.columns[index]] == UInt8(ascii: "j") { return try NestedJSON.decode(text, statement: handle) }
            return .string(text)
        default: return .bytes(Statement.blob(handle, column))
        }
    }

    /// The parameters of `record` for `meta.insertSQL` or `meta.updateSQL` (numbered alike:
    /// id, type tags, columns); `nil` when a field has no column yet.
    static func parameters(_ record: Record, _ meta: CollectionMeta, id: SQLValue) -> [SQLValue]? {
        var values = [SQLValue](repeating: .null, count: meta.fields.count + 2)
        var tags = ""
        for (field, value) in record.fields {
            guard let index = meta.position[field] else { return nil }
            switch value {
            case .bool: tags += meta.columns[index] + ":b,"
            case .array, .object: tags += meta.columns[index] + ":j,"
            default: break
            }
            values[index + 2] = SQLiteQueryTranslator.sqlValue(value)
        }
        values[1] = tags.isEmpty ? .null : .text("," + tags)
        values[0] = id
        return values
    }

    // MARK: Writing

    func prepare(_ schema: CollectionSchema) throws {
        try checkWritable()
        try schema.validate()
        try withSavepoint {
            var meta: CollectionMeta
            if let existing = catalog.collections[schema.name] {
                guard existing.idKind == schema.idKind else {
                    throw DepotError(.schemaMismatch, "Collection '\(schema.name)' uses \(existing.idKind) ids, not \(schema.idKind).", collection: schema.name.rawValue)
                }
                meta = existing
            } else {
                meta = try createCollection(schema.name, kind: schema.idKind)
            }
            let wanted = Set(schema.uniqueConstraints.flatMap(\.fields) + schema.indexes.flatMap(\.fields))
            meta = try ensureColumns(wanted, meta)
            var info = meta.info
            // Drop SQL indexes whose definition is gone or changed.
            let oldUnique = Dictionary(meta.info.uniqueConstraints.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
            let oldIndexes = Dictionary(meta.info.indexes.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
            let newUnique = Dictionary(schema.uniqueConstraints.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
            let newIndexes = Dictionary(schema.indexes.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
            for (name, sqlName) in info.sqlIndexes {
                let keep = (oldUnique[name] != nil && oldUnique[name] == newUnique[name]) || (oldIndexes[name] != nil && oldIndexes[name] == newIndexes[name])
                if !keep {
                    try connection.execute("DROP INDEX IF EXISTS \(quoteIdentifier(sqlName))")
                    info.sqlIndexes[name] = nil
                }
            }
            var taken = try SQLNaming.schemaNames(connection)
            for constraint in schema.uniqueConstraints where info.sqlIndexes[constraint.name] == nil {
                let sqlName = SQLNaming.fresh(meta.table + "__" + constraint.name, taken: taken)
                taken.insert(sqlName.lowercased())
                var terms: [String] = []
                for field in constraint.fields {
                    guard let column = meta.position[field].map({ meta.columns[$0] }) else { continue }
                    terms.append(quoteIdentifier(column))
                    terms.append(Self.uniqueKindExpression(column))
                }
                do {
                    try connection.execute("CREATE UNIQUE INDEX \(quoteIdentifier(sqlName)) ON \(meta.quotedTable)(\(terms.joined(separator: ", ")))")
                } catch let error as DepotError where error.code == .uniqueViolation {
                    throw DepotError(
                        .uniqueViolation, "Existing records break unique constraint '\(constraint.name)'.",
                        collection: schema.name.rawValue, constraint: constraint.name, cause: error.cause, detail: error.detail)
                }
                info.sqlIndexes[constraint.name] = sqlName
            }
            for index in schema.indexes where info.sqlIndexes[index.name] == nil {
                let sqlName = SQLNaming.fresh(meta.table + "__" + index.name, taken: taken)
                taken.insert(sqlName.lowercased())
                let columns = index.fields.compactMap { meta.position[$0].map { quoteIdentifier(meta.columns[$0]) } }
                try connection.execute("CREATE INDEX \(quoteIdentifier(sqlName)) ON \(meta.quotedTable)(\(columns.joined(separator: ", ")))")
                info.sqlIndexes[index.name] = sqlName
            }
            info.uniqueConstraints = schema.uniqueConstraints
            info.indexes = schema.indexes
            try save(meta.replacing(info: info))
        }
    }

    /// The expression a unique index adds after each column so that values SQLite would
    /// call equal but Depot would not (a bool and an int, JSON text and a string) differ.
    /// The tag patterns are built from validated column names, not from record values.
    static func uniqueKindExpression(_ column: String) -> String {
        let tags = "COALESCE(\(quoteIdentifier(SQLiteLayout.tagColumn)), '')"
        return "(CASE WHEN instr(\(tags), \(quoteLiteral("," + column + ":b,"))) > 0 THEN 1 WHEN instr(\(tags), \(quoteLiteral("," + column + ":j,"))) > 0 THEN 2 ELSE 0 END)"
    }

    func dropCollection(_ collection: CollectionName) throws -> Bool {
        try checkWritable()
        guard let meta = catalog.collections[collection] else { return false }
        try withSavepoint {
            try connection.execute("DROP TABLE IF EXISTS \(meta.quotedTable)")
            if meta.info.idMarks == true {
                try connection.run(#"DELETE FROM "_depotsys_idmarks" WHERE tbl = ?"#, [.text(meta.table)])
            }
            try connection.run(#"DELETE FROM "_depotsys_collections" WHERE name = ?"#, [.text(collection.rawValue)])
            try bumpGeneration()
            catalog.collections[collection] = nil
        }
        return true
    }

    /// The one record write of the contract: each mode has its own statements below.
    @discardableResult
    func write(_ record: Record, as mode: RecordWriteMode, into collection: CollectionName) throws -> WriteOutcome {
        let record = record.withoutNulls
        switch mode {
        case .insert: try insert(record, into: collection); return .inserted
        case .update: try update(record, in: collection); return .updated
        case .save: return try save(record, into: collection)
        }
    }

    private func insert(_ record: Record, into collection: CollectionName) throws {
        let meta = try metaForWrite(collection, kind: record.id.kind, fields: record.fields.keys)
        let id = Self.idValue(record.id)
        if meta.checksIDBeforeInsert, try exists(id, meta) {
            throw DepotError(.alreadyExists, "A record with id \(record.id) exists.", collection: collection.rawValue, id: record.id)
        }
        let (current, values) = try bound(record, meta, id: id)
        try runWrite(current.insertSQL, values, current, id: record.id)
    }

    func insert(fields: [String: FieldValue], into collection: CollectionName) throws -> RecordID {
        let record = Record(id: .int(0), fields: fields).withoutNulls
        let meta = try metaForWrite(collection, kind: .int, fields: record.fields.keys)
        if let baseSQL = meta.assignedBaseSQL {
            guard case .int(let base) = try connection.scalar(baseSQL) else {
                throw DepotError(.internal, "The largest id of '\(collection)' could not be read.", collection: collection.rawValue)
            }
            guard base < Int64.max else {
                throw DepotError(.invalidValue, "No integer ids are left in '\(collection)'.", collection: collection.rawValue)
            }
            let id = base + 1
            let (current, values) = try bound(record, meta, id: .int(id))
            try runWrite(current.insertSQL, values, current, id: .int(id))
            return .int(id)
        }
        // A table of layout 1: AUTOINCREMENT assigns the id.
        do {
            let (current, values) = try bound(record, meta, id: .null)
            try runWrite(current.insertSQL, values, current, id: nil)
        } catch let error as DepotError where error.code == .io && (error.cause as? SQLiteResult)?.primaryCode == SQLITE_FULL {
            throw DepotError(.invalidValue, "No integer ids are left in '\(collection)'.", collection: collection.rawValue, cause: error.cause)
        }
        return .int(connection.lastInsertRowID)
    }

    /// Inserts, updates or saves one record whose fields are bound to the statement as they
    /// are encoded (``SQLiteFieldSink``): the INSERT, the UPDATE or, for a save, the upsert,
    /// whose outcome a lookup of the id tells. The record path takes over, encoding the model
    /// again, when the collection does not exist yet, when a field has no column yet, or when
    /// the id is of the wrong kind.
    func write(_ mode: RecordWriteMode, into collection: CollectionName, _ encode: (DriverFieldSink) throws -> RecordID) throws -> WriteOutcome {
        try checkWritable()
        let sink: SQLiteFieldSink
        if let cached = fieldSink, cached.meta.name == collection {
            sink = cached
        } else {
            guard let meta = catalog.collections[collection] else { return try writeRecord(mode, into: collection, encode) }
            sink = SQLiteFieldSink(meta: meta, connection: connection)
            fieldSink = sink
        }
        if let outcome = try writeBound(mode, sink, encode) { return outcome }
        return try writeRecord(mode, into: collection, encode)
    }

    /// ``write(_:into:_:)`` through `sink`: `nil` when the record needs the record path, the
    /// statement then abandoned.
    private func writeBound(_ mode: RecordWriteMode, _ sink: SQLiteFieldSink, _ encode: (DriverFieldSink) throws -> RecordID) throws -> WriteOutcome? {
        let meta = sink.meta
        let sql = switch mode {
        case .insert: meta.insertSQL
        case .update: meta.updateSQL
        case .save: meta.upsertSQL
        }
        let statement = try connection.statement(sql)
        // Held bound while the id is looked up: no statement the lookup prepares may
        // finalize it to make room in the cache.
        connection.pinned = statement.handle
        sink.begin(statement)
        var clearing = true
        defer {
            sink.end()
            connection.pinned = nil
            statement.finish(clearing: clearing)
        }
        let id = try encode(sink)
        guard !sink.hasExtra, id.kind == meta.idKind else { return nil }
        let idValue = Self.idValue(id)
        let outcome: WriteOutcome
        switch mode {
        case .insert:
            if meta.checksIDBeforeInsert, try exists(idValue, meta) {
                throw DepotError(.alreadyExists, "A record with id \(id) exists.", collection: meta.name.rawValue, id: id)
            }
            outcome = .inserted
        case .update:
            outcome = .updated
        case .save:
            outcome = try exists(idValue, meta) ? .updated : .inserted
        }
        let changed = try mappingWriteErrors(meta, id: id) { () throws -> Int in
            clearing = try sink.complete(id: idValue)
            while try statement.step() {}
            return connection.changes
        }
        // The UPDATE's changed-row count says whether the record exists: no lookup first.
        if mode == .update, changed == 0 {
            throw DepotError(.notFound, "No record with id \(id).", collection: meta.name.rawValue, id: id)
        }
        return outcome
    }

    private func update(_ record: Record, in collection: CollectionName) throws {
        try checkWritable()
        if catalog.collections[collection] == nil {
            throw DepotError(.notFound, "No record with id \(record.id).", collection: collection.rawValue, id: record.id)
        }
        let meta = try metaForWrite(collection, kind: record.id.kind, fields: record.fields.keys)
        let id = Self.idValue(record.id)
        if let values = Self.parameters(record, meta, id: id) {
            // Every field has a column: the UPDATE's changed-row count says whether the
            // record exists, with no lookup first.
            guard try runWrite(meta.updateSQL, values, meta, id: record.id) > 0 else {
                throw DepotError(.notFound, "No record with id \(record.id).", collection: collection.rawValue, id: record.id)
            }
            return
        }
        // New fields: check first, so a missing record adds no columns.
        guard try exists(id, meta) else {
            throw DepotError(.notFound, "No record with id \(record.id).", collection: collection.rawValue, id: record.id)
        }
        let (current, values) = try bound(record, meta, id: id)
        try runWrite(current.updateSQL, values, current, id: record.id)
    }

    private func save(_ record: Record, into collection: CollectionName) throws -> WriteOutcome {
        let meta = try metaForWrite(collection, kind: record.id.kind, fields: record.fields.keys)
        let id = Self.idValue(record.id)
        if try exists(id, meta) {
            let (current, values) = try bound(record, meta, id: id)
            try runWrite(current.updateSQL, values, current, id: record.id)
            return .updated
        }
        let (current, values) = try bound(record, meta, id: id)
        try runWrite(current.insertSQL, values, current, id: record.id)
        return .inserted
    }

    func delete(_ id: RecordID, from collection: CollectionName) throws -> Bool {
        try checkWritable()
        guard let meta = catalog.collections[collection], id.kind == meta.idKind else { return false }
        return try connection.run(meta.deleteSQL, [Self.idValue(id)]) > 0
    }

    /// One `DELETE … RETURNING "id"` statement: the filter translated as a query's is.
    func deleteReturningIDs(matching filter: Filter, from collection: CollectionName) throws -> [RecordID] {
        try checkWritable()
        try filter.validate()
        guard let meta = catalog.collections[collection] else { return [] }
        var translator = SQLiteQueryTranslator(meta: meta)
        let condition = translator.filter(filter)
        var sql = "DELETE FROM \(meta.quotedTable)"
        if condition != "1" { sql += " WHERE " + condition }
        sql += " RETURNING \"id\""
        var ids: [RecordID] = []
        try connection.query(sql, translator.parameters) { row in
            switch row.value(0) {
            case .int(let i): ids.append(.int(i))
            case .text(let text): ids.append(.string(text))
            default: throw DepotError(.corrupted, "A row of '\(collection)' has an id that is neither an integer nor text.", collection: collection.rawValue)
            }
            return true
        }
        ids.sort()
        return ids
    }

    // MARK: Helpers

    private func exists(_ id: SQLValue, _ meta: CollectionMeta) throws -> Bool {
        try connection.scalar(meta.existsSQL, [id]) != nil
    }

    /// Runs an INSERT or UPDATE, naming the unique constraint a violation broke.
    @discardableResult
    private func runWrite(_ sql: String, _ parameters: [SQLValue], _ meta: CollectionMeta, id: RecordID?) throws -> Int {
        try runWrite(sql, meta, id: id) { try $0.bind(parameters) }
    }

    /// Runs an INSERT or UPDATE whose parameters `bind` sets, naming the unique constraint a
    /// violation broke. Returns the number of rows changed.
    @discardableResult
    private func runWrite(_ sql: String, _ meta: CollectionMeta, id: RecordID?, binding bind: (Statement) throws -> Void) throws -> Int {
        try mappingWriteErrors(meta, id: id) { try connection.run(sql, binding: bind) }
    }

    /// Runs a write, turning SQLite's constraint errors into Depot's: a unique violation
    /// naming the constraint, an existing id naming the record.
    func mappingWriteErrors<T>(_ meta: CollectionMeta, id: RecordID?, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as DepotError where error.code == .uniqueViolation {
            let message = (error.cause as? SQLiteResult)?.message ?? ""
            let constraint = SQLiteErrorMapping.indexName(inUniqueMessage: message).flatMap { meta.constraintName(forSQLIndex: $0) }
            let fields = constraint.flatMap { name in meta.info.uniqueConstraints.first { $0.name == name }?.fields }
            throw DepotError(
                .uniqueViolation,
                "Another record already has these values for unique constraint '\(constraint ?? "?")'" + (fields.map { " (\($0.joined(separator: ", ")))." } ?? "."),
                collection: meta.name.rawValue, id: id, constraint: constraint, cause: error.cause, detail: error.detail)
        } catch let error as DepotError where error.code == .alreadyExists {
            let message = id.map { "A record with id \($0) exists." } ?? error.message
            throw DepotError(.alreadyExists, message, collection: meta.name.rawValue, id: id, cause: error.cause, detail: error.detail)
        }
    }

    /// The collection for a write of an id of `kind` with these fields: created if missing,
    /// with a column for every field.
    private func metaForWrite(_ name: CollectionName, kind: IDKind, fields: Dictionary<String, FieldValue>.Keys) throws -> CollectionMeta {
        try checkWritable()
        var meta: CollectionMeta
        if let existing = catalog.collections[name] {
            guard existing.idKind == kind else {
                throw DepotError(.invalidValue, "Collection '\(name)' uses \(existing.idKind) ids; got a \(kind) id.", collection: name.rawValue)
            }
            meta = existing
            return existing
        } else {
            for field in fields { try FieldName.validate(field, collection: name.rawValue) }
            meta = try createCollection(name, kind: kind)
        }
        meta = try ensureColumns(Set(fields), meta)
        try save(meta)
        return meta
    }

    /// The parameters for writing `record`, adding columns first for fields that have none.
    private func bound(_ record: Record, _ meta: CollectionMeta, id: SQLValue) throws -> (CollectionMeta, [SQLValue]) {
        if let values = Self.parameters(record, meta, id: id) { return (meta, values) }
        let extended = try ensureColumns(Set(record.fields.keys), meta)
        try save(extended)
        guard let values = Self.parameters(record, extended, id: id) else {
            throw DepotError(.internal, "A column is missing after it was added.", collection: meta.name.rawValue)
        }
        return (extended, values)
    }

    /// Creates the table for a new collection (not yet saved in the catalog).
    private func createCollection(_ name: CollectionName, kind: IDKind) throws -> CollectionMeta {
        let taken = try SQLNaming.schemaNames(connection)
        var base = name.rawValue
        if base.lowercased().hasPrefix("sqlite_") { base = "c_" + base }
        let table = SQLNaming.fresh(base, taken: taken)
        let idColumn = kind == .int ? "\"id\" INTEGER PRIMARY KEY" : "\"id\" TEXT PRIMARY KEY NOT NULL"
        let suffix = kind == .int ? "" : " WITHOUT ROWID"
        try connection.execute("CREATE TABLE \(quoteIdentifier(table))(\(idColumn), \(quoteIdentifier(SQLiteLayout.tagColumn)) TEXT)\(suffix)")
        var info = CollectionInfo(uniqueConstraints: [], indexes: [], sqlIndexes: [:], columns: [:])
        if kind == .int {
            try createIDMarkTriggers(table, taken: taken.union([table.lowercased()]))
            info.idMarks = true
        }
        let meta = CollectionMeta(name: name, table: table, idKind: kind, info: info)
        try connection.run(
            #"INSERT INTO "_depotsys_collections"(name, tbl, id_kind, info) VALUES (?, ?, ?, '{}')"#,
            [.text(name.rawValue), .text(table), .text(kind.rawValue)])
        return meta
    }

    /// Keeps the id mark of the integer-id table `table` (which has no `AUTOINCREMENT`): when
    /// a DELETE, or an UPDATE of the id, takes away the table's largest id, the mark in
    /// ``SQLiteLayout/idMarksTable`` rises to it, so an assigned id stays greater than every
    /// id the table has had (Docs/SQLiteDriver.md, "On-disk layout"). Inserts pay nothing; each
    /// deleted row pays a lookup of the largest id. Raises the store to layout 2.
    private func createIDMarkTriggers(_ table: String, taken: Set<String>) throws {
        try connection.execute(SQLiteLayout.createIDMarksSQL)
        try connection.execute(#"UPDATE "_depotsys_meta" SET value = 2 WHERE key = 'format' AND value < 2"#)
        try connection.run(#"DELETE FROM "_depotsys_idmarks" WHERE tbl = ?"#, [.text(table)])
        let quotedTable = quoteIdentifier(table)
        let raise = "INSERT INTO \"\(SQLiteLayout.idMarksTable)\"(tbl, mark) VALUES (\(quoteLiteral(table)), old.\"id\") "
            + "ON CONFLICT(tbl) DO UPDATE SET mark = max(mark, excluded.mark);"
        let largestGone = "(SELECT max(\"id\") FROM \(quotedTable)) IS NULL OR old.\"id\" > (SELECT max(\"id\") FROM \(quotedTable))"
        let onDelete = SQLNaming.fresh(table + "__idmark_d", taken: taken)
        let onUpdate = SQLNaming.fresh(table + "__idmark_u", taken: taken.union([onDelete.lowercased()]))
        try connection.execute("CREATE TRIGGER \(quoteIdentifier(onDelete)) AFTER DELETE ON \(quotedTable) WHEN \(largestGone) BEGIN \(raise) END")
        try connection.execute("CREATE TRIGGER \(quoteIdentifier(onUpdate)) AFTER UPDATE OF \"id\" ON \(quotedTable) WHEN new.\"id\" IS NOT old.\"id\" AND (\(largestGone)) BEGIN \(raise) END")
    }

    /// Adds a column for every field that has none (validating the field name first).
    func ensureColumns(_ fields: Set<String>, _ meta: CollectionMeta) throws -> CollectionMeta {
        let missing = fields.filter { meta.position[$0] == nil }.sorted()
        if missing.isEmpty { return meta }
        var info = meta.info
        for field in missing { try FieldName.validate(field, collection: meta.name.rawValue) }
        var taken = Set(["id", SQLiteLayout.tagColumn] + meta.columns.map { $0.lowercased() })
        for field in missing {
            let column = SQLNaming.fresh(field, taken: taken)
            taken.insert(column.lowercased())
            try connection.execute("ALTER TABLE \(meta.quotedTable) ADD COLUMN \(quoteIdentifier(column))")
            info.columns[field] = column
        }
        return meta.replacing(info: info)
    }

    /// Stores a collection's metadata and bumps the catalog generation.
    func save(_ meta: CollectionMeta) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let info = String(decoding: try encoder.encode(meta.info), as: UTF8.self)
        try connection.run(#"UPDATE "_depotsys_collections" SET info = ? WHERE name = ?"#, [.text(info), .text(meta.name.rawValue)])
        try bumpGeneration()
        catalog.collections[meta.name] = meta
    }

    private func bumpGeneration() throws {
        try connection.run(SQLiteLayout.bumpGenerationSQL)
        catalog.generation = try Catalog.currentGeneration(connection)
        catalogChanged = true
    }

    private var savepointDepth = 0

    /// Runs `body` in a savepoint: on a throw, the database and the catalog are as before.
    private func withSavepoint(_ body: () throws -> Void) throws {
        let saved = catalog
        let savedChanged = catalogChanged
        savepointDepth += 1
        let name = "depot_sp\(savepointDepth)"
        defer { savepointDepth -= 1 }
        try connection.execute("SAVEPOINT \(name)")
        do {
            try body()
            try connection.execute("RELEASE \(name)")
        } catch {
            try? connection.execute("ROLLBACK TO \(name)")
            try? connection.execute("RELEASE \(name)")
            catalog = saved
            catalogChanged = savedChanged
            throw error
        }
    }
}
