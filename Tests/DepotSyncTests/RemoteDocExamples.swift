// example: Docs/Remote.md #1
import DepotModel
import DepotSync
import DepotCore // scaffold
import Foundation // scaffold

@Model(collection: "posts")
struct BlogPost {
    var id: Int?                                             // nil: the server assigns one
    var userId: Int
    var title: String
    @Transform(.millisecondsSince1970) var createdAt: Date  // 1700000000000 on the wire
    @Transform(Sealed(key: noteKey)) var note: String?       // cipher text on the wire
    static let comments = HasMany<BlogPost, BlogComment>("comments", field: "postId")
}

@Model(collection: "comments")
struct BlogComment {
    var id: Int?
    var postId: Int?
    var body: String
}
// end of example

/// The encrypting transformer the document names: the tests' keyed stand-in (RemoteTestSupport.swift).
typealias Sealed = TestSealed
/// The key of the document's sealed field.
let noteKey: UInt64 = 0x5EA1

/// Every Swift block of Docs/Remote.md, compiled (DocExampleTests checks they are the
/// document's lines); the running tests of the same features are the Remote*Tests suites.
enum RemoteDocExamples {
    static func show(_ models: [BlogPost], from source: ReadResult.Source) {}

// example: Docs/Remote.md #2
static func crud() async throws { // scaffold
let posts = RemoteResource<BlogPost>(baseURL: URL(string: "https://api.example.com/v1")!, path: "/posts")
let post = try await posts.fetch(id: 1)                                  // GET /v1/posts/1
print(post.title)
let page = try await posts.list(page: 0, size: 20, sort: [SortKey("createdAt", descending: true)])
print(page.items.count, page.total ?? -1, page.hasMore)                 // total: X-Total-Count, when sent
let created = try await posts.create(BlogPost(id: nil, userId: 7, title: "Hello", createdAt: .now))
var edited = created
edited.title = "Hello again"
_ = try await posts.replace(edited)                                      // PUT, whole record
_ = try await posts.patch(edited, fields: ["title"])                    // PATCH {"title": ...}
try await posts.delete(edited)                                           // DELETE /v1/posts/ID
} // scaffold
// end of example

// example: Docs/Remote.md #3
static func computedPath(_ original: RemoteResource<BlogPost>, _ post: BlogPost) async throws { // scaffold
var posts = original // scaffold
posts.modelPath = { post in "/users/\(post.userId)/posts" }
_ = try await posts.create(post)                          // POST /users/7/posts
let mine = try await posts.at("/users/7/posts").list()     // the same list, read
print(mine.items.map(\.title))
} // scaffold
// end of example

// example: Docs/Remote.md #4
static func nested(_ posts: RemoteResource<BlogPost>, _ post: BlogPost) async throws { // scaffold
var comments = try posts.nested(BlogPost.comments, of: post)   // /posts/1/comments
comments.keyMapping = ["body": "text"]
let first = try await comments.list()
let added = try await comments.create(BlogComment(id: nil, postId: nil, body: "Nice"))
print(first.items.count, added.postId ?? -1)                 // postId set by the server
} // scaffold
// end of example

// example: Docs/Remote.md #5
static func keys(_ original: RemoteResource<BlogPost>) { // scaffold
var posts = original // scaffold
posts.keyMapping = ["userId": "user_id", "title": "headline"]   // model field -> server key
posts.idKey = "_id"                                             // MongoDB-style servers
} // scaffold
// end of example

// example: Docs/Remote.md #6
static func envelope(_ original: RemoteResource<BlogPost>) { // scaffold
var posts = original // scaffold
// {"status": "ok", "payload": {"items": [...], "count": 52}} and
// {"status": "ok", "payload": {"properties": {...}}}
posts.envelope = RemoteEnvelope(single: "properties", list: "items", total: "count")
posts.preprocess = { body, shape in          // runs first, on every parsed answer
    guard let payload = body.objectValue?["payload"] else { throw DepotError(.decoding, "no payload") }
    return payload
}
} // scaffold
// end of example

// example: Docs/Remote.md #7
static func paging(_ original: RemoteResource<BlogPost>) { // scaffold
var posts = original // scaffold
posts.paging = .range   // json-server's _start=40&_limit=20
posts.paging = .page    // _page=3&_per_page=20 (the default)
posts.paging = .custom { index, size in [("offset", String(index * size)), ("count", String(size))] }
} // scaffold
// end of example

// example: Docs/Remote.md #8
static func hooks(_ original: RemoteResource<BlogPost>, token: String, deviceID: String) { // scaffold
var posts = original // scaffold
posts.requestHook = { request in
    request.headers["Authorization"] = "Bearer \(token)"
    request.setQueryItem("device", deviceID)
    request.setQueryItem("app_version", "2.1")
}
} // scaffold
// end of example

// example: Docs/Remote.md #9
static func errors(_ posts: RemoteResource<BlogPost>) async throws { // scaffold
do {
    _ = try await posts.fetch(id: 7)
} catch let error as DepotError where error.code == .notFound {
    print("gone:", error.remoteFailure?.serverMessage ?? "")
} catch let error as DepotError where error.remoteFailure?.isRetryable == true {
    print("try later:", error)          // "GET /posts/7 answered 503 after 6 attempts: busy (retryable)"
}
} // scaffold
// end of example

// example: Docs/Remote.md #10
static func retries(_ original: RemoteResource<BlogPost>, _ draft: BlogPost, draftKey: String) async throws { // scaffold
var posts = original // scaffold
posts.retryPolicy = RetryPolicy(baseDelay: .milliseconds(200), maxDelay: .seconds(10), maxAttempts: 4)
let created = try await posts.create(draft, idempotencyKey: draftKey)   // kept with the draft
print(created.id ?? -1)
} // scaffold
// end of example

// example: Docs/Remote.md #11
static func cancellation(_ posts: RemoteResource<BlogPost>) { // scaffold
let load = Task { try await posts.list(page: 0) }
load.cancel()                       // throws DepotError(.cancelled)
} // scaffold
// end of example

// example: Docs/Remote.md #12
static func feed(_ store: Store, _ posts: RemoteResource<BlogPost>) throws { // scaffold
var feed = try RemoteCollection(store: store, resource: posts, pageSize: 20, sort: [SortKey("createdAt", descending: true)])
feed.parameters = [("userId", "7")]          // the server-side selection...
feed.filter = Field("userId") == 7            // ...and the same records in the store
} // scaffold
// end of example

// example: Docs/Remote.md #13
static func policies(_ feed: RemoteCollection<BlogPost>) async throws { // scaffold
let screen = try await feed.firstPage(.localElseRemote)   // open a screen: the store; the network only when it has none
show(screen.models, from: screen.source)                   // .local or .remote

_ = try await feed.firstPage(.localOnly)                   // never the network
_ = try await feed.firstPage(.remoteOnly)                  // a refresh; fails when the server does
_ = try await feed.firstPage(.remoteElseLocal)             // network first; the store when the server cannot answer

let quick = try await feed.firstPage(.localThenRefresh)    // the store now...
show(quick.models, from: quick.source)
if let fresh = try await quick.refreshed?.value { show(fresh, from: .remote) }   // ...and fresh data later
} // scaffold
// end of example

// example: Docs/Remote.md #14
static func loadMore(_ feed: RemoteCollection<BlogPost>) async throws { // scaffold
let next = try await feed.page(2)     // offset 40, 20 models
print(next.count)
} // scaffold
// end of example

// example: Docs/Remote.md #15
static func refresh(_ feed: RemoteCollection<BlogPost>) async throws { // scaffold
let report = try await feed.refresh()
print(report.firstPage, report.updated, report.removed)
} // scaffold
// end of example

}
