import Depot
import DepotCore
import Foundation
import Testing

/// The synchronous API (`store.blocking`, `repository.blocking`, `query.blocking`) on every
/// built-in driver, called from plain threads: the same results, transactions, change
/// events and errors as the async API.
@Suite struct BlockingAPITests {
    struct Book: Model, Equatable {
        var id: Int64?
        var isbn: String
        var title: String
        var year: Int
        static let uniqueConstraints = [UniqueConstraint(["isbn"])]
    }

    static func storeStrings(_ dir: String) -> [String] {
        ["memory:", "sqlite:\(dir)/b.sqlite?durability=normal", "sqlite:\(dir)/f.sqlite", "sqlite::memory:", "gdbm:\(dir)/g?durability=normal", "json:\(dir)/b.json"]
    }

    /// Runs `body` on a new plain thread (not Swift's cooperative pool) and waits for it.
    static func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread { continuation.resume(with: Result { try body() }) }
            thread.start()
        }
    }

    @Test func everyDriverAnswersTheBlockingCallsAsTheAsyncOnes() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("blocking-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for string in Self.storeStrings(dir) {
            let store = try await Store.open(string)
            let changes = store.changes()
            let summary = try await Self.onThread { () -> [String] in
                let books = try store.blocking.repository(Book.self)
                let dune = try books.insert(Book(id: nil, isbn: "1", title: "Dune", year: 1965))
                _ = try books.insert(Book(id: nil, isbn: "2", title: "Emma", year: 1815))
                try books.save([Book(id: 10, isbn: "3", title: "Ubik", year: 1969), Book(id: 11, isbn: "4", title: "Solaris", year: 1961)])
                // A throwing transaction leaves nothing behind.
                #expect(throws: DepotError.self) {
                    try store.blocking.write { tx in
                        try tx.repository(Book.self).insert(Book(id: 20, isbn: "5", title: "Kept?", year: 2000))
                        try tx.repository(Book.self).insert(Book(id: 21, isbn: "1", title: "Duplicate isbn", year: 2000))
                    }
                }
                let nested = #expect(throws: DepotError.self) {
                    try store.blocking.read { _ in try books.count() }
                }
                let sixties = try books.query().filter(Field("year") >= 1960 && Field("year") < 1970).sort("title").all()
                return [
                    "\(dune.id != nil)",
                    "\(try books.count())",
                    sixties.map(\.title).joined(separator: ","),
                    "\(try books.find(id: 10)?.title ?? "-")",
                    "\(try books.find(id: 20)?.title ?? "-")",
                    "\(nested?.code == .unsupported)",
                    "\(try books.query().filter(Field("year") < 1900).exists())",
                    "\(try books.delete(id: 10))",
                    "\(try books.query().filter(Field("year") < 1900).delete())",
                    "\(try books.all().map(\.title).sorted())",
                ]
            }
            #expect(summary == ["true", "4", "Dune,Solaris,Ubik", "Ubik", "-", "true", "true", "true", "1", "[\"Dune\", \"Solaris\"]"], "\(string)")
            // The async API sees what the blocking one wrote, and its change events went out.
            let books = try await store.repository(Book.self)
            #expect(try await books.count() == 2, "\(string)")
            var seen = 0
            for await batch in changes {
                seen += batch.changes.count
                if seen >= 6 { break }
            }
            #expect(seen == 6, "\(string)")
            try await store.close()
        }
    }

    @Test func threadsWritingThroughTheBlockingAPILoseNothing() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("blocking-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for string in Self.storeStrings(dir) {
            let store = try await Store.open(string)
            let items = try store.collection("items")
            let errors = Locked<[String]>([])
            let group = DispatchGroup()
            for worker in 0..<4 {
                group.enter()
                Thread {
                    defer { group.leave() }
                    do {
                        for n in 0..<50 {
                            let id = RecordID.int(Int64(worker * 1000 + n))
                            try store.blocking.write { tx in
                                let count = try tx.count(.all, in: items.name)
                                try tx.insert(Record(id: id, fields: ["seen": .int(Int64(count))]), into: items.name)
                            }
                            _ = try store.blocking.read { tx in try tx.get(id, from: items.name) }
                        }
                    } catch {
                        errors.withLock { $0.append("\(error)") }
                    }
                }.start()
            }
            await withCheckedContinuation { continuation in group.notify(queue: .global()) { continuation.resume() } }
            #expect(errors.withLock { $0 } == [], "\(string)")
            // Serializable: every transaction saw all the earlier ones, so the counts it
            // read are exactly 0..<200.
            let seen = try await store.read { tx in try tx.query(Query(), in: items.name).compactMap { record -> Int64? in
                if case .int(let n)? = record.fields["seen"] { return n }
                return nil
            } }
            #expect(seen.sorted() == (0..<200).map { Int64($0) }, "\(string)")
            try await store.close()
        }
    }
}
