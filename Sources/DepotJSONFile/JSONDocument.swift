import DepotCore

/// The store file: one JSON object, the shape of a json-server `db.json`.
///
/// ```json
/// {
///   "_depot": {"collections": {"users": {"idKind": "int", "indexes": [], "lastAssignedID": 2, "unique": []}}, "format": 1},
///   "users": [
///     {"id": 1, "name": "Ada"},
///     {"id": 2, "name": "Grace"}
///   ]
/// }
/// ```
///
/// `_depot` comes first, then the collections in byte order of their names; records are
/// ordered by id, `id` first and the other fields in byte order. Decoding accepts what a
/// person may write by hand: any whitespace and member order, a missing `_depot` (id kinds
/// are then inferred from the records), a leading UTF-8 byte-order mark, and an empty file
/// (an empty store). See Docs/JSONFileDriver.md.
enum JSONDocument {
    /// The format version this driver writes; a file with a higher one is refused.
    static let formatVersion: Int64 = 1
    /// The reserved top-level key holding Depot's metadata.
    static let metadataKey = "_depot"

    // MARK: Encoding

    /// The serialized records of one collection, in id order.
    struct CollectionBytes {
        /// The records, in id order: what the committed state's ``JSONStoreState/order``
        /// holds, so queries in id order neither sort nor look ids up.
        var records: [Record] = []
        /// `chunks[i]` is the text of `records[i]`, without separators.
        var chunks: [[UInt8]] = []
    }

    /// The serialized records of a state, by collection, so a commit re-serializes only the
    /// records it touched (and needs no sort). Valid only for the state (and `pretty`
    /// setting) it was made with.
    typealias RecordBytes = [CollectionName: CollectionBytes]

    /// The whole file for `state`.
    static func encode(_ state: JSONStoreState, pretty: Bool, capacity: Int = 1 << 16) -> [UInt8] {
        encode(state, pretty: pretty, capacity: capacity, reusing: [:], touched: [:], replaced: []).bytes
    }

    /// The whole file for `state`, reusing the bytes in `cache` (made for the state before
    /// a transaction) for every record not in `touched` of every collection not in
    /// `replaced`; returns the file and the cache for `state`.
    static func encode(
        _ state: JSONStoreState, pretty: Bool, capacity: Int, reusing cache: RecordBytes,
        touched: [CollectionName: Set<RecordID>], replaced: Set<CollectionName>
    ) -> (bytes: [UInt8], cache: RecordBytes) {
        var w = JSONWriter(pretty: pretty, capacity: capacity)
        var newCache: RecordBytes = [:]
        w.byte(0x7B)
        lineBreak(&w, level: 1)
        w.string(metadataKey)
        w.colon()
        w.value(metadata(state), level: 1)
        for name in state.collections.keys.sorted() {
            guard let collection = state.collections[name] else { continue }
            w.byte(0x2C)
            lineBreak(&w, level: 1)
            w.string(name.rawValue)
            w.colon()
            if collection.records.isEmpty {
                w.raw("[]")
                continue
            }
            let mark = w.bytes.count
            var encoded = CollectionBytes()
            if let old = replaced.contains(name) ? nil : cache[name] {
                encoded = merge(old, touched: touched[name] ?? [], collection, &w)
            }
            if encoded.records.count != collection.records.count {
                // No usable cache (or, defensively, one out of step): serialize it all.
                w.bytes.removeSubrange(mark...)
                encoded = CollectionBytes()
                w.byte(0x5B)
                for (id, fields) in collection.records.sorted(by: { $0.key < $1.key }) {
                    append(&w, &encoded, Record(id: id, fields: fields))
                }
            }
            newCache[name] = encoded
            lineBreak(&w, level: 1)
            w.byte(0x5D)
        }
        lineBreak(&w, level: 0)
        w.byte(0x7D)
        w.byte(0x0A)
        return (w.bytes, newCache)
    }

