// swift-tools-version:6.1
import PackageDescription

// The GDBM driver against raw libgdbm on the same bytes, in one run (release builds only):
//   cd Benchmarks/GDBMBench && swift run -c release gdbm-bench [records]
let package = Package(
    name: "GDBMBench",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "Depot", path: "../..")],
    targets: [
        .systemLibrary(name: "CGDBMBench", path: "Sources/CGDBMBench"),
        .executableTarget(
            name: "gdbm-bench",
            dependencies: [.product(name: "Depot", package: "Depot"), "CGDBMBench"],
            path: "Sources/GDBMBench"
        ),
    ]
)
