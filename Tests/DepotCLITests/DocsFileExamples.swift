// Swift examples of Docs/Remote.md, "Files" (compiled only: they need a server with a files
// folder; the running tests of the same features are FileRoutesTests, FileClientTests,
// FileKillTests and FileOutboxTests). DocExampleTests (DepotMemoryTests) checks that the
// lines from each "// example:" mark to "// end of example", less the lines ending in
// "// scaffold", are the document's block. Edit the document and this file together.
import DepotServer
import Foundation

enum FileDocExamples {
// example: Docs/Remote.md #16
static func serve(_ store: Store) -> DepotServer { // scaffold
var configuration = DepotServer.Configuration(port: 8080)
configuration.filesDirectory = "/srv/app/files"   // nil (the default): no /_files routes
configuration.maxFileSize = 1 << 30               // 413 above this; default 4 GiB
let server = DepotServer(store: store, configuration: configuration)
return server // scaffold
} // scaffold
// end of example
}

// example: Docs/Remote.md #17
import Depot

func fileClientExample() async throws { // scaffold
let client = FileClient(baseURL: URL(string: "http://127.0.0.1:8080")!)

// Upload: the file is read once to hash it, then streamed from disk.
let up = try await client.upload(from: URL(fileURLWithPath: "movie.mp4"), name: "movie.mp4").result()
print(up.size, up.sha256, up.etag ?? "")

// Download with progress.
let transfer = client.download(name: "movie.mp4", to: URL(fileURLWithPath: "copy.mp4"))
for await step in transfer {
    print(step.bytesDone, "of", step.totalBytes ?? -1)
}
let down = try await transfer.result()          // down.sha256 == up.sha256

try await client.delete(name: "movie.mp4", ifMatch: down.etag)
let files = try await client.list()             // [FileClient.Entry]
print(files.count) // scaffold
} // scaffold
// end of example

extension FileDocExamples {
// example: Docs/Remote.md #18
static func resumable(_ client: FileClient, _ dest: URL) async throws { // scaffold
do {
    _ = try await client.download(name: "movie.mp4", to: dest).result()
} catch let error as DepotError where error.code == .remote {
    if (error.cause as? FileTransferFailure)?.retryable == true {
        // Later: the same call resumes from dest.part.
    }
}
} // scaffold
// end of example

// example: Docs/Remote.md #19
static func queued(_ store: Store, _ posts: CollectionName, _ server: URL, _ photoURL: URL) async throws -> SyncReport { // scaffold
let sync = SyncCoordinator(store: store)
try await sync.attach(posts, to: SyncEndpoint(baseURL: server, path: "/posts"))
await sync.attachFiles(FileClient(baseURL: server))

try await store.write { tx in
    try SyncCoordinator.enqueueUpload(from: photoURL, name: "beach.jpg", in: tx)
    try tx.insert(fields: ["title": "Holiday", "photo": FileReference.value(for: "beach.jpg")], into: posts)
}
let report = try await sync.sync(posts)   // PUT /_files/beach.jpg, then POST /posts
return report // scaffold
} // scaffold
// end of example
}