    /// Writes `[` and the records of `collection` in id order, walking the previous order in
    /// `old` and serializing only the `touched` ids (new, changed or deleted).
    private static func merge(_ old: CollectionBytes, touched: Set<RecordID>, _ collection: InMemoryCollection, _ w: inout JSONWriter) -> CollectionBytes {
        var encoded = CollectionBytes()
        encoded.records.reserveCapacity(collection.records.count)
        encoded.chunks.reserveCapacity(collection.records.count)
        // What goes before every record but the first: a comma and the record's line break.
        var separator: [UInt8] = [0x2C]
        lineBreak(&separator, indent: w.indent, level: 2)
        w.byte(0x5B)
        // The untouched records between two touched ones go over as a run: their place is
        // found by binary search (the records are in id order), their texts are copied.
        var next = 0
        for id in touched.sorted() {
            let end = firstIndex(in: old.records, from: next, notBelow: id)
            appendKept(&w, &encoded, old, next..<end, separator: separator)
            next = end
            if next < old.records.count, old.records[next].id == id { next += 1 }
            append(&w, &encoded, id, collection)
        }
        appendKept(&w, &encoded, old, next..<old.records.count, separator: separator)
        return encoded
    }

    /// The first index at or after `low` whose record's id is not below `id` (`records` are
    /// in id order).
    private static func firstIndex(in records: [Record], from low: Int, notBelow id: RecordID) -> Int {
        var low = low
        var high = records.count
        while low < high {
            let mid = low + (high - low) / 2
            if records[mid].id < id { low = mid + 1 } else { high = mid }
        }
        return low
    }

    /// Appends the untouched records `range` of `old` with their cached texts, each after
    /// its separator (`separator`, or only the line break before the collection's first).
    private static func appendKept(_ w: inout JSONWriter, _ encoded: inout CollectionBytes, _ old: CollectionBytes, _ range: Range<Int>, separator: [UInt8]) {
        guard !range.isEmpty else { return }
        for (n, chunk) in old.chunks[range].enumerated() {
            if n == 0 && encoded.records.isEmpty {
                w.bytes.append(contentsOf: separator[1...])
            } else {
                w.bytes.append(contentsOf: separator)
            }
            w.bytes.append(contentsOf: chunk)
        }
        encoded.records.append(contentsOf: old.records[range])
        encoded.chunks.append(contentsOf: old.chunks[range])
    }

    /// Appends the record `id` of `collection` freshly serialized (nothing if it no longer
    /// exists) with the separator before it.
    private static func append(_ w: inout JSONWriter, _ encoded: inout CollectionBytes, _ id: RecordID, _ collection: InMemoryCollection) {
        guard let fields = collection.records[id] else { return }
        append(&w, &encoded, Record(id: id, fields: fields))
    }

    /// Appends `record` freshly serialized, with the separator before it.
    private static func append(_ w: inout JSONWriter, _ encoded: inout CollectionBytes, _ record: Record) {
        if !encoded.records.isEmpty { w.byte(0x2C) }
        lineBreak(&w, level: 2)
        let start = w.bytes.count
        self.record(&w, id: record.id, fields: record.fields, level: 2)
        encoded.records.append(record)
        encoded.chunks.append(Array(w.bytes[start...]))
    }

    /// A line break, indented when pretty: the top two levels always break, so each record
    /// is on a line of its own (small diffs) even when not pretty.
    private static func lineBreak(_ w: inout JSONWriter, level: Int) {
        lineBreak(&w.bytes, indent: w.indent, level: level)
    }

    /// ``lineBreak(_:level:)`` into `bytes`, for a writer whose indent is `indent`.
    private static func lineBreak(_ bytes: inout [UInt8], indent: Int?, level: Int) {
        bytes.append(0x0A)
        if let indent, level > 0 { bytes.append(contentsOf: repeatElement(0x20, count: indent * level)) }
    }

    private static func record(_ w: inout JSONWriter, id: RecordID, fields: [String: FieldValue], level: Int) {
        w.byte(0x7B)
        w.newline(level: level + 1)
        w.string("id")
        w.colon()
        switch id {
        case .int(let i): w.int(i)
        case .string(let s): w.string(s)
        }
        for (_, key, value) in JSONWriter.sortedMembers(fields) {
            w.byte(0x2C)
            w.newline(level: level + 1)
            w.string(key)
            w.colon()
            w.value(value, level: level + 1)
        }
        w.newline(level: level)
        w.byte(0x7D)
    }

