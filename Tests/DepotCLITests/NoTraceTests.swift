import Depot
import Foundation
import Testing

/// Names, kinds, sizes and modification times of everything under a directory.
///
/// With `strict`, directories' modification times count too (so a file created and removed
/// again is noticed), and nothing is ignored; otherwise directories count by name only and the
/// side files that Docs/CLI.md ("Read-only commands") allows a read to create and remove are
/// ignored: SQLite's `-wal` and `-shm`.
func treeSnapshot(_ root: URL, strict: Bool) throws -> [String: String] {
    var out: [String: String] = [:]
    let manager = FileManager.default
    let rootAttributes = try manager.attributesOfItem(atPath: root.path)
    if strict { out["."] = "dir \(modificationTime(rootAttributes))" }
    guard let walker = manager.enumerator(atPath: root.path) else { throw HarnessError("cannot list \(root.path)") }
    for case let relative as String in walker {
        if !strict, relative.hasSuffix("-wal") || relative.hasSuffix("-shm") { continue }
        let attributes = try manager.attributesOfItem(atPath: root.appendingPathComponent(relative).path)
        let mtime = modificationTime(attributes)
        if attributes[.type] as? FileAttributeType == .typeDirectory {
            out[relative] = strict ? "dir \(mtime)" : "dir"
        } else {
            out[relative] = "file \((attributes[.size] as? NSNumber)?.int64Value ?? -1) \(mtime)"
        }
    }
    return out
}

/// A modification time with all the precision the file system gives (sub-second).
private func modificationTime(_ attributes: [FileAttributeKey: Any]) -> String {
    guard let date = attributes[.modificationDate] as? Date else { return "no mtime" }
    return String(date.timeIntervalSince1970)
}

/// The file name of a store of `scheme` in the tests below.
private func storeName(_ scheme: String) -> String {
    switch scheme {
    case "sqlite": return "app.db"
    case "json": return "app.json"
    default: return "app"
    }
}

@Suite("depot: read-only commands change nothing; failed writes leave no trace")
struct NoTraceTests {
    /// The read-only commands, run on `store`; `books` is the collection they read.
    static func readOnlyCommands(_ store: String) -> [[String]] {
        [["info", store], ["info", store, "--json"], ["count", store, "books"], ["dump", store], ["dump", store, "books"],
         ["query", store, "books"], ["check", store], ["copy", store, "memory:"]]
    }

    @Test("info, count, dump, query, check and copy's SRC create nothing at a path that is not a store of the driver")
    func readOnlyCommandsOnNonStores() async throws {
        let schemes = try await CLI.persistentSchemes()
        #expect(Set(schemes).isSuperset(of: ["sqlite", "gdbm", "json"]), "\(schemes)")
        for scheme in schemes {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let manager = FileManager.default
            let empty = directory.url.appendingPathComponent("empty")
            try manager.createDirectory(at: empty, withIntermediateDirectories: false)
            let unrelated = directory.url.appendingPathComponent("unrelated")
            try manager.createDirectory(at: unrelated, withIntermediateDirectories: false)
            try Data("some notes\n".utf8).write(to: unrelated.appendingPathComponent("notes.txt"))
            try Data([0, 1, 2, 3]).write(to: unrelated.appendingPathComponent("blob.bin"))
            try manager.createDirectory(at: unrelated.appendingPathComponent("sub"), withIntermediateDirectories: false)
            let situations: [(name: String, path: String)] = [
                ("an empty folder", empty.path),
                ("a folder of unrelated files", unrelated.path),
                ("an unrelated file", unrelated.appendingPathComponent("notes.txt").path),
                ("a missing path", directory.url.appendingPathComponent("missing").path),
                ("a missing path in a missing folder", directory.url.appendingPathComponent("nowhere/missing").path),
            ]
            for (situation, path) in situations {
                for args in Self.readOnlyCommands("\(scheme):\(path)") {
                    let before = try treeSnapshot(directory.url, strict: true)
                    let run = try await CLI.run(args)
                    #expect(run.status == 1, "\(scheme), \(situation), depot \(args): \(run)")
                    // A JSON store is any regular file: an unrelated one is opened and refused as damaged.
                    if !(scheme == "json" && situation == "an unrelated file") {
                        // `check` reports it as its one problem, on standard output.
                        #expect((args[0] == "check" ? run.stdout : run.stderr).contains("no store at"), "\(scheme), \(situation), depot \(args): \(run)")
                    }
                    let after = try treeSnapshot(directory.url, strict: true)
                    #expect(after == before, "\(scheme), \(situation), depot \(args) changed the tree: \(run)")
                }
            }
        }
    }

