import Foundation

/// How two collections relate, without types: what the loader reads (Docs/Relations.md).
public struct RelationDescriptor: Hashable, Sendable {
    /// Where the link between the two sides is kept.
    public enum Kind: Hashable, Sendable {
        /// The owner's `field` holds the target's id (to-one).
        case belongsTo(field: String)
        /// The target's `field` holds the owner's id; one target at most (to-one).
        case hasOne(field: String)
        /// The target's `field` holds the owner's id (to-many).
        case hasMany(field: String)
        /// Records of the link collection `through` hold the owner's id in `ownerField` and
        /// the target's in `targetField` (many-to-many).
        case manyToMany(through: String, ownerField: String, targetField: String)
    }

    /// The relation's name, unique per owner; loaded results are kept under it.
    public var name: String
    /// The collection of the owning side.
    public var owner: String
    /// The collection of the related side.
    public var target: String
    /// Where the link is kept.
    public var kind: Kind

    /// A relation named `name` from `owner` to `target`.
    public init(_ name: String, owner: String, target: String, kind: Kind) {
        self.name = name
        self.owner = owner
        self.target = target
        self.kind = kind
    }

    /// `true` for belongs-to and has-one: at most one related record.
    public var isToOne: Bool {
        switch kind {
        case .belongsTo, .hasOne: true
        case .hasMany, .manyToMany: false
        }
    }
}

/// A relation between two model types, declared as a static property of the owner.
///
/// ```swift
/// struct Author: Model {
///     var id: Int; var name: String
///     static let books = HasMany<Author, Book>("books", field: "authorID")
/// }
/// struct Book: Model {
///     var id: Int; var title: String; var authorID: Int?
///     static let author = BelongsTo<Book, Author>("author", field: "authorID")
///     static let references = [author.reference(onDelete: .cascade)]
/// }
/// let authors = try await repository.query().including(Author.books).all()
/// let books = try authors[0].related(Author.books)
/// ```
public protocol Relationship: IncludeConvertible {
    /// The model that declares the relation.
    associatedtype Owner: StoredModel
    /// The related model.
    associatedtype Target: StoredModel
    /// The relation without types.
    var descriptor: RelationDescriptor { get }
}

extension Relationship {
    /// Loads this relation, and `nested` relations of its targets, eagerly.
    public func including(_ nested: any IncludeConvertible...) -> Include {
        Include(descriptor, nested: nested.map(\.include), make: { node, nested in try Loaded<Target>(node, includes: nested) })
    }

    /// Loads this relation eagerly (no nested relations).
    public var include: Include { including() }
}

/// The owner's `field` holds the id of one `Target` (to-one).
public struct BelongsTo<Owner: StoredModel, Target: StoredModel>: Relationship {
    /// The relation without types.
    public let descriptor: RelationDescriptor
    /// The owner's field holding the target's id.
    public var field: String
    /// A relation named `name`, whose owner holds the target's id in `field`.
    public init(_ name: String, field: String) {
        self.field = field
        descriptor = RelationDescriptor(name, owner: Owner.collectionName, target: Target.collectionName, kind: .belongsTo(field: field))
    }
    /// The reference the store keeps for this relation, with a delete rule: declare it in
    /// ``StoredModel/references`` for referential integrity.
    public func reference(onDelete: DeleteRule) -> Reference {
        Reference(descriptor.name, field: field, to: Target.collectionName, onDelete: onDelete)
    }
}

/// One `Target` holds the owner's id in `field` (to-one, the other side of a ``BelongsTo``).
public struct HasOne<Owner: StoredModel, Target: StoredModel>: Relationship {
    /// The relation without types.
    public let descriptor: RelationDescriptor
    /// A relation named `name`, whose target holds the owner's id in `field`.
    public init(_ name: String, field: String) {
        descriptor = RelationDescriptor(name, owner: Owner.collectionName, target: Target.collectionName, kind: .hasOne(field: field))
    }
}

