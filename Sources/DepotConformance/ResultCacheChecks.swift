import DepotCore
import Foundation

/// The opt-in result cache (Docs/Semantics.md, "Result cache"): never a result older than
/// a write that has returned, with writers running at the same time.
enum ResultCacheChecks {
    struct Counter: Model, Equatable {
        static let collectionName = "counters"
        var id: Int
        var n: Int
    }

    static let all: [ConformanceCheck] = [
        .driver("resultCache.servesAndForgets") { driver, expect in
            let store = try await Store(driver: driver)
            let counters = try await store.repository(Counter.self)
            try await counters.save(Counter(id: 1, n: 0))
            let query = counters.query().filter(Field("n") >= 0).cached()
            try expect.equal(try await query.all(), [Counter(id: 1, n: 0)], "first read")
            let before = store.resultCacheStatistics
            try expect.equal(try await query.all(), [Counter(id: 1, n: 0)], "second read")
            try expect.equal(store.resultCacheStatistics.hits, before.hits + 1, "the second read came from the cache")
            try await counters.save(Counter(id: 2, n: 5))
            try expect.equal(try await query.all(), [Counter(id: 1, n: 0), Counter(id: 2, n: 5)], "a read after a write sees it")
            try await store.collection("other").insert(Record(id: 1))
            let hits = store.resultCacheStatistics.hits
            _ = try await query.all()
            try expect.equal(store.resultCacheStatistics.hits, hits + 1, "a write to another collection keeps the entry")
            try await counters.update(matching: .all, FieldChange(set: ["n": 7]))
            try expect.equal(try await query.count(), 2, "count through the cache")
            try expect.equal(try await query.all().map(\.n), [7, 7], "a partial update is seen")
            try await counters.delete(id: 2)
            try expect.equal(try await store.collection("counters").query(Query(), cached: true).map(\.id), [1], "records through the cache after a delete")
            _ = try await store.collection("counters").drop()
            try expect.equal(try await store.collection("counters").query(Query(), cached: true).count, 0, "nothing after the collection is dropped")
        },
        .driver("resultCache.neverStaleWithConcurrentWriters") { driver, expect in
            let store = try await Store(driver: driver)
            let counters = try await store.repository(Counter.self)
            try await counters.save(Counter(id: 1, n: 0))
            let rounds = 60
            // Each writer bumps the counter and then, after its write returned, reads through
            // the cache: it must see at least its own value. Readers see values only grow.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<2 {
                    group.addTask {
                        for _ in 0..<rounds {
                            let written = try await store.write { tx -> Int in
                                let repo = try tx.repository(Counter.self)
                                let current = try repo.find(id: 1)?.n ?? 0
                                try repo.save(Counter(id: 1, n: current + 1))
                                return current + 1
                            }
                            let seen = try await counters.query().cached().first()?.n ?? -1
                            guard seen >= written else { throw expect.failure("writer \(writer) wrote \(written), then read \(seen) through the cache") }
                        }
                    }
                }
                group.addTask {
                    var last = 0
                    for _ in 0..<(rounds * 2) {
                        let seen = try await counters.query().cached().first()?.n ?? -1
                        guard seen >= last else { throw expect.failure("a reader saw \(seen) after \(last)") }
                        last = seen
                    }
                }
                try await group.waitForAll()
            }
            try expect.equal(try await counters.query().cached().first()?.n, rounds * 2, "the final value through the cache")
        },
    ]
}
