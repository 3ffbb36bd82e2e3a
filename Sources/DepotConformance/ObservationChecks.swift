import DepotCore
import Foundation

/// Change events, observed queries and the read cache, through a ``Store`` on the driver
/// under test (Docs/Semantics.md, "Change events").
enum ObservationChecks {
    struct Task1: Model, Equatable {
        static let collectionName = "tasks"
        var id: Int
        var title: String
        var done: Bool
    }

    /// Collects the next `count` change batches of `store` (at most a minute).
    static func nextBatches(_ stream: AsyncStream<ChangeBatch>, count: Int, _ expect: Expect) async throws -> [ChangeBatch] {
        try await withTimeout(60, expect, "waiting for \(count) change batches") {
            var batches: [ChangeBatch] = []
            for await batch in stream {
                batches.append(batch)
                if batches.count == count { break }
            }
            return batches
        }
    }

    static let all: [ConformanceCheck] = [
        .driver("events.insertUpdateDeleteInOrder") { driver, expect in
            let store = try await Store(driver: driver)
            let tasks = try store.collection("tasks")
            let stream = store.changes()
            try await tasks.insert(Record(id: 1, fields: ["title": "a"]))
            try await tasks.save(Record(id: 1, fields: ["title": "b"]))
            try await tasks.save(Record(id: 2, fields: ["title": "c"]))
            try await tasks.delete(1)
            let batches = try await nextBatches(stream, count: 4, expect)
            let name = try CollectionName("tasks")
            try expect.equal(batches.map(\.changes), [
                [ChangeEvent(collection: name, kind: .inserted, id: 1)], [ChangeEvent(collection: name, kind: .updated, id: 1)],
                [ChangeEvent(collection: name, kind: .inserted, id: 2)], [ChangeEvent(collection: name, kind: .deleted, id: 1)],
            ], "change batches")
        },
        .driver("events.oneBatchPerTransaction") { driver, expect in
            let store = try await Store(driver: driver)
            let stream = store.changes()
            let tasks = try CollectionName("tasks"), notes = try CollectionName("notes")
            try await store.write { tx in
                try tx.insert(Record(id: 1), into: tasks)
                try tx.insert(Record(id: "n"), into: notes)
                _ = try tx.delete(1, from: tasks)
            }
            try await store.write { tx in _ = try tx.delete(matching: .all, from: notes) }
            let batches = try await nextBatches(stream, count: 2, expect)
            try expect.equal(batches[0].changes, [
                ChangeEvent(collection: tasks, kind: .inserted, id: 1), ChangeEvent(collection: notes, kind: .inserted, id: "n"),
                ChangeEvent(collection: tasks, kind: .deleted, id: 1),
            ], "first transaction's changes")
            try expect.equal(batches[0].collections, [tasks, notes], "collections of the first batch")
            try expect.equal(batches[1].changes, [ChangeEvent(collection: notes, kind: .deleted, id: "n")], "delete matching reports each id")
        },
        .driver("events.noEventsForRollbackOrNoOps") { driver, expect in
            let store = try await Store(driver: driver)
            let stream = store.changes()
            let tasks = try CollectionName("tasks")
            _ = try? await store.write { tx in
                try tx.insert(Record(id: 1), into: tasks)
                throw Fixture.Rollback()
            }
            _ = try? await store.write { tx in try tx.update(Record(id: 5), in: tasks) }
            try await store.write { tx in _ = try tx.delete(99, from: tasks) }
            try await store.write { tx in try tx.insert(Record(id: 2), into: tasks) }
            let batches = try await nextBatches(stream, count: 1, expect)
            try expect.equal(batches[0].changes, [ChangeEvent(collection: tasks, kind: .inserted, id: 2)], "the first batch is the first real commit")
        },
        .driver("events.closingTheStoreEndsSubscriptions") { driver, expect in
            let store = try await Store(driver: driver)
            let tasks = try store.collection("tasks")
            let stream = store.changes()
            try await tasks.insert(Record(id: 1))
            try await store.close()
            let received = try await withTimeout(60, expect, "a subscription after close") {
                var count = 0
                for await _ in stream { count += 1 }
                return count
            }
            try expect.equal(received, 1, "batches received before the stream ended")
        },
        .driver("events.observedQueryYieldsFreshResults") { driver, expect in
            let store = try await Store(driver: driver)
            let tasks = try await store.repository(Task1.self)
            try await tasks.save(Task1(id: 1, title: "a", done: false))
            let observed = tasks.observe(tasks.query().filter(Field("done") == false).sort("title"))
            let results = try await withTimeout(60, expect, "observed query") {
                var seen: [[Int]] = []
                for try await current in observed {
                    seen.append(current.map(\.id))
                    switch seen.count {
                    case 1: try await tasks.save(Task1(id: 2, title: "0 first", done: false))
                    case 2: try await tasks.save(Task1(id: 1, title: "a", done: true))
                    case 3: try await store.collection("other").save(Record(id: 1)); try await tasks.delete(id: 2)
                    default: break
                    }
                    if seen.count == 4 { break }
                }
                return seen
            }
            try expect.equal(results, [[1], [2, 1], [2], []], "observed results after each commit to the collection")
        },
        .driver("events.readCacheNeverStale") { driver, expect in
            let store = try await Store(driver: driver)
            let tasks = try await store.repository(Task1.self, cacheCapacity: 8)
            try await tasks.save(Task1(id: 1, title: "v1", done: false))
            try expect.equal(try await tasks.find(id: 1)?.title, "v1", "first read")
            try await tasks.save(Task1(id: 1, title: "v2", done: false))
            try expect.equal(try await tasks.find(id: 1)?.title, "v2", "read after a save")
            try await store.collection("tasks").update(Record(id: 1, fields: ["title": "v3", "done": true]))
            try expect.equal(try await tasks.find(id: 1)?.title, "v3", "read after an untyped update")
            try await tasks.delete(id: 1)
            try expect.equal(try await tasks.find(id: 1), nil, "read after a delete")
            _ = try? await store.write { tx in
                try tx.repository(Task1.self).save(Task1(id: 1, title: "rolled back", done: false))
                throw Fixture.Rollback()
            }
            try expect.equal(try await tasks.find(id: 1), nil, "read after a rolled-back save")
        },
    ]
}