/// Every `Target` holding the owner's id in `field` (to-many).
public struct HasMany<Owner: StoredModel, Target: StoredModel>: Relationship {
    /// The relation without types.
    public let descriptor: RelationDescriptor
    /// A relation named `name`, whose targets hold the owner's id in `field`.
    public init(_ name: String, field: String) {
        descriptor = RelationDescriptor(name, owner: Owner.collectionName, target: Target.collectionName, kind: .hasMany(field: field))
    }
}

/// Owners and targets linked by records of a link collection (many-to-many). The store
/// prepares the link collection with a cascading reference to each side, so that links go
/// with either side.
public struct ManyToMany<Owner: StoredModel, Target: StoredModel>: Relationship {
    /// The relation without types.
    public let descriptor: RelationDescriptor
    /// The link collection.
    public let through: String
    /// The link field holding the owner's id.
    public let ownerField: String
    /// The link field holding the target's id.
    public let targetField: String

    /// A relation named `name` kept in the link collection `through`.
    public init(_ name: String, through: String, ownerField: String, targetField: String) {
        self.through = through
        self.ownerField = ownerField
        self.targetField = targetField
        descriptor = RelationDescriptor(name, owner: Owner.collectionName, target: Target.collectionName, kind: .manyToMany(through: through, ownerField: ownerField, targetField: targetField))
    }

    /// The link collection's schema: see ``RelationDescriptor/linkSchema()``.
    public func linkSchema() throws -> CollectionSchema { try descriptor.linkSchema() }
}

extension RelationDescriptor {
    /// For a many-to-many relation, the link collection's schema: string ids, a unique
    /// pair, an index on the target field, and a cascading reference to each side (links
    /// go with either side); `nil` for other kinds.
    public func linkSchema() throws -> CollectionSchema {
        guard case .manyToMany(let through, let ownerField, let targetField) = kind else {
            throw DepotError(.invalidQuery, "Relation '\(name)' is not many-to-many: it has no link collection.")
        }
        return CollectionSchema(
            name: try CollectionName(through), idKind: .string,
            uniqueConstraints: [UniqueConstraint([ownerField, targetField], name: "\(ownerField)_\(targetField)_pair")],
            indexes: [IndexDefinition([targetField], name: "\(targetField)_link_idx")],
            references: [
                Reference(ownerField, field: ownerField, to: owner, onDelete: .cascade),
                Reference(targetField, field: targetField, to: target, onDelete: .cascade),
            ])
    }

    /// The id of the link between `owner` and `target`: both ids as JSON, one per pair.
    public static func linkID(_ owner: RecordID, _ target: RecordID) -> RecordID {
        .string(JSONText.serialize(.array([owner.fieldValue, target.fieldValue])))
    }
}

/// Something ``RepositoryQuery/including(_:)`` can load: a relation, or an ``Include``.
public protocol IncludeConvertible: Sendable {
    /// The relation to load and what to load below it.
    var include: Include { get }
}

/// A relation to load eagerly, with the relations to load below it.
public struct Include: IncludeConvertible {
    /// The relation.
    public let descriptor: RelationDescriptor
    /// What to load for each related record.
    public let nested: [Include]
    let make: (@Sendable (LoadedRecord, [Include]) throws -> any Sendable)?

    /// An untyped include, for records (the CLI, tools).
    public init(_ descriptor: RelationDescriptor, nested: [Include] = []) {
        self.init(descriptor, nested: nested, make: nil)
    }

    init(_ descriptor: RelationDescriptor, nested: [Include], make: (@Sendable (LoadedRecord, [Include]) throws -> any Sendable)?) {
        self.descriptor = descriptor
        self.nested = nested
        self.make = make
    }

    /// Itself.
    public var include: Include { self }
}

/// A record with the related records loaded for it, by relation name (a to-one relation
/// has zero or one).
public struct LoadedRecord: Sendable, Hashable {
    /// The record.
    public var record: Record
    /// The related records, by relation name; only the relations that were requested.
    public var related: [String: [LoadedRecord]]

    /// A record with the given related records.
    public init(_ record: Record, related: [String: [LoadedRecord]] = [:]) {
        self.record = record
        self.related = related
    }
}

