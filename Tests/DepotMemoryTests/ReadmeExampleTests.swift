import Depot
import Foundation
import Testing

/// The README's example, run as written (on `memory:`), so the documented API cannot drift.
@Suite struct ReadmeExampleTests {
    /// The README's types, compiled as written in ReadmeExamples.swift.
    typealias Book = ReadmeExample1.Book

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

    typealias Shelf = ReadmeExample3.Shelf
    typealias Item = ReadmeExample3.Item

    /// The README's relations example, with data, checked.
    @Test func readmeRelationsExampleRuns() async throws {
        let store = try await Store.open("memory:")
        let hall = try await store.repository(Shelf.self).insert(Shelf(id: nil, name: "hall"))
        let attic = try await store.repository(Shelf.self).insert(Shelf(id: nil, name: "attic"))
        for (title, pages, shelf) in [("Dune", 600, hall), ("Emma", 400, hall), ("Ulysses", 700, attic)] {
            _ = try await store.repository(Item.self).insert(Item(id: nil, shelfID: shelf.id, title: title, pages: pages))
        }
        let shelves = try await store.repository(Shelf.self).query().including(Shelf.items).all()
        #expect(try shelves.map { try $0.related(Shelf.items).map(\.title) } == [["Dune", "Emma"], ["Ulysses"]])
        let perShelf = try await store.repository(Item.self).query()
            .aggregate([.count(), .sum("pages")], groupBy: ["shelfID"], having: Field("count") >= 2)
        #expect(perShelf.map(\.values) == [["shelfID": .int(hall.id ?? 0), "count": 2, "sum_pages": 1000]])
        let changed = try await store.repository(Item.self).update(matching: Field("pages") > 500, FieldChange(set: ["long": true]))
        #expect(changed == 2)
        try await store.repository(Shelf.self).delete(id: hall.id)
        #expect(try await store.repository(Item.self).all().map(\.title) == ["Ulysses"], "a shelf's items go with it")
        try await store.close()
    }
}
