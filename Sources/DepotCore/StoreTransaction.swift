import Foundation

/// Reading inside ``Store/read(_:)``: the driver's transaction plus typed access.
/// Valid only inside the closure.
public class StoreReadTransaction {
    @usableFromInline let base: any ReadTransaction
    unowned let store: Store

    init(_ base: any ReadTransaction, store: Store) {
        self.base = base
        self.store = store
    }

    /// The driver's own transaction, for what this wrapper does not offer.
    public var driverTransaction: any ReadTransaction { base }

    /// The record with `id`, `nil` when there is none.
    public func get(_ id: RecordID, from collection: CollectionName) throws -> Record? { try base.get(id, from: collection) }
    /// Every result of `query`, in order.
    /// - Throws: `.invalidQuery`, driver errors.
    public func query(_ query: Query, in collection: CollectionName) throws -> [Record] {
        try query.validate()
        return try base.query(query, in: collection)
    }
    /// Calls `body` with each result of `query` until it returns `false`.
    /// - Throws: `.invalidQuery`, what `body` throws, driver errors.
    public func forEach(_ query: Query, in collection: CollectionName, _ body: (Record) throws -> Bool) throws {
        try query.validate()
        try base.forEach(query, in: collection, body)
    }
    /// Each result of `query` read in place; see ``ReadTransaction/forEachFields(_:in:_:)``.
    public func forEachFields(_ query: Query, in collection: CollectionName, _ body: (any FieldSource) throws -> Bool) throws {
        try query.validate()
        try base.forEachFields(query, in: collection, body)
    }
    /// The record with `id` read in place; see ``ReadTransaction/withFields(of:from:_:)``.
    public func withFields<T>(of id: RecordID, from collection: CollectionName, _ body: (any FieldSource) throws -> T) throws -> T? {
        try base.withFields(of: id, from: collection, body)
    }
    /// The results of `query` decoded as `M`, read in place where the driver can.
    /// - Throws: `.decoding` naming the collection and id of the record that does not decode.
    ///
    /// Inlinable, like ``model(_:id:in:)``, so that it is compiled for the app's model type:
    /// unspecialized, each row looked up the runtime metadata of the generic types it uses
    /// (Docs/Models.md, "Cost of a typed read").
    @inlinable
    public func models<M: StoredModel>(_ type: M.Type, _ query: Query, in collection: CollectionName) throws -> [M] {
        var out: [M] = []
        if let limit = query.limit { out.reserveCapacity(min(limit, 1024)) }
        try forEachFields(query, in: collection) { source in
            out.append(try M.decode(source))
            return true
        }
        return out
    }
    /// The record with `id` decoded as `M`, read in place where the driver can.
    @inlinable
    public func model<M: StoredModel>(_ type: M.Type, id: RecordID, in collection: CollectionName) throws -> M? {
        try base.withFields(of: id, from: collection) { try M.decode($0) }
    }

    /// ``model(_:id:in:)``, then, when there is no record with `id`, the first of
    /// `alternates` that has one (a UUID id stored in lower case).
    @inlinable
    func model<M: StoredModel>(_ type: M.Type, id: RecordID, alternates: [RecordID], in collection: CollectionName) throws -> M? {
        try Self.model(M.self, id: id, alternates: alternates, in: collection, of: base)
    }

    /// ``model(_:id:alternates:in:)`` read through the driver's transaction `base`: what
    /// ``Repository/find(id:)`` runs without a wrapper. Static, with `base` an argument, so
    /// that the compiler specializes it for `M` alone; as a method of an extension of
    /// `ReadTransaction` called on `any ReadTransaction` it stayed generic over the opened
    /// type, which is the unspecialized path Docs/Models.md ("Cost of a typed read") describes.
    @inlinable
    static func model<M: StoredModel>(_ type: M.Type, id: RecordID, alternates: [RecordID], in collection: CollectionName, of base: any ReadTransaction) throws -> M? {
        if let found = try base.withFields(of: id, from: collection, { try M.decode($0) }) { return found }
        for alternate in alternates {
            if let found = try base.withFields(of: alternate, from: collection, { try M.decode($0) }) { return found }
        }
        return nil
    }
    /// The number of records `filter` matches.
    /// - Throws: `.invalidQuery`, driver errors.
    public func count(_ filter: Filter = .all, in collection: CollectionName) throws -> Int {
        try filter.validate()
        return try base.count(filter, in: collection)
    }
    /// `true` when some record matches `filter`.
    /// - Throws: `.invalidQuery`, driver errors.
    public func exists(_ filter: Filter, in collection: CollectionName) throws -> Bool {
        try filter.validate()
        return try base.exists(filter, in: collection)
    }
    /// The rows of a grouped query (Docs/Aggregates.md): groups and aggregates computed by
    /// the driver (in its engine where it has one), then having, sort and paging.
    /// - Throws: `.invalidQuery`, `.invalidValue` for an int sum that overflows, driver errors.
    public func aggregate(_ query: AggregateQuery, in collection: CollectionName) throws -> [AggregateRow] {
        try query.validate()
        let groups = try base.aggregateGroups(query, in: collection)
        return AggregateEvaluator.finish(groups, query, collection: collection)
    }