/// A model with the relations requested for it (``RepositoryQuery/including(_:)``).
///
/// Read the model's properties directly (`loaded.name`) or through ``model``; read a
/// relation with `related(_:)`, which throws `.invalidQuery` when the relation was not
/// requested: never a crash, never an empty list that looks like data.
@dynamicMemberLookup
public struct Loaded<M: StoredModel>: Sendable {
    /// The model.
    public var model: M
    /// The loaded relations' values (each a `Loaded<Target>`), by relation name.
    var relations: [String: [any Sendable]] = [:]
    /// How to save the relations set with `with(_:_:)`, by relation name.
    var savers: [String: GraphSaver] = [:]

    /// A model with no relations loaded; add some with `with(_:_:)` to save a graph.
    public init(_ model: M) {
        self.model = model
    }

    /// A property of the model.
    public subscript<T>(dynamicMember keyPath: KeyPath<M, T>) -> T { model[keyPath: keyPath] }

    /// The names of the relations loaded.
    public var loadedRelations: Set<String> { Set(relations.keys) }

    func values<T: StoredModel>(_ descriptor: RelationDescriptor, as type: T.Type) throws -> [Loaded<T>] {
        guard let values = relations[descriptor.name] else {
            throw DepotError(
                .invalidQuery,
                "Relation '\(descriptor.name)' of \(M.self) was not loaded: add .including(\(M.self).\(descriptor.name)) to the query, or fetch it with the repository's related(_:of:).",
                collection: M.collectionName)
        }
        return try values.map { value in
            guard let loaded = value as? Loaded<T> else {
                throw DepotError(.internal, "Relation '\(descriptor.name)' holds another type than \(T.self).", collection: M.collectionName)
            }
            return loaded
        }
    }

    /// The target of a to-one relation, `nil` when there is none.
    /// - Throws: `.invalidQuery` when the relation was not loaded.
    public func related<T>(_ relation: BelongsTo<M, T>) throws -> Loaded<T>? { try values(relation.descriptor, as: T.self).first }
    /// The target of a to-one relation, `nil` when there is none.
    /// - Throws: `.invalidQuery` when the relation was not loaded.
    public func related<T>(_ relation: HasOne<M, T>) throws -> Loaded<T>? { try values(relation.descriptor, as: T.self).first }
    /// The targets of a to-many relation, in id order.
    /// - Throws: `.invalidQuery` when the relation was not loaded.
    public func related<T>(_ relation: HasMany<M, T>) throws -> [Loaded<T>] { try values(relation.descriptor, as: T.self) }
    /// The targets of a many-to-many relation, in id order.
    /// - Throws: `.invalidQuery` when the relation was not loaded.
    public func related<T>(_ relation: ManyToMany<M, T>) throws -> [Loaded<T>] { try values(relation.descriptor, as: T.self) }

    /// This model with `target` as the target of `relation`, for ``TransactionRepository/save(graph:)``.
    public func with<T>(_ relation: BelongsTo<M, T>, _ target: Loaded<T>?) -> Loaded<M> { setting(relation.descriptor, target.map { [$0] } ?? []) }
    /// This model with `target` as the target of `relation`, for ``TransactionRepository/save(graph:)``.
    public func with<T>(_ relation: HasOne<M, T>, _ target: Loaded<T>?) -> Loaded<M> { setting(relation.descriptor, target.map { [$0] } ?? []) }
    /// This model with `targets` as the targets of `relation`, for ``TransactionRepository/save(graph:)``.
    public func with<T>(_ relation: HasMany<M, T>, _ targets: [Loaded<T>]) -> Loaded<M> { setting(relation.descriptor, targets) }
    /// This model with `targets` as the targets of `relation`, for ``TransactionRepository/save(graph:)``.
    public func with<T>(_ relation: ManyToMany<M, T>, _ targets: [Loaded<T>]) -> Loaded<M> { setting(relation.descriptor, targets) }

    private func setting<T>(_ descriptor: RelationDescriptor, _ targets: [Loaded<T>]) -> Loaded<M> {
        var copy = self
        copy.relations[descriptor.name] = targets
        copy.savers[descriptor.name] = GraphSaver(descriptor: descriptor) { tx, owner in
            try targets.map { try $0.saveGraph(in: tx, linkedTo: owner, by: descriptor) as any Sendable }
        }
        return copy
    }
}

