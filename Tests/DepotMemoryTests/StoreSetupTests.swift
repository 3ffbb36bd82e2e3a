import Depot
import DepotCore
import Foundation
import Testing

/// Runs `body` and returns the DepotError it threw, or nil.
private func depotError(_ body: () async throws -> Void) async -> DepotError? {
    do {
        try await body()
        return nil
    } catch let error as DepotError {
        return error
    } catch {
        return DepotError(.internal, "not a DepotError: \(error)")
    }
}

/// A directory removed when the test is done.
private final class Scratch {
    let path: String
    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("depot-setup-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Raw SQL where there is no SQL: every driver but SQLite refuses it, naming itself.
@Suite struct RawSQLUnsupportedTests {
    @Test(arguments: ["memory", "gdbm", "json"])
    func driversWithoutSQLRefuseItNamingThemselves(scheme: String) async throws {
        let scratch = try Scratch()
        let store = try await Store.open(scheme == "memory" ? "memory:" : "\(scheme):\(scratch.path)/store.\(scheme)")
        #expect(!store.driver.capabilities.contains(.rawSQL))
        let books = try CollectionName("books")
        try await store.write { tx in try tx.insert(Record(id: 1, fields: ["title": "Dune"]), into: books) }
        let viaStore = await depotError { try await store.sql("SELECT 1") }
        #expect(viaStore?.code == .unsupported)
        #expect(viaStore?.message.contains("The \(scheme) driver") == true, "\(String(describing: viaStore))")
        let inRead = await depotError { _ = try await store.read { tx in try tx.sql("SELECT 1") } }
        #expect(inRead?.code == .unsupported)
        let inWrite = await depotError {
            try await store.write { tx in
                try tx.insert(Record(id: 2, fields: ["title": "Emma"]), into: books)
                _ = try tx.sql("DELETE FROM books")
            }
        }
        #expect(inWrite?.code == .unsupported)
        #expect(await depotError { _ = try await store.explainSQL("SELECT 1") }?.code == .unsupported)
        let blocking = store.blocking
        let viaBlocking = await depotError { _ = try await Task.detached { try blocking.sql("SELECT 1") }.value }
        #expect(viaBlocking?.code == .unsupported)
        // The failed write transaction left nothing behind.
        #expect(try await store.read { tx in try tx.query(Query(), in: books).map(\.id) } == [1])
        try await store.close()
    }
}

/// Several stores open at once, one the default (Docs/Semantics.md, "Several stores and a default").
@Suite struct StoreRegistryTests {
    @Test func theFirstRegisteredIsTheDefaultUntilAnotherIsMadeSo() async throws {
        let registry = StoreRegistry()
        let noDefault = await depotError { _ = try registry.defaultStore }
        #expect(noDefault?.code == .notFound)
        #expect(noDefault?.message.contains("No default store") == true)

        let main = try await Store.open("memory:")
        let cache = try await Store.open("memory:")
        try registry.register(main, as: "main")
        try registry.register(cache, as: "cache")
        #expect(try registry.defaultStore === main)
        #expect(registry.defaultName == "main")
        #expect(try registry.store(named: "cache") === cache)
        #expect(registry.names == ["cache", "main"])

        try registry.setDefault("cache")
        #expect(try registry.defaultStore === cache)
        #expect(await depotError { try registry.setDefault("nope") }?.code == .notFound)
        #expect(await depotError { try registry.register(main, as: "cache") }?.code == .alreadyExists)
        #expect(await depotError { try registry.register(main, as: "") }?.code == .invalidName)

        let third = try await Store.open("memory:")
        try registry.register(third, as: "third", makeDefault: true)
        #expect(try registry.defaultStore === third)

        // Unregistering the default leaves no default; no other store takes its place unasked.
        #expect(registry.unregister("third") === third)
        #expect(registry.defaultName == nil)
        #expect(await depotError { _ = try registry.defaultStore }?.code == .notFound)
        #expect(registry.unregister("third") == nil)
        let missing = await depotError { _ = try registry.store(named: "third") }
        #expect(missing?.code == .notFound)
        #expect(missing?.message.contains("cache, main") == true)

        // The stores stay open: the registry never closes them.
        let books = try CollectionName("books")
        try await third.write { tx in try tx.insert(Record(id: 1, fields: [:]), into: books) }
        for store in [main, cache, third] { try await store.close() }
    }

    @Test func theSharedRegistryServesStoreDefaultAndNamed() async throws {
        let name = "setup-test-\(UUID().uuidString)"
        let store = try await Store.open("memory:")
        try Store.register(store, as: name, makeDefault: true)
        #expect(try Store.named(name) === store)
        #expect(try Store.default === store)
        #expect(Store.unregister(name) === store)
        #expect(await depotError { _ = try Store.named(name) }?.code == .notFound)
        try await store.close()
    }

    @Test func registeringFromManyTasksAtOnceKeepsEveryStore() async throws {
        let registry = StoreRegistry()
        let store = try await Store.open("memory:")
        try await withThrowingTaskGroup(of: Void.self) { group in
            for n in 0..<64 {
                group.addTask { try registry.register(store, as: "s\(n)") }
            }
            try await group.waitForAll()
        }
        #expect(registry.names.count == 64)
        let defaultName = try #require(registry.defaultName)
        #expect(registry.names.contains(defaultName))
        try await store.close()
    }
}

/// `@data/` store paths (Docs/Semantics.md, "Stores and collections").
@Suite struct DataFolderStoreTests {
    @Test(arguments: ["sqlite", "gdbm", "json"])
    func storesOpenInTheDataFolderWhichIsCreated(scheme: String) async throws {
        let scratch = try Scratch()
        var registry = DriverRegistry.standard
        let folder = try DataFolder(path: scratch.path + "/data/MyApp")
        registry.dataFolder = folder
        let store = try await Store.open("\(scheme):@data/stores/books.\(scheme)", registry: registry)
        #expect(store.name == "\(scheme):@data/stores/books.\(scheme)")
        let books = try CollectionName("books")
        try await store.write { tx in try tx.insert(Record(id: 1, fields: ["title": "Dune"]), into: books) }
        try await store.close()
        #expect(FileManager.default.fileExists(atPath: scratch.path + "/data/MyApp/stores/books.\(scheme)"))

        let again = try await Store.open("\(scheme):@data/./stores/books.\(scheme)", registry: registry)
        #expect(try await again.read { tx in try tx.get(1, from: books)?.fields["title"] } == "Dune")
        try await again.close()

        for escaping in ["@data/../books", "@data/stores/../../x", "@data/", "@data", "@data//", "@data/."] {
            let error = await depotError { _ = try await Store.open("\(scheme):\(escaping)", registry: registry) }
            #expect(error?.code == .invalidStore, "\(escaping): \(String(describing: error))")
        }
        // Nothing was made outside the folder.
        let outside = try FileManager.default.contentsOfDirectory(atPath: scratch.path + "/data")
        #expect(outside == ["MyApp"])
    }
}

/// Callbacks around versioned migrations (Docs/Semantics.md, "Migrations").
@Suite struct MigrationCallbackTests {
    /// What the callbacks saw, in order.
    final class Calls: Sendable {
        private let list = Locked<[String]>([])
        func add(_ call: String) { list.withLock { $0.append(call) } }
        var all: [String] { list.withLock { $0 } }
    }

    static let migrations = [
        Migration(version: 1, [.addField("users", "active", default: true)]),
        Migration(version: 2, [.renameField("users", from: "name", to: "fullName")]),
        Migration(version: 4, [.addIndex("users", IndexDefinition(["fullName"]))]),
    ]

    func fill(_ store: Store) async throws {
        let users = try CollectionName("users")
        try await store.write { tx in
            // More records than SQLite's inline step budget, so a transaction tried inline runs again.
            for n in 1...150 { try tx.insert(Record(id: .int(Int64(n)), fields: ["name": .string("u\(n)")]), into: users) }
        }
    }

    @Test(arguments: ["memory:", "sqlite::memory:", "sqlite-normal"])
    func calledOncePerMigrationAroundItsTransaction(storeString: String) async throws {
        let scratch = try Scratch()
        let string = storeString == "sqlite-normal" ? "sqlite:\(scratch.path)/s.sqlite?durability=normal" : storeString
        let store = try await Store.open(string)
        try await fill(store)
        let calls = Calls()
        let reached = try await store.migrate(
            Self.migrations,
            willMigrate: { step in
                // Before the transaction: the store is still at the version migrated from.
                calls.add("will \(step.from)->\(step.to) at \(try await store.schemaVersion())")
            },
            didMigrate: { step in
                calls.add("did \(step.from)->\(step.to) at \(try await store.schemaVersion())")
            })
        #expect(reached == 4)
        #expect(calls.all == ["will 0->1 at 0", "did 0->1 at 1", "will 1->2 at 1", "did 1->2 at 2", "will 2->4 at 2", "did 2->4 at 4"])

        // Nothing to migrate: no callback at all.
        let again = Calls()
        try await store.migrate(Self.migrations, willMigrate: { _ in again.add("will") }, didMigrate: { _ in again.add("did") })
        #expect(again.all.isEmpty)
        try await store.close()
    }

    @Test func aThrowingWillMigrateAbortsWithoutChanges() async throws {
        let store = try await Store.open("memory:")
        try await fill(store)
        let users = try CollectionName("users")
        struct NotNow: Error {}
        let calls = Calls()
        await #expect(throws: NotNow.self) {
            try await store.migrate(
                Self.migrations,
                willMigrate: { step in
                    calls.add("will \(step.to)")
                    if step.to == 2 { throw NotNow() }
                },
                didMigrate: { step in calls.add("did \(step.to)") })
        }
        // Migration 1 committed; migration 2 never began, and 4 was not tried.
        #expect(calls.all == ["will 1", "did 1", "will 2"])
        #expect(try await store.schemaVersion() == 1)
        let first = try await store.read { tx in try tx.get(1, from: users) }
        #expect(first?.fields == ["name": "u1", "active": true])

        // Throwing before the first migration leaves the store exactly as it was.
        let fresh = try await Store.open("memory:")
        try await fill(fresh)
        await #expect(throws: NotNow.self) {
            try await fresh.migrate(Self.migrations, willMigrate: { _ in throw NotNow() })
        }
        #expect(try await fresh.schemaVersion() == 0)
        #expect(try await fresh.read { tx in try tx.get(1, from: users)?.fields } == ["name": "u1"])
        #expect(try await fresh.collectionNames(includingReserved: true) == [users])

        // A throwing didMigrate keeps its migration and stops the later ones.
        await #expect(throws: NotNow.self) {
            try await fresh.migrate(Self.migrations, didMigrate: { step in if step.to == 1 { throw NotNow() } })
        }
        #expect(try await fresh.schemaVersion() == 1)
        try await store.close()
        try await fresh.close()
    }
}
