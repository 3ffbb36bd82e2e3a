import DepotCore
import Foundation

/// A transaction over a store: reads the committed GDBM files through an in-memory overlay
/// of its own uncommitted changes. Used only on the engine's thread, only inside the
/// closure it was given to.
///
/// A write transaction touches no file until commit: its changes (records, index entries,
/// catalog entries) wait in ``overlays`` and ``postings``, and ``finish()``
/// turns them into the physical ops the engine journals and applies.
final class GDBMTransaction: WriteTransaction {
    let engine: GDBMEngine
    let writable: Bool
    var isValid = true
    /// The catalog as this transaction sees it (committed plus its own changes).
    private(set) var catalog: [CollectionName: CollectionMeta]
    /// The committed catalog when the transaction began.
    private let startCatalog: [CollectionName: CollectionMeta]
    /// ``catalog`` was written in this transaction (it may still equal ``startCatalog``).
    /// When it was not, ``finish()`` skips comparing the two: most commits change records only.
    private(set) var catalogChanged = false
    /// Commits published but not yet applied to the files when the transaction began,
    /// oldest first: part of its snapshot.
    private let layers: [CommittedLayer]

    enum Change {
        case put([UInt8])
        case delete
    }

    /// A key of ``Overlay/changes``: its bytes, hashed in one call (an array of bytes
    /// hashes itself a byte at a time, a call each, which was most of a write's hashing).
    struct Key: Hashable {
        let bytes: [UInt8]
        init(_ bytes: [UInt8]) { self.bytes = bytes }
        func hash(into hasher: inout Hasher) { bytes.withUnsafeBytes { hasher.combine(bytes: $0) } }
    }

    struct Overlay {
        /// The committed file is ignored (dropped or rebuilt in this transaction).
        var cleared = false
        var changes: [Key: Change] = [:]
        /// The keys of `changes` in the order they were first changed: the order the
        /// commit's ops are journaled and applied in. gdbm stores keys given in the caller's
        /// order (ids ascending in a bulk load) ~20% faster than in a hash table's order.
        var order: [[UInt8]] = []

        /// Records `change` for `key` (one hash lookup).
        mutating func set(_ key: [UInt8], _ change: Change) {
            if changes.updateValue(change, forKey: Key(key)) == nil { order.append(key) }
        }
    }

    private var overlays: [FileID: Overlay] = [:]
    /// Index posting lists changed in this transaction: collection → entry key → record keys.
    private var postings: [CollectionName: [Key: PostingList]] = [:]

    /// The commit count of the snapshot.
    let generation: UInt64

    /// For a transaction run inline on a caller's thread: how many more gdbm reads and
    /// record writes it may make. Past that, or at any scan, it is abandoned (``escalated``)
    /// and the engine runs the closure again on its own threads. `nil`: no limit.
    var inlineBudget: Int?
    /// The transaction was abandoned by the inline budget: every later call throws too,
    /// and the engine discards whatever the closure returned or threw.
    private(set) var escalated = false
    /// The error that abandons an inline transaction (never seen by callers).
    struct Escalation: Error {}

    /// Counts one gdbm read or record write against the inline budget.
    private func spend() throws {
        guard let budget = inlineBudget else { return }
        if escalated || budget <= 0 {
            escalated = true
            throw Escalation()
        }
        inlineBudget = budget - 1
    }

    /// Abandons an inline transaction that asks for unbounded work (a scan).
    private func requireUnbounded() throws {
        guard inlineBudget != nil else { return }
        escalated = true
        throw Escalation()
    }

    init(engine: GDBMEngine, writable: Bool, catalog: [CollectionName: CollectionMeta], layers: [CommittedLayer], generation: UInt64) {
        self.engine = engine
        self.generation = generation
        self.writable = writable
        self.catalog = catalog
        self.startCatalog = catalog
        self.layers = layers
    }

    /// This transaction's changes per file (after ``finish()``): a commit's layer.
    var overlayChanges: [FileID: Overlay] { overlays }

    private func checkValid() throws {
        guard isValid else { throw DepotError(.closed, "A transaction was used after its closure returned.") }
        if escalated { throw Escalation() }
    }

    private func checkWritable() throws {
        try checkValid()
        guard writable else { throw DepotError(.unsupported, "Writes need a write transaction.") }
    }

    // MARK: Raw access

    private func committedFile(_ id: FileID) throws -> GDBMFile? {
        try engine.primary.file(id, create: false)
    }

    /// Where the snapshot's value of `key` in `file` is.
    private enum Found {
        case value([UInt8])
        case absent
        /// Not changed since the files were last written: read the file.
        case inFile
    }

    private func find(_ file: FileID, _ key: [UInt8]) -> Found {
        // A read transaction with no layer over the files (the usual case) hashes nothing.
        if overlays.isEmpty && layers.isEmpty { return .inFile }
        let key = Key(key)
        if let overlay = overlays[file] {
            if let change = overlay.changes[key] {
                if case .put(let value) = change { return .value(value) }
                return .absent
            }
            if overlay.cleared { return .absent }
        }
        for layer in layers.reversed() {
            guard let overlay = layer.changes[file] else { continue }
            if let change = overlay.changes[key] {
                if case .put(let value) = change { return .value(value) }
                return .absent
            }
            if overlay.cleared { return .absent }
        }
        return .inFile
    }

    private func raw(_ id: FileID, _ key: [UInt8]) throws -> [UInt8]? {
        switch find(id, key) {
        case .value(let value): return value
        case .absent: return nil
        case .inFile:
            try spend()
            return try committedFile(id)?.fetch(key)
        }
    }