    /// How the driver would run a grouped query.
    public func explain(_ query: AggregateQuery, in collection: CollectionName) throws -> QueryPlan {
        try query.validate()
        return try base.explain(query, in: collection)
    }

    /// The results of `query` with only the fields named in `fields` (and the id).
    /// - Throws: `.invalidQuery` for a query or a field name that is not valid.
    public func query(_ query: Query, selecting fields: [String], in collection: CollectionName) throws -> [Record] {
        try query.validate()
        try Self.validateSelection(fields)
        var out: [Record] = []
        try base.forEach(query, selecting: Set(fields), in: collection) { out.append($0); return true }
        return out
    }

    /// Checks the names of a projection. - Throws: `.invalidQuery`.
    static func validateSelection(_ fields: [String]) throws {
        for field in fields where field != "id" && !FieldName.isValid(field) {
            throw DepotError(.invalidQuery, "Select names field \(CollectionName.quotedForMessage(field)), which is not a valid field name.")
        }
    }

    /// The collection's schema, with the references, required fields and defaults the
    /// store keeps; `nil` when it does not exist.
    public func schema(of collection: CollectionName) throws -> CollectionSchema? {
        guard var schema = try base.schema(of: collection) else { return nil }
        if let rules = try store.rules.snapshot({ try Rules.load(base) }).byCollection[collection] {
            schema.references = rules.references
            schema.requiredFields = rules.requiredFields
            schema.defaults = rules.defaults
        }
        return schema
    }
    /// Every collection's name, reserved ones included, sorted.
    public func collectionNames() throws -> [CollectionName] { try base.collectionNames() }

    /// Typed access to `M`'s collection inside this transaction.
    public func repository<M: StoredModel>(_ type: M.Type) throws -> TransactionRepository<M> {
        TransactionRepository(transaction: self, collection: try M.collection())
    }
}

/// Writing inside ``Store/write(excluding:_:)``: validates every record, removes top-level
/// nulls, records change events, and runs the store's write observers (the sync outbox, a
/// server's change log) after each change — all in the same driver transaction.
public final class StoreWriteTransaction: StoreReadTransaction {
    let writer: any WriteTransaction
    let observers: [any StoreWriteObserver]
    var changes: [ChangeEvent] = []
    var preparedModels: Set<String> = []
    var isValid = true
    /// The rules as changed by this transaction's prepares, `nil` when it changed none.
    var localRules: RulesSnapshot?
    /// The store's rules as this transaction first read them.
    var seenRules: RulesSnapshot?
    /// `true` once this transaction changed a collection's rules.
    var rulesChanged = false
    /// Records whose references are checked when the transaction's closure returns.
    var pendingReferenceChecks: [(CollectionName, RecordID)] = []
    /// The collections this transaction wrote to, dropped or prepared (the result cache
    /// forgets them after the commit).
    var touched: Set<CollectionName> = []
    /// The collection ``note(_:_:_:fields:)`` last added to ``touched`` (only ever added to).
    private var lastNoted: CollectionName?
    /// What ``interest(in:)`` last found for a collection of the user's.
    private var interest: (collection: CollectionName, observers: [any StoreWriteObserver], wantsFields: Bool)?
    /// `true` when this transaction may have written anywhere (raw SQL).
    var touchedAll = false
    /// Whether references are checked when the closure returns (Docs/Relations.md). The sync
    /// coordinator turns it off for the records it applies from the server, which may come
    /// before the records they refer to; delete rules still apply.
    public var checksReferences = true
    /// Deletes under a `deny` rule, checked when the closure returns.
    var pendingDenials: [(CollectionName, [RecordID], CollectionName, Reference)] = []
    /// Set by ``Store/writeOne(_:)``: the closure is one write of one record by id, so the
    /// driver may be told that its write is the transaction's last call
    /// (``tellDriverLastCall(_:rules:)``).
    var isOneWrite = false
    /// Set by ``Store/writeOne(sameOnEveryRun:_:)``: every run of the closure asks for that
    /// one write with the same values.
    var oneWriteIsSameOnEveryRun = false

