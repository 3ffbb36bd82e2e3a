// swift-tools-version:6.1
// Benchmarks, a separate package so that the peers they compare with (GRDB) are never
// dependencies of Depot. ordo-one/package-benchmark 1.38 needs swift-runtime-interposer on
// Linux with Swift 6.3, which this machine cannot fetch, so the runner is a plain release
// executable that times each workload with ContinuousClock, best of several runs, all sides
// in the same run with the same pragmas:
//
//   cd Benchmarks && swift run -c release SQLiteBenchmarks
import Foundation
import PackageDescription

/// The identity of the Depot package depended on by path: its directory's name.
let depot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().lastPathComponent

let package = Package(
    name: "DepotBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
    ],
    targets: [
        .executableTarget(
            name: "SQLiteBenchmarks",
            dependencies: [
                .product(name: "Depot", package: depot),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            path: "Benchmarks/SQLiteBenchmarks"
        ),
    ]
)