    /// The snapshot's changes to `file` over what the file holds, and whether the file's
    /// own contents still count (not when the file was dropped or rebuilt since).
    private func merged(_ file: FileID) -> (fileVisible: Bool, changes: [Key: Change]) {
        var visible = true
        var changes: [Key: Change] = [:]
        let stack = layers.compactMap { $0.changes[file] } + (overlays[file].map { [$0] } ?? [])
        for overlay in stack {
            if overlay.cleared {
                visible = false
                changes = [:]
            }
            if changes.isEmpty {
                changes = overlay.changes
            } else {
                changes.merge(overlay.changes) { _, new in new }
            }
        }
        return (visible, changes)
    }

    /// Calls `body` with every key and value of `file` in the snapshot until it returns `false`.
    private func scanRaw(_ file: FileID, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool) throws {
        try requireUnbounded()
        let (visible, changes) = merged(file)
        var stopped = false
        if visible, let committed = try committedFile(file) {
            try committed.forEachKey { key in
                let keyBytes = Array(key)
                if !changes.isEmpty && changes[Key(keyBytes)] != nil { return true }
                let keep = try committed.fetch(keyBytes) { value in try body(key, value) }
                if keep == false {
                    stopped = true
                    return false
                }
                return true
            }
        }
        guard !stopped else { return }
        for (key, change) in changes {
            guard case .put(let value) = change else { continue }
            let keep = try key.bytes.withUnsafeBytes { k in try value.withUnsafeBytes { v in try body(k, v) } }
            if !keep { return }
        }
    }

    /// Calls `body` with every key of `file` in the snapshot; no value is fetched.
    private func scanKeys(_ file: FileID, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        try requireUnbounded()
        let (visible, changes) = merged(file)
        if visible, let committed = try committedFile(file) {
            try committed.forEachKey { key in
                if !changes.isEmpty && changes[Key(Array(key))] != nil { return true }
                try body(key)
                return true
            }
        }
        for (key, change) in changes {
            guard case .put = change else { continue }
            try key.bytes.withUnsafeBytes { try body($0) }
        }
    }

    private func setRaw(_ id: FileID, _ key: [UInt8], _ change: Change) {
        overlays[id, default: Overlay()].set(key, change)
    }

    private func clear(_ id: FileID) {
        overlays[id] = Overlay(cleared: true)
    }

    // MARK: Records

    /// The record stored under `key` with bytes `value`. `knownID` is the id `key` was built
    /// from, when the caller has it (a get by id): the id is then not decoded again.
    /// `layouts`, when given, are the field layouts to decode with (a reader slot's copies).
    private func decodeRecord(_ collection: CollectionName, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, knownID: RecordID? = nil, layouts: [FieldLayout]? = nil) throws -> Record {
        guard let id = knownID ?? (try? BinaryCodec.id(fromKey: key)) else {
            throw GDBMErrors.corrupted("A record key in collection '\(collection)' (file '\(collection).records.gdbm') cannot be decoded.", collection: collection.rawValue)
        }
        do {
            return Record(id: id, fields: try BinaryCodec.decodeFields(key: key, value: value, layouts: engine.fieldLayouts, known: layouts))
        } catch {
            throw GDBMErrors.badRecord(error, collection: collection.rawValue, id: id)
        }
    }

