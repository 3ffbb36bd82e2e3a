import DepotCore
import Foundation

// Models of the relation checks: authors have one profile and many books; books belong to
// an author, have many reviews and many tags through `book_tags`.

struct RAuthor: Model, Equatable {
    static let collectionName = "authors"
    var id: Int?
    var name: String
    static let books = HasMany<RAuthor, RBook>("books", field: "authorID")
    static let profile = HasOne<RAuthor, RProfile>("profile", field: "authorID")
}

struct RProfile: Model, Equatable {
    static let collectionName = "profiles"
    var id: Int?
    var authorID: Int?
    var bio: String
    static let references = [Reference("author", field: "authorID", to: "authors", onDelete: .cascade)]
}

struct RBook: Model, Equatable {
    static let collectionName = "books"
    var id: Int?
    var title: String
    var authorID: Int?
    static let author = BelongsTo<RBook, RAuthor>("author", field: "authorID")
    static let reviews = HasMany<RBook, RReview>("reviews", field: "bookID")
    static let tags = ManyToMany<RBook, RTag>("tags", through: "book_tags", ownerField: "bookID", targetField: "tagID")
    static let references = [author.reference(onDelete: .cascade)]
}

struct RReview: Model, Equatable {
    static let collectionName = "reviews"
    var id: Int?
    var bookID: Int?
    var stars: Int
    static let references = [Reference("book", field: "bookID", to: "books", onDelete: .cascade)]
}

struct RTag: Model, Equatable {
    static let collectionName = "tags"
    var id: String
    static let books = ManyToMany<RTag, RBook>("books", through: "book_tags", ownerField: "tagID", targetField: "bookID")
}

/// A book whose author reference is removed when the author goes.
struct RNullifiedBook: Model, Equatable {
    static let collectionName = "nullified_books"
    var id: Int
    var authorID: Int?
    var title: String
    static let author = BelongsTo<RNullifiedBook, RAuthor>("writtenBy", field: "authorID")
    static let references = [author.reference(onDelete: .nullify)]
}

/// A book whose author cannot be deleted while it refers to her.
struct RDeniedBook: Model, Equatable {
    static let collectionName = "denied_books"
    var id: Int
    var authorID: Int?
    var title: String
    static let author = BelongsTo<RDeniedBook, RAuthor>("writtenBy", field: "authorID")
    static let references = [author.reference(onDelete: .deny)]
}

/// Relations, eager loading, graphs and links (Docs/Relations.md).
enum RelationChecks {
    /// A library: 3 authors (the third without books), 4 books (one without author),
    /// reviews, tags and a profile.
    static func library(_ driver: any StorageDriver) async throws -> Store {
        let store = try await Store(driver: driver)
        try await store.write { tx in
            let authors = try tx.repository(RAuthor.self)
            for (id, name) in [(1, "Ada"), (2, "Bo"), (3, "Cy")] { try authors.insert(RAuthor(id: id, name: name)) }
            let books = try tx.repository(RBook.self)
            try books.insert(RBook(id: 10, title: "Engines", authorID: 1))
            try books.insert(RBook(id: 11, title: "Notes", authorID: 1))
            try books.insert(RBook(id: 12, title: "Poems", authorID: 2))
            try books.insert(RBook(id: 13, title: "Anonymous", authorID: nil))
            let reviews = try tx.repository(RReview.self)
            try reviews.insert(RReview(id: 100, bookID: 10, stars: 5))
            try reviews.insert(RReview(id: 101, bookID: 10, stars: 3))
            try reviews.insert(RReview(id: 102, bookID: 12, stars: 4))
            try tx.repository(RProfile.self).insert(RProfile(id: 50, authorID: 2, bio: "poet"))
            let tags = try tx.repository(RTag.self)
            for tag in ["math", "poetry", "history"] { try tags.insert(RTag(id: tag)) }
            try books.link(RBook(id: 10, title: "", authorID: nil), RTag(id: "math"), by: RBook.tags)
            try books.link(RBook(id: 10, title: "", authorID: nil), RTag(id: "history"), by: RBook.tags)
            try books.link(RBook(id: 12, title: "", authorID: nil), RTag(id: "poetry"), by: RBook.tags)
        }
        return store
    }