    init(_ base: any WriteTransaction, store: Store, observers: [any StoreWriteObserver]) {
        self.writer = base
        self.observers = observers
        super.init(base, store: store)
    }

    /// The driver's own write transaction. Writes made through it bypass validation,
    /// change events and the write observers; use it only to read, or for a driver's own
    /// tests.
    public var driverWriteTransaction: any WriteTransaction { writer }

    /// Throws `.closed` once the transaction's closure has returned.
    private func checkValid() throws {
        guard isValid else { throw DepotError(.closed, "A transaction was used after its closure returned.") }
    }

    private func prepared(_ record: Record, _ collection: CollectionName) throws -> Record {
        try checkValid()
        let clean = record.withoutNulls
        try clean.validate(collection: collection.rawValue)
        return clean
    }

    /// `true` when some observer wants the fields of changes to `collection`.
    private func observersWantFields(_ collection: CollectionName) throws -> Bool {
        try interest(in: collection).wantsFields
    }

    /// The observers that want the changes of `collection` (``StoreWriteObserver/wantsChanges(of:in:)``)
    /// and whether one of them wants the fields. The answer for the last collection of the
    /// user's is kept until this transaction writes a reserved collection (what observers
    /// read to decide, such as the sync attachments, lives there), so a run of writes to one
    /// collection asks the observers once.
    private func interest(in collection: CollectionName) throws -> (observers: [any StoreWriteObserver], wantsFields: Bool) {
        if let interest, interest.collection == collection { return (interest.observers, interest.wantsFields) }
        var wanting: [any StoreWriteObserver] = []
        var wantsFields = false
        for observer in observers where try observer.wantsChanges(of: collection, in: self) {
            wanting.append(observer)
            if try observer.wantsFields(of: collection, in: self) { wantsFields = true }
        }
        if !collection.isReserved { interest = (collection, wanting, wantsFields) }
        return (wanting, wantsFields)
    }

    /// Tells the driver that its next call ends the transaction
    /// (``WriteTransaction/nextCallEndsTransaction()``) when this is a transaction of one
    /// write (``isOneWrite``) and nothing the store does after that call can reach the
    /// driver: no reference check queued or possible for `collection` (`rules`), and no
    /// write observer that wants its changes. Asked once, right before the driver's call.
    private func tellDriverLastCall(_ collection: CollectionName, rules: CollectionRules?) throws {
        guard isOneWrite else { return }
        isOneWrite = false
        guard pendingReferenceChecks.isEmpty, pendingDenials.isEmpty, rules?.references.isEmpty ?? true else { return }
        // Observers are asked again for every write to a reserved collection; they may read.
        if !observers.isEmpty {
            guard !collection.isReserved, try interest(in: collection).observers.isEmpty else { return }
        }
        writer.nextCallEndsTransaction(sameOnEveryRun: oneWriteIsSameOnEveryRun)
    }

    /// Records a change event and hands the change to the observers.
    private func note(_ kind: ChangeEvent.Kind, _ id: RecordID, _ collection: CollectionName, fields: [String: FieldValue]?) throws {
        changes.append(ChangeEvent(collection: collection, kind: kind, id: id))
        // Runs of writes to one collection skip the set's hashing after the first.
        if lastNoted != collection {
            touched.insert(collection)
            lastNoted = collection
        }
        guard !observers.isEmpty else { return }
        if collection.isReserved { interest = nil }
        let wanting = try interest(in: collection).observers
        guard !wanting.isEmpty else { return }
        let change = RecordChange(collection: collection, kind: kind, id: id, fields: kind == .deleted ? nil : fields)
        for observer in wanting { try observer.record(change, in: self) }
    }

    /// Adds a record. - Throws: `.alreadyExists`, `.uniqueViolation`, `.invalidName`, `.invalidValue`.
    public func insert(_ record: Record, into collection: CollectionName) throws {
        try write(record, as: .insert, into: collection)
    }

    /// Stores `record` as `mode` says (see ``WriteTransaction/write(_:as:into:)``): the one
    /// path every record write of the store takes.
    /// - Throws: the errors of that mode, `.invalidName`, `.invalidValue`.
    @discardableResult
    public func write(_ record: Record, as mode: RecordWriteMode, into collection: CollectionName) throws -> WriteOutcome {
        let record = try applyRules(try prepared(record, collection), collection)
        try tellDriverLastCall(collection, rules: nil)
        let outcome = try writer.write(record, as: mode, into: collection)
        try note(outcome == .inserted ? .inserted : .updated, record.id, collection, fields: record.fields)
        return outcome
    }

