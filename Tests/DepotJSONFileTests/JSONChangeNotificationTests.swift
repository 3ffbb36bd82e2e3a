import DepotCore
import Foundation
import Synchronization
import Testing
@testable import DepotJSONFile

/// Reads trust the kernel's change notification for the store's folder (inotify, Linux) and
/// `stat` the file only after something there changed (Docs/JSONFileDriver.md, "Reads"):
/// a quiet store is read without a `stat`, and an edit that lands between two reads is seen by
/// the second, however close together they are.
@Suite struct JSONChangeNotificationTests {
    /// The real file system, counting the `stat`s of the store file by path. Its change
    /// watches use an inotify instance of their own, so other tests' stores (whose events
    /// share the process's instance) do not add stats to the count.
    final class StatCounting: JSONFileSystem {
        let base = PosixFileSystem()
        let stats = Atomic<Int>(0)
        let hub = InotifyHub.make()
        func openForReading(_ path: String) throws -> Int32? { try base.openForReading(path) }
        func openForWriting(_ path: String, permissions: UInt32?) throws -> Int32 { try base.openForWriting(path, permissions: permissions) }
        func readAll(_ fd: Int32, limit: Int) throws -> [UInt8] { try base.readAll(fd, limit: limit) }
        func write(_ fd: Int32, _ bytes: [UInt8]) throws { try base.write(fd, bytes) }
        func fsync(_ fd: Int32) throws { try base.fsync(fd) }
        func close(_ fd: Int32) throws { try base.close(fd) }
        func closeQuietly(_ fd: Int32) { base.closeQuietly(fd) }
        func rename(_ from: String, _ to: String) throws { try base.rename(from, to) }
        func fsyncDirectory(_ path: String) throws { try base.fsyncDirectory(path) }
        func identity(ofPath path: String) throws -> FileIdentity? {
            stats.add(1, ordering: .relaxed)
            return try base.identity(ofPath: path)
        }
        func identity(of fd: Int32) throws -> FileIdentity { try base.identity(of: fd) }
        func removeQuietly(_ path: String) { base.removeQuietly(path) }
        func openLockFile(_ path: String) throws -> Int32 { try base.openLockFile(path) }
        func tryLock(_ fd: Int32) throws -> Bool { try base.tryLock(fd) }
        func unlock(_ fd: Int32) { base.unlock(fd) }
        func changeWatch(directory: String) -> FileChangeWatch? { FileChangeWatch.make(directory: directory, hub: hub) }
    }

    static var items: CollectionName { get throws { try CollectionName("items") } }

    static func value(_ driver: JSONFileDriver) async throws -> FieldValue? {
        try await driver.read { tx in try tx.get(1, from: try Self.items) }?.fields["v"]
    }

    /// An edit by "another program" that sets record 1's `v` to `n`: in place with a new
    /// length (even `n`), or a new file renamed over the store, a new inode (odd `n`).
    static func edit(_ dir: TestDirectory, to n: Int) throws {
        let text = "{\"items\":[{\"id\":1,\"v\":\(n)}" + String(repeating: " ", count: n % 7) + "]}"
        if n.isMultiple(of: 2) {
            try dir.write(text)
        } else {
            try dir.write(text, to: "next.json")
            #expect(rename(dir.path + "/next.json", dir.store) == 0)
        }
    }