/// How to save one relation of a graph once its owner has an id.
struct GraphSaver: Sendable {
    let descriptor: RelationDescriptor
    let save: @Sendable (StoreWriteTransaction, Record) throws -> [any Sendable]
}

// MARK: - Loading

enum Relations {
    /// Ids per query when loading or applying delete rules: under every engine's limit on
    /// bound parameters (SQLite's smallest is 999; an `in` of field values binds two each).
    static let chunkSize = 400

    /// Loads `includes` for `records` of `collection` through `tx`: one query per relation
    /// level per chunk of ids, in one snapshot.
    static func load(_ includes: [Include], for records: [Record], in tx: any ReadTransaction) throws -> [LoadedRecord] {
        var out = records.map { LoadedRecord($0) }
        for include in includes {
            let related = try loadOne(include, for: records, in: tx)
            for i in out.indices { out[i].related[include.descriptor.name] = related[i] }
        }
        return out
    }

    /// The related records of each of `records` (same order) for one include.
    static func loadOne(_ include: Include, for records: [Record], in tx: any ReadTransaction) throws -> [[LoadedRecord]] {
        let d = include.descriptor
        let target = try CollectionName(d.target)
        var result: [[Record]]
        switch d.kind {
        case .belongsTo(let field):
            let groups = try fetch(target, field: "id", keys: records.map { $0[field] }, in: tx)
            result = records.map { groups[AggregateEvaluator.groupKey($0[field])] ?? [] }
        case .hasOne(let field), .hasMany(let field):
            let groups = try fetch(target, field: field, keys: records.map(\.id.fieldValue), in: tx)
            result = records.map { groups[AggregateEvaluator.groupKey($0.id.fieldValue)] ?? [] }
            if d.isToOne { result = result.map { Array($0.prefix(1)) } }
        case .manyToMany(let through, let ownerField, let targetField):
            let links = try fetch(try CollectionName(through), field: ownerField, keys: records.map(\.id.fieldValue), in: tx)
            let targets = try fetch(target, field: "id", keys: links.values.flatMap { $0.map { $0[targetField] } }, in: tx)
            result = records.map { record in
                let owned = links[AggregateEvaluator.groupKey(record.id.fieldValue)] ?? []
                return owned.compactMap { targets[AggregateEvaluator.groupKey($0[targetField])]?.first }.sorted { $0.id < $1.id }
            }
        }
        guard !include.nested.isEmpty else { return result.map { $0.map { LoadedRecord($0) } } }
        // The next level: once for all related records of this level.
        let flat = result.flatMap { $0 }
        let loaded = try load(include.nested, for: flat, in: tx)
        var index = 0
        return result.map { group in
            defer { index += group.count }
            return Array(loaded[index..<index + group.count])
        }
    }

    /// Above this many keys, a level reads its whole target collection once and keeps the
    /// records whose field is a key (a hash lookup each), even where an index could find
    /// them chunk by chunk.
    static let scanThreshold = 2_000