    /// The snapshot's record under `key`; `id`, when given, is the id `key` was built from.
    private func loadRecord(_ collection: CollectionName, key: [UInt8], id: RecordID? = nil) throws -> Record? {
        let file = FileID.records(collection)
        switch find(file, key) {
        case .value(let value):
            return try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try decodeRecord(collection, key: k, value: v, knownID: id) } }
        case .absent:
            return nil
        case .inFile:
            try spend()
            // A read transaction fetches through a reader handle of its own when it can, and
            // decodes here, after gdbm's lock is released.
            if !writable {
                switch try engine.primary.fetchForReader(file, key, layouts: engine.fieldLayouts) {
                case .found(let value, let layouts):
                    return try key.withUnsafeBytes { k in try decodeRecord(collection, key: k, value: value.bytes, knownID: id, layouts: layouts) }
                case .absent:
                    return nil
                case .declined:
                    break
                }
            }
            guard let committed = try committedFile(file) else { return nil }
            let record = try committed.fetch(key) { value in try key.withUnsafeBytes { k in try decodeRecord(collection, key: k, value: value, knownID: id) } }
            // Only a write transaction asks again (an update after its get).
            if writable, record != nil { lastFoundInFile = (collection, key) }
            return record
        }
    }

    /// The record key this transaction last read from a collection's file and found there.
    /// The files do not change while a transaction is open (commits are applied only under
    /// the writer lock, which a write transaction holds, and only with no read transaction
    /// open), so a get followed by an update of the same record asks gdbm once, not twice.
    private var lastFoundInFile: (collection: CollectionName, key: [UInt8])?

    /// `true` when the snapshot holds a record under `key` (`gdbm_exists`: nothing decoded).
    private func recordExists(_ collection: CollectionName, key: [UInt8]) throws -> Bool {
        let file = FileID.records(collection)
        switch find(file, key) {
        case .value: return true
        case .absent: return false
        case .inFile:
            if let last = lastFoundInFile, last.key == key, last.collection == collection { return true }
            try spend()
            return try committedFile(file)?.contains(key) ?? false
        }
    }

    /// The stored record a write replaces, when the collection's unique constraints or
    /// indexes need its old values; otherwise only whether it exists (`nil` record).
    private func prior(_ collection: CollectionName, key: [UInt8], meta: CollectionMeta) throws -> (exists: Bool, record: Record?) {
        if meta.schema.uniqueConstraints.isEmpty && meta.schema.indexes.isEmpty {
            return (try recordExists(collection, key: key), nil)
        }
        let record = try loadRecord(collection, key: key)
        return (record != nil, record)
    }

    /// Calls `body` with every record of the collection in the snapshot until it returns `false`.
    private func scan(_ collection: CollectionName, _ body: (Record) throws -> Bool) throws {
        try scanRaw(.records(collection)) { key, value in try body(try decodeRecord(collection, key: key, value: value)) }
    }

    // MARK: Index entries

    static func uniqueEntryKey(_ name: String, _ values: [FieldValue]) -> [UInt8] {
        [UInt8(ascii: "U")] + Array(name.utf8) + [0] + BinaryCodec.indexKeyBytes(values)
    }

    static func indexEntryKey(_ name: String, _ values: [FieldValue]) -> [UInt8] {
        [UInt8(ascii: "I")] + Array(name.utf8) + [0] + BinaryCodec.indexKeyBytes(values)
    }

    /// The normalized key of `record` under an index's fields (`nil`: a field is null).
    static func indexKey(_ fields: [String], _ record: Record) -> [FieldValue]? {
        UniqueConstraint(fields).key(for: record)
    }

    /// Query equality's normal form of a value (`1.0` → `1`, `-0.0` → `0`).
    static func normalize(_ value: FieldValue) -> FieldValue {
        UniqueConstraint(["v"]).key(for: Record(id: 0, fields: ["v": value]))?.first ?? value
    }

    private func uniqueOwner(_ collection: CollectionName, _ entryKey: [UInt8]) throws -> [UInt8]? {
        guard let value = try raw(.index(collection), entryKey) else { return nil }
        guard let owner = value.withUnsafeBytes({ BinaryCodec.unsealed($0).map(Array.init) }) else {
            throw GDBMErrors.corrupted("A unique-constraint entry of collection '\(collection)' (file '\(collection).index.gdbm') fails its checksum.", collection: collection.rawValue)
        }
        return owner
    }

    private func posting(_ collection: CollectionName, _ entryKey: [UInt8]) throws -> PostingList {
        if let changed = postings[collection]?[Key(entryKey)] { return changed }
        guard let value = try raw(.index(collection), entryKey) else { return PostingList() }
        guard let list = value.withUnsafeBytes({ PostingList(stored: $0) }) else {
            throw GDBMErrors.corrupted("An index entry of collection '\(collection)' (file '\(collection).index.gdbm') fails its checksum or is malformed (a length past its end, keys out of order or repeated).", collection: collection.rawValue)
        }
        return list
    }

    private func updatePosting(_ collection: CollectionName, _ entryKey: [UInt8], _ change: (inout PostingList) -> Void) throws {
        var list = try posting(collection, entryKey)
        // Not also held in `postings` while it changes: the splice then needs no copy.
        postings[collection]?[Key(entryKey)] = nil
        change(&list)
        postings[collection, default: [:]][Key(entryKey)] = list
    }

    /// Fails with `.uniqueViolation` if `record` would collide with another record.
    private func checkUnique(_ record: Record, idKey: [UInt8], in collection: CollectionName, meta: CollectionMeta) throws {
        for constraint in meta.schema.uniqueConstraints {
            guard let key = constraint.key(for: record),
                let owner = try uniqueOwner(collection, GDBMTransaction.uniqueEntryKey(constraint.name, key)), owner != idKey
            else { continue }
            throw DepotError(
                .uniqueViolation, "Another record already has these values for unique constraint '\(constraint.name)' (\(constraint.fields.joined(separator: ", "))).",
                collection: collection.rawValue, id: record.id, constraint: constraint.name)
        }
    }

    /// Moves the index entries of a record from `old` to `new` (either may be `nil`).
    private func moveEntries(from old: Record?, to new: Record?, idKey: [UInt8], in collection: CollectionName, meta: CollectionMeta) throws {
        for constraint in meta.schema.uniqueConstraints {
            let oldKey = old.flatMap { constraint.key(for: $0) }
            let newKey = new.flatMap { constraint.key(for: $0) }
            if oldKey == newKey { continue }
            if let oldKey {
                let entry = GDBMTransaction.uniqueEntryKey(constraint.name, oldKey)
                if try uniqueOwner(collection, entry) == idKey { setRaw(.index(collection), entry, .delete) }
            }
            if let newKey {
                setRaw(.index(collection), GDBMTransaction.uniqueEntryKey(constraint.name, newKey), .put(BinaryCodec.sealed(idKey)))
            }
        }
        for index in meta.schema.indexes {
            let oldKey = old.flatMap { GDBMTransaction.indexKey(index.fields, $0) }
            let newKey = new.flatMap { GDBMTransaction.indexKey(index.fields, $0) }
            if oldKey == newKey { continue }
            if let oldKey { try updatePosting(collection, GDBMTransaction.indexEntryKey(index.name, oldKey)) { $0.remove(idKey) } }
            if let newKey { try updatePosting(collection, GDBMTransaction.indexEntryKey(index.name, newKey)) { $0.insert(idKey) } }
        }
    }

    /// Stores `record` (already free of nulls) after checking uniqueness; nothing changes
    /// when a check fails.
    private func put(_ record: Record, idKey: [UInt8], existing: Record?, into collection: CollectionName, meta: CollectionMeta) throws {
        try spend()
        try checkUnique(record, idKey: idKey, in: collection, meta: meta)
        try moveEntries(from: existing, to: record, idKey: idKey, in: collection, meta: meta)
        setRaw(.records(collection), idKey, .put(BinaryCodec.encodeRecord(key: idKey, fields: record.fields)))
        // The catalog is written only when the collection is new or its last assigned id
        // grows: an update of a string-keyed record leaves it (and its storage) untouched.
        if case .int(let i) = record.id, i > meta.lastAssignedID {
            var meta = meta
            meta.lastAssignedID = i
            catalog[collection] = meta
            catalogChanged = true
        } else if catalog.index(forKey: collection) == nil {
            catalog[collection] = meta
            catalogChanged = true
        }
    }

    // MARK: Query planning

    /// How a filter's candidates are found.
    enum Access {
        case scan
        case ids([RecordID])
        case entries([[UInt8]], name: String, unique: Bool)
    }

    func access(for filter: Filter, meta: CollectionMeta) -> Access {
        let conjuncts: [Filter]
        if case .and(let parts) = filter { conjuncts = parts } else { conjuncts = [filter] }
        func ids(_ values: [FieldValue]) -> [RecordID] {
            var out = Set<RecordID>()
            for value in values {
                switch (GDBMTransaction.normalize(value), meta.schema.idKind) {
                case (.int(let i), .int): out.insert(.int(i))
                case (.string(let s), .string): out.insert(.string(s))
                default: break
                }
            }
            return out.sorted()
        }
        for part in conjuncts {
            if case .equal("id", let value) = part { return .ids(ids([value])) }
            if case .isIn("id", let values) = part { return .ids(ids(values)) }
        }
        var equal: [String: FieldValue] = [:]
        var among: [String: [FieldValue]] = [:]
        for part in conjuncts {
            if case .equal(let field, let value) = part, !value.isNull { equal[field] = GDBMTransaction.normalize(value) }
            if case .isIn(let field, let values) = part, !values.contains(where: \.isNull) { among[field] = values.map(GDBMTransaction.normalize) }
        }
        func covered(_ fields: [String]) -> [FieldValue]? {
            let values = fields.compactMap { equal[$0] }
            return values.count == fields.count ? values : nil
        }
        for u in meta.schema.uniqueConstraints {
            if let values = covered(u.fields) { return .entries([GDBMTransaction.uniqueEntryKey(u.name, values)], name: u.name, unique: true) }
        }
        for i in meta.schema.indexes {
            if let values = covered(i.fields) { return .entries([GDBMTransaction.indexEntryKey(i.name, values)], name: i.name, unique: false) }
        }
        for u in meta.schema.uniqueConstraints where u.fields.count == 1 {
            if let values = among[u.fields[0]] { return .entries(values.map { GDBMTransaction.uniqueEntryKey(u.name, [$0]) }, name: u.name, unique: true) }
        }
        for i in meta.schema.indexes where i.fields.count == 1 {
            if let values = among[i.fields[0]] { return .entries(values.map { GDBMTransaction.indexEntryKey(i.name, [$0]) }, name: i.name, unique: false) }
        }
        return .scan
    }

    /// Calls `body` with each candidate record of `access` (a superset of the matches).
    private func candidates(_ collection: CollectionName, _ access: Access, _ body: (Record) throws -> Bool) throws {
        switch access {
        case .scan:
            try scan(collection, body)
        case .ids(let ids):
            for id in ids {
                if let record = try loadRecord(collection, key: BinaryCodec.key(for: id), id: id), try !body(record) { return }
            }
        case .entries(let keys, _, let unique):
            var seen = Set<[UInt8]>()
            for entry in keys {
                let found: [[UInt8]]
                if unique {
                    found = try uniqueOwner(collection, entry).map { [$0] } ?? []
                } else {
                    found = try posting(collection, entry).keys
                }
                for idKey in found where seen.insert(idKey).inserted {
                    if let record = try loadRecord(collection, key: idKey), try !body(record) { return }
                }
            }
        }
    }

    /// A filter that tests nothing but the id (a range of ids, say) and that no key lookup
    /// answers: the record keys alone say which records match, so a scan reads the keys
    /// (`gdbm_firstkey`/`gdbm_nextkey`) and fetches no value.
    static func filtersOnIDOnly(_ filter: Filter) -> Bool {
        let names = filter.fieldNames
        return !names.isEmpty && names.allSatisfy { $0 == "id" }
    }

    /// The ids of the snapshot's records matching `filter` (a filter on the id only), read
    /// from the record keys without fetching or decoding a record.
    private func matchingIDsFromKeys(_ filter: Filter, in collection: CollectionName) throws -> [RecordID] {
        var ids: [RecordID] = []
        try scanKeys(.records(collection)) { key in
            guard let id = try? BinaryCodec.id(fromKey: key) else {
                throw GDBMErrors.corrupted("A record key in collection '\(collection)' (file '\(collection).records.gdbm') cannot be decoded.", collection: collection.rawValue)
            }
            if QueryEvaluator.matches(filter, Record(id: id)) { ids.append(id) }
        }
        return ids
    }

    /// The matches of `query`, sorted and paged.
    private func results(_ query: Query, in collection: CollectionName) throws -> [Record] {
        guard let meta = catalog[collection] else { return [] }
        let access = access(for: query.filter, meta: meta)
        if case .scan = access, GDBMTransaction.filtersOnIDOnly(query.filter), query.sort.allSatisfy({ $0.field == "id" }) {
            // An id range in id order (YCSB E's scans): the keys are scanned, the page of
            // matching ids selected in order, and only its records fetched and decoded.
            let ids = try matchingIDsFromKeys(query.filter, in: collection)
            let descending = query.sort.first?.descending ?? false
            let pageIDs = QueryEvaluator.sortedPage(ids, offset: query.offset, limit: query.limit) { descending ? $1 < $0 : $0 < $1 }
            var page: [Record] = []
            page.reserveCapacity(pageIDs.count)
            for id in pageIDs {
                if let record = try loadRecord(collection, key: BinaryCodec.key(for: id), id: id) { page.append(record) }
            }
            return page
        }
        var matched: [Record] = []
        try candidates(collection, access) { record in
            if QueryEvaluator.matches(query.filter, record) { matched.append(record) }
            return true
        }
        if query.sort.allSatisfy({ $0.field == "id" }) {
            // Id order (no sort keys, or only the id): sorted through the key bytes.
            return KeyOrder.page(matched, descending: query.sort.first?.descending ?? false, offset: query.offset, limit: query.limit)
        }
        return QueryEvaluator.sortedPage(matched, offset: query.offset, limit: query.limit) { QueryEvaluator.precedes($0, $1, sort: query.sort) }
    }

    /// The ids of the matches of `query` in result order, for a stream: only the ids (8
    /// bytes per integer id) and, for a sort on other fields, the sort values are held; the
    /// records themselves are decoded one at a time to test the filter and dropped.
    func orderedIDs(_ query: Query, in collection: CollectionName) throws -> StreamIDs {
        try checkValid()
        try query.validate()
        guard let meta = catalog[collection] else { return .ids([]) }
        let access = access(for: query.filter, meta: meta)
        func window(_ count: Int) -> Range<Int> {
            guard query.offset < count else { return 0..<0 }
            let end = query.limit.map { query.offset + min(count - query.offset, max(0, $0)) } ?? count
            return query.offset..<max(query.offset, end)
        }
        if query.sort.allSatisfy({ $0.field == "id" }) {
            // Id order: the ids alone, integers unboxed.
            let descending = query.sort.first?.descending ?? false
            var ints: [Int64] = []
            var others: [RecordID] = []
            if case .scan = access, GDBMTransaction.filtersOnIDOnly(query.filter) {
                for id in try matchingIDsFromKeys(query.filter, in: collection) {
                    if case .int(let i) = id { ints.append(i) } else { others.append(id) }
                }
            } else {
                try candidates(collection, access) { record in
                    guard QueryEvaluator.matches(query.filter, record) else { return true }
                    if case .int(let i) = record.id { ints.append(i) } else { others.append(record.id) }
                    return true
                }
            }
            if others.isEmpty {
                ints.sort()
                if descending { ints.reverse() }
                let range = window(ints.count)
                if range.count == ints.count { return .ints(ints) }
                return .ints(Array(ints[range]))
            }
            var all = ints.map(RecordID.int) + others
            ints = []
            others = []
            all.sort()
            if descending { all.reverse() }
            return .ids(Array(all[window(all.count)]))
        }
        var keys: [Record] = []
        try candidates(collection, access) { record in
            if QueryEvaluator.matches(query.filter, record) {
                var slim: [String: FieldValue] = [:]
                for key in query.sort where key.field != "id" { slim[key.field] = record.fields[key.field] }
                keys.append(Record(id: record.id, fields: slim))
            }
            return true
        }
        keys.sort { QueryEvaluator.precedes($0, $1, sort: query.sort) }
        let range = window(keys.count)
        var ids: [RecordID] = []
        ids.reserveCapacity(range.count)
        for record in keys[range] { ids.append(record.id) }
        return .ids(ids)
    }

    /// Turns gdbm's memory mapping of the collection's record file off for a stream (see
    /// ``GDBMFile/beginUnmappedReads()``); `nil` when the collection has no file yet.
    /// The caller ends it with ``UnmappedReads/end()``.
    func beginUnmappedReads(of collection: CollectionName) throws -> UnmappedReads? {
        try checkValid()
        guard let file = try committedFile(.records(collection)) else { return nil }
        return UnmappedReads(file, readers: engine.primary.readers)
    }

    /// The records of `ids` that still exist and match `filter` (a stream's page).
    func records(_ ids: [RecordID], in collection: CollectionName, recheck filter: Filter?) throws -> [Record] {
        try checkValid()
        var out: [Record] = []
        out.reserveCapacity(ids.count)
        for id in ids {
            guard let record = try loadRecord(collection, key: BinaryCodec.key(for: id), id: id) else { continue }
            if let filter, !QueryEvaluator.matches(filter, record) { continue }
            out.append(record)
        }
        return out
    }

    // MARK: ReadTransaction

    func collectionNames() throws -> [CollectionName] {
        try checkValid()
        return catalog.keys.sorted()
    }

    func schema(of collection: CollectionName) throws -> CollectionSchema? {
        try checkValid()
        return catalog[collection]?.schema
    }

    func get(_ id: RecordID, from collection: CollectionName) throws -> Record? {
        try checkValid()
        guard catalog.index(forKey: collection) != nil else { return nil }
        return try loadRecord(collection, key: BinaryCodec.key(for: id), id: id)
    }

    /// The record with `id` read through a ``GDBMFieldSource``: a model read decodes the
    /// stored values by position and builds no ``Record``.
    func withFields<T>(of id: RecordID, from collection: CollectionName, _ body: (any FieldSource) throws -> T) throws -> T? {
        try checkValid()
        guard catalog.index(forKey: collection) != nil else { return nil }
        let key = BinaryCodec.key(for: id)
        let file = FileID.records(collection)
        let source: GDBMFieldSource
        if let kept = fieldSource, !kept.inUse {
            source = kept
        } else {
            source = GDBMFieldSource()
            if fieldSource == nil { fieldSource = source }
        }
        let layouts = engine.fieldLayouts
        func load(_ value: UnsafeRawBufferPointer, known: [FieldLayout]? = nil) throws {
            do {
                try key.withUnsafeBytes { k in try source.load(id: id, key: k, value: value, layouts: layouts, known: known) }
            } catch let problem as BinaryCodec.RecordProblem {
                throw GDBMErrors.badRecord(problem, collection: collection.rawValue, id: id)
            }
        }
        switch find(file, key) {
        case .value(let value):
            try value.withUnsafeBytes { try load($0) }
        case .absent:
            return nil
        case .inFile:
            try spend()
            // As `loadRecord`: a read transaction's own reader handle when it can.
            var loaded = false
            if !writable {
                switch try engine.primary.fetchForReader(file, key, layouts: layouts) {
                case .found(let value, let known):
                    try load(value.bytes, known: known)
                    loaded = true
                case .absent:
                    return nil
                case .declined:
                    break
                }
            }
            if !loaded {
                guard let committed = try committedFile(file), try committed.fetch(key, { try load($0) }) != nil else { return nil }
                if writable { lastFoundInFile = (collection, key) }
            }
        }
        source.inUse = true
        defer { source.inUse = false }
        return try body(source)
    }

    /// The source ``withFields(of:from:_:)`` reuses from one read to the next.
    private var fieldSource: GDBMFieldSource?

    func forEach(_ query: Query, in collection: CollectionName, _ body: (Record) throws -> Bool) throws {
        try checkValid()
        try query.validate()
        for record in try results(query, in: collection) where try !body(record) { break }
    }

    func count(_ filter: Filter, in collection: CollectionName) throws -> Int {
        try checkValid()
        try filter.validate()
        guard let meta = catalog[collection] else { return 0 }
        if case .all = filter, overlays[.records(collection)] == nil, !layers.contains(where: { $0.changes[.records(collection)] != nil }) {
            try requireUnbounded()
            return try committedFile(.records(collection))?.count() ?? 0
        }
        let access = access(for: filter, meta: meta)
        if case .scan = access, GDBMTransaction.filtersOnIDOnly(filter) {
            return try matchingIDsFromKeys(filter, in: collection).count
        }
        var n = 0
        try candidates(collection, access) { record in
            if QueryEvaluator.matches(filter, record) { n += 1 }
            return true
        }
        return n
    }

    func explain(_ query: Query, in collection: CollectionName) throws -> QueryPlan {
        try checkValid()
        try query.validate()
        let file = FileID.records(collection).fileName
        let tail = "the shared evaluator applies the filter, sorts (id order by default) and pages"
        guard let meta = catalog[collection] else {
            return QueryPlan(backend: "gdbm", filterInEngine: false, sortInEngine: false, pagingInEngine: false, detail: "collection '\(collection)' does not exist: no records")
        }
        switch access(for: query.filter, meta: meta) {
        case .scan where GDBMTransaction.filtersOnIDOnly(query.filter):
            return QueryPlan(
                backend: "gdbm", filterInEngine: false, sortInEngine: false, pagingInEngine: false,
                detail: "scan of the keys of \(file) (the filter tests only the id; no record is decoded to test it), then fetch of the matches by id; \(tail)")
        case .scan:
            return QueryPlan(backend: "gdbm", filterInEngine: false, sortInEngine: false, pagingInEngine: false, detail: "full scan of \(file); \(tail)")
        case .ids(let ids):
            return QueryPlan(
                backend: "gdbm", filterInEngine: false, sortInEngine: false, pagingInEngine: false, indexesUsed: ["id"],
                detail: "direct fetch of \(ids.count) id(s) from \(file); \(tail)")
        case .entries(let keys, let name, let unique):
            return QueryPlan(
                backend: "gdbm", filterInEngine: false, sortInEngine: false, pagingInEngine: false, indexesUsed: [name],
                detail: "lookup of \(keys.count) \(unique ? "unique-constraint" : "index") entr\(keys.count == 1 ? "y" : "ies") '\(name)' in \(FileID.index(collection).fileName), then fetch by id; \(tail)")
        }
    }

    // MARK: WriteTransaction

    private func metaForWrite(_ collection: CollectionName, kind: IDKind) throws -> CollectionMeta {
        try checkWritable()
        if let meta = catalog[collection] {
            guard meta.schema.idKind == kind else {
                throw DepotError(.invalidValue, "Collection '\(collection)' uses \(meta.schema.idKind) ids; got a \(kind) id.", collection: collection.rawValue)
            }
            return meta
        }
        return CollectionMeta(schema: CollectionSchema(name: collection, idKind: kind), lastAssignedID: 0)
    }

    func prepare(_ schema: CollectionSchema) throws {
        try checkWritable()
        try schema.validate()
        let name = schema.name
        guard let existing = catalog[name] else {
            catalog[name] = CollectionMeta(schema: schema, lastAssignedID: 0)
            catalogChanged = true
            return
        }
        guard existing.schema.idKind == schema.idKind else {
            throw DepotError(.schemaMismatch, "Collection '\(name)' uses \(existing.schema.idKind) ids, not \(schema.idKind).", collection: name.rawValue)
        }
        if existing.schema == schema { return }
        let meta = CollectionMeta(schema: schema, lastAssignedID: existing.lastAssignedID)
        // Check every record against the new constraints before changing anything.
        var records: [Record] = []
        var seen: [String: Set<[FieldValue]>] = [:]
        try scan(name) { record in
            for constraint in schema.uniqueConstraints {
                guard let key = constraint.key(for: record) else { continue }
                if !seen[constraint.name, default: []].insert(key).inserted {
                    throw DepotError(
                        .uniqueViolation, "Existing records break unique constraint '\(constraint.name)'.", collection: name.rawValue, id: record.id,
                        constraint: constraint.name)
                }
            }
            records.append(record)
            return true
        }
        clear(.index(name))
        postings[name] = nil
        for record in records {
            try moveEntries(from: nil, to: record, idKey: BinaryCodec.key(for: record.id), in: name, meta: meta)
        }
        catalog[name] = meta
        catalogChanged = true
    }

    func dropCollection(_ collection: CollectionName) throws -> Bool {
        try checkWritable()
        guard catalog.index(forKey: collection) != nil else { return false }
        catalog[collection] = nil
        catalogChanged = true
        clear(.records(collection))
        clear(.index(collection))
        postings[collection] = nil
        return true
    }

    /// Stores a record as `mode` says: an insert checks only that the key is free, an
    /// update or save reads the prior record (its index entries move).
    func write(_ record: Record, as mode: RecordWriteMode, into collection: CollectionName) throws -> WriteOutcome {
        let record = record.withoutNulls
        let meta = try metaForWrite(collection, kind: record.id.kind)
        let idKey = BinaryCodec.key(for: record.id)
        if mode == .insert {
            if try recordExists(collection, key: idKey) {
                throw DepotError(.alreadyExists, "A record with id \(record.id) exists.", collection: collection.rawValue, id: record.id)
            }
            try put(record, idKey: idKey, existing: nil, into: collection, meta: meta)
            return .inserted
        }
        let existing = try prior(collection, key: idKey, meta: meta)
        if mode == .update, !existing.exists {
            throw DepotError(.notFound, "No record with id \(record.id).", collection: collection.rawValue, id: record.id)
        }
        try put(record, idKey: idKey, existing: existing.record, into: collection, meta: meta)
        return existing.exists ? .updated : .inserted
    }

    /// Applies `change` to the stored bytes (``BinaryCodec/patchRecord(key:value:applying:)``)
    /// when the collection has no unique constraint or index to move and the change names
    /// few fields; otherwise reads the record, changes it and writes it back, as the default
    /// does. Both give the same record (Docs/GDBMDriver.md, "Partial updates").
    func update(_ id: RecordID, applying change: FieldChange, in collection: CollectionName) throws -> Bool {
        try checkWritable()
        guard let meta = catalog[collection] else { return false }
        guard meta.schema.uniqueConstraints.isEmpty, meta.schema.indexes.isEmpty,
            change.set.count + change.remove.count <= BinaryCodec.patchFieldLimit
        else {
            guard let record = try get(id, from: collection) else { return false }
            _ = try write(change.applied(to: record), as: .update, into: collection)
            return true
        }
        let key = BinaryCodec.key(for: id)
        let file = FileID.records(collection)
        func patch(_ value: UnsafeRawBufferPointer) throws -> [UInt8] {
            do {
                return try key.withUnsafeBytes { k in try BinaryCodec.patchRecord(key: k, value: value, applying: change) }
            } catch let problem as BinaryCodec.RecordProblem {
                throw GDBMErrors.badRecord(problem, collection: collection.rawValue, id: id)
            }
        }
        let patched: [UInt8]?
        switch find(file, key) {
        case .value(let value):
            patched = try value.withUnsafeBytes { try patch($0) }
        case .absent:
            patched = nil
        case .inFile:
            try spend()
            patched = try committedFile(file)?.fetch(key) { try patch($0) }
        }
        guard let patched else { return false }
        try spend()
        setRaw(file, key, .put(patched))
        return true
    }

    func insert(fields: [String: FieldValue], into collection: CollectionName) throws -> RecordID {
        let meta = try metaForWrite(collection, kind: .int)
        guard meta.lastAssignedID < Int64.max else {
            throw DepotError(.invalidValue, "No integer ids are left in '\(collection)'.", collection: collection.rawValue)
        }
        let record = Record(id: .int(meta.lastAssignedID + 1), fields: fields).withoutNulls
        let idKey = BinaryCodec.key(for: record.id)
        let existing = try prior(collection, key: idKey, meta: meta)
        try put(record, idKey: idKey, existing: existing.record, into: collection, meta: meta)
        return record.id
    }

    func delete(_ id: RecordID, from collection: CollectionName) throws -> Bool {
        try checkWritable()
        guard let meta = catalog[collection] else { return false }
        let idKey = BinaryCodec.key(for: id)
        let existing = try prior(collection, key: idKey, meta: meta)
        guard existing.exists else { return false }
        try spend()
        try moveEntries(from: existing.record, to: nil, idKey: idKey, in: collection, meta: meta)
        setRaw(.records(collection), idKey, .delete)
        return true
    }

    // MARK: Commit

    /// The physical changes of this transaction, relative to the catalog it began with.
    func finish() -> [FileOp] {
        let committedCatalog = startCatalog
        for (collection, entries) in postings {
            for (key, list) in entries {
                setRaw(.index(collection), key.bytes, list.isEmpty ? .delete : .put(list.sealed()))
            }
        }
        postings.removeAll()
        var ops: [FileOp] = []
        ops.reserveCapacity(overlays.values.reduce(catalogChanged ? catalog.count : 0) { $0 + $1.order.count + 1 })
        for name in catalogChanged ? Set(committedCatalog.keys).union(catalog.keys).sorted() : [] {
            let old = committedCatalog[name], new = catalog[name]
            if let new, new != old {
                ops.append(.put(.catalog, key: CollectionMeta.catalogKey(name), value: new.encoded()))
            } else if new == nil, old != nil {
                ops.append(.delete(.catalog, key: CollectionMeta.catalogKey(name)))
            }
        }
        for (file, overlay) in overlays {
            if overlay.cleared { ops.append(.drop(file)) }
            for key in overlay.order {
                switch overlay.changes[Key(key)] {
                case .put(let value)?: ops.append(.put(file, key: key, value: value))
                case .delete?: if !overlay.cleared { ops.append(.delete(file, key: key)) }
                case nil: break
                }
            }
        }
        return ops
    }

    // MARK: Integrity

    /// Problems in one collection's stored records and index entries.
    func verify(collection: CollectionName, meta: CollectionMeta) -> [String] {
        var problems: [String] = []
        var uniques: [[UInt8]: [UInt8]] = [:]
        var indexes: [[UInt8]: Set<[UInt8]>] = [:]
        do {
            try scanRaw(.records(collection)) { keyRaw, valueRaw in
                let key = Array(keyRaw)
                do {
                    let record = try decodeRecord(collection, key: keyRaw, value: valueRaw)
                    if record.id.kind != meta.schema.idKind { problems.append("\(collection): record \(record.id) has a \(record.id.kind) id") }
                    if case .int(let i) = record.id, i > meta.lastAssignedID {
                        problems.append("\(collection): record \(record.id) is above the last assigned id \(meta.lastAssignedID)")
                    }
                    for u in meta.schema.uniqueConstraints {
                        guard let k = u.key(for: record) else { continue }
                        let entry = GDBMTransaction.uniqueEntryKey(u.name, k)
                        if uniques[entry] != nil { problems.append("\(collection): records break unique constraint '\(u.name)'") }
                        uniques[entry] = key
                    }
                    for i in meta.schema.indexes {
                        guard let k = GDBMTransaction.indexKey(i.fields, record) else { continue }
                        indexes[GDBMTransaction.indexEntryKey(i.name, k), default: []].insert(key)
                    }
                } catch {
                    problems.append("\(collection): \(error)")
                }
                return true
            }
            try scanRaw(.index(collection)) { keyRaw, value in
                let key = Array(keyRaw)
                if key.first == UInt8(ascii: "U") {
                    let owner = BinaryCodec.unsealed(value).map(Array.init)
                    if owner == nil || uniques.removeValue(forKey: key) != owner {
                        problems.append("\(collection): a unique-constraint entry does not match the records")
                    }
                } else {
                    let set = PostingList(stored: value).map { Set($0.keys) }
                    if set == nil || indexes.removeValue(forKey: key) != set {
                        problems.append("\(collection): an index entry does not match the records")
                    }
                }
                return true
            }
            if !uniques.isEmpty { problems.append("\(collection): \(uniques.count) unique-constraint entries are missing") }
            if !indexes.isEmpty { problems.append("\(collection): \(indexes.count) index entries are missing") }
        } catch {
            problems.append("\(collection): \(error)")
        }
        return problems
    }
}

