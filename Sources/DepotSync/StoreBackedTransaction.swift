import DepotCore

/// Lets the sync code, written against `WriteTransaction`, write through a `Store`
/// transaction: writes go through the store (validation, change events, read-cache
/// invalidation, attachment reloads), reads through the driver's transaction (which sees
/// the transaction's own writes). Used with `Store.write(recordingOutbox: false)`, so
/// applying pulled records records no outbox entries.
final class StoreBackedTransaction: WriteTransaction {
    let store: StoreWriteTransaction
    var driver: any WriteTransaction { store.driverWriteTransaction }

    init(_ store: StoreWriteTransaction) { self.store = store }

    func collectionNames() throws -> [CollectionName] { try driver.collectionNames() }
    func schema(of collection: CollectionName) throws -> CollectionSchema? { try driver.schema(of: collection) }
    func get(_ id: RecordID, from collection: CollectionName) throws -> Record? { try driver.get(id, from: collection) }
    func forEach(_ query: Query, in collection: CollectionName, _ body: (Record) throws -> Bool) throws {
        try driver.forEach(query, in: collection, body)
    }
    func count(_ filter: Filter, in collection: CollectionName) throws -> Int { try driver.count(filter, in: collection) }
    func explain(_ query: Query, in collection: CollectionName) throws -> QueryPlan { try driver.explain(query, in: collection) }

    func prepare(_ schema: CollectionSchema) throws { try store.prepare(schema) }
    func dropCollection(_ collection: CollectionName) throws -> Bool { try store.dropCollection(collection) }
    func insert(_ record: Record, into collection: CollectionName) throws { try store.insert(record, into: collection) }
    func insert(fields: [String: FieldValue], into collection: CollectionName) throws -> RecordID {
        try store.insert(fields: fields, into: collection)
    }
    func update(_ record: Record, in collection: CollectionName) throws { try store.update(record, in: collection) }
    func save(_ record: Record, into collection: CollectionName) throws -> WriteOutcome { try store.save(record, into: collection) }
    func delete(_ id: RecordID, from collection: CollectionName) throws -> Bool { try store.delete(id, from: collection) }
    func delete(matching filter: Filter, from collection: CollectionName) throws -> Int { try store.delete(matching: filter, from: collection) }
}
