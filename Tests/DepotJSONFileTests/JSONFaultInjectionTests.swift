import DepotCore
import Foundation
import Testing
@testable import DepotJSONFile

/// Fails every operation of a commit in turn, once and for good, and checks that the
/// previous file survives, the error is `.io`, memory is rolled back, and (after a single
/// failure) the next commit works.
@Suite struct JSONFaultInjectionTests {
    static var users: CollectionName { get throws { try CollectionName("users") } }

    /// The file's records, read with a fresh driver on the real file system.
    static func recordsOnDisk(_ dir: TestDirectory) async throws -> [RecordID] {
        let driver = try await JSONFileDriver(path: dir.store)
        defer { Task { try? await driver.close() } }
        return try await driver.read { tx in try tx.query(Query(), in: try users).map(\.id) }
    }

    /// The operations of one single-record commit, counted on a store like the tested ones.
    static func operationsOfOneCommit(_ durability: Durability) async throws -> [String] {
        let dir = TestDirectory()
        let fs = FaultInjectingFileSystem()
        let driver = try await JSONFileDriver(path: dir.store, configuration: .init(durability: durability), fileSystem: fs)
        try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["v": "one"]), into: try users) }
        fs.disarm()
        try await driver.write { tx in try tx.insert(Record(id: 2, fields: ["v": "two"]), into: try users) }
        let log = fs.operationLog
        try await driver.close()
        return log
    }

    @Test func aCommitDoesWhatTheDocumentationSays() async throws {
        #expect(try await Self.operationsOfOneCommit(.full) == ["lock", "stat", "openForWriting", "write", "fsync", "rename", "fsyncDirectory", "fstat"])
        #expect(try await Self.operationsOfOneCommit(.normal) == ["lock", "stat", "openForWriting", "write", "rename", "fstat"])
    }

    @Test(arguments: [FaultInjectingFileSystem.Mode.once, .always], [Durability.full, .normal])
    func everyOperationOfACommitFails(mode: FaultInjectingFileSystem.Mode, durability: Durability) async throws {
        let operations = try await Self.operationsOfOneCommit(durability)
        let users = try Self.users
        let pointOfNoReturn = operations.firstIndex(of: durability == .full ? "fsyncDirectory" : "fstat").map { $0 + 1 } ?? operations.count
        for n in 1...operations.count {
            let dir = TestDirectory()
            let fs = FaultInjectingFileSystem()
            let driver = try await JSONFileDriver(path: dir.store, configuration: .init(durability: durability), fileSystem: fs)
            try await driver.write { tx in try tx.insert(Record(id: 1, fields: ["v": "one"]), into: users) }
            let previous = try #require(dir.bytes())
            fs.arm(failingAt: n, mode: mode)
            var failed: DepotError?
            do {
                try await driver.write { tx in try tx.insert(Record(id: 2, fields: ["v": "two"]), into: users) }
            } catch let error as DepotError {
                failed = error
            }
            let log = fs.operationLog
            fs.disarm()
            let failedOperation = operations[n - 1]
            let context = "operation \(n) (\(failedOperation)), \(mode), \(durability): log \(log)"
            if failedOperation == "fstat" {
                // After the directory sync the commit is durable: acknowledged; the driver just reloads next time.
                #expect(failed == nil, "\(context)")
                #expect(try await Self.recordsOnDisk(dir) == [1, 2], "\(context)")
            } else {
                #expect(failed?.code == .io, "\(context): \(String(describing: failed))")
                // A failed fsync is never followed by the rename of the file it failed on.
                if failedOperation == "fsync" || failedOperation == "write" {
                    #expect(log.count == n || log[n] != "rename", "\(context)")
                }
                let onDisk = try #require(dir.bytes(), "\(context)")
                if mode == .once || n < pointOfNoReturn {
                    #expect(onDisk == previous, "the previous file is intact: \(context)")
                } else {
                    // A dead disk after the rename: nothing can be put back. The file still
                    // parses and holds either the previous or the unacknowledged commit.
                    let ids = try await Self.recordsOnDisk(dir)
                    #expect(ids == [1] || ids == [1, 2], "\(context)")
                }
                // The driver's memory was rolled back to what the file holds.
                let inMemory = try await driver.read { tx in try tx.query(Query(), in: users).map(\.id) }
                #expect(inMemory == (try await Self.recordsOnDisk(dir)), "\(context)")
                if mode == .once || n < pointOfNoReturn {
                    #expect(inMemory == [1], "\(context)")
                }
            }
            // The next commit works once the disk does.
            _ = try await driver.write { tx in try tx.save(Record(id: 3, fields: ["v": "three"]), into: users) }
            let ids = try await Self.recordsOnDisk(dir)
            #expect(ids == (failed == nil || (mode == .always && n >= pointOfNoReturn && ids.contains(2)) ? [1, 2, 3] : [1, 3]), "\(context)")
            #expect(!FileManager.default.fileExists(atPath: dir.path + "/.db.json.tmp"), "\(context)")
            try await driver.close()
        }
    }

    @Test func failuresWhileLoadingAreIO() async throws {
        let dir = TestDirectory()
        try dir.write(#"{"users":[{"id":1}]}"#)
        for n in 1...3 {
            let fs = FaultInjectingFileSystem()
            fs.arm(failingAt: n, mode: .once)
            await expectError(.io, "operation \(n)") { _ = try await JSONFileDriver(path: dir.store, fileSystem: fs) }
        }
        #expect(dir.contents() == #"{"users":[{"id":1}]}"#)
    }
}
