@testable import DepotCore
import Foundation
import Testing

/// `@data/` store paths (Docs/Semantics.md, "Stores and collections").
@Suite struct DataFolderTests {
    @Test func theXDGRulesPickTheFolder() throws {
        let xdg = try DataFolder.standard(environment: ["XDG_DATA_HOME": "/xdg/data", "HOME": "/home/ada"], processName: "Books")
        #expect(xdg.path == "/xdg/data/Books")
        // Unset, empty or relative XDG_DATA_HOME: ~/.local/share, as the XDG spec says.
        for environment in [["HOME": "/home/ada"], ["XDG_DATA_HOME": "", "HOME": "/home/ada"], ["XDG_DATA_HOME": "rel/data", "HOME": "/home/ada/"]] {
            let folder = try DataFolder.standard(environment: environment, processName: "Books")
            #expect(folder.path == "/home/ada/.local/share/Books", "\(environment)")
        }
        #expect(throws: DepotError.self) { try DataFolder.standard(environment: ["HOME": "relative"], processName: "x") }
        // A process name never makes a path of several parts, nor `..`.
        #expect(try DataFolder.standard(environment: ["HOME": "/h"], processName: "a/../b").path == "/h/.local/share/a_.._b")
        #expect(try DataFolder.standard(environment: ["HOME": "/h"], processName: "..").path == "/h/.local/share/depot")
        #expect(try DataFolder.standard(environment: ["HOME": "/h"], processName: "").path == "/h/.local/share/depot")
    }

    @Test func pathsStayInsideTheFolder() throws {
        let folder = try DataFolder(path: "/data/App")
        #expect(try folder.resolve("books.db") == "/data/App/books.db")
        #expect(try folder.resolve("./stores//books.db") == "/data/App/stores/books.db")
        for bad in ["", "/etc/passwd", "..", "../x", "a/../../x", "a/..", ".", "./", "a\u{0}b"] {
            #expect(throws: DepotError.self, "\(bad.debugDescription)") { try folder.resolve(bad) }
        }
        #expect(throws: DepotError.self) { try DataFolder(path: "relative/folder") }
    }

    @Test func storeLocationsResolveOnlyDataPaths() throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("depot-data-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let folder = try DataFolder(path: scratch + "/App")
        let location = try StoreLocation("sqlite:@data/sub/books.db?durability=normal")
        #expect(location.isInDataFolder)
        #expect(location.description == "sqlite:@data/sub/books.db?durability=normal")

        let unresolved = try location.resolvingDataFolder(folder, create: false)
        #expect(unresolved.path == scratch + "/App/sub/books.db")
        #expect(unresolved.options == ["durability": "normal"])
        #expect(!FileManager.default.fileExists(atPath: scratch))

        let resolved = try location.resolvingDataFolder(folder)
        #expect(resolved == unresolved)
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: scratch + "/App/sub", isDirectory: &isDirectory) && isDirectory.boolValue)
        #expect(!FileManager.default.fileExists(atPath: scratch + "/App/sub/books.db"))

        for other in ["sqlite:books.db", "sqlite::memory:", "memory:", "pg://user@host/db", "json:/abs/@data/x.json"] {
            let plain = try StoreLocation(other)
            #expect(try plain.resolvingDataFolder(folder) == plain, "\(other)")
        }
    }

    @Test func theRegistryResolvesBeforeTheFactorySeesThePath() async throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("depot-data-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        var registry = DriverRegistry()
        registry.dataFolder = try DataFolder(path: scratch)
        registry.register("probe") { location in
            throw DepotError(.unsupported, "seen", detail: location.path)
        }
        do {
            _ = try await registry.makeDriver("probe:@data/x/y.db")
            Issue.record("the probe factory always throws")
        } catch let error as DepotError {
            #expect(error.message == "seen")
            #expect(error.detail == scratch + "/x/y.db")
        }
        #expect(FileManager.default.fileExists(atPath: scratch + "/x"))
        await #expect(throws: DepotError.self) { _ = try await registry.makeDriver("probe:@data/../y.db") }
    }
}