    /// `authors` authors with two books each, one of them written "backwards", loaded both
    /// ways: over 400 keys the loader reads in chunks, over 2,000 in one scan.
    static func manyParents(_ name: String, _ authorCount: Int) -> ConformanceCheck {
        .driver(name) { driver, expect in
            let store = try await Store(driver: driver)
            try await store.write { tx in
                let authors = try tx.repository(RAuthor.self), books = try tx.repository(RBook.self)
                for i in 1...authorCount {
                    try authors.insert(RAuthor(id: i, name: "a\(i)"))
                    try books.insert(RBook(id: 2 * i, title: "b", authorID: i))
                    try books.insert(RBook(id: 2 * i + 1, title: "b", authorID: authorCount + 1 - i))
                }
            }
            let authors = try await store.repository(RAuthor.self).query().including(RAuthor.books).all()
            try expect.equal(authors.count, authorCount, "authors loaded")
            let wrong = try authors.filter { author in
                let id = author.model.id ?? 0
                return try author.related(RAuthor.books).map(\.model.id) != [2 * id, 2 * (authorCount + 1 - id) + 1].sorted()
            }
            try expect.equal(wrong.map(\.model.id), [], "authors whose two books are not exactly theirs")
            let books = try await store.repository(RBook.self).query().including(RBook.author).all()
            try expect.equal(try books.filter { try $0.related(RBook.author)?.model.id != $0.authorID }.count, 0, "books whose author is not theirs")
        }
    }

    static func count(_ store: Store, _ collection: String) async throws -> Int {
        try await store.collection(collection).count()
    }

