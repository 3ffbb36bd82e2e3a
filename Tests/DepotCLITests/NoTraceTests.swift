import CSQLite
import Depot
import Foundation
import Testing

/// Names, kinds, sizes and modification times of everything under a directory.
///
/// With `strict`, directories' modification times and files' contents (a 64-bit FNV-1a hash)
/// count too (so a file created and removed again, or rewritten in place, is noticed), and
/// nothing is ignored; otherwise directories count by name only and the
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
            let size = (attributes[.size] as? NSNumber)?.int64Value ?? -1
            let contents = strict ? " \(fnv1a(try FileHandle(forReadingFrom: root.appendingPathComponent(relative)).readToEnd() ?? Data()))" : ""
            out[relative] = "file \(size) \(mtime)\(contents)"
        }
    }
    return out
}

/// The 64-bit FNV-1a hash of `bytes`, in hex: enough to notice a change in a small file.
func fnv1a(_ bytes: Data) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in bytes {
        hash ^= UInt64(byte)
        hash = hash &* 0x0000_0100_0000_01B3
    }
    return String(hash, radix: 16)
}

/// Makes an SQLite database the way another program would (a table of its own, no Depot
/// tables), in rollback-journal or WAL mode, and closes it (which removes its -wal and -shm).
func makeForeignSQLiteDatabase(_ path: String, wal: Bool) throws {
    var db: OpaquePointer?
    let opened = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil)
    guard let db else { throw HarnessError("sqlite3_open_v2 returned \(opened) and no connection") }
    defer { sqlite3_close_v2(db) }
    guard opened == SQLITE_OK else { throw HarnessError("cannot create \(path): \(String(cString: sqlite3_errmsg(db)))") }
    let sql = (wal ? "PRAGMA journal_mode = WAL; " : "")
        + "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes(body) VALUES ('keep me');"
    guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
        throw HarnessError("cannot fill \(path): \(String(cString: sqlite3_errmsg(db)))")
    }
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
    /// `sql` only for SQLite: on the other drivers it fails on a real store.
    static func readOnlyCommands(_ store: String, scheme: String) -> [[String]] {
        [["info", store], ["info", store, "--json"], ["count", store, "books"], ["dump", store], ["dump", store, "books"],
         ["dump", store, "books", "--format", "csv"], ["query", store, "books"], ["check", store], ["copy", store, "memory:"]]
            + (scheme == "sqlite" ? [["sql", store, "SELECT 1"]] : [])
    }

    /// The paths of a scheme's own "looks like a store but is not" situations, made in `directory`.
    static func lookalikes(_ scheme: String, in directory: URL) throws -> [(name: String, path: String, saysNoStore: Bool)] {
        let file = { (name: String, bytes: [UInt8]) throws -> String in
            let url = directory.appendingPathComponent(name)
            try Data(bytes).write(to: url)
            return url.path
        }
        switch scheme {
        case "sqlite":
            let rollback = directory.appendingPathComponent("other.db").path
            try makeForeignSQLiteDatabase(rollback, wal: false)
            let wal = directory.appendingPathComponent("other-wal.db").path
            try makeForeignSQLiteDatabase(wal, wal: true)
            return [
                ("an empty 0-byte file", try file("empty.db", []), true),
                ("a file named x.db that is not SQLite", try file("x.db", Array("name,year\nAda,1815\n".utf8)), true),
                ("a file that starts like SQLite and is not", try file("fake.db", Array("SQLite format 3\u{0}".utf8) + [UInt8](repeating: 7, count: 200)), true),
                ("an SQLite database of another program", rollback, true),
                ("an SQLite database of another program in WAL mode", wal, true),
            ]
        case "json":
            return [
                ("a .json file that is not JSON", try file("x.json", Array("name,year\nAda,1815\n".utf8)), true),
                ("a JSON array", try file("array.json", Array("[1, 2, 3]\n".utf8)), true),
                // An object: the driver reads it, finds a member that is not records, and refuses it.
                ("a JSON object that is not a store", try file("object.json", Array("{\"name\": \"settings\", \"n\": 1}\n".utf8)), false),
            ]
        case "gdbm":
            let folder = directory.appendingPathComponent("journal-only")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
            try Data("someone else's journal\n".utf8).write(to: folder.appendingPathComponent("journal"))
            return [("a folder with a journal file of another program", folder.path, true)]
        default:
            return []
        }
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
            let situations: [(name: String, path: String, saysNoStore: Bool)] = [
                ("an empty folder", empty.path, true),
                ("a folder of unrelated files", unrelated.path, true),
                ("an unrelated file", unrelated.appendingPathComponent("notes.txt").path, true),
                ("a missing path", directory.url.appendingPathComponent("missing").path, true),
                ("a missing path in a missing folder", directory.url.appendingPathComponent("nowhere/missing").path, true),
            ] + (try Self.lookalikes(scheme, in: directory.url))
            var checked = 0
            for (situation, path, saysNoStore) in situations {
                for args in Self.readOnlyCommands("\(scheme):\(path)", scheme: scheme) {
                    let before = try treeSnapshot(directory.url, strict: true)
                    let run = try await CLI.run(args)
                    #expect(run.status == 1, "\(scheme), \(situation), depot \(args): \(run)")
                    // `check` reports it as its one problem, on standard output.
                    let said = args[0] == "check" ? run.stdout : run.stderr
                    if saysNoStore {
                        #expect(said.contains("no store at"), "\(scheme), \(situation), depot \(args): \(run)")
                    } else {
                        // The driver's refusal, naming the file.
                        #expect(said.contains("cannot be read") && said.contains(path), "\(scheme), \(situation), depot \(args): \(run)")
                    }
                    let after = try treeSnapshot(directory.url, strict: true)
                    #expect(after == before, "\(scheme), \(situation), depot \(args) changed the tree: \(run)")
                    checked += 1
                }
            }
            print("NoTraceTests: \(scheme): \(checked) read-only runs on \(situations.count) situations that are not stores (\(situations.map(\.name).joined(separator: "; "))), each compared with the tree before it")
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
            for args in Self.readOnlyCommands(storeString, scheme: scheme) {
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

            if scheme == "sqlite" {
                // Input bad from its first line never opens the path: a database of another
                // program and an empty file stay exactly as they were.
                let other = directory.url.appendingPathComponent("other.db").path
                try makeForeignSQLiteDatabase(other, wal: false)
                let empty = directory.url.appendingPathComponent("empty.db")
                try Data().write(to: empty)
                let before = try treeSnapshot(directory.url, strict: true)
                for target in [other, empty.path] {
                    let bad = try await CLI.run(["load", "sqlite:\(target)", "t"], stdin: "not json\n")
                    #expect(bad.status == 1 && bad.stderr.contains("line 1"), "\(target): \(bad)")
                }
                #expect(try treeSnapshot(directory.url, strict: true) == before, "a load failing at line 1 changed a file")
                // A load that opened the empty file and failed before its first commit empties it again.
                let later = try await CLI.run(["load", "sqlite:\(empty.path)", "t", "--batch", "0"], stdin: "{\"id\":1}\n{oops\n")
                #expect(later.status == 1 && later.stderr.contains("line 2") && later.stderr.contains("nothing was committed"), "\(later)")
                let size = try FileManager.default.attributesOfItem(atPath: empty.path)[.size] as? NSNumber
                #expect(size?.intValue == 0, "the empty file is empty again: \(String(describing: size))")
                #expect(Set(try treeSnapshot(directory.url, strict: false).keys) == ["other.db", "empty.db"], "no side file left")
                try FileManager.default.removeItem(atPath: other)
                try FileManager.default.removeItem(at: empty)
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