    /// Adds a record under a new store-assigned integer id and returns it.
    public func insert(fields: [String: FieldValue], into collection: CollectionName) throws -> RecordID {
        var record = try prepared(Record(id: .int(1), fields: fields), collection)
        let rules = try rules(of: collection)
        if let rules {
            record.fields = rules.withDefaults(record.fields)
            try rules.checkRequired(record.fields, collection: collection, id: nil)
        }
        let id = try writer.insert(fields: record.fields, into: collection)
        if let rules, !rules.references.isEmpty { pendingReferenceChecks.append((collection, id)) }
        try note(.inserted, id, collection, fields: record.fields)
        return id
    }

    /// Replaces an existing record's fields. - Throws: `.notFound`, `.uniqueViolation`.
    public func update(_ record: Record, in collection: CollectionName) throws {
        try write(record, as: .update, into: collection)
    }

    /// Inserts or replaces a record.
    @discardableResult
    public func save(_ record: Record, into collection: CollectionName) throws -> WriteOutcome {
        try write(record, as: .save, into: collection)
    }

    /// Inserts, updates or saves `model` (which has an id) by encoding its fields straight
    /// into the driver's ``FieldSink``: the same checks, change events and observer calls as
    /// the record methods (the checks are made by the sink's base class,
    /// ``DriverFieldSink``). When an observer wants the fields of this collection, the sink
    /// also keeps a copy of them for it.
    /// - Throws: `.invalidValue` when the model has no id, the encoder's errors, and those of
    ///   the record method of `mode`.
    @discardableResult
    func write<M: StoredModel>(_ model: M, _ mode: RecordWriteMode, into collection: CollectionName) throws -> WriteOutcome {
        try checkValid()
        // A collection with rules takes the record path, where they are applied.
        if try rules(of: collection) != nil { return try write(try model.record(), as: mode, into: collection) }
        let copiesFields = try observersWantFields(collection)
        try tellDriverLastCall(collection, rules: nil)
        var written: RecordID?
        var copied: [String: FieldValue]?
        let outcome = try writer.write(mode, into: collection) { sink in
            sink.startRecord(collection: collection.rawValue, copying: copiesFields)
            defer { copied = sink.finishRecord() }
            guard let id = try model.encodeRecord(into: sink) else {
                throw DepotError(.invalidValue, "\(M.self) has no id; insert it to have the store assign one.", collection: collection.rawValue)
            }
            try id.validate(collection: collection.rawValue)
            written = id
            return id
        }
        guard let written else { throw DepotError(.internal, "The driver did not encode the record.", collection: collection.rawValue) }
        try note(outcome == .inserted ? .inserted : .updated, written, collection, fields: copied)
        return outcome
    }

    /// Saves `record`, keyed by the unique constraint `constraint` instead of its id: when
    /// another record has the same values for that constraint, that record is replaced and
    /// keeps its id; otherwise `record` is inserted. Returns the id stored and what happened.
    /// - Throws: `.notFound` when the collection has no such constraint.
    @discardableResult
    public func upsert(_ record: Record, uniqueOn constraint: String, into collection: CollectionName) throws -> (id: RecordID, outcome: WriteOutcome) {
        if let existing = try recordHolding(record.fields, uniqueOn: constraint, in: collection) {
            try update(Record(id: existing, fields: record.fields), in: collection)
            return (existing, .updated)
        }
        return (record.id, try save(record, into: collection))
    }

    /// The upsert rule, written once for records and models: the id of the record whose
    /// values for the unique constraint `constraint` equal those in `fields`, or `nil` when
    /// there is none or when `fields` leaves one of them null (a constraint binds only
    /// records with all its fields set).
    /// - Throws: `.notFound` when the collection has no such constraint.
    func recordHolding(_ fields: [String: FieldValue], uniqueOn constraint: String, in collection: CollectionName) throws -> RecordID? {
        guard let definition = try writer.schema(of: collection)?.uniqueConstraints.first(where: { $0.name == constraint }) else {
            throw DepotError(.notFound, "Collection '\(collection)' has no unique constraint '\(constraint)'.", collection: collection.rawValue, constraint: constraint)
        }
        let values = definition.fields.map { fields[$0] ?? .null }
        guard !values.contains(where: \.isNull) else { return nil }
        let filter = Filter.and(zip(definition.fields, values).map { Filter.equal($0, $1) })
        return try writer.first(Query(filter: filter), in: collection)?.id
    }

