// swift-tools-version:6.1
import PackageDescription

// A measurement, not a test: one single-record commit of the JSON-file driver at 1k, 10k
// and 100k records against the floor (Foundation's JSONSerialization of the same data plus
// the same atomic durable write). Run:
//   swift run -c release --package-path Benchmarks/JSONFileCommit
let package = Package(
    name: "JSONFileCommit",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "Depot", path: "../..")],
    targets: [
        .executableTarget(name: "JSONFileCommit", dependencies: [.product(name: "Depot", package: "Depot")]),
    ]
)