    static let loading: [ConformanceCheck] = [
        .driver("relation.belongsTo") { driver, expect in
            let store = try await library(driver)
            let books = try await store.repository(RBook.self).query().including(RBook.author).all()
            try expect.equal(books.map(\.title), ["Engines", "Notes", "Poems", "Anonymous"], "books in id order")
            try expect.equal(try books.map { try $0.related(RBook.author)?.name }, ["Ada", "Ada", "Bo", nil], "each book's author, none for the anonymous one")
        },
        .driver("relation.hasManyInIDOrder") { driver, expect in
            let store = try await library(driver)
            let authors = try await store.repository(RAuthor.self).query().including(RAuthor.books).all()
            try expect.equal(try authors.map { try $0.related(RAuthor.books).map(\.model.id) }, [[10, 11], [12], []], "books per author")
        },
        .driver("relation.hasOne") { driver, expect in
            let store = try await library(driver)
            let authors = try await store.repository(RAuthor.self).query().including(RAuthor.profile).all()
            try expect.equal(try authors.map { try $0.related(RAuthor.profile)?.bio }, [nil, "poet", nil], "profile per author")
        },
        .driver("relation.manyToMany") { driver, expect in
            let store = try await library(driver)
            let books = try await store.repository(RBook.self).query().including(RBook.tags).all()
            try expect.equal(try books.map { try $0.related(RBook.tags).map(\.model.id) }, [["history", "math"], [], ["poetry"], []], "tags per book, in id order")
            let tags = try await store.repository(RTag.self).query().including(RTag.books).all()
            try expect.equal(try tags.map { try $0.related(RTag.books).map(\.model.id) }, [[10], [10], [12]], "books per tag (history, math, poetry)")
        },
        .driver("relation.nestedThreeLevels") { driver, expect in
            let store = try await library(driver)
            let authors = try await store.repository(RAuthor.self).query().filter(Field.id == 1)
                .including(RAuthor.books.including(RBook.reviews, RBook.tags), RAuthor.profile).all()
            let books = try authors.first.map { try $0.related(RAuthor.books) } ?? []
            try expect.equal(try books.map { try $0.related(RBook.reviews).map(\.stars) }, [[5, 3], []], "reviews of Ada's books")
            try expect.equal(try books.map { try $0.related(RBook.tags).map(\.model.id) }, [["history", "math"], []], "tags of Ada's books")
            try expect.equal(try authors.first?.related(RAuthor.profile)?.bio, nil as String?, "Ada has no profile")
        },
        .driver("relation.notLoadedIsATypedError") { driver, expect in
            let store = try await library(driver)
            let authors = try await store.repository(RAuthor.self).query().including(RAuthor.profile).all()
            let error = try await expect.error(.invalidQuery, "reading books that were not requested") { try authors[0].related(RAuthor.books) }
            try expect.that(error.message.contains("books"), "the error names the relation: \(error.message)")
            let nested = try await store.repository(RAuthor.self).query().including(RAuthor.books).all()
            try await expect.throwsCode(.invalidQuery, "reviews two levels down, not requested") { try nested[0].related(RAuthor.books)[0].related(RBook.reviews) }
        },
        .driver("relation.explicitFetch") { driver, expect in
            let store = try await library(driver)
            let authors = try await store.repository(RAuthor.self)
            let ada = RAuthor(id: 1, name: "Ada")
            try expect.equal(try await authors.related(RAuthor.books, of: ada).map(\.title), ["Engines", "Notes"], "Ada's books fetched")
            try expect.equal(try await store.repository(RBook.self).related(RBook.author, of: RBook(id: 12, title: "Poems", authorID: 2))?.name, "Bo", "the author of Poems")
            try expect.equal(try await store.repository(RBook.self).related(RBook.tags, of: RBook(id: 10, title: "", authorID: nil)).map(\.id), ["history", "math"], "tags of Engines")
        },
        manyParents("relation.manyParentsInChunks", 1_000),
        manyParents("relation.manyParentsInOneScan", 2_500),
        .driver("relation.emptyResults") { driver, expect in
            let store = try await library(driver)
            let none = try await store.repository(RAuthor.self).query().filter(Field("name") == "Zed").including(RAuthor.books).all()
            try expect.equal(none.count, 0, "no authors, no books")
        },
        .driver("relation.equalNumbersLink") { driver, expect in
            let store = try await library(driver)
            // A reference stored as a double that equals the id still links (query equality).
            try await store.collection("books").save(Record(id: 14, fields: ["title": "Float", "authorID": 3.0]))
            let authors = try await store.repository(RAuthor.self).query().filter(Field.id == 3).including(RAuthor.books).all()
            try expect.equal(try authors.first?.related(RAuthor.books).map(\.title), ["Float"], "Cy's book found by 3.0")
            let books = try await store.repository(RBook.self).query().filter(Field.id == 14).including(RBook.author).all()
            try expect.equal(try books.first?.related(RBook.author)?.name, "Cy", "the book's author found by 3.0")
        },
        .driver("relation.untypedRecords") { driver, expect in
            let store = try await library(driver)
            let books = RelationDescriptor("books", owner: "authors", target: "books", kind: .hasMany(field: "authorID"))
            let reviews = RelationDescriptor("reviews", owner: "books", target: "reviews", kind: .hasMany(field: "bookID"))
            let loaded = try await store.collection("authors").query(Query(filter: .equal("id", 1)), including: [Include(books, nested: [Include(reviews)])])
            try expect.equal(loaded.first?.related["books"]?.map(\.record.id), Fixture.intIDs(10, 11), "Ada's books as records")
            try expect.equal(loaded.first?.related["books"]?.first?.related["reviews"]?.map(\.record.id), Fixture.intIDs(100, 101), "reviews of Engines as records")
        },
        .driver("relation.saveGraph", requires: .assignedIDs) { driver, expect in
            let store = try await Store(driver: driver)
            let graph = Loaded(RAuthor(id: nil, name: "Dee"))
                .with(RAuthor.books, [
                    Loaded(RBook(id: nil, title: "One", authorID: nil)).with(RBook.reviews, [Loaded(RReview(id: nil, bookID: nil, stars: 2))]),
                    Loaded(RBook(id: 7, title: "Two", authorID: 99)).with(RBook.tags, [Loaded(RTag(id: "new"))]),
                ])
                .with(RAuthor.profile, Loaded(RProfile(id: nil, authorID: nil, bio: "bio")))
            let saved = try await store.repository(RAuthor.self).save(graph: graph)
            guard let id = saved.id else { throw expect.failure("the saved author has no id") }
            let loaded = try await store.repository(RAuthor.self).query().filter(Field.id == id)
                .including(RAuthor.books.including(RBook.reviews, RBook.tags), RAuthor.profile).all()
            let books = try loaded.first.map { try $0.related(RAuthor.books) } ?? []
            try expect.equal(books.map(\.title).sorted(), ["One", "Two"], "both books saved")
            try expect.equal(books.map(\.authorID), [id, id], "each book refers to the new author")
            try expect.equal(try books.flatMap { try $0.related(RBook.reviews).map(\.stars) }, [2], "the review saved under its book")
            try expect.equal(try books.flatMap { try $0.related(RBook.tags).map(\.model.id) }, ["new"], "the tag saved and linked")
            try expect.equal(try loaded.first?.related(RAuthor.profile)?.bio, "bio", "the profile saved")
        },
        .driver("relation.saveGraphIsAtomic") { driver, expect in
            let store = try await library(driver)
            // The tag's empty id cannot be stored: the author and book saved before it go too.
            let graph = Loaded(RAuthor(id: 8, name: "Eve"))
                .with(RAuthor.books, [Loaded(RBook(id: 80, title: "A", authorID: nil)).with(RBook.tags, [Loaded(RTag(id: ""))])])
            try await expect.throwsCode(.invalidValue, "a graph with a tag that has an empty id") {
                try await store.repository(RAuthor.self).save(graph: graph)
            }
            try expect.equal(try await count(store, "authors"), 3, "no author of the failed graph")
            try expect.equal(try await count(store, "books"), 4, "no book of the failed graph")
        },
        .driver("relation.linkAndUnlink") { driver, expect in
            let store = try await library(driver)
            let books = try await store.repository(RBook.self)
            let poems = RBook(id: 12, title: "Poems", authorID: 2)
            try await books.link(poems, RTag(id: "history"), by: RBook.tags)
            try await books.link(poems, RTag(id: "history"), by: RBook.tags)
            try expect.equal(try await books.related(RBook.tags, of: poems).map(\.id), ["history", "poetry"], "linked once, even twice")
            try expect.equal(try await books.unlink(poems, RTag(id: "poetry"), by: RBook.tags), true, "an existing link removed")
            try expect.equal(try await books.unlink(poems, RTag(id: "poetry"), by: RBook.tags), false, "no link left to remove")
            try expect.equal(try await books.related(RBook.tags, of: poems).map(\.id), ["history"], "tags after unlinking")
            try await expect.throwsCode(.referenceViolation, "a link to a tag that does not exist") {
                try await books.link(poems, RTag(id: "nope"), by: RBook.tags)
            }
        },
    ]