    private static func metadata(_ state: JSONStoreState) -> FieldValue {
        var collections: [String: FieldValue] = [:]
        for (name, collection) in state.collections {
            let schema = collection.schema
            var entry: [String: FieldValue] = [
                "idKind": .string(schema.idKind.rawValue),
                "unique": .array(schema.uniqueConstraints.map { ["name": .string($0.name), "fields": .array($0.fields.map(FieldValue.string))] }),
                "indexes": .array(schema.indexes.map { ["name": .string($0.name), "fields": .array($0.fields.map(FieldValue.string))] }),
            ]
            if schema.idKind == .int { entry["lastAssignedID"] = .int(collection.lastAssignedID) }
            collections[name.rawValue] = .object(entry)
        }
        return ["format": .int(formatVersion), "collections": .object(collections)]
    }

    // MARK: Decoding

    /// A record read from the file, with where it started (for error messages).
    private struct Located {
        var record: Record
        var offset: Int
    }

    /// Parses a whole file.
    /// - Throws: `.corrupted` for text that is not JSON, `.decoding` for JSON of the wrong
    ///   shape (duplicate ids, bad names, wrong value types, broken unique constraints),
    ///   `.schemaMismatch` for a newer format version; each names the collection and the
    ///   line, column and byte offset.
    static func decode(_ bytes: [UInt8], maximumDepth: Int = FieldValue.maximumDepth) throws -> JSONStoreState {
        try bytes.withUnsafeBufferPointer { buffer in
            var reader = JSONReader(buffer, maximumDepth: maximumDepth, reporting: .file)
            if buffer.count >= 3, buffer[0] == 0xEF, buffer[1] == 0xBB, buffer[2] == 0xBF { reader.position = 3 }
            if reader.atEnd() { return JSONStoreState() }
            guard reader.peek() == 0x7B else {
                throw reader.failure(.decoding, "the file must hold one JSON object with one key per collection", at: reader.position)
            }
            var metadata: (value: FieldValue, offset: Int)?
            var data: [(name: CollectionName, offset: Int, records: [Located])] = []
            try reader.readObject { reader, key, keyOffset in
                if key == metadataKey {
                    reader.context = metadataKey
                    let offset = reader.position
                    metadata = (try reader.readValue(depth: 0), offset)
                    reader.context = nil
                    return
                }
                guard let name = try? CollectionName(validating: key) else {
                    throw reader.failure(.decoding, "top-level key \(JSONReader.quoted(key)) is not a valid collection name", at: keyOffset)
                }
                reader.context = key
                guard reader.peek() == 0x5B else {
                    throw reader.failure(.decoding, "a collection must be an array of records", at: reader.position)
                }
                var records: [Located] = []
                try reader.readArray { reader, offset in
                    records.append(Located(record: try readRecord(&reader, index: records.count), offset: offset))
                }
                data.append((name, keyOffset, records))
                reader.context = nil
            }
            guard reader.atEnd() else { throw reader.syntax("unexpected text after the top-level object") }

            let schemas = try readMetadata(metadata, buffer)
            var state = JSONStoreState()
            for (name, schema) in schemas { state.collections[name] = InMemoryCollection(schema: schema.schema) }
            for (name, _, records) in data {
                reader.context = name.rawValue
                let idKind = schemas[name]?.schema.idKind ?? records.first?.record.id.kind ?? .int
                var collection = state.collections[name] ?? InMemoryCollection(schema: CollectionSchema(name: name, idKind: idKind))
                collection.lastAssignedID = schemas[name]?.lastAssignedID ?? 0
                for located in records {
                    let id = located.record.id
                    guard id.kind == idKind else {
                        throw reader.failure(.decoding, "record \(id) has a \(id.kind) id; the collection uses \(idKind) ids", at: located.offset)
                    }
                    guard collection.records[id] == nil else {
                        throw reader.failure(.decoding, "two records have id \(id)", at: located.offset)
                    }
                    collection.records[id] = located.record.fields
                    if case .int(let i) = id, i > collection.lastAssignedID { collection.lastAssignedID = i }
                }
                do {
                    try collection.rebuildUniqueIndexes()
                } catch let error as DepotError {
                    let offset = records.first { $0.record.id == error.id }?.offset ?? 0
                    throw reader.failure(.decoding, "records break unique constraint '\(error.constraint ?? "?")' (record \(error.id.map(String.init(describing:)) ?? "?"))", at: offset)
                }
                state.collections[name] = collection
            }
            return state
        }
    }