    /// The records of `collection` whose `field` (or id) is one of `keys` under query
    /// equality, grouped by that value (normalized as ``AggregateEvaluator/groupKey(_:)``),
    /// each group in id order: `in` queries of ``chunkSize`` keys when the driver's plan for
    /// them uses an index, otherwise (or for more than ``scanThreshold`` keys) one scan with
    /// a hash lookup per record. Null keys and values that cannot be ids are left out.
    static func fetch(_ collection: CollectionName, field: String, keys: [FieldValue], in tx: any ReadTransaction) throws -> [FieldValue: [Record]] {
        var groups: [FieldValue: [Record]] = [:]
        var distinct: [FieldValue] = []
        for key in keys where Rules.recordID(key) != nil {
            let normalized = AggregateEvaluator.groupKey(key)
            if groups.updateValue([], forKey: normalized) == nil { distinct.append(normalized) }
        }
        guard !distinct.isEmpty else { return groups }
        // Chunked `in` queries pay only where the driver finds the keys through an index
        // (its plan names one); otherwise each chunk would scan the collection, and one
        // scan with a hash lookup per record does the work once.
        // Not `a && (try b)`: a throw from inside the `&&` autoclosure released the captured
        // transaction once too often (found by AddressSanitizer when a PostgreSQL `explain`
        // threw), so the plan is asked in a statement of its own.
        var indexed = false
        if distinct.count <= scanThreshold {
            let plan = try tx.explain(Query(filter: .isIn(field, Array(distinct.prefix(2)))), in: collection)
            indexed = !plan.indexesUsed.isEmpty
        }
        if !indexed {
            let filter: Filter = field == "id" ? .all : .isNotNull(field)
            try tx.forEach(Query(filter: filter), in: collection) { record in
                groups[AggregateEvaluator.groupKey(record[field])]?.append(record)
                return true
            }
            return groups
        }
        var start = 0
        while start < distinct.count {
            let chunk = Array(distinct[start..<min(start + chunkSize, distinct.count)])
            try tx.forEach(Query(filter: .isIn(field, chunk)), in: collection) { record in
                groups[AggregateEvaluator.groupKey(record[field])]?.append(record)
                return true
            }
            start += chunkSize
        }
        return groups
    }

    /// Appends one line per include (depth first) saying how its level is read.
    static func explain(_ includes: [Include], depth: Int, in tx: any ReadTransaction, into lines: inout [String]) throws {
        for include in includes {
            let d = include.descriptor
            let lookups: [(String, String)]
            switch d.kind {
            case .belongsTo: lookups = [(d.target, "id")]
            case .hasOne(let field), .hasMany(let field): lookups = [(d.target, field)]
            case .manyToMany(let through, let ownerField, _): lookups = [(through, ownerField), (d.target, "id")]
            }
            for (collection, field) in lookups {
                let plan = try tx.explain(Query(filter: .isIn(field, [.int(1), .int(2)])), in: try CollectionName(collection))
                let how = plan.indexesUsed.isEmpty
                    ? "one scan of \(collection) with a hash lookup of \(field) per record"
                    : "in-queries on \(field) in chunks of \(chunkSize) keys (one scan above \(scanThreshold) keys)"
                lines.append(String(repeating: "  ", count: depth) + "\(d.name): \(how); plan: \(plan)")
            }
            try explain(include.nested, depth: depth + 1, in: tx, into: &lines)
        }
    }

}

extension Loaded {
    /// Builds the typed tree from a loaded record and the includes that loaded it.
    init(_ node: LoadedRecord, includes: [Include]) throws {
        self.init(try M.decode(node.record))
        for include in includes {
            guard let make = include.make else {
                throw DepotError(.invalidQuery, "Relation '\(include.descriptor.name)' was given without a type; include the model's relation.")
            }
            let children = node.related[include.descriptor.name] ?? []
            relations[include.descriptor.name] = try children.map { try make($0, include.nested) }
        }
    }
}

// MARK: - Saving a graph

extension Loaded {
    /// Saves this model and every relation set with `with(_:_:)`, recursively, setting the
    /// reference fields from the ids saved: belongs-to targets before the owner, has-one
    /// and has-many targets after it, many-to-many targets and their links after it.
    /// Returns the record saved.
    func saveGraph(in tx: StoreWriteTransaction, linkedTo owner: Record?, by relation: RelationDescriptor?) throws -> Record {
        let collection = try M.collection()
        _ = try tx.repository(M.self)
        var (id, fields) = try model.fieldsAndID()
        // Targets this model belongs to: saved first, their ids set here.
        for saver in savers.values.sorted(by: { $0.descriptor.name < $1.descriptor.name }) {
            guard case .belongsTo(let field) = saver.descriptor.kind else { continue }
            let saved = try saver.save(tx, Record(id: id ?? .int(0), fields: fields))
            if let target = saved.first as? Record { fields[field] = target.id.fieldValue } else { fields[field] = nil }
        }
        // This model's own reference to its owner, when it is the target of a has-one or has-many.
        if let owner, let relation {
            switch relation.kind {
            case .hasOne(let field), .hasMany(let field): fields[field] = owner.id.fieldValue
            default: break
            }
        }
        let record: Record
        if let id {
            record = Record(id: id, fields: fields)
            try tx.save(record, into: collection)
        } else {
            record = Record(id: try tx.insert(fields: fields, into: collection), fields: fields)
        }
        for saver in savers.values.sorted(by: { $0.descriptor.name < $1.descriptor.name }) {
            switch saver.descriptor.kind {
            case .belongsTo: continue
            case .hasOne, .hasMany: _ = try saver.save(tx, record)
            case .manyToMany:
                let targets = try saver.save(tx, record).compactMap { $0 as? Record }
                for target in targets { try tx.link(record.id, target.id, by: saver.descriptor) }
            }
        }
        return record
    }
}

