// swift-tools-version:6.1
import CompilerPluginSupport
import PackageDescription

/// One list of compiler settings for every target: Swift 6 mode is the package default,
/// and these make the concurrency checking complete and explicit.
let settings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "Depot",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "Depot", targets: ["Depot"]),
        .library(name: "DepotCore", targets: ["DepotCore"]),
        .library(name: "DepotConformance", targets: ["DepotConformance"]),
        .executable(name: "depot", targets: ["DepotCLI"]),
        .executable(name: "depot-crash-helper", targets: ["DepotCrashHelper"]),
        // The fuzz harness (Docs/Fuzzing.md); scripts/fuzz runs it.
        .executable(name: "depot-fuzz", targets: ["DepotFuzzTool"]),
        // The benchmark engine of `depot bench`, also used by the Benchmarks/ packages.
        .library(name: "DepotBench", targets: ["DepotBench"]),
        // The @Model macro (Docs/Models.md); the only product that builds swift-syntax.
        .library(name: "DepotModel", targets: ["DepotModel"]),
        // The PostgreSQL driver (Docs/PostgresDriver.md): its own product so that the embedded
        // drivers never pull in NIO and postgres-nio.
        .library(name: "DepotPostgres", targets: ["DepotPostgres"]),
        // A sync transport over SwiftNIO for plain-HTTP servers (Docs/Sync.md, "Transports").
        .library(name: "DepotHTTPClient", targets: ["DepotHTTPClient"]),
    ],
    traits: [
        // The PostgreSQL driver inside `depot` (Docs/CLI.md, "Builds"): on by default; the
        // README's first command (scripts/tour) builds without it, so that it never compiles
        // postgres-nio, swift-nio-ssl and swift-crypto.
        .trait(name: "PostgreSQL", description: "The depot executable includes the PostgreSQL driver (postgres:// stores, depot bench --drivers postgres)."),
        .default(enabledTraits: ["PostgreSQL"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        // DepotServer only.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.0.0"),
        // The @Model macro only (DepotModelMacrosCore): no other target may depend on it, so
        // `swift build --product depot` never builds it.
        .package(url: "https://github.com/swiftlang/swift-syntax", "600.0.0"..<"604.0.0"),
        // DepotPostgres only.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.25.0"),
    ],
    targets: [
        // Values, errors, queries, the StorageDriver protocol and the public API. No I/O.
        .target(name: "CDepotSHA256"),
        .target(name: "DepotCore", dependencies: ["CDepotSHA256"], swiftSettings: settings),
        // The reference driver: everything in memory, no I/O.
        .target(name: "DepotMemory", dependencies: ["DepotCore"], swiftSettings: settings),
        // The executable contract every driver runs (no test framework inside).
        .target(name: "DepotConformance", dependencies: ["DepotCore", "DepotMemory"], swiftSettings: settings),
        // The umbrella: re-exports the core and registers the built-in drivers.
        .target(name: "Depot", dependencies: ["DepotCore", "DepotMemory", "DepotSQLite", "DepotJSONFile", "DepotGDBM", "DepotSync"], swiftSettings: settings),
        // The parsers of what `depot` reads from users, a library so depot-fuzz runs them (Docs/Fuzzing.md).
        .target(name: "DepotCLIParsers", dependencies: ["DepotCore"], swiftSettings: settings),
        .executableTarget(
            name: "DepotCLI",
            dependencies: [
                "Depot", "DepotCLIParsers", "DepotServer", "DepotBench", "DepotConformance", "DepotHTTPClient",
                .target(name: "DepotPostgres", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "ArgumentParser", package: "swift-argument-parser"), .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: settings
        ),
        // The SQLite driver, over libsqlite3 from the system (apt: libsqlite3-dev).
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // Calls Swift cannot make itself (the variadic sqlite3_db_config, SQLITE_TRANSIENT).
        .target(name: "CSQLiteShim", dependencies: ["CSQLite"]),
        // Logging: the statement log (Docs/SQLiteDriver.md, "Statement log").
        .target(
            name: "DepotSQLite",
            dependencies: ["DepotCore", "CSQLite", "CSQLiteShim", .product(name: "Logging", package: "swift-log")],
            swiftSettings: settings
        ),
        .testTarget(
            name: "DepotSQLiteTests",
            dependencies: ["DepotSQLite", "DepotConformance", "DepotCore", .product(name: "Logging", package: "swift-log")],
            swiftSettings: settings
        ),
        // The PostgreSQL driver over postgres-nio; not in the `Depot` umbrella (Docs/PostgresDriver.md).
        .target(
            name: "DepotPostgres",
            dependencies: [
                "DepotCore",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: settings
        ),
        // Needs a server: DEPOT_TEST_POSTGRES (scripts/test starts one).
        .testTarget(name: "DepotPostgresTests", dependencies: ["DepotPostgres", "DepotConformance", "DepotCore", "DepotSQLite"], swiftSettings: settings),
        // The JSON-file driver.
        .target(name: "DepotJSONFile", dependencies: ["DepotCore"], swiftSettings: settings),
        .testTarget(name: "DepotJSONFileTests", dependencies: ["DepotJSONFile", "DepotConformance", "DepotMemory"], swiftSettings: settings),
        // What the server and sync share about the HTTP wire (ETags, their reserved collections;
        // the JSON is DepotCore's JSONText), DepotServer (Hummingbird 2) and DepotSync (no server deps).
        .target(name: "DepotWire", dependencies: ["DepotCore"], swiftSettings: settings),
        .target(
            name: "DepotServer",
            dependencies: ["DepotCore", "DepotWire",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: settings
        ),
        .target(name: "DepotSync", dependencies: ["DepotCore", "DepotWire"], swiftSettings: settings),
        // A sync transport over SwiftNIO for plain-HTTP servers (Docs/Sync.md, "Transports"): not in
        // the `Depot` umbrella, so apps that sync over URLSession do not build NIO.
        .target(
            name: "DepotHTTPClient",
            dependencies: [
                "DepotCore", "DepotSync",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: settings
        ),
        .testTarget(name: "DepotServerTests", dependencies: ["DepotServer", "DepotWire", "DepotMemory"], swiftSettings: settings),
        .testTarget(
            name: "DepotSyncTests",
            // DepotConformance (ChildProcess, the helper's path) and DepotSQLite (the kill test
            // reads the clients' store files) for SyncKillTests; DepotModel for the @Model types of the
            // remote-resource tests (Docs/Remote.md); DepotHTTPClient, whose transport the sync
            // tests also run over.
            dependencies: ["DepotSync", "DepotServer", "DepotWire", "DepotMemory", "DepotConformance", "DepotSQLite", "DepotGDBM", "DepotModel", "DepotHTTPClient"],
            swiftSettings: settings
        ),
        // Commits transactions until killed; the crash tests of every driver run it.
        .executableTarget(name: "DepotCrashHelper", dependencies: ["Depot", "DepotPostgres"], swiftSettings: settings),
        // The fuzz harness (Docs/Fuzzing.md): the engine and the targets of every module that
        // reads outside bytes, the CLI's parsers included, and the tool that runs them.
        .target(name: "DepotFuzz", dependencies: ["DepotCore", "DepotCLIParsers", "DepotGDBM", "DepotJSONFile", "DepotServer"], swiftSettings: settings),
        .executableTarget(name: "DepotFuzzTool", dependencies: ["DepotFuzz"], swiftSettings: settings),
        .testTarget(name: "DepotFuzzTests", dependencies: ["DepotFuzz", "DepotCore"], swiftSettings: settings),
        // A small app on Depot (Examples/README.md), built with the package and run by ExampleAppTests.
        .executableTarget(name: "Bookshelf", dependencies: ["Depot"], path: "Examples/Bookshelf", swiftSettings: settings),
        // End-to-end tests of `depot` (they run the built executable).
        // CSQLite: NoTraceTests makes SQLite databases of "another program" (no Depot tables).
        // DepotPostgres and DepotServer: DocsServiceExamples compiles Docs/PostgresDriver.md's and Docs/Server.md's examples.
        // DepotCLIParsers: unit tests of the --where, --sort and CSV parsers.
        .testTarget(name: "DepotCLITests", dependencies: ["Depot", "DepotCLI", "DepotCLIParsers", "DepotConformance", "CSQLite", "DepotPostgres", "DepotServer"], swiftSettings: settings),
        // The engine of `depot bench` (workloads, raw baselines, report, chart).
        .target(name: "DepotBench", dependencies: ["Depot", "DepotCore", "DepotConformance", "CSQLite", "CSQLiteShim", "CGDBM"], swiftSettings: settings),
        .testTarget(name: "DepotBenchTests", dependencies: ["DepotBench", "Depot"], swiftSettings: settings),
        // The GDBM driver, over libgdbm from the system (apt: libgdbm-dev).
        .systemLibrary(name: "CGDBM", path: "Sources/CGDBM", providers: [.apt(["libgdbm-dev"])]),
        .target(name: "DepotGDBM", dependencies: ["DepotCore", "CGDBM"], swiftSettings: settings),
        .testTarget(name: "DepotGDBMTests", dependencies: ["DepotGDBM", "DepotConformance", "DepotMemory", "CGDBM"], swiftSettings: settings),
        .testTarget(name: "DepotCoreTests", dependencies: ["DepotCore"], swiftSettings: settings),
        .testTarget(name: "DepotMemoryTests", dependencies: ["Depot", "DepotMemory", "DepotConformance"], swiftSettings: settings),
        // The conformance library tested against deliberately broken drivers.
        .testTarget(name: "DepotConformanceTests", dependencies: ["DepotCore", "DepotMemory", "DepotConformance"], swiftSettings: settings),
        // The @Model macro: its implementation over swift-syntax (a plain library, so that the
        // expansion tests build it like any other: a test target that depends on a macro target
        // has every test built a second time for the host), the compiler plugin serving it, and
        // the declarations users import. Nothing else depends on them (Docs/Models.md).
        .target(
            name: "DepotModelMacrosCore",
            dependencies: [
                .product(name: "SwiftSyntax", package: "swift-syntax"),
                .product(name: "SwiftSyntaxMacros", package: "swift-syntax"),
                .product(name: "SwiftDiagnostics", package: "swift-syntax"),
            ],
            swiftSettings: settings
        ),
        .macro(
            name: "DepotModelMacros",
            dependencies: ["DepotModelMacrosCore", .product(name: "SwiftCompilerPlugin", package: "swift-syntax")],
            swiftSettings: settings
        ),
        .target(name: "DepotModel", dependencies: ["DepotCore", "DepotModelMacros"], swiftSettings: settings),
        // Expansions and diagnostics, compared as text.
        .testTarget(
            name: "DepotModelMacrosTests",
            dependencies: ["DepotModelMacrosCore", .product(name: "SwiftSyntaxMacrosTestSupport", package: "swift-syntax")],
            swiftSettings: settings
        ),
        // @Model types stored through Store on every driver.
        .testTarget(
            name: "DepotModelTests",
            dependencies: ["DepotModel", "DepotCore", "DepotMemory", "DepotSQLite", "DepotGDBM", "DepotJSONFile", "DepotConformance"],
            swiftSettings: settings
        ),
    ]
)