/// A stream's hold on gdbm's memory mapping being off for one record file
/// (``GDBMFile/beginUnmappedReads()``), ended once by ``end()`` or when released.
final class UnmappedReads: @unchecked Sendable {
    // @unchecked: `file` is only used through beginUnmappedReads/endUnmappedReads, which
    // take the file's lock (and do nothing once the file is closed); `ended` is guarded by
    // `lock`.
    private let file: GDBMFile
    /// Kept off while the stream runs (``ReaderHandles/unmappedStreams``): their mappings
    /// would bring the file's pages in.
    private let readers: ReaderHandles?
    private let lock = NSLock()
    private var ended = false

    init(_ file: GDBMFile, readers: ReaderHandles? = nil) {
        self.file = file
        self.readers = readers
        readers?.unmappedStreams.add(1, ordering: .sequentiallyConsistent)
        file.beginUnmappedReads()
    }

    /// Turns the mapping back on unless another stream still reads the file unmapped.
    func end() {
        let first = lock.withLock { () -> Bool in
            defer { ended = true }
            return !ended
        }
        if first {
            file.endUnmappedReads()
            readers?.unmappedStreams.subtract(1, ordering: .sequentiallyConsistent)
        }
    }

    deinit { end() }
}

/// The ids of a stream's results in result order, held compactly.
enum StreamIDs: Sendable {
    /// Integer ids only: 8 bytes each.
    case ints([Int64])
    case ids([RecordID])

    var count: Int {
        switch self {
        case .ints(let a): a.count
        case .ids(let a): a.count
        }
    }

    /// The ids at `range`.
    subscript(range: Range<Int>) -> [RecordID] {
        switch self {
        case .ints(let a): a[range].map(RecordID.int)
        case .ids(let a): Array(a[range])
        }
    }
}

/// A commit published to readers but not yet applied to the GDBM files: its changes per
/// file (what reads consult) and its ops (what the writer applies). Immutable.
final class CommittedLayer: Sendable {
    let seq: UInt64
    let changes: [FileID: GDBMTransaction.Overlay]
    let ops: [FileOp]

    init(seq: UInt64, changes: [FileID: GDBMTransaction.Overlay], ops: [FileOp]) {
        self.seq = seq
        self.changes = changes
        self.ops = ops
    }
}
