import DepotMemory
import Testing

// The README's @Model example (its second Swift block), compiled here as written.
// DocExampleTests (DepotMemoryTests) checks that the lines from the "// example:" mark to
// "// end of example", less the lines ending in "// scaffold", are the README's block.
// example: README.md #2
import DepotModel
import Foundation

@Model
struct Edition {
    var id: Int64?                              // nil: the store assigns one
    @Unique var isbn: String
    @Stored("title_text") var title: String
    @Transform(.millisecondsSince1970) var published: Date
    @Default(0) var printings: Int             // records written before it existed read as 0
}

func readmeExample2(_ store: Store) throws { // scaffold
let editions = try store.blocking.repository(Edition.self)   // no await: blocks this thread
let dune = try editions.insert(Edition(id: nil, isbn: "978-0441013593", title: "Dune", published: .now, printings: 1))
_ = dune // scaffold
} // scaffold
// end of example

/// The README's @Model and synchronous example compiles and does what its comments say.
@Suite struct ReadmeModelExampleTests {
    @Test func theReadmeExampleRuns() async throws {
        let store = try await Store(driver: MemoryDriver())
        let published = Date(timeIntervalSince1970: 1_000_000.25)
        let id = try await Task.detached {
            let editions = try store.blocking.repository(Edition.self)   // no await: blocks this thread
            let dune = try editions.insert(Edition(id: nil, isbn: "978-0441013593", title: "Dune", published: published, printings: 1))
            return dune.id
        }.value
        let assigned = try #require(id)
        let record = try await store.read { tx in try tx.get(.int(assigned), from: try CollectionName("Edition")) }
        #expect(record?.fields == ["isbn": "978-0441013593", "title_text": "Dune", "published": 1_000_000_250, "printings": 1])
        // A record stored before `printings` existed reads as 0.
        try await store.write { tx in try tx.save(Record(id: 1_000, fields: ["isbn": "0", "title_text": "Old", "published": 0]), into: try CollectionName("Edition")) }
        let old = try await store.repository(Edition.self).find(id: 1_000)
        #expect(old?.printings == 0 && old?.title == "Old" && old?.published == Date(timeIntervalSince1970: 0))
    }
}
