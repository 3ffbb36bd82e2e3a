import Foundation

/// A fresh scratch directory, removed when the value is deinitialized.
final class TestDirectory: Sendable {
    let path: String

    init() {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("depot-json-\(UUID().uuidString)").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    var store: String { path + "/db.json" }

    func contents(_ name: String = "db.json") -> String? {
        bytes(name).map { String(decoding: $0, as: UTF8.self) }
    }

    func bytes(_ name: String = "db.json") -> Data? {
        // Not Data(contentsOf:), which leaks 4 KB per empty file (Docs/Testing.md, "Sanitizers").
        try? FileHandle(forReadingFrom: URL(fileURLWithPath: path + "/" + name)).readToEnd() ?? Data()
    }

    func write(_ text: String, to name: String = "db.json") throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path + "/" + name))
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}
