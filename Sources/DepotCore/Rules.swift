import Foundation

/// What deleting a record does to the records that refer to it (Docs/Relations.md).
public enum DeleteRule: String, Hashable, Sendable, Codable, CaseIterable {
    /// The referring records are deleted too (and their own rules apply).
    case cascade
    /// The referring records lose the reference: the field is removed.
    case nullify
    /// The delete is refused with `.referenceViolation` while referring records remain when
    /// the transaction ends.
    case deny
}

/// A reference from a field of one collection to the ids of another: a foreign key that
/// the store keeps whole on every driver (Docs/Relations.md, "Referential integrity").
///
/// A record whose `field` is not null must name an existing record of `target` when its
/// transaction ends; deleting a target record applies `onDelete` to the records naming it.
/// Both are checked in the transaction that writes, by the store, so every driver gives
/// the same answers.
///
/// ```swift
/// Reference("author", field: "authorID", to: "authors", onDelete: .cascade)
/// ```
public struct Reference: Hashable, Sendable {
    /// The relation's name, unique among the collection's references; errors name it.
    public var name: String
    /// The referring field: a top-level field holding the target's id.
    public var field: String
    /// The collection whose ids the field holds.
    public var target: String
    /// What deleting a target record does to the records referring to it.
    public var onDelete: DeleteRule

    /// A reference named `name` from `field` to the ids of `target`.
    public init(_ name: String, field: String, to target: String, onDelete: DeleteRule) {
        self.name = name
        self.field = field
        self.target = target
        self.onDelete = onDelete
    }

    var fieldValue: FieldValue {
        ["name": .string(name), "field": .string(field), "target": .string(target), "onDelete": .string(onDelete.rawValue)]
    }

    init(_ value: FieldValue) throws {
        guard case .object(let o) = value, case .string(let name)? = o["name"], case .string(let field)? = o["field"],
            case .string(let target)? = o["target"], case .string(let rule)? = o["onDelete"], let onDelete = DeleteRule(rawValue: rule)
        else { throw DepotError(.corrupted, "A stored reference rule is not readable.", collection: Rules.collectionName) }
        self.init(name, field: field, to: target, onDelete: onDelete)
    }
}

/// The rules the store keeps for a collection beyond what its driver enforces:
/// references, required fields and default values. Stored in the reserved collection
/// `_depot_rules`, one record per collection, written in the transaction that prepares it.
struct CollectionRules: Hashable, Sendable {
    var references: [Reference] = []
    var requiredFields: [String] = []
    var defaults: [String: FieldValue] = [:]

    var isEmpty: Bool { references.isEmpty && requiredFields.isEmpty && defaults.isEmpty }

    init(references: [Reference] = [], requiredFields: [String] = [], defaults: [String: FieldValue] = [:]) {
        self.references = references
        self.requiredFields = requiredFields
        self.defaults = defaults
    }

    init(schema: CollectionSchema) {
        self.init(references: schema.references, requiredFields: schema.requiredFields, defaults: schema.defaults)
    }

    var record: [String: FieldValue] {
        ["references": .array(references.map(\.fieldValue)), "required": .array(requiredFields.map { .string($0) }), "defaults": .object(defaults)]
    }

    init(record: Record) throws {
        if case .array(let refs)? = record.fields["references"] { references = try refs.map(Reference.init) }
        if case .array(let names)? = record.fields["required"] {
            requiredFields = try names.map {
                guard case .string(let s) = $0 else { throw DepotError(.corrupted, "A stored required field is not a name.", collection: Rules.collectionName) }
                return s
            }
        }
        if case .object(let d)? = record.fields["defaults"] { defaults = d }
    }

    /// `fields` with every missing default filled in.
    func withDefaults(_ fields: [String: FieldValue]) -> [String: FieldValue] {
        guard !defaults.isEmpty else { return fields }
        var out = fields
        for (name, value) in defaults where out[name] == nil { out[name] = value }
        return out
    }

    /// Throws when a required field is missing from `fields`.
    func checkRequired(_ fields: [String: FieldValue], collection: CollectionName, id: RecordID?) throws {
        for name in requiredFields where fields[name] == nil {
            throw DepotError(.invalidValue, "Field '\(name)' of '\(collection)' is required (NOT NULL) and has no value.", collection: collection.rawValue, id: id, constraint: name)
        }
    }
}

/// Every collection's rules, and for each collection the references that point at it.
struct RulesSnapshot: Sendable {
    var byCollection: [CollectionName: CollectionRules] = [:]

    var isEmpty: Bool { byCollection.isEmpty }

    /// The references into `target`: (referring collection, reference), in name order.
    func incoming(_ target: CollectionName) -> [(CollectionName, Reference)] {
        var out: [(CollectionName, Reference)] = []
        for (collection, rules) in byCollection.sorted(by: { $0.key < $1.key }) {
            for reference in rules.references where reference.target == target.rawValue { out.append((collection, reference)) }
        }
        return out
    }
}