    @Test("info, count, dump, query, check and copy's SRC change nothing a user sees in a real store")
    func readOnlyCommandsOnRealStores() async throws {
        for scheme in try await CLI.persistentSchemes() {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let storeString = "\(scheme):" + directory.url.appendingPathComponent(storeName(scheme)).path
            let store = try await Store.open(storeString)
            try await store.write { tx in
                for n in 1...5 { try tx.save(Record(id: .int(Int64(n)), fields: ["title": .string("book \(n)")]), into: try CollectionName("books")) }
            }
            try await store.close()
            for args in Self.readOnlyCommands(storeString) {
                let before = try treeSnapshot(directory.url, strict: false)
                let run = try await CLI.run(args)
                #expect(run.status == 0, "\(scheme), depot \(args): \(run)")
                let after = try treeSnapshot(directory.url, strict: false)
                #expect(after == before, "\(scheme), depot \(args) changed the store's files: \(run)")
            }
        }
    }

    @Test("a load or copy that fails before committing leaves no new store, and never removes an existing one")
    func failedWritesLeaveNoTrace() async throws {
        for scheme in try await CLI.persistentSchemes() {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let path = directory.url.appendingPathComponent(storeName(scheme)).path
            let storeString = "\(scheme):\(path)"

            let badLoad = try await CLI.run(["load", storeString, "t"], stdin: "not json\n")
            #expect(badLoad.status == 1 && badLoad.stderr.contains("line 1") && badLoad.stderr.contains("nothing was committed"), "\(scheme): \(badLoad)")
            #expect(try treeSnapshot(directory.url, strict: false).isEmpty, "\(scheme): a failed load left files behind")

            let badCopy = try await CLI.run(["copy", "memory:", storeString, "--collection", "nosuch"])
            #expect(badCopy.status == 1, "\(scheme): \(badCopy)")
            #expect(try treeSnapshot(directory.url, strict: false).isEmpty, "\(scheme): a failed copy left files behind")

            if scheme == "gdbm" {
                // A folder that existed stays, emptied of what the load created in it.
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
                let intoFolder = try await CLI.run(["load", storeString, "t"], stdin: "{\"id\":1}\n{oops\n")
                #expect(intoFolder.status == 1, "\(intoFolder)")
                #expect(try treeSnapshot(directory.url, strict: false) == [storeName(scheme): "dir"], "a failed load into an empty folder left files in it")
                try FileManager.default.removeItem(atPath: path)
            }

            // Once a load has committed, its store stays, also when a later line fails...
            let partial = try await CLI.run(["load", storeString, "t", "--batch", "1"], stdin: "{\"id\":1}\nnot json\n")
            #expect(partial.status == 1 && partial.stderr.contains("1 record in 1 batch was committed"), "\(scheme): \(partial)")
            // ...and a failing load into an existing store leaves it as it was.
            let before = try treeSnapshot(directory.url, strict: false)
            let again = try await CLI.run(["load", storeString, "t"], stdin: "not json\n")
            #expect(again.status == 1, "\(scheme): \(again)")
            #expect(try treeSnapshot(directory.url, strict: false) == before, "\(scheme): a failed load changed an existing store")
            let count = try await CLI.run(["count", storeString, "t"])
            #expect(count.status == 0 && count.stdout == "1\n", "\(scheme): \(count)")
        }
    }
}
