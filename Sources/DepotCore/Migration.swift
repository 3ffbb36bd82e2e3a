/// One versioned change to a store's data or schema, written once and run on every driver.
///
/// ```swift
/// let migrations = [
///     Migration(version: 1, [.addField("users", "active", default: true)]),
///     Migration(version: 2, [.renameField("users", from: "name", to: "fullName"),
///                            .addUnique("users", UniqueConstraint(["email"]))]),
///     Migration(version: 3, [.transform("users") { record in
///         record.fields["email"] = record["email"].stringValue.map { .string($0.lowercased()) } ?? .null
///     }]),
/// ]
/// try await store.migrate(migrations)
/// ```
///
/// Each migration runs in one write transaction together with the new version number, so
/// a half-run migration never remains. Adding a field to a model needs no migration.
public struct Migration: Sendable {
    /// The schema version the store is at once this migration has run; versions must be unique.
    public var version: Int
    /// The steps, run in order inside one write transaction.
    public var steps: [MigrationStep]

    /// A migration to `version` made of `steps`.
    public init(version: Int, _ steps: [MigrationStep]) {
        self.version = version
        self.steps = steps
    }
}

/// The versions one migration takes a store between, given to the callbacks of
/// ``Store/migrate(_:willMigrate:didMigrate:)``.
public struct MigrationTransition: Sendable, Hashable {
    /// The store's schema version before the migration (0 for a store never migrated).
    public let from: Int
    /// The version the migration brings it to (the ``Migration/version``).
    public let to: Int

    /// The transition from `from` to `to`.
    public init(from: Int, to: Int) {
        self.from = from
        self.to = to
    }
}

/// One step of a ``Migration``.
public enum MigrationStep: Sendable {
    /// Sets `field` to `default` on every record that lacks it.
    case addField(String, String, default: FieldValue)
    /// Moves `from` to `to` on every record that has it.
    case renameField(String, from: String, to: String)
    /// Removes `field` from every record.
    case removeField(String, String)
    /// Adds (or replaces, by name) a secondary index on the collection.
    case addIndex(String, IndexDefinition)
    /// Removes the index with that name.
    case removeIndex(String, name: String)
    /// Adds (or replaces, by name) a unique constraint; fails with `.uniqueViolation` when
    /// existing records break it.
    case addUnique(String, UniqueConstraint)
    /// Removes the unique constraint with that name.
    case removeUnique(String, name: String)
    /// Rewrites every record of the collection; the closure may change fields (not the id).
    case transform(String, @Sendable (inout Record) throws -> Void)
}

extension Store {
    /// The store's schema version: 0 before any migration.
    public func schemaVersion() async throws -> Int {
        try await read { tx in try Store.version(tx) }
    }

    static let metaCollection = "_depot_meta"

    static func version(_ tx: StoreReadTransaction) throws -> Int {
        let meta = try CollectionName(reserved: metaCollection)
        guard let record = try tx.get("schema", from: meta) else { return 0 }
        guard case .int(let version) = record["version"], let value = Int(exactly: version) else {
            throw DepotError(.corrupted, "The store's schema version record is damaged.", collection: metaCollection)
        }
        return value
    }