    /// `readWithoutWaiting` (what `Collection.get` tries first) runs on the calling thread
    /// only over a file known to be unchanged: right after an edit it declines, and whenever it
    /// runs it sees the last edit.
    @Test func readsWithoutWaitingNeverSeeAnOldFile() async throws {
        let dir = TestDirectory()
        let driver = try await JSONFileDriver(path: dir.store, configuration: .init(durability: .normal))
        try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["v": 0]), into: try Self.items) }
        let store = try await Store(driver: driver)
        let items = store.collection(try Self.items)
        var ran = 0
        for n in 1...100 {
            try Self.edit(dir, to: n)
            var seen: FieldValue?
            if try driver.readWithoutWaiting({ tx in seen = try tx.get(1, from: try Self.items)?.fields["v"] }) {
                ran += 1
                #expect(seen == .int(Int64(n)), "edit \(n)")
            }
            #expect(try await items.get(1)?.fields["v"] == .int(Int64(n)), "edit \(n)")
            // The file is now known: the next one runs here.
            #expect(try driver.readWithoutWaiting { tx in seen = try tx.get(1, from: try Self.items)?.fields["v"] })
            #expect(seen == .int(Int64(n)))
        }
        #expect(ran == 0, "right after an edit the driver's thread reads the file first")
        try await driver.close()
    }

    #if os(Linux)
    @Test func aQuietStoreIsReadWithoutAStatAndAnyEditIsSeenByTheNextRead() async throws {
        let dir = TestDirectory()
        let fs = StatCounting()
        let driver = try await JSONFileDriver(path: dir.store, configuration: .init(durability: .normal), fileSystem: fs)
        #expect(driver.store.watch != nil, "inotify is available on Linux")
        try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["v": 0]), into: try Self.items) }
        // The first read after the commit checks the file once; the next ones do not.
        #expect(try await Self.value(driver) == 0)
        let before = fs.stats.load(ordering: .relaxed)
        for _ in 0..<200 { #expect(try await Self.value(driver) == 0) }
        #expect(fs.stats.load(ordering: .relaxed) == before, "200 reads of a quiet store made no stat")

        // 300 edits by "another program", each followed at once by a read on this thread:
        // in place with a new length, or a new file renamed over the store (a new inode).
        for n in 1...300 {
            try Self.edit(dir, to: n)
            #expect(try await Self.value(driver) == .int(Int64(n)), "the read right after edit \(n)")
        }
        // A change to another file in the folder costs one stat, and the store stays as it was.
        try dir.write("notes", to: "notes.txt")
        let beforeNotes = fs.stats.load(ordering: .relaxed)
        #expect(try await Self.value(driver) == 300)
        #expect(fs.stats.load(ordering: .relaxed) == beforeNotes + 1)
        #expect(try await Self.value(driver) == 300)
        #expect(fs.stats.load(ordering: .relaxed) == beforeNotes + 1)
        // Deleted: an empty store, seen by the next read.
        try FileManager.default.removeItem(atPath: dir.store)
        #expect(try await Self.value(driver) == nil)
        try await driver.close()
    }

    /// Edits and reads on two threads with no pause between them: whenever an edit has
    /// returned, a read that begins afterwards sees it (or a later one), never an older value.
    @Test func editsOnAnotherThreadAreSeenByEveryLaterRead() async throws {
        let dir = TestDirectory()
        let driver = try await JSONFileDriver(path: dir.store, configuration: .init(durability: .normal))
        try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["v": 0]), into: try Self.items) }
        let done = Atomic<Int>(0)
        let editor = Thread {
            for n in 1...400 {
                let text = "{\"items\":[{\"id\":1,\"v\":\(n)}" + String(repeating: " ", count: n % 5) + "]}"
                let path = dir.path + "/e\(n).json"
                FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
                _ = rename(path, dir.store)
                done.store(n, ordering: .sequentiallyConsistent)
            }
        }
        editor.start()
        var stale = 0
        var reads = 0
        while done.load(ordering: .sequentiallyConsistent) < 400 {
            let floor = done.load(ordering: .sequentiallyConsistent)
            guard case .int(let seen)? = try await Self.value(driver) else { Issue.record("no value"); break }
            if seen < Int64(floor) { stale += 1 }
            reads += 1
        }
        #expect(stale == 0, "\(stale) of \(reads) reads returned a value older than an edit that had returned before they began")
        #expect(try await Self.value(driver) == 400)
        try await driver.close()
    }
    #endif

    @Test func notifyFalseStatsOnEveryRead() async throws {
        let dir = TestDirectory()
        let fs = StatCounting()
        let driver = try await JSONFileDriver(path: dir.store, configuration: .init(durability: .normal, changeNotification: false), fileSystem: fs)
        #expect(driver.store.watch == nil)
        try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["v": 0]), into: try Self.items) }
        let before = fs.stats.load(ordering: .relaxed)
        for _ in 0..<20 { #expect(try await Self.value(driver) == 0) }
        #expect(fs.stats.load(ordering: .relaxed) == before + 20)
        try await driver.close()

        let location = try StoreLocation("json:\(dir.store)?notify=false")
        #expect(try JSONFileDriver.configuration(from: location).changeNotification == false)
        #expect(try JSONFileDriver.configuration(from: StoreLocation("json:\(dir.store)")).changeNotification)
        await expectError(.invalidStore) { _ = try JSONFileDriver.configuration(from: StoreLocation("json:\(dir.store)?notify=maybe")) }
    }
}
