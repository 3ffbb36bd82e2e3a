import DepotCore
import DepotMemory
@testable import DepotServer
import DepotWire
import Foundation
import Testing

@Suite("DepotServer")
struct DepotServerTests {
    @Test("POST assigns int ids, GET by id returns the record with an ETag, X-Total-Count on lists")
    func createAndRead() async throws {
        try await withServer { live in
            let created = try await live.send("POST", "/posts", json: #"{"title":"a","views":3}"#)
            #expect(created.status == 201)
            #expect(created.json.objectValue?["id"] == .int(1))
            #expect(created.header("Location") == "/posts/1")
            let etag = try #require(created.header("ETag"))
            let second = try await live.send("POST", "/posts", json: #"{"title":"b","views":10,"ratio":1.0}"#)
            #expect(second.json.objectValue?["id"] == .int(2))
            let got = try await live.send("GET", "/posts/1")
            #expect(got.status == 200)
            #expect(got.header("ETag") == etag)
            #expect(got.json == ["id": 1, "title": "a", "views": 3])
            let two = try await live.send("GET", "/posts/2")
            #expect(two.json.objectValue?["ratio"] == .double(1.0))  // stays a double
            let list = try await live.send("GET", "/posts")
            #expect(list.header("X-Total-Count") == "2")
            #expect(list.json.arrayValue?.count == 2)
            let notModified = try await live.send("GET", "/posts/1", headers: ["If-None-Match": etag])
            #expect(notModified.status == 304)
        }
    }

    @Test("string ids given by the client are kept; a taken id is 409")
    func clientIDs() async throws {
        try await withServer { live in
            let a = try await live.send("POST", "/notes", json: #"{"id":"n-1","text":"x"}"#)
            #expect(a.status == 201)
            #expect(a.json.objectValue?["id"] == "n-1")
            let again = try await live.send("POST", "/notes", json: #"{"id":"n-1","text":"y"}"#)
            #expect(again.status == 409)
            #expect(again.errorCode == "alreadyExists")
            let auto = try await live.send("POST", "/notes", json: #"{"text":"z"}"#)
            #expect(auto.status == 201)
            #expect(auto.json.objectValue?["id"]?.stringValue?.count == 36)
        }
    }

    @Test("query strings are split on scalars: a prepended scalar before & or = hides no separator")
    func querySeparatorsAreFoundAmongScalars() throws {
        // U+0603 joins the next scalar into one Character; split on Characters, "&b=1" stayed
        // inside a's value.
        let parameters = try QueryParameters("a=x\u{0603}&b=1&c\u{0603}=2&d=%2B+e")
        #expect(parameters.pairs.map(\.0) == ["a", "b", "c\u{0603}", "d"])
        #expect(parameters.pairs.map(\.1) == ["x\u{0603}", "1", "2", "+ e"])
    }

    @Test("paging, sorting and filters follow json-server")
    func listConventions() async throws {
        try await withServer { live in
            for i in 1...25 {
                let body = "{\"n\":\(i),\"group\":\"\(i % 2 == 0 ? "even" : "odd")\",\"flag\":\(i % 5 == 0)}"
                _ = try await live.send("POST", "/items", json: body)
            }
            let page2 = try await live.send("GET", "/items?_page=2&_per_page=10")
            #expect(page2.header("X-Total-Count") == "25")
            #expect(page2.json.arrayValue?.first?.objectValue?["n"] == .int(11))
            #expect(page2.json.arrayValue?.count == 10)
            let slice = try await live.send("GET", "/items?_start=5&_end=8")
            #expect(slice.json.arrayValue?.compactMap { $0.objectValue?["n"]?.intValue } == [6, 7, 8])
            let limited = try await live.send("GET", "/items?_start=20&_limit=10")
            #expect(limited.json.arrayValue?.count == 5)
            let sorted = try await live.send("GET", "/items?_sort=group,-n&_limit=3")
            #expect(sorted.json.arrayValue?.compactMap { $0.objectValue?["n"]?.intValue } == [24, 22, 20])
            let filtered = try await live.send("GET", "/items?group=odd&n_gte=10&n_lt=16")
            #expect(filtered.json.arrayValue?.compactMap { $0.objectValue?["n"]?.intValue } == [11, 13, 15])
            #expect(filtered.header("X-Total-Count") == "3")
            let flags = try await live.send("GET", "/items?flag=true")
            #expect(flags.json.arrayValue?.count == 5)
            let ne = try await live.send("GET", "/items?n_ne=1&n_lte=3")
            #expect(ne.json.arrayValue?.compactMap { $0.objectValue?["n"]?.intValue } == [2, 3])
            let text = try await live.send("GET", "/items?group=%22odd%22&n=1")
            #expect(text.json.arrayValue?.count == 1)
            let anyOf = try await live.send("GET", "/items?n=1&n=2")
            #expect(anyOf.json.arrayValue?.count == 2)
            let bad = try await live.send("GET", "/items?_bogus=1")
            #expect(bad.status == 400)
            #expect(bad.errorCode == "badRequest")
            let badPage = try await live.send("GET", "/items?_page=0")
            #expect(badPage.status == 400)
        }
    }

    @Test("PUT replaces, PATCH merges, DELETE removes; If-Match mismatch is 412")
    func writesAndPreconditions() async throws {
        try await withServer { live in
            let created = try await live.send("POST", "/posts", json: #"{"title":"a","views":1}"#)
            let etag = try #require(created.header("ETag"))
            let put = try await live.send("PUT", "/posts/1", json: #"{"title":"b"}"#, headers: ["If-Match": etag])
            #expect(put.status == 200)
            #expect(put.json == ["id": 1, "title": "b"])
            let newTag = try #require(put.header("ETag"))
            #expect(newTag != etag)
            let stale = try await live.send("PATCH", "/posts/1", json: #"{"views":5}"#, headers: ["If-Match": etag])
            #expect(stale.status == 412)
            #expect(stale.errorCode == "preconditionFailed")
            #expect(stale.header("ETag") == newTag)
            let patch = try await live.send("PATCH", "/posts/1", json: #"{"views":5,"title":null}"#, headers: ["If-Match": newTag])
            #expect(patch.json == ["id": 1, "views": 5])
            let missing = try await live.send("PUT", "/posts/99", json: #"{"title":"x"}"#)
            #expect(missing.status == 404)
            let wrongID = try await live.send("PUT", "/posts/1", json: #"{"id":2,"title":"x"}"#)
            #expect(wrongID.status == 400)
            let delStale = try await live.send("DELETE", "/posts/1", headers: ["If-Match": etag])
            #expect(delStale.status == 412)
            let del = try await live.send("DELETE", "/posts/1")
            #expect(del.status == 200)
            #expect(try await live.send("GET", "/posts/1").status == 404)
            #expect(try await live.send("DELETE", "/posts/1").status == 404)
        }
    }

    @Test("nested resources: /posts/1/comments lists and creates comments with postId 1")
    func nested() async throws {
        try await withServer { live in
            _ = try await live.send("POST", "/posts", json: #"{"title":"a"}"#)
            _ = try await live.send("POST", "/comments", json: #"{"postId":2,"text":"other"}"#)
            let made = try await live.send("POST", "/posts/1/comments", json: #"{"text":"hi"}"#)
            #expect(made.status == 201)
            #expect(made.json.objectValue?["postId"] == .int(1))
            let list = try await live.send("GET", "/posts/1/comments")
            #expect(list.json.arrayValue?.count == 1)
            #expect(list.header("X-Total-Count") == "1")
            let one = try await live.send("GET", "/posts/1/comments/2")
            #expect(one.status == 200)
            let wrongParent = try await live.send("GET", "/posts/1/comments/1")
            #expect(wrongParent.status == 404)
        }
    }

    @Test("Idempotency-Key replays the first answer; the same key with another body is 422")
    func idempotency() async throws {
        try await withServer { live in
            let key = ["Idempotency-Key": "k-1"]
            let first = try await live.send("POST", "/posts", json: #"{"title":"a"}"#, headers: key)
            let again = try await live.send("POST", "/posts", json: #"{"title":"a"}"#, headers: key)
            #expect(first.status == 201)
            #expect(again.status == 201)
            #expect(again.json == first.json)
            #expect(again.header("Idempotent-Replayed") == "true")
            #expect(again.header("ETag") == first.header("ETag"))
            let list = try await live.send("GET", "/posts")
            #expect(list.header("X-Total-Count") == "1")
            let reused = try await live.send("POST", "/posts", json: #"{"title":"b"}"#, headers: key)
            #expect(reused.status == 422)
            #expect(reused.errorCode == "idempotencyKeyReused")
            let badKey = try await live.send("POST", "/posts", json: #"{"title":"b"}"#, headers: ["Idempotency-Key": "has space"])
            #expect(badKey.status == 400)
            // The key is stored in the reserved collection in the same transaction as the write.
            let stored = try await live.driver.read { tx in try tx.get("k-1", from: WireCollections.idempotency) }
            #expect(stored?["status"] == .int(201))
        }
    }

    @Test("the change feed lists upserts and tombstones in commit order, one entry per record")
    func changeFeed() async throws {
        try await withServer { live in
            _ = try await live.send("POST", "/posts", json: #"{"title":"a"}"#)
            _ = try await live.send("POST", "/posts", json: #"{"title":"b"}"#)
            _ = try await live.send("POST", "/tags", json: #"{"id":"t","n":1}"#)
            _ = try await live.send("PATCH", "/posts/1", json: #"{"title":"a2"}"#)
            _ = try await live.send("DELETE", "/posts/2")
            let all = try await live.send("GET", "/_changes?since=0&limit=10")
            let changes = try #require(all.json.objectValue?["changes"]?.arrayValue)
            let summary = changes.compactMap { c -> String? in
                guard let o = c.objectValue, let op = o["op"]?.stringValue, let coll = o["collection"]?.stringValue, let id = o["id"] else { return nil }
                return "\(coll)/\(id)/\(op)"
            }
            #expect(summary == ["tags/\"t\"/upsert", "posts/1/upsert", "posts/2/delete"])
            let upsert = try #require(changes[1].objectValue)
            #expect(upsert["record"] == ["id": 1, "title": "a2"])
            #expect(upsert["etag"]?.stringValue == (try await live.send("GET", "/posts/1")).header("ETag"))
            let next = try #require(all.json.objectValue?["next"]?.stringValue)
            #expect(all.json.objectValue?["hasMore"] == false)
            let paged = try await live.send("GET", "/_changes?since=0&limit=1")
            #expect(paged.json.objectValue?["hasMore"] == true)
            let after = try await live.send("GET", "/_changes?since=\(next)")
            #expect(after.json.objectValue?["changes"]?.arrayValue?.isEmpty == true)
            _ = try await live.send("POST", "/posts", json: #"{"title":"c"}"#)
            let later = try await live.send("GET", "/_changes?since=\(next)&collection=posts")
            #expect(later.json.objectValue?["changes"]?.arrayValue?.count == 1)
        }
    }

    /// A model of the serving process's own code.
    struct Post: Model, Equatable {
        var id: Int64?
        var title: String
        static let collectionName = "posts"
    }

    @Test("a write over HTTP is seen in the serving process like a repository write: change events, read caches, observed queries")
    func serverWritesAreSeen() async throws {
        try await withServer { live in
            let posts = try await live.store.repository(Post.self, cacheCapacity: 16)
            try await posts.save(Post(id: 1, title: "first"))
            #expect(try await posts.find(id: 1)?.title == "first")  // now cached
            let changes = live.store.changes()
            var observed = posts.observe(posts.query().filter(Field("title").hasPrefix("s")))
                .makeAsyncIterator()
            #expect(try await observed.next()?.count == 0)

            let put = try await live.send("PUT", "/posts/1", json: #"{"title":"second"}"#)
            #expect(put.status == 200)
            #expect(try await posts.find(id: 1)?.title == "second", "the read cache was not invalidated")
            #expect(try await observed.next()?.map(\.title) == ["second"], "the observed query did not wake")
            let post = try await live.send("POST", "/posts", json: #"{"title":"sixth"}"#)
            #expect(post.status == 201)
            #expect(try await observed.next()?.map(\.title) == ["second", "sixth"])
            var seen: [ChangeEvent] = []
            for await batch in changes {
                seen += batch.changes.filter { !$0.collection.isReserved }
                if seen.count >= 2 { break }
            }
            #expect(seen == [
                ChangeEvent(collection: try CollectionName("posts"), kind: .updated, id: 1),
                ChangeEvent(collection: try CollectionName("posts"), kind: .inserted, id: 2),
            ])
        }
    }

    @Test("a write by the serving process's own code reaches the change feed like one over HTTP")
    func ownWritesReachTheFeed() async throws {
        try await withServer { live in
            let posts = try await live.store.repository(Post.self)
            try await posts.save(Post(id: 7, title: "local"))
            _ = try await posts.delete(id: 7)
            try await posts.save(Post(id: 8, title: "kept"))
            let feed = try await live.send("GET", "/_changes?since=0")
            let changes = try #require(feed.json.objectValue?["changes"]?.arrayValue)
            #expect(changes.map { $0.objectValue?["op"] } == ["delete", "upsert"])
            #expect(changes.last?.objectValue?["record"] == ["id": 8, "title": "kept"])
            // A write behind the store's back (the raw driver) is not in the feed: only in the listing.
            try await live.driver.write { tx in try tx.save(Record(id: 9, fields: ["title": "raw"]), into: try CollectionName("posts")) }
            let again = try await live.send("GET", "/_changes?since=0")
            #expect(again.json.objectValue?["changes"]?.arrayValue?.count == 2)
        }
    }

    @Test("bad requests get 4xx JSON errors; unknown collections 404; paths never reach files")
    func badRequests() async throws {
        try await withServer { live in
            #expect(try await live.send("GET", "/nothing").status == 404)
            #expect(try await live.send("GET", "/nothing/1").status == 404)
            let traversal = try await live.send("GET", "/..%2F..%2Fetc%2Fpasswd")
            #expect(traversal.status == 404)
            #expect(traversal.errorCode == "notFound")
            #expect(try await live.send("GET", "/_depot_idempotency").status == 404)
            let badJSON = try await live.send("POST", "/posts", json: "{nope")
            #expect(badJSON.status == 400)
            #expect(badJSON.errorCode == "badRequest")
            #expect(try await live.send("POST", "/posts", json: "[1,2]").status == 400)
            #expect(try await live.send("POST", "/posts", json: #"{"bad name":1}"#).status == 400)
            #expect(try await live.send("POST", "/posts", json: #"{"_depot_x":1}"#).status == 400)
            #expect(try await live.send("POST", "/posts", json: #"{"id":[1]}"#).status == 400)
            #expect(try await live.send("DELETE", "/posts").status == 405)
            _ = try await live.send("POST", "/posts", json: #"{"t":1}"#)
            #expect(try await live.send("GET", "/posts/abc").status == 404)
            #expect(try await live.send("POST", "/posts", json: #"{"id":"s","t":1}"#).status == 400)
            let deep = String(repeating: "[", count: 200) + String(repeating: "]", count: 200)
            #expect(try await live.send("POST", "/posts", json: "{\"d\":\(deep)}").status == 400)
            // Still serving after all of that.
            #expect(try await live.send("GET", "/posts").status == 200)
        }
    }

    @Test("injected faults: status answers and dropped connections, and a lost answer still commits")
    func faults() async throws {
        let faults = ServerFaults { method, path in
            if path == "/fail" { return .status(503) }
            if path == "/drop" { return .dropConnection }
            if method == "POST", path == "/lost" { return .loseResponseAfterCommit }
            return nil
        }
        try await withServer(faults: faults) { live in
            #expect(try await live.send("GET", "/fail").status == 503)
            await #expect(throws: (any Error).self) { _ = try await live.send("GET", "/drop") }
            await #expect(throws: (any Error).self) { _ = try await live.send("POST", "/lost", json: #"{"a":1}"#, headers: ["Idempotency-Key": "L"]) }
            let list = try await live.send("GET", "/lost")
            #expect(list.header("X-Total-Count") == "1")
        }
    }
}

@Suite("JSON on the wire")
struct WireFormatTests {
    @Test("values round-trip exactly through the wire's JSON: ints stay ints, doubles stay doubles, bytes, infinities and text survive")
    func roundTrip() throws {
        let values: [FieldValue] = [
            .int(.min), .int(.max), .double(-0.0), .double(1.0), .double(.greatestFiniteMagnitude), .double(1e-300),
            .double(.infinity), .double(-.infinity),
            .string("a\u{0}b\"\\\n😀e\u{301}"), .bytes(Data([0, 1, 255])), .bytes(Data()), ["a": [1, 2.5, nil, true]], .string("{}"),
            ["$base64": "aGk="], ["$bytes": "aGk="], ["$double": "Infinity"], ["$object": ["a": 1]],
        ]
        for value in values {
            let text = JSONText.serialize(value)
            #expect(try JSONText.parse(text) == value, "\(text)")
            #expect(try JSONText.parse(Array(text.utf8), acceptingLegacyBase64: true) == value, "\(text)")
        }
        // The older wire's bytes, from an older client: read as bytes by the wire's reader only.
        #expect(try JSONText.parse(Array(#"{"$base64":"aGk="}"#.utf8), acceptingLegacyBase64: true) == .bytes(Data("hi".utf8)))
        #expect(try JSONText.parse(#"{"$base64":"aGk="}"#) == ["$base64": "aGk="])
        #expect(try JSONText.parse(#"{"a":"\ud83d\ude00"}"#) == ["a": "😀"])
        for bad in ["", "{", "[1,]", "01", "1.", "\"\\x\"", "tru", "{\"a\" 1}", "1 2"] {
            #expect(throws: DepotError.self) { try JSONText.parse(bad) }
        }
        // Bytes that are not UTF-8 inside a string (plain and after an escape): an error, never a repaired string.
        for bad: [UInt8] in [[0x22, 0xC3, 0x28, 0x22], [0x22, 0x5C, 0x6E, 0xFF, 0x22], [0x22, 0xF0, 0x90, 0x80, 0x41, 0x22]] {
            #expect(throws: DepotError.self) { try JSONText.parse(bad) }
        }
        #expect(try JSONText.parse([0x22, 0xC3, 0xA9, 0x22]) == .string("é"))
    }

    @Test("query-string values are JSON scalars when they are one, otherwise text")
    func literals() {
        #expect(QueryParameters.literal("12") == .int(12))
        #expect(QueryParameters.literal("1.5") == .double(1.5))
        #expect(QueryParameters.literal("abc") == .string("abc"))
        #expect(QueryParameters.literal("\"12\"") == .string("12"))
        #expect(QueryParameters.literal("[1]") == .string("[1]"))
        #expect(QueryParameters.literal(#"{"$bytes":"aGk="}"#) == .string(#"{"$bytes":"aGk="}"#))
        #expect(QueryParameters.literal("null") == .null)
    }

    @Test("ETags are stable over key order and If-Match follows strong comparison")
    func etags() throws {
        let a = Record(id: 1, fields: ["x": 1, "y": "b"])
        let b = Record(id: 1, fields: ["y": "b", "x": 1])
        #expect(WireETag.of(a) == WireETag.of(b))
        #expect(WireETag.of(a) != WireETag.of(Record(id: 1, fields: ["x": 1.0, "y": "b"])))
        #expect(WireETag.of(Record(id: 1, fields: ["x": .double(.infinity)])) != WireETag.of(Record(id: 1, fields: ["x": .double(-.infinity)])))
        let tag = WireETag.of(a)
        #expect(WireETag.ifMatch(tag, admits: tag))
        #expect(WireETag.ifMatch("\"zz\", \(tag)", admits: tag))
        #expect(!WireETag.ifMatch("W/\(tag)", admits: tag))
        #expect(WireETag.ifMatch("*", admits: tag))
        #expect(!WireETag.ifMatch("*", admits: nil))
    }
}