    /// Runs the migrations newer than the store's version, in order, each in its own transaction.
    /// Returns the version reached.
    ///
    /// `willMigrate` and `didMigrate` are called around each migration that runs, with the
    /// versions it goes from and to, *outside* its write transaction (Docs/Semantics.md,
    /// "Migrations"), so each is called exactly once per migration however the driver runs
    /// the transaction (a driver may run a transaction closure twice):
    ///
    /// - `willMigrate` before the transaction begins. Throwing aborts: that migration and
    ///   the later ones do not run, nothing of them is written, and `migrate` throws the
    ///   error (earlier migrations stay committed).
    /// - `didMigrate` after the transaction committed. Throwing stops the later migrations;
    ///   the committed one stays.
    ///
    /// Neither is called when the store is already at the newest version.
    ///
    /// ```swift
    /// try await store.migrate(migrations,
    ///     willMigrate: { step in try await backUp(before: step.to) },
    ///     didMigrate: { step in log.info("store migrated from \(step.from) to \(step.to)") })
    /// ```
    /// - Throws: `.schemaMismatch` when the store was written by a newer version than any
    ///   migration given (an older app opening a newer store), or when versions repeat;
    ///   a failing step's error, after rolling its migration back; what a callback throws.
    @discardableResult
    public func migrate(
        _ migrations: [Migration],
        willMigrate: (@Sendable (MigrationTransition) async throws -> Void)? = nil,
        didMigrate: (@Sendable (MigrationTransition) async throws -> Void)? = nil
    ) async throws -> Int {
        let sorted = migrations.sorted { $0.version < $1.version }
        for (a, b) in zip(sorted, sorted.dropFirst()) where a.version == b.version {
            throw DepotError(.schemaMismatch, "Two migrations have version \(a.version).")
        }
        let known = sorted.last?.version ?? 0
        let current = try await schemaVersion()
        if current > known {
            throw DepotError(.schemaMismatch, "This store is at schema version \(current), newer than this program knows (\(known)). Use a newer version of the program.")
        }
        var reached = current
        for migration in sorted where migration.version > current {
            let expected = reached
            let transition = MigrationTransition(from: expected, to: migration.version)
            if let willMigrate { try await willMigrate(transition) }
            try await write { tx in
                guard try Store.version(tx) == expected else {
                    throw DepotError(.conflict, "Another process migrated the store at the same time; open it again.")
                }
                for step in migration.steps { try Store.apply(step, in: tx) }
                let meta = try CollectionName(reserved: Store.metaCollection)
                try tx.save(Record(id: "schema", fields: ["version": .int(Int64(migration.version))]), into: meta)
            }
            reached = migration.version
            if let didMigrate { try await didMigrate(transition) }
        }
        return reached
    }

    static func apply(_ step: MigrationStep, in tx: StoreWriteTransaction) throws {
        switch step {
        case let .addField(collection, field, defaultValue):
            try FieldName.validate(field, collection: collection)
            try rewrite(collection, in: tx, where: .isNull(field)) { $0.fields[field] = defaultValue }
        case let .renameField(collection, from, to):
            try FieldName.validate(from, collection: collection)
            try FieldName.validate(to, collection: collection)
            try rewrite(collection, in: tx, where: .isNotNull(from)) { record in
                record.fields[to] = record.fields.removeValue(forKey: from)
            }
        case let .removeField(collection, field):
            try FieldName.validate(field, collection: collection)
            try rewrite(collection, in: tx, where: .isNotNull(field)) { $0.fields[field] = nil }
        case let .transform(collection, body):
            try rewrite(collection, in: tx, where: .all) { record in
                let id = record.id
                try body(&record)
                guard record.id == id else {
                    throw DepotError(.invalidValue, "A transform may not change a record's id.", collection: collection, id: id)
                }
            }
        case let .addIndex(collection, index):
            try changeSchema(collection, in: tx) { $0.indexes.removeAll { $0.name == index.name }; $0.indexes.append(index) }
        case let .removeIndex(collection, name):
            try changeSchema(collection, in: tx) { $0.indexes.removeAll { $0.name == name } }
        case let .addUnique(collection, constraint):
            try changeSchema(collection, in: tx) {
                $0.uniqueConstraints.removeAll { $0.name == constraint.name }
                $0.uniqueConstraints.append(constraint)
            }
        case let .removeUnique(collection, name):
            try changeSchema(collection, in: tx) { $0.uniqueConstraints.removeAll { $0.name == name } }
        }
    }

    private static func rewrite(_ collection: String, in tx: StoreWriteTransaction, where filter: Filter, _ change: (inout Record) throws -> Void) throws {
        let name = try CollectionName(collection)
        let records = try tx.query(Query(filter: filter), in: name)
        for var record in records {
            let before = record
            try change(&record)
            if record != before { try tx.update(record, in: name) }
        }
    }

    private static func changeSchema(_ collection: String, in tx: StoreWriteTransaction, _ change: (inout CollectionSchema) -> Void) throws {
        let name = try CollectionName(collection)
        guard var schema = try tx.schema(of: name) else {
            throw DepotError(.notFound, "Collection '\(collection)' does not exist.", collection: collection)
        }
        change(&schema)
        try tx.prepare(schema)
    }
}
