import Depot
import DepotConformance
import Foundation
import Testing

/// Runs the built `depot` executable as a subprocess and captures what it prints.
enum CLI {
    /// What one run of `depot` did.
    struct Run: CustomStringConvertible {
        var status: Int32
        var stdout: String
        var stderr: String
        var lines: [String] { stdout.split(separator: "\n", omittingEmptySubsequences: true).map(String.init) }
        var description: String { "exit \(status)\nstdout: \(stdout.prefix(2000))\nstderr: \(stderr.prefix(2000))" }
    }

    /// Finds `depot` beside the test binary (or in `DEPOT_CLI`).
    static func executable() throws -> String {
        if let path = ProcessInfo.processInfo.environment["DEPOT_CLI"] { return path }
        var directory = URL(fileURLWithPath: CommandLine.arguments.first ?? ".").deletingLastPathComponent()
        for _ in 0..<6 {
            let candidate = directory.appendingPathComponent("depot").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        throw HarnessError("the depot executable was not found beside the test binary; run `swift build` first")
    }

    /// Runs `depot args...` with `stdin` as its input; DEPOT_STORE is removed from the
    /// environment unless `environment` sets it.
    static func run(_ args: [String], stdin: String = "", environment: [String: String] = [:]) async throws -> Run {
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "DEPOT_STORE")
        for (key, value) in environment { env[key] = value }
        let result = try await ChildProcess.run(try executable(), args, environment: env, standardInput: Data(stdin.utf8))
        let status: Int32
        switch result.status {
        case .exited(let code): status = code
        case .signalled(let signal): status = 128 + signal
        }
        return Run(status: status, stdout: result.outputText, stderr: result.errorText)
    }

    /// The schemes of this build whose drivers keep files, found by opening each once in a
    /// scratch directory.
    static func persistentSchemes() async throws -> [String] {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        var found: [String] = []
        for scheme in DriverRegistry.standard.schemes where scheme != "memory" {
            guard let store = try? await Store.open(scratch.storeString(scheme, "probe")) else { continue }
            if store.driver.capabilities.contains(.persistence) { found.append(scheme) }
            try? await store.close()
        }
        return found
    }
}

/// A directory removed when the test is done.
struct TemporaryDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("depot-cli-test-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    var path: String { url.path }

    /// `SCHEME:DIR/NAME.SCHEME`.
    func storeString(_ scheme: String, _ name: String) -> String { "\(scheme):\(url.appendingPathComponent("\(name).\(scheme)").path)" }

    /// Writes `text` to a file in the directory and returns its path.
    func file(_ name: String, _ text: String) throws -> String {
        let path = url.appendingPathComponent(name).path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Every regular file under the directory with its contents, for "nothing changed" checks.
    func snapshot() -> [String: Data] {
        var out: [String: Data] = [:]
        guard let walker = FileManager.default.enumerator(atPath: path) else { return out }
        for case let relative as String in walker {
            let full = url.appendingPathComponent(relative).path
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory), !isDirectory.boolValue {
                // Not contents(atPath:), which leaks 4 KB per empty file (Docs/Testing.md, "Sanitizers").
                let handle = FileHandle(forReadingAtPath: full)
                out[relative] = (try? handle?.readToEnd()) ?? Data()
            }
        }
        return out
    }

    func remove() { try? FileManager.default.removeItem(at: url) }
}

struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
