// Swift examples of Docs/SQLiteDriver.md (raw SQL, run here on a fresh store),
// Docs/PostgresDriver.md, Docs/Server.md and Docs/Sync.md (compiled only: they need a
// PostgreSQL server, bind a port until a signal, or call a remote host). DocExampleTests
// (DepotMemoryTests) checks that the lines from each "// example:" mark to
// "// end of example", less the lines ending in "// scaffold", are the document's block.
// Edit the document and this file together.
import Depot
import Foundation
import Testing

@Suite("Docs/SQLiteDriver.md: the raw SQL example runs as written")
struct SQLiteDocExampleTests {
    @Test func rawSQLExample() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try await Store.open(directory.storeString("sqlite", "books"))
        let books = try CollectionName("books")
        try await store.write { tx in
            for (id, author, year) in [(1, "Le Guin", 1969), (2, "Le Guin", 1974), (3, "Le Guin", 1971), (4, "Asimov", 1942), (5, "Verne", 1870)] {
                try tx.insert(Record(id: .int(Int64(id)), fields: ["author": .string(author), "year": .int(Int64(year)), "title": .string("t\(id)"), "isbn": .string("isbn-\(id)")]), into: books)
            }
        }
        let (result, counts, plan) = try await Self.example(store, books)
        #expect(result.columns == ["author", "n"])
        #expect(result.rows.first?["n"] == .int(3), "\(result.rows)")
        #expect(counts.rows.first?.values == [.int(6)], "the insert of id 7 committed: \(counts.rows)")
        #expect(!plan.description.isEmpty)
        let updated = try await store.collection(books).get(.int(5))
        #expect(updated?.fields["year"] == .int(1900), "the UPDATE committed with the insert: \(String(describing: updated))")
        try await store.close()
    }

    static func example(_ store: Store, _ books: CollectionName) async throws -> (SQLResult, SQLResult, QueryPlan) { // scaffold
// example: Docs/SQLiteDriver.md #1
let result = try await store.sql("SELECT author, count(*) AS n FROM books WHERE year >= ? GROUP BY author", [1950])
result.columns                    // ["author", "n"]
result.rows.first?["n"]           // .int(3)
try await store.write { tx in
    try tx.insert(Record(id: 7, fields: ["title": "Ubik"]), into: books)
    _ = try tx.sql("UPDATE books SET year = ?1 WHERE year < ?1", [1900])    // commits with the insert
}
let counts = try await store.read { tx in try tx.sql("SELECT count(*) FROM books") }   // read-only statements
let plan = try await store.explainSQL("SELECT title FROM books WHERE isbn = ?", ["x"])  // EXPLAIN QUERY PLAN
return (result, counts, plan) // scaffold
} // scaffold
// end of example
}

// example: Docs/PostgresDriver.md #1
import DepotPostgres

func postgresDocExample() async throws { // scaffold
var registry = DriverRegistry.standard
PostgresDriver.register(in: &registry)
let store = try await Store.open("postgres://app:secret@127.0.0.1/appdb?schema=depot", registry: registry)
_ = store // scaffold
} // scaffold
// end of example

// example: Docs/Server.md #1
import DepotServer

func serverDocExample() async throws { // scaffold
let store = try await Store.open("sqlite:served.db")
let server = DepotServer(store: store, configuration: .init(host: "127.0.0.1", port: 8080))
try await server.run { port in print("listening on \(port)") }   // until SIGINT/SIGTERM

// or, in tests and apps that embed it:
let port = try await server.start()   // port 0 (the default) picks a free port
await server.stop()
_ = port // scaffold
} // scaffold
// end of example

// example: Docs/Sync.md #1
import DepotSync

func syncDocExample(token: String) async throws { // scaffold
let store = try await Store.open("sqlite:app.db")
let sync = SyncCoordinator(store: store, conflictPolicy: .lastWriterWins(field: "updatedAt"))
var endpoint = SyncEndpoint(baseURL: URL(string: "https://api.example.com")!, path: "/posts")
endpoint.requestHook = { request in
    request.headers["Authorization"] = "Bearer \(token)"   // never logged, never sent to another host
}
try await sync.attach(try CollectionName("posts"), to: endpoint)

Task { for await event in await sync.events() { print(event) } }
let report = try await sync.sync(try CollectionName("posts"))   // pull, then push
print(report.succeeded, report.pushed, report.pulled, report.failures)
} // scaffold
// end of example
