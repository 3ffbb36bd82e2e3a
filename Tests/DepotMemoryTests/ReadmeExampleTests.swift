import Depot
import Foundation
import Testing

/// The README's example, run as written (on `memory:`), so the documented API cannot drift.
@Suite struct ReadmeExampleTests {
    struct Book: Model {
        var id: Int64?
        var isbn: String
        var title: String
        var year: Int
        static let uniqueConstraints = [UniqueConstraint(["isbn"])]
        static let indexes = [IndexDefinition(["year"])]
    }

    @Test func readmeExampleRuns() async throws {
        let store = try await Store.open("memory:")
        let books = try await store.repository(Book.self)
        let dune = try await books.insert(Book(id: nil, isbn: "978-0441013593", title: "Dune", year: 1965))
        try await books.upsert(Book(id: nil, isbn: "978-0441013593", title: "Dune (reissue)", year: 1965), uniqueOn: "isbn_unique")
        let sixties = try await books.query().filter(Field("year") >= 1960 && Field("year") < 1970).sort("title").all()
        #expect(sixties.map(\.title) == ["Dune (reissue)"])
        #expect(sixties.first?.id == dune.id)
        var seen = -1
        for try await current in books.observe(books.query().filter(Field("title").hasPrefix("D"))) {
            seen = current.count
            break
        }
        #expect(seen == 1)
        try await store.write { tx in
            try tx.repository(Book.self).delete(id: dune.id)
        }
        #expect(try await books.count() == 0)
        try await store.close()
    }
}