    /// One record: an object with an `id` (int or string) and valid top-level field names.
    private static func readRecord(_ reader: inout JSONReader, index: Int) throws -> Record {
        let start = reader.position
        guard reader.peek() == 0x7B else {
            throw reader.failure(.decoding, "record \(index + 1) is not an object", at: start)
        }
        var id: RecordID?
        var fields: [String: FieldValue] = [:]
        try reader.readObject { reader, key, keyOffset in
            if key == "id" {
                let valueOffset = reader.position
                let value = try reader.readValue(depth: 0)
                guard let parsed = RecordID(value) else {
                    throw reader.failure(.decoding, "record \(index + 1) has an id that is neither an integer nor a string", at: valueOffset)
                }
                do { try parsed.validate() } catch {
                    throw reader.failure(.decoding, "record \(index + 1) has a string id that is empty, longer than 512 bytes or holds NUL", at: valueOffset)
                }
                id = parsed
                return
            }
            guard FieldName.isValid(key) else {
                throw reader.failure(.decoding, "record \(index + 1) has field \(JSONReader.quoted(key)), which is not a valid field name", at: keyOffset)
            }
            let value = try reader.readValue(depth: 0)
            if !value.isNull { fields[key] = value }
        }
        guard let id else { throw reader.failure(.decoding, "record \(index + 1) has no \"id\"", at: start) }
        return Record(id: id, fields: fields)
    }

    private struct StoredSchema {
        var schema: CollectionSchema
        var lastAssignedID: Int64
    }

    /// Reads the `_depot` metadata.
    private static func readMetadata(_ metadata: (value: FieldValue, offset: Int)?, _ buffer: UnsafeBufferPointer<UInt8>) throws -> [CollectionName: StoredSchema] {
        guard let (value, offset) = metadata else { return [:] }
        var reader = JSONReader(buffer, reporting: .file)
        reader.context = metadataKey
        func bad(_ message: String) -> DepotError { reader.failure(.decoding, "Depot's metadata is malformed: \(message)", at: offset) }
        guard case .object(let root) = value else { throw bad("it must be an object") }
        switch root["format"] {
        case nil: break
        case .int(let version)?:
            guard version >= 1 else { throw bad("format \(version) is not a format version") }
            guard version <= formatVersion else {
                throw DepotError(.schemaMismatch, "The store file was written in format \(version) by a newer Depot; this one reads format \(formatVersion).", detail: "byte offset \(offset)")
            }
        default: throw bad("\"format\" must be an integer")
        }
        guard let collectionsValue = root["collections"] else { return [:] }
        guard case .object(let collections) = collectionsValue else { throw bad("\"collections\" must be an object") }
        var out: [CollectionName: StoredSchema] = [:]
        for (key, entryValue) in collections {
            guard let name = try? CollectionName(validating: key) else { throw bad("\(JSONReader.quoted(key)) is not a collection name") }
            guard case .object(let entry) = entryValue else { throw bad("the entry for '\(key)' must be an object") }
            let idKind: IDKind
            switch entry["idKind"] {
            case .string("int")?: idKind = .int
            case .string("string")?: idKind = .string
            default: throw bad("'\(key)' needs \"idKind\": \"int\" or \"string\"")
            }
            func definitions(_ field: String) throws -> [(String, [String])] {
                guard let list = entry[field] else { return [] }
                guard case .array(let items) = list else { throw bad("'\(key)'.\(field) must be an array") }
                return try items.map { item in
                    guard case .object(let object) = item, case .string(let n)? = object["name"], case .array(let fs)? = object["fields"] else {
                        throw bad("each of '\(key)'.\(field) needs a \"name\" and \"fields\"")
                    }
                    return (n, try fs.map { f in
                        guard case .string(let s) = f else { throw bad("'\(key)'.\(field) fields must be strings") }
                        return s
                    })
                }
            }
            let schema = CollectionSchema(
                name: name, idKind: idKind,
                uniqueConstraints: try definitions("unique").map { UniqueConstraint($0.1, name: $0.0) },
                indexes: try definitions("indexes").map { IndexDefinition($0.1, name: $0.0) })
            do { try schema.validate() } catch { throw bad("'\(key)' has invalid constraints or indexes") }
            var last: Int64 = 0
            switch entry["lastAssignedID"] {
            case nil: break
            case .int(let i)?: last = i
            default: throw bad("'\(key)'.lastAssignedID must be an integer")
            }
            out[name] = StoredSchema(schema: schema, lastAssignedID: last)
        }
        return out
    }
}
