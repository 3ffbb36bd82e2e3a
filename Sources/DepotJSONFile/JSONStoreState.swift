import DepotCore

/// The parsed contents of a JSON store: a value, so copying it is a snapshot.
///
/// Semantics are those of the memory driver (the reference), so the same operations give
/// the same results; the driver serializes this value to the file on each commit.
struct JSONStoreState: Sendable {
    var collections: [CollectionName: InMemoryCollection] = [:]
    /// A collection's records in id order, when known: set for every collection of a
    /// committed state (from the commit's serialization, which reuses the previous order for
    /// untouched records, or sorted once after loading) and removed by every write to that
    /// collection, so an entry is never out of step. Queries in id order walk it instead of
    /// sorting the collection or looking ids up (see ``JSONFileTransaction/forEach(_:in:_:)``).
    /// The field dictionaries are shared with `collections`, not copied.
    var order: [CollectionName: [Record]] = [:]

    /// Sets ``order`` for every collection that lacks it by sorting its records.
    mutating func completeOrder() {
        for (name, collection) in collections where order[name] == nil {
            order[name] = collection.records.sorted { $0.key < $1.key }.map { Record(id: $0.key, fields: $0.value) }
        }
    }

    /// Problems found by rebuilding every unique index (empty when sound).
    func problems() -> [String] {
        var found: [String] = []
        for name in collections.keys.sorted() {
            guard let collection = collections[name] else { continue }
            var rebuilt = collection
            do { try rebuilt.rebuildUniqueIndexes() } catch { found.append("\(name): \(error)") }
            if rebuilt.uniqueIndexes != collection.uniqueIndexes { found.append("\(name): unique index out of step") }
            for id in collection.records.keys where id.kind != collection.schema.idKind {
                found.append("\(name): record \(id) has a \(id.kind) id in a collection of \(collection.schema.idKind) ids")
            }
        }
        return found
    }
}

