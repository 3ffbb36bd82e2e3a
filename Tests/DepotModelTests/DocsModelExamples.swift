// Docs/Models.md's @Model example (#2), compiled here as written (the expansion it shows,
// #3, is compiled in DepotMemoryTests/DocsExamples.swift: this target has a @Model Counter). DocExampleTests (DepotMemoryTests) checks that the lines from each "// example:"
// mark to "// end of example", less the lines ending in "// scaffold", are the document's
// block. Edit the document and this file together.

// example: Docs/Models.md #2
import DepotModel
import DepotCore // scaffold
import Foundation // scaffold
enum ModelsDocMacroExample { // scaffold

@Model(collection: "books", unique: [["author", "title"]], indexes: [["year", "title"]])
struct Book {
    @ID var isbn: String
    var author: String
    var title: String
    var year: Int
    @Stored("page_count") var pages: Int
    @Default(3) var rating: Int
    var subtitle: String?                                  // absent when nil, nil when absent
    var tags: [String]                                     // any Codable: RecordEncoder for this field
    @Unique var slug: String
    @Indexed var price: Double
    @Transform(.millisecondsSince1970) var published: Date
    @Transient var isSelected = false
}
} // scaffold
// end of example
