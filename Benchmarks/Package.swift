// swift-tools-version:6.1
import PackageDescription

// Micro-benchmarks of Depot with ordo-one/benchmark. A separate package, so the benchmark
// tooling and GRDB (the peer to beat on SQLite) never become dependencies of Depot.
//
//     cd Benchmarks && swift package --allow-writing-to-directory .benchmarkBaselines benchmark
//
// Docs/Benchmarks.md explains every benchmark and the figures.

let package = Package(
    name: "DepotBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Depot", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.0", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
    ],
    targets: [
        // Depot's codec, every driver's paths through Store/Collection/Repository, and the raw
        // C APIs (SQLite, GDBM) and the JSON floor doing the same work.
        .executableTarget(
            name: "DepotBenchmarks",
            dependencies: [
                .product(name: "Depot", package: "Depot"),
                .product(name: "DepotBench", package: "Depot"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/DepotBenchmarks",
            // Benchmark's registration API predates Sendable annotations.
            swiftSettings: [.swiftLanguageMode(.v5)],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // Issue 3's four SQLite workloads and issue 19's typed models timed side by side (raw C
        // API, Depot's Store and driver, Depot's Codable and @Model models, GRDB's Codable and
        // hand-written records) with ContinuousClock, best of several runs: `swift run -c release SQLiteBenchmarks`.
        .executableTarget(
            name: "SQLiteBenchmarks",
            dependencies: [
                .product(name: "Depot", package: "Depot"),
                // IntegerRecord and GeneratedIntegerRecord (the @Model expansion) of the typed models.
                .product(name: "DepotBench", package: "Depot"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            path: "Sources/SQLiteBenchmarks"
        ),
        // GRDB's Codable records on the same SQLite workloads: the peer Depot must beat.
        .executableTarget(
            name: "GRDBBenchmarks",
            dependencies: [
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "DepotBench", package: "Depot"),
                // SplitMix64, the seeded generator the YCSB helpers take, lives in the core.
                .product(name: "DepotCore", package: "Depot"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/GRDBBenchmarks",
            swiftSettings: [.swiftLanguageMode(.v5)],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)