    static let deleteRules: [ConformanceCheck] = [
        .driver("deleteRule.cascade") { driver, expect in
            let store = try await library(driver)
            try await store.repository(RAuthor.self).delete(id: 1)
            try expect.equal(try await store.repository(RBook.self).all().map(\.title), ["Poems", "Anonymous"], "Ada's books went with her")
            try expect.equal(try await store.repository(RReview.self).all().map(\.id), [102], "and the reviews of her books")
            try expect.equal(try await count(store, "book_tags"), 1, "and the links of her books")
        },
        .driver("deleteRule.cascadeByFilterAndEvents") { driver, expect in
            let store = try await library(driver)
            let changes = store.changes()
            let deleted = try await store.repository(RAuthor.self).delete(matching: Field("name").in(["Ada", "Bo"]))
            try expect.equal(deleted, 2, "two authors deleted")
            var iterator = changes.makeAsyncIterator()
            let batch = await iterator.next()
            func key(_ collection: String, _ id: RecordID) -> String { collection + "/" + JSONText.serialize(id.fieldValue) }
            let deletedIDs = Set((batch?.changes ?? []).filter { $0.kind == .deleted }.map { key($0.collection.rawValue, $0.id) })
            let expected: Set<String> = [
                key("authors", 1), key("authors", 2), key("books", 10), key("books", 11), key("books", 12),
                key("reviews", 100), key("reviews", 101), key("reviews", 102), key("profiles", 50),
                key("book_tags", RelationDescriptor.linkID(10, "math")), key("book_tags", RelationDescriptor.linkID(10, "history")),
                key("book_tags", RelationDescriptor.linkID(12, "poetry")),
            ]
            try expect.equal(deletedIDs, expected, "one delete event per record removed, cascades included")
            try expect.equal(try await count(store, "books"), 1, "only the anonymous book is left")
        },
        .driver("deleteRule.nullify") { driver, expect in
            let store = try await library(driver)
            try await store.write { tx in
                try tx.repository(RNullifiedBook.self).insert(RNullifiedBook(id: 1, authorID: 3, title: "x"))
                try tx.repository(RNullifiedBook.self).insert(RNullifiedBook(id: 2, authorID: 1, title: "y"))
            }
            try await store.repository(RAuthor.self).delete(id: 3)
            try expect.equal(try await store.repository(RNullifiedBook.self).all().map(\.authorID), [nil, 1], "the reference to Cy removed, the other kept")
        },
        .driver("deleteRule.denyNamesTheRelation") { driver, expect in
            let store = try await library(driver)
            _ = try await store.repository(RDeniedBook.self).insert(RDeniedBook(id: 1, authorID: 3, title: "x"))
            let error = try await expect.error(.referenceViolation, "deleting Cy, who still has a ruled book") { try await store.repository(RAuthor.self).delete(id: 3) }
            try expect.equal(error.constraint, "writtenBy", "the error names the relation")
            try await expect.throwsCode(.referenceViolation, "deleting everyone by filter") { try await store.repository(RAuthor.self).deleteAll() }
            try expect.equal(try await count(store, "authors"), 3, "no author was deleted")
            try expect.equal(try await count(store, "books"), 4, "no cascade of the refused delete remains")
        },
        .driver("deleteRule.denyAllowsWhenReferrersGoFirst") { driver, expect in
            let store = try await library(driver)
            _ = try await store.repository(RDeniedBook.self).insert(RDeniedBook(id: 1, authorID: 3, title: "x"))
            try await store.write { tx in
                try tx.repository(RAuthor.self).delete(id: 3)
                try tx.repository(RDeniedBook.self).delete(id: 1)
            }
            try expect.equal(try await count(store, "authors"), 2, "Cy deleted with her ruled book in one transaction")
        },
        .driver("deleteRule.danglingWriteRefused") { driver, expect in
            let store = try await library(driver)
            let books = try await store.repository(RBook.self)
            let error = try await expect.error(.referenceViolation, "a book by author 99") { try await books.insert(RBook(id: 20, title: "x", authorID: 99)) }
            try expect.equal(error.constraint, "author", "the relation named")
            try await expect.throwsCode(.referenceViolation, "moving a book to author 99") { try await books.update(id: 10, FieldChange(set: ["authorID": 99])) }
            try await expect.throwsCode(.referenceViolation, "an untyped record with a dangling reference") {
                try await store.collection("books").insert(Record(id: 21, fields: ["title": "y", "authorID": "1"]))
            }
            try expect.equal(try await count(store, "books"), 4, "no dangling book stored")
            try expect.equal(try await books.find(id: 10)?.authorID, 1, "Engines still by Ada")
        },
        .driver("deleteRule.danglingAssignedInsertRefused", requires: .assignedIDs) { driver, expect in
            let store = try await library(driver)
            try await expect.throwsCode(.referenceViolation, "an assigned-id insert with a dangling reference") {
                try await store.collection("books").insert(fields: ["title": "z", "authorID": 42])
            }
            let id = try await store.collection("books").insert(fields: ["title": "z", "authorID": 2])
            try expect.equal(try await store.collection("books").get(id)?["authorID"], 2, "an assigned-id insert referring to Bo")
        },
        .driver("deleteRule.referenceCheckedAtCommit") { driver, expect in
            let store = try await library(driver)
            try await store.write { tx in
                // The book first, its author later in the same transaction.
                try tx.repository(RBook.self).insert(RBook(id: 30, title: "Early", authorID: 40))
                try tx.repository(RAuthor.self).insert(RAuthor(id: 40, name: "Late"))
            }
            try expect.equal(try await store.repository(RBook.self).find(id: 30)?.authorID, 40, "the book by an author inserted after it")
            try await expect.throwsCode(.referenceViolation, "an author deleted after a book was pointed at her, with the rule skipped by a direct driver write") {
                try await store.write { tx in
                    try tx.repository(RBook.self).update(id: 13, FieldChange(set: ["authorID": 40]))
                    _ = try tx.driverWriteTransaction.delete(40, from: try CollectionName("authors"))
                }
            }
        },
        .driver("deleteRule.linksGoWithEitherSide") { driver, expect in
            let store = try await library(driver)
            try await store.repository(RTag.self).delete(id: "math")
            try expect.equal(try await store.repository(RBook.self).related(RBook.tags, of: RBook(id: 10, title: "", authorID: nil)).map(\.id), ["history"], "the link to the deleted tag is gone")
            try await store.repository(RBook.self).delete(id: 12)
            try expect.equal(try await count(store, "book_tags"), 1, "the link of the deleted book is gone")
            try expect.equal(try await count(store, "tags"), 2, "tags stay when a book goes")
        },
        .context("deleteRule.rulesSurviveReopen", requires: .persistence) { context, driver, expect in
            _ = try await library(driver)
            try await driver.close()
            let reopened = try await Store(driver: try await context.openDriver())
            try await reopened.collection("authors").delete(1)
            try expect.equal(try await reopened.collection("books").count(), 2, "the cascade of a rule declared before reopening")
            try await expect.throwsCode(.referenceViolation, "a dangling untyped write after reopening") {
                try await reopened.collection("reviews").insert(Record(id: 9, fields: ["bookID": 999, "stars": 1]))
            }
        },
    ]

