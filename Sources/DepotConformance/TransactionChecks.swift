import DepotCore
import Foundation

/// Write transactions: atomic across collections, rolled back on throw, reads see their own
/// writes; read transactions see one snapshot (Docs/Semantics.md, "Transactions").
enum TransactionChecks {
    static let all: [ConformanceCheck] = [
        .driver("tx.returnsClosureValue") { driver, expect in
            let items = try Fixture.items
            let written = try await driver.write { tx -> String in
                try tx.insert(Record(id: 1, fields: ["v": "x"]), into: items)
                return "done"
            }
            try expect.equal(written, "done", "value returned by write")
            let read = try await driver.read { tx in try tx.get(1, from: items)?.fields["v"] }
            try expect.equal(read, .string("x"), "value returned by read")
        },
        .driver("tx.rollbackOnThrowAcrossCollections", requires: .transactions) { driver, expect in
            let users = try Fixture.users, posts = try Fixture.posts
            try await driver.write { tx in
                try tx.insert(Record(id: 1, fields: ["name": "Ada"]), into: users)
                try tx.insert(Record(id: 1, fields: ["title": "Notes"]), into: posts)
            }
            do {
                try await driver.write { tx in
                    try tx.insert(Record(id: 2, fields: ["name": "Bob"]), into: users)
                    try tx.update(Record(id: 1, fields: ["name": "Changed"]), in: users)
                    _ = try tx.delete(1, from: posts)
                    try tx.insert(Record(id: 2, fields: ["title": "Draft"]), into: posts)
                    throw Fixture.Rollback(tag: 7)
                }
                throw expect.failure("the write closure's error was swallowed")
            } catch let error as Fixture.Rollback {
                try expect.equal(error.tag, 7, "the closure's own error comes back unchanged")
            }
            try expect.equal(try await driver.records(in: users), [Record(id: 1, fields: ["name": "Ada"])], "users after rollback")
            try expect.equal(try await driver.records(in: posts), [Record(id: 1, fields: ["title": "Notes"])], "posts after rollback")
        },
        .driver("tx.rollbackOfDriverError", requires: .transactions) { driver, expect in
            let users = try Fixture.users, posts = try Fixture.posts
            try await driver.seed([Record(id: 1, fields: ["n": 1])], into: users)
            try await expect.throwsCode(.alreadyExists, "insert of an existing id at the end of a transaction") {
                try await driver.write { tx in
                    try tx.insert(Record(id: 5, fields: ["n": 5]), into: posts)
                    try tx.insert(Record(id: 2, fields: ["n": 2]), into: users)
                    try tx.insert(Record(id: 1, fields: ["n": 9]), into: users)
                }
            }
            try expect.equal(try await driver.ids(in: users), [1], "users after rollback")
            try expect.equal(try await driver.count(in: posts), 0, "posts after rollback")
        },
        .driver("tx.rollbackOfCreatedCollection", requires: .transactions) { driver, expect in
            let users = try Fixture.users, posts = try Fixture.posts
            try await driver.seed([Record(id: 1)], into: users)
            _ = try? await driver.write { tx in
                try tx.insert(Record(id: 1), into: posts)
                try tx.prepare(CollectionSchema(name: try Fixture.tags, idKind: .string))
                throw Fixture.Rollback()
            }
            let names = try await driver.read { tx in try tx.collectionNames() }
            try expect.equal(names, [users], "collections created in a rolled-back transaction are gone")
        },
        .driver("tx.rollbackOfDrop", requires: .transactions) { driver, expect in
            let users = try Fixture.users
            try await driver.seed([Record(id: 1, fields: ["a": 1]), Record(id: 2, fields: ["a": 2])], into: users)
            _ = try? await driver.write { tx in
                _ = try tx.dropCollection(users)
                throw Fixture.Rollback()
            }
            try expect.equal(try await driver.ids(in: users), [1, 2], "records of a collection dropped in a rolled-back transaction")
        },
        .driver("tx.rollbackOfSchemaChange", requires: [.transactions, .uniqueConstraints]) { driver, expect in
            let users = try Fixture.users
            let original = CollectionSchema(name: users, idKind: .int, uniqueConstraints: [UniqueConstraint(["email"])], indexes: [IndexDefinition(["age"])])
            try await driver.write { tx in try tx.prepare(original) }
            _ = try? await driver.write { tx in
                try tx.prepare(CollectionSchema(name: users, idKind: .int))
                throw Fixture.Rollback()
            }
            try expect.equal(try await driver.read { tx in try tx.schema(of: users) }, original, "schema after a rolled-back prepare")
        },
        .driver("tx.rollbackKeepsAssignedIdsConsistent", requires: [.transactions, .assignedIDs]) { driver, expect in
            let items = try Fixture.items
            let first = try await driver.write { tx in try tx.insert(fields: ["v": 1], into: items) }
            _ = try? await driver.write { tx in
                _ = try tx.insert(fields: ["v": 2], into: items)
                throw Fixture.Rollback()
            }
            let next = try await driver.write { tx in try tx.insert(fields: ["v": 3], into: items) }
            try expect.equal(first, 1, "first id")
            try expect.that(next > first, "id after a rolled-back assignment is greater than \(first), got \(next)")
            try expect.equal(try await driver.count(in: items), 2, "two records")
        },
        .driver("tx.readsSeeOwnWrites") { driver, expect in
            let items = try Fixture.items, tags = try Fixture.tags
            try await driver.seed([Record(id: 1, fields: ["n": 1]), Record(id: 2, fields: ["n": 2]), Record(id: 3, fields: ["n": 3])], into: items)
            let seen = try await driver.write { tx -> [String] in
                try tx.insert(Record(id: 4, fields: ["n": 4]), into: items)
                try tx.update(Record(id: 1, fields: ["n": 10]), in: items)
                _ = try tx.delete(2, from: items)
                try tx.insert(Record(id: "t", fields: ["x": true]), into: tags)
                return [
                    "\(try tx.get(4, from: items)?.fields["n"] ?? .null)",
                    "\(try tx.get(1, from: items)?.fields["n"] ?? .null)",
                    "\(try tx.get(2, from: items) == nil)",
                    try tx.query(Query(sort: [SortKey("n", descending: true)]), in: items).map(\.id.description).joined(separator: ","),
                    "\(try tx.count(.greater("n", 3), in: items))",
                    try tx.collectionNames().map(\.rawValue).joined(separator: ","),
                    "\(try tx.schema(of: tags)?.idKind.rawValue ?? "none")",
                ]
            }
            try expect.equal(seen, ["4", "10", "true", "1,4,3", "2", "items,tags", "string"], "what the transaction saw of its own writes")
        },
        .driver("tx.commitIsVisibleToLaterReads") { driver, expect in
            let items = try Fixture.items
            for i in 1...5 {
                try await driver.write { tx in try tx.insert(Record(id: .int(Int64(i)), fields: ["n": .int(Int64(i))]), into: items) }
                try expect.equal(try await driver.count(in: items), i, "count after commit \(i)")
            }
        },
        .driver("tx.readTransactionIsConsistent") { driver, expect in
            let users = try Fixture.users, posts = try Fixture.posts
            try await driver.write { tx in
                for i in 1...20 {
                    try tx.insert(Record(id: .int(Int64(i)), fields: ["n": .int(Int64(i))]), into: users)
                    try tx.insert(Record(id: .int(Int64(i)), fields: ["user": .int(Int64(i))]), into: posts)
                }
            }
            let (u, p, q) = try await driver.read { tx in (try tx.count(.all, in: users), try tx.count(.all, in: posts), try tx.query(Query(filter: .less("n", 5)), in: users).count) }
            try expect.equal([u, p, q], [20, 20, 4], "counts in one read transaction")
        },
        .driver("tx.snapshotWhileWriterCommits", requires: .snapshotReads) { driver, expect in
            let users = try Fixture.users, posts = try Fixture.posts
            try await driver.write { tx in
                for i in 1...10 {
                    try tx.insert(Record(id: .int(Int64(i)), fields: ["n": 1]), into: users)
                    try tx.insert(Record(id: .int(Int64(i)), fields: ["n": 1]), into: posts)
                }
            }
            let signal = SnapshotSignal()
            // The reader blocks its thread inside the read transaction; both sides run off the
            // cooperative pool so the writer never waits for a free pool thread.
            let writer = Task(executorPreference: DedicatedExecutor("depot.conformance.writer")) {
                try await signal.waitUntilReaderStarted()
                try await driver.write { tx in
                    for i in 1...10 { try tx.update(Record(id: .int(Int64(i)), fields: ["n": 2]), in: users) }
                    try tx.insert(Record(id: 11, fields: ["n": 2]), into: users)
                    _ = try tx.delete(1, from: posts)
                }
                signal.writerCommitted()
            }
            let observed = try await Task(executorPreference: DedicatedExecutor("depot.conformance.reader")) {
                try await driver.read { tx -> [Int] in
                let before = [try tx.count(.all, in: users), try tx.count(.equal("n", 1), in: users), try tx.count(.all, in: posts)]
                signal.readerStarted()
                // A driver may also make the writer wait for open readers (Docs/Semantics.md,
                // "Transactions", lets each driver choose); then the snapshot is trivially
                // consistent.
                let committed = signal.waitForWriter(seconds: 1.5)
                let after = [try tx.count(.all, in: users), try tx.count(.equal("n", 1), in: users), try tx.count(.all, in: posts),
                             try tx.get(1, from: users)?.fields["n"] == .int(1) ? 1 : 0, try tx.get(1, from: posts) != nil ? 1 : 0]
                return before + after + [committed ? 1 : 0]
                }
            }.value
            try await writer.value
            try expect.equal(observed.count, 9, "values observed")
            try expect.equal(Array(observed[0..<3]), [10, 10, 10], "counts when the read began")
            try expect.equal(Array(observed[3..<8]), [10, 10, 10, 1, 1], observed[8] == 1 ? "the same snapshot after the writer committed" : "the same snapshot while the writer waited")
            try expect.equal(try await driver.count(.equal("n", 2), in: users), 11, "a new read sees the commit")
            try expect.equal(try await driver.count(in: posts), 9, "a new read sees the delete")
        },
        .driver("tx.sequentialTransactionsSerialize") { driver, expect in
            let items = try Fixture.items
            try await driver.seed([Record(id: 1, fields: ["counter": 0])], into: items)
            for _ in 0..<20 {
                try await driver.write { tx in
                    let current = try tx.get(1, from: items)?.fields["counter"]?.intValue ?? -1000
                    try tx.update(Record(id: 1, fields: ["counter": .int(current + 1)]), in: items)
                }
            }
            try expect.equal(try await driver.record(1, in: items)?.fields["counter"], .int(20), "counter after 20 read-modify-write transactions")
        },
        .driver("tx.failedTransactionLeavesStoreUsable") { driver, expect in
            let items = try Fixture.items
            for round in 0..<5 {
                _ = try? await driver.write { tx in
                    try tx.insert(Record(id: .int(Int64(100 + round))), into: items)
                    throw Fixture.Rollback(tag: round)
                }
                try await driver.write { tx in try tx.insert(Record(id: .int(Int64(round))), into: items) }
            }
            try expect.equal(try await driver.ids(in: items), [0, 1, 2, 3, 4], "only the committed inserts")
        },
    ]
}