    /// Deletes by id; `false` if there was none.
    @discardableResult
    public func delete(_ id: RecordID, from collection: CollectionName) throws -> Bool {
        try checkValid()
        let deleted = try writer.delete(id, from: collection)
        if deleted {
            try note(.deleted, id, collection, fields: nil)
            try applyDeleteRules([id], from: collection)
        }
        return deleted
    }

    /// Deletes every record matching `filter`; returns how many. The driver deletes them
    /// in one step where it can (``WriteTransaction/deleteReturningIDs(matching:from:)``);
    /// each is then a change event and reaches the observers.
    @discardableResult
    public func delete(matching filter: Filter, from collection: CollectionName) throws -> Int {
        try checkValid()
        try filter.validate()
        let ids = try writer.deleteReturningIDs(matching: filter, from: collection)
        for id in ids { try note(.deleted, id, collection, fields: nil) }
        try applyDeleteRules(ids, from: collection)
        return ids.count
    }

    /// Applies `change` to the record with `id` without reading it first where the driver
    /// can; `false` when there is no such record. A change event and the write observers
    /// see an update with the record's new fields.
    /// - Throws: `.invalidName`/`.invalidValue` for the change, `.uniqueViolation`.
    @discardableResult
    public func update(_ id: RecordID, in collection: CollectionName, _ change: FieldChange) throws -> Bool {
        try checkValid()
        try change.validate(collection: collection.rawValue)
        let (change, rules) = try applyRules(change.normalized, collection)
        if change.isEmpty { return try writer.get(id, from: collection) != nil }
        try tellDriverLastCall(collection, rules: rules)
        guard try writer.update(id, applying: change, in: collection) else { return false }
        try noteUpdates([id], collection, rules: rules, change: change)
        return true
    }

    /// Applies `change` to every record `filter` matches; returns how many.
    /// - Throws: `.invalidQuery`, `.invalidName`/`.invalidValue` for the change, `.uniqueViolation`.
    @discardableResult
    public func update(matching filter: Filter, in collection: CollectionName, _ change: FieldChange) throws -> Int {
        try checkValid()
        try filter.validate()
        try change.validate(collection: collection.rawValue)
        let (change, rules) = try applyRules(change.normalized, collection)
        if change.isEmpty { return try writer.count(filter, in: collection) }
        let ids = try writer.updateReturningIDs(matching: filter, applying: change, in: collection)
        try noteUpdates(ids, collection, rules: rules, change: change)
        return ids.count
    }

    /// Records update events for `ids`, with the records' new fields when an observer wants them.
    private func noteUpdates(_ ids: [RecordID], _ collection: CollectionName, rules: CollectionRules?, change: FieldChange) throws {
        if let rules, rules.references.contains(where: { change.set[$0.field] != nil }) {
            for id in ids { pendingReferenceChecks.append((collection, id)) }
        }
        let wantsFields = try observersWantFields(collection)
        for id in ids {
            let fields = wantsFields ? try writer.get(id, from: collection)?.fields : nil
            try note(.updated, id, collection, fields: fields)
        }
    }

    /// Creates a collection or makes its constraints and indexes those of `schema`.
    public func prepare(_ schema: CollectionSchema) throws {
        try checkValid()
        try schema.validate()
        try schema.validateRules()
        try writer.prepare(schema.driverPart)
        touched.insert(schema.name)
        try prepareRules(schema)
    }

    /// Removes a collection and its records.
    @discardableResult
    public func dropCollection(_ collection: CollectionName) throws -> Bool {
        try checkValid()
        if let schema = try writer.schema(of: collection), try rules(of: collection) != nil {
            try prepareRules(CollectionSchema(name: collection, idKind: schema.idKind))
        }
        touched.insert(collection)
        return try writer.dropCollection(collection)
    }

    /// The collection's schema with the rules the store keeps, as this transaction sees them.
    public override func schema(of collection: CollectionName) throws -> CollectionSchema? {
        guard var schema = try writer.schema(of: collection) else { return nil }
        if let rules = try rules(of: collection) {
            schema.references = rules.references
            schema.requiredFields = rules.requiredFields
            schema.defaults = rules.defaults
        }
        return schema
    }

    /// Typed access to `M`'s collection inside this transaction; prepares `M`'s schema
    /// (constraints, indexes) the first time this store sees `M`.
    public override func repository<M: StoredModel>(_ type: M.Type) throws -> TransactionRepository<M> {
        let key = String(reflecting: M.self)
        if !store.preparedModels.withLock({ $0.contains(key) }) && !preparedModels.contains(key) {
            try prepare(try M.schema())
            preparedModels.insert(key)
        }
        return TransactionRepository(transaction: self, collection: try M.collection())
    }
}