// MARK: - Links, loading and saving through the store

extension StoreWriteTransaction {
    /// Links `owner` to `target` through the many-to-many `relation` (preparing its link
    /// collection the first time); linking twice is harmless.
    /// - Throws: `.invalidQuery` for a relation that is not many-to-many;
    ///   `.referenceViolation` at the end of the transaction if either record is missing.
    public func link(_ owner: RecordID, _ target: RecordID, by relation: RelationDescriptor) throws {
        let schema = try relation.linkSchema()
        guard case .manyToMany(_, let ownerField, let targetField) = relation.kind else { return }
        if !preparedModels.contains("link:" + schema.name.rawValue) {
            try prepare(schema)
            preparedModels.insert("link:" + schema.name.rawValue)
        }
        try save(Record(id: RelationDescriptor.linkID(owner, target), fields: [ownerField: owner.fieldValue, targetField: target.fieldValue]), into: schema.name)
    }

    /// Removes the link between `owner` and `target`; `false` when there was none.
    @discardableResult
    public func unlink(_ owner: RecordID, _ target: RecordID, by relation: RelationDescriptor) throws -> Bool {
        let schema = try relation.linkSchema()
        return try delete(RelationDescriptor.linkID(owner, target), from: schema.name)
    }
}

extension StoreReadTransaction {
    /// `records` of their collection with `includes` loaded: one query per relation level
    /// per chunk of ids, all in this transaction's snapshot.
    public func load(_ includes: [Include], for records: [Record]) throws -> [LoadedRecord] {
        try Relations.load(includes, for: records, in: base)
    }

    /// The results of `query` with `includes` loaded.
    public func query(_ query: Query, in collection: CollectionName, including includes: [Include]) throws -> [LoadedRecord] {
        try Relations.load(includes, for: try self.query(query, in: collection), in: base)
    }
}

extension Collection {
    /// The results of `query` with the relations `includes` loaded (untyped).
    public func query(_ query: Query = Query(), including includes: [Include]) async throws -> [LoadedRecord] {
        let name = self.name
        return try await store.read { tx in try tx.query(query, in: name, including: includes) }
    }
}

/// A repository query that loads relations with its results.
public struct LoadingQuery<M: StoredModel>: Sendable {
    /// The query of the models themselves.
    public let base: RepositoryQuery<M>
    /// The relations loaded with each.
    public let includes: [Include]

    /// Every result with its relations, in the query's order, read in one snapshot.
    /// - Throws: `.invalidQuery`, `.decoding`.
    public func all() async throws -> [Loaded<M>] {
        let query = base.query, collection = base.repository.collection, includes = self.includes
        return try await base.repository.store.read { tx in
            let records = try tx.query(query, in: collection)
            return try Relations.load(includes, for: records, in: tx.base).map { try Loaded<M>($0, includes: includes) }
        }
    }

    /// How the query and each relation level would run: the driver's plan for the query,
    /// then per relation (depth first) the plan of its lookup and whether the loader reads
    /// it in chunked `in` queries (the plan uses an index) or in one scan.
    public func explain() async throws -> [String] {
        let query = base.query, collection = base.repository.collection, includes = self.includes
        return try await base.repository.store.read { tx in
            var lines = ["\(collection): \(try tx.base.explain(query, in: collection))"]
            try Relations.explain(includes, depth: 1, in: tx.base, into: &lines)
            return lines
        }
    }