    static let fieldRules: [ConformanceCheck] = [
        .driver("fieldRules.requiredRefusesMissing") { driver, expect in
            let store = try await Store(driver: driver)
            let items = store.collection(try Fixture.items)
            try await store.write { tx in try tx.prepare(CollectionSchema(name: items.name, idKind: .int, requiredFields: ["name"])) }
            let error = try await expect.error(.invalidValue, "a record without name") { try await items.insert(Record(id: 1, fields: ["x": 1])) }
            try expect.equal(error.constraint, "name", "the field named")
            try await expect.throwsCode(.invalidValue, "a record whose name is null") { try await items.save(Record(id: 1, fields: ["name": .null])) }
            try await expect.throwsCode(.invalidValue, "an assigned-id insert without name") { try await items.insert(fields: ["x": 1]) }
            try await items.insert(Record(id: 2, fields: ["name": "ok"]))
            try await expect.throwsCode(.invalidValue, "removing the name") { try await items.update(2, FieldChange(remove: ["name"])) }
            try await expect.throwsCode(.invalidValue, "setting the name to null") { try await items.update(matching: .all, FieldChange(set: ["name": .null])) }
            try await expect.throwsCode(.invalidValue, "replacing the record without name") { try await items.update(Record(id: 2, fields: ["y": 1])) }
            try expect.sameRecords(try await items.query(), [Record(id: 2, fields: ["name": "ok"])], "only the valid record")
        },
        .driver("fieldRules.requiredOnExistingDataRefused") { driver, expect in
            let store = try await Store(driver: driver)
            let items = store.collection(try Fixture.items)
            try await items.insert(Record(id: 1, fields: ["x": 1]))
            try await expect.throwsCode(.invalidValue, "making name required while record 1 lacks it") {
                try await store.write { tx in try tx.prepare(CollectionSchema(name: items.name, idKind: .int, requiredFields: ["name"])) }
            }
            try await items.insert(Record(id: 2, fields: ["name": "b"]))
            try expect.equal(try await items.count(), 2, "records without name can still be written: the rule was not kept")
        },
        .driver("fieldRules.defaultsFillMissing") { driver, expect in
            let store = try await Store(driver: driver)
            let items = store.collection(try Fixture.items)
            try await store.write { tx in
                try tx.prepare(CollectionSchema(name: items.name, idKind: .int, requiredFields: ["status"], defaults: ["status": "new", "views": 0]))
            }
            try await items.insert(Record(id: 1, fields: ["title": "a"]))
            try await items.insert(Record(id: 2, fields: ["title": "b", "status": "done", "views": 5]))
            try await items.update(2, FieldChange(remove: ["status"]))
            try await items.update(Record(id: 1, fields: ["title": "a2"]))
            try expect.sameRecord(try await items.get(1), Record(id: 1, fields: ["title": "a2", "status": "new", "views": 0]), "defaults filled on insert and on a full update")
            try expect.sameRecord(try await items.get(2), Record(id: 2, fields: ["title": "b", "status": "new", "views": 5]), "removing a field with a default restores it")
        },
        .driver("fieldRules.defaultsOnAssignedIDs", requires: .assignedIDs) { driver, expect in
            let store = try await Store(driver: driver)
            let items = store.collection(try Fixture.items)
            try await store.write { tx in try tx.prepare(CollectionSchema(name: items.name, idKind: .int, defaults: ["status": "new"])) }
            let assigned = try await items.insert(fields: ["title": "c"])
            try expect.sameRecord(try await items.get(assigned), Record(id: assigned, fields: ["title": "c", "status": "new"]), "defaults on an assigned-id insert")
        },
        .driver("fieldRules.modelsGetDefaults") { driver, expect in
            let store = try await Store(driver: driver)
            let repository = try await store.repository(DefaultedNote.self)
            _ = try await repository.insert(DefaultedNote(id: 1, text: "x", priority: nil))
            try expect.equal(try await repository.find(id: 1)?.priority, 3, "the model's missing field took its default")
            try await expect.throwsCode(.invalidValue, "a note without text") { try await repository.insert(DefaultedNote(id: 2, text: nil, priority: 1)) }
        },
        .driver("fieldRules.schemaReportsRules") { driver, expect in
            let store = try await Store(driver: driver)
            _ = try await store.repository(RBook.self)
            let schema = try await store.collection("books").schema()
            try expect.equal(schema?.references, [RBook.author.reference(onDelete: .cascade)], "the references")
            let notes = try await store.repository(DefaultedNote.self)
            _ = notes
            let noteSchema = try await store.collection("notes").schema()
            try expect.equal(noteSchema?.requiredFields, ["text"], "the required fields")
            try expect.equal(noteSchema?.defaults, ["priority": 3], "the defaults")
            try await store.write { tx in try tx.prepare(CollectionSchema(name: try CollectionName("notes"), idKind: .int)) }
            try expect.equal(try await store.collection("notes").schema()?.requiredFields, [], "rules removed by a plain prepare")
            try await store.collection("notes").insert(Record(id: 9, fields: [:]))
        },
        .driver("fieldRules.invalidRulesRefused") { driver, expect in
            let store = try await Store(driver: driver)
            let name = try Fixture.items
            let bad: [(String, CollectionSchema)] = [
                ("a required field named id", CollectionSchema(name: name, idKind: .int, requiredFields: ["id"])),
                ("a null default", CollectionSchema(name: name, idKind: .int, defaults: ["x": .null])),
                ("a reference to an invalid collection", CollectionSchema(name: name, idKind: .int, references: [Reference("r", field: "f", to: "bad name", onDelete: .deny)])),
                ("two references with one name", CollectionSchema(name: name, idKind: .int, references: [
                    Reference("r", field: "f", to: "a", onDelete: .deny), Reference("r", field: "g", to: "b", onDelete: .deny),
                ])),
            ]
            for (what, schema) in bad {
                do {
                    try await store.write { tx in try tx.prepare(schema) }
                    throw expect.failure("\(what) was accepted")
                } catch let error as DepotError {
                    try expect.that([.invalidName, .invalidValue].contains(error.code), "\(what): \(error)")
                }
            }
        },
    ]

    static let all: [ConformanceCheck] = loading + deleteRules + fieldRules
}

/// A note with a required text and a default priority.
struct DefaultedNote: Model, Equatable {
    static let collectionName = "notes"
    var id: Int
    var text: String?
    var priority: Int?
    static let requiredFields = ["text"]
    static let fieldDefaults: [String: FieldValue] = ["priority": 3]
}