/// The store's cached copy of `_depot_rules`, reloaded after a commit of this store that
/// changed it. Another process's rule changes are seen when the store is opened again
/// (Docs/Relations.md).
final class RulesCache: Sendable {
    private struct State {
        var snapshot: RulesSnapshot?
        var generation: UInt64 = 0
    }
    private let state = Locked(State())

    /// The snapshot, loading it with `load` (inside the caller's transaction) when there is none.
    func snapshot(_ load: () throws -> RulesSnapshot) throws -> RulesSnapshot {
        let (cached, generation) = state.withLock { ($0.snapshot, $0.generation) }
        if let cached { return cached }
        let loaded = try load()
        state.withLock { if $0.generation == generation { $0.snapshot = loaded } }
        return loaded
    }

    /// Drops the snapshot: the next transaction reads the rules again.
    func invalidate() {
        state.withLock {
            $0.snapshot = nil
            $0.generation += 1
        }
    }
}

enum Rules {
    static let collectionName = "_depot_rules"
    // A constant valid reserved name: `_depot_` followed by lower-case letters.
    static let collection: CollectionName = {
        do { return try CollectionName(reserved: collectionName) } catch { preconditionFailure("\(collectionName) is a valid reserved name") }
    }()

    /// Reads every collection's rules through `tx`.
    static func load(_ tx: any ReadTransaction) throws -> RulesSnapshot {
        var snapshot = RulesSnapshot()
        try tx.forEach(Query(), in: collection) { record in
            guard case .string(let name) = record.id else {
                throw DepotError(.corrupted, "A rules record has an id that is not a collection name.", collection: collectionName)
            }
            let rules = try CollectionRules(record: record)
            if !rules.isEmpty { snapshot.byCollection[try CollectionName(name)] = rules }
            return true
        }
        return snapshot
    }

    /// The id a reference field's value names, `nil` when the value cannot be an id.
    static func recordID(_ value: FieldValue) -> RecordID? {
        switch value {
        case .int(let i): return .int(i)
        case .double(let d):
            guard d.rounded(.towardZero) == d, d >= -9_223_372_036_854_775_808.0, d < 9_223_372_036_854_775_808.0 else { return nil }
            return .int(Int64(d))
        case .string(let s): return .string(s)
        default: return nil
        }
    }
}

extension CollectionSchema {
    /// Checks the store-kept parts: reference names, fields and targets, required fields, defaults.
    /// - Throws: `.invalidName`, `.invalidValue`.
    func validateRules() throws {
        var names = Set<String>()
        for reference in references {
            guard FieldName.isValid(reference.name), names.insert(reference.name).inserted else {
                throw DepotError(.invalidName, "Reference name \(CollectionName.quotedForMessage(reference.name)) is not allowed or not unique.", collection: name.rawValue)
            }
            try FieldName.validate(reference.field, collection: name.rawValue)
            _ = try CollectionName(reference.target)
        }
        for field in requiredFields { try FieldName.validate(field, collection: name.rawValue) }
        for (field, value) in defaults {
            try FieldName.validate(field, collection: name.rawValue)
            try value.validate(field: field)
            guard !value.isNull else {
                throw DepotError(.invalidValue, "The default of '\(field)' is null; leave it out instead.", collection: name.rawValue)
            }
        }
    }
}

// MARK: - Enforcement in the write gateway

extension StoreWriteTransaction {
    /// The rules as this transaction sees them (its own prepares included).
    func rulesSnapshot() throws -> RulesSnapshot {
        if let local = localRules ?? seenRules { return local }
        // Read once per transaction: a write then costs no lock to learn its rules.
        let snapshot = try store.rules.snapshot { try Rules.load(writer) }
        seenRules = snapshot
        return snapshot
    }

    /// The rules of `collection`, `nil` when it has none (the common, fast case).
    func rules(of collection: CollectionName) throws -> CollectionRules? {
        let snapshot = try rulesSnapshot()
        if snapshot.isEmpty { return nil }
        return snapshot.byCollection[collection]
    }

    /// Stores the rules of `schema` in `_depot_rules` and checks existing records against
    /// new required fields.
    func prepareRules(_ schema: CollectionSchema) throws {
        let rules = CollectionRules(schema: schema)
        let current = try rulesSnapshot()
        guard current.byCollection[schema.name] ?? CollectionRules() != rules else { return }
        for field in rules.requiredFields where !(current.byCollection[schema.name]?.requiredFields.contains(field) ?? false) {
            let missing = try writer.count(.isNull(field), in: schema.name)
            if missing > 0 {
                throw DepotError(.invalidValue, "\(missing) records of '\(schema.name)' have no '\(field)'; it cannot become required.", collection: schema.name.rawValue, constraint: field)
            }
        }
        if rules.isEmpty {
            try writer.delete(.string(schema.name.rawValue), from: Rules.collection)
        } else {
            if try writer.schema(of: Rules.collection) == nil {
                try writer.prepare(CollectionSchema(name: Rules.collection, idKind: .string))
            }
            try writer.save(Record(id: .string(schema.name.rawValue), fields: rules.record), into: Rules.collection)
        }
        var updated = current
        updated.byCollection[schema.name] = rules.isEmpty ? nil : rules
        localRules = updated
        rulesChanged = true
    }