    /// The first result with its relations, or `nil`.
    public func first() async throws -> Loaded<M>? {
        try await LoadingQuery(base: base.limit(1), includes: includes).all().first
    }
}

extension RepositoryQuery {
    /// Loads `includes` (relations of `M`, each with its own nested includes) with the results.
    ///
    /// ```swift
    /// let authors = try await repo.query().including(Author.books.including(Book.tags)).all()
    /// for author in authors { print(author.name, try author.related(Author.books).count) }
    /// ```
    public func including(_ includes: any IncludeConvertible...) -> LoadingQuery<M> {
        LoadingQuery(base: self, includes: includes.map(\.include))
    }
}

extension TransactionRepository {
    /// Saves `graph`'s model and the related models set on it with `with(_:_:)`, recursively,
    /// in this transaction, setting reference fields from the ids saved (and assigned).
    /// Returns the model as stored.
    /// - Throws: `.unsupported` inside a read transaction, and the errors of each save.
    @discardableResult
    public func save(graph: Loaded<M>) throws -> M {
        let record = try graph.saveGraph(in: try writer, linkedTo: nil, by: nil)
        return try M.decode(record)
    }

    /// Links two models through a many-to-many relation.
    public func link<T>(_ owner: M, _ target: T, by relation: ManyToMany<M, T>) throws {
        guard let ownerID = owner.storedRecordID, let targetID = target.storedRecordID else {
            throw DepotError(.invalidValue, "Both models need ids to be linked.", collection: relation.through)
        }
        try writer.link(ownerID, targetID, by: relation.descriptor)
    }

    /// Removes the link between two models; `false` when there was none.
    @discardableResult
    public func unlink<T>(_ owner: M, _ target: T, by relation: ManyToMany<M, T>) throws -> Bool {
        guard let ownerID = owner.storedRecordID, let targetID = target.storedRecordID else { return false }
        return try writer.unlink(ownerID, targetID, by: relation.descriptor)
    }
}

extension Repository {
    /// Saves a graph in one transaction: see ``TransactionRepository/save(graph:)``.
    @discardableResult
    public func save(graph: Loaded<M>) async throws -> M {
        try await store.write { tx in try tx.repository(M.self).save(graph: graph) }
    }

    /// Links two models through a many-to-many relation, in one transaction.
    public func link<T>(_ owner: M, _ target: T, by relation: ManyToMany<M, T>) async throws {
        try await store.write { tx in try tx.repository(M.self).link(owner, target, by: relation) }
    }

    /// Removes the link between two models; `false` when there was none.
    @discardableResult
    public func unlink<T>(_ owner: M, _ target: T, by relation: ManyToMany<M, T>) async throws -> Bool {
        try await store.write { tx in try tx.repository(M.self).unlink(owner, target, by: relation) }
    }

    /// Explicit fetch of a relation that was not loaded eagerly.
    private func fetch<T: StoredModel>(_ include: Include, of model: M, as type: T.Type) async throws -> [T] {
        let record = try model.record()
        return try await store.read { tx in
            let loaded = try Relations.load([include], for: [record], in: tx.base)
            return try (loaded.first?.related[include.descriptor.name] ?? []).map { try T.decode($0.record) }
        }
    }

    /// The target of a to-one relation of `model`, read now; `nil` when there is none.
    public func related<T>(_ relation: BelongsTo<M, T>, of model: M) async throws -> T? { try await fetch(relation.include, of: model, as: T.self).first }
    /// The target of a to-one relation of `model`, read now; `nil` when there is none.
    public func related<T>(_ relation: HasOne<M, T>, of model: M) async throws -> T? { try await fetch(relation.include, of: model, as: T.self).first }
    /// The targets of a to-many relation of `model`, read now, in id order.
    public func related<T>(_ relation: HasMany<M, T>, of model: M) async throws -> [T] { try await fetch(relation.include, of: model, as: T.self) }
    /// The targets of a many-to-many relation of `model`, read now, in id order.
    public func related<T>(_ relation: ManyToMany<M, T>, of model: M) async throws -> [T] { try await fetch(relation.include, of: model, as: T.self) }
}