/// Lets a reader inside a read transaction and a writer task take turns, without blocking
/// the writer's thread: the reader blocks (it owns a transaction), the writer polls.
final class SnapshotSignal: Sendable {
    private let state = Locked<(readerStarted: Bool, writerDone: Bool)>((false, false))
    private let condition = NSCondition()

    func readerStarted() { state.withLock { $0.readerStarted = true } }

    func waitUntilReaderStarted() async throws {
        while !state.withLock({ $0.readerStarted }) { try await Task.sleep(nanoseconds: 1_000_000) }
    }

    func writerCommitted() {
        condition.lock()
        state.withLock { $0.writerDone = true }
        condition.broadcast()
        condition.unlock()
    }

    /// Blocks the calling thread until the writer committed or `seconds` passed.
    func waitForWriter(seconds: Double) -> Bool {
        let deadline = Date(timeIntervalSinceNow: seconds)
        condition.lock()
        defer { condition.unlock() }
        while !state.withLock({ $0.writerDone }) {
            if !condition.wait(until: deadline) { return state.withLock { $0.writerDone } }
        }
        return true
    }
}

/// Runs a task's jobs on its own serial dispatch queue instead of the cooperative pool, so a
/// check may block a thread (inside a transaction) without starving the tasks it waits for.
final class DedicatedExecutor: TaskExecutor {
    private let queue: DispatchQueue

    init(_ label: String) { queue = DispatchQueue(label: label) }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