    /// A record about to be written: defaults filled in, required fields checked, its
    /// references queued for the end-of-transaction check.
    func applyRules(_ record: Record, _ collection: CollectionName) throws -> Record {
        guard let rules = try rules(of: collection) else { return record }
        let fields = rules.withDefaults(record.fields)
        try rules.checkRequired(fields, collection: collection, id: record.id)
        if !rules.references.isEmpty { pendingReferenceChecks.append((collection, record.id)) }
        return Record(id: record.id, fields: fields)
    }

    /// A partial update about to be applied: a removed field with a default gets it back,
    /// a removed required field is refused; touched references are queued.
    func applyRules(_ change: FieldChange, _ collection: CollectionName) throws -> (FieldChange, CollectionRules?) {
        guard let rules = try rules(of: collection) else { return (change, nil) }
        var change = change
        for name in change.remove {
            if let value = rules.defaults[name] {
                change.remove.remove(name)
                change.set[name] = value
            } else if rules.requiredFields.contains(name) {
                throw DepotError(.invalidValue, "Field '\(name)' of '\(collection)' is required (NOT NULL) and cannot be removed.", collection: collection.rawValue, constraint: name)
            }
        }
        return (change, rules)
    }

    /// Applies the delete rules of the references into `collection` for the records `ids`
    /// just deleted: cascades and nullifies now, queues denials for the end of the transaction.
    func applyDeleteRules(_ ids: [RecordID], from collection: CollectionName) throws {
        guard !ids.isEmpty else { return }
        let snapshot = try rulesSnapshot()
        guard !snapshot.isEmpty else { return }
        for (referring, reference) in snapshot.incoming(collection) {
            for chunk in stride(from: 0, to: ids.count, by: Relations.chunkSize).map({ Array(ids[$0..<min($0 + Relations.chunkSize, ids.count)]) }) {
                let filter = Filter.isIn(reference.field, chunk.map(\.fieldValue))
                switch reference.onDelete {
                case .cascade:
                    try delete(matching: filter, from: referring)
                case .nullify:
                    try update(matching: filter, in: referring, FieldChange(remove: [reference.field]))
                case .deny:
                    pendingDenials.append((collection, chunk, referring, reference))
                }
            }
        }
    }

    /// The end-of-transaction checks: every queued reference names an existing record, and
    /// no denied delete left referring records.
    /// - Throws: `.referenceViolation` naming the relation.
    func checkReferences() throws {
        guard checksReferences, !pendingReferenceChecks.isEmpty || !pendingDenials.isEmpty else { return }
        let snapshot = try rulesSnapshot()
        var checked = Set<String>()
        for (collection, id) in pendingReferenceChecks {
            guard checked.insert(collection.rawValue + "\u{0}" + id.description).inserted,
                let rules = snapshot.byCollection[collection], let record = try writer.get(id, from: collection) else { continue }
            for reference in rules.references {
                let value = record[reference.field]
                if value.isNull { continue }
                let target = try CollectionName(reference.target)
                guard let targetID = Rules.recordID(value), try writer.get(targetID, from: target) != nil else {
                    throw DepotError(
                        .referenceViolation,
                        "Record \(id) of '\(collection)' refers through '\(reference.name)' (\(reference.field)) to a record of '\(target)' that does not exist.",
                        collection: collection.rawValue, id: id, constraint: reference.name)
                }
            }
        }
        for (target, ids, referring, reference) in pendingDenials {
            let gone = try ids.filter { try writer.get($0, from: target) == nil }
            guard !gone.isEmpty else { continue }
            if let left = try writer.first(Query(filter: .isIn(reference.field, gone.map(\.fieldValue))), in: referring) {
                throw DepotError(
                    .referenceViolation,
                    "A record of '\(target)' cannot be deleted: record \(left.id) of '\(referring)' still refers to it through '\(reference.name)' (delete rule deny).",
                    collection: target.rawValue, id: Rules.recordID(left[reference.field]), constraint: reference.name)
            }
        }
    }
}

extension DepotError.Code {
    /// A write would leave a reference to a record that does not exist, or a delete rule
    /// `deny` refused a delete; ``DepotError/constraint`` names the relation.
    public static let referenceViolation = DepotError.Code("referenceViolation")
}
