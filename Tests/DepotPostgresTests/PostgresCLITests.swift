import DepotConformance
import DepotCore
import DepotPostgres
import DepotSQLite
import Foundation
import Testing

/// `depot` with PostgreSQL stores: `depot copy sqlite:… postgres://…` and back, verified
/// like every copy, and `depot info` without the password.
@Suite struct PostgresCLITests {
    static func depot(_ arguments: [String]) async throws -> (status: ChildProcess.Status, out: String, err: String) {
        var directory = URL(fileURLWithPath: CommandLine.arguments.first ?? ".").deletingLastPathComponent()
        var path: String?
        for _ in 0..<6 where path == nil {
            let candidate = directory.appendingPathComponent("depot").path
            if FileManager.default.isExecutableFile(atPath: candidate) { path = candidate }
            directory = directory.deletingLastPathComponent()
        }
        let executable = try #require(path, "the depot executable was not found beside the test binary; run `swift build` first")
        let result = try await ChildProcess.run(executable, arguments)
        return (result.status, result.outputText, result.errorText)
    }

    @Test func copyToPostgresAndBackKeepsEveryRecord() async throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("depot-pg-cli-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }  // scratch files only
        let books = try CollectionName("books"), people = try CollectionName("people")
        let original = try await SQLiteDriver(StoreLocation("sqlite:\(scratch)/source.sqlite"))
        var bookRecords: [Record] = []
        for i in 1...300 {
            let n = Int64(i)
            var fields: [String: FieldValue] = [:]
            fields["title"] = .string("Book \(i) \u{0} é")
            fields["price"] = i % 3 == 0 ? .double(Double(i) + 0.5) : .int(n)
            fields["tags"] = .array([.string("t\(i % 5)"), .int(n)])
            fields["cover"] = .bytes(Data([UInt8(i % 256), 0, 255]))
            fields["big"] = .int(9_007_199_254_740_993 + n)
            fields["zero"] = .double(-0.0)
            bookRecords.append(Record(id: .int(n), fields: fields))
        }
        let books300 = bookRecords
        let personRecords = ["ada", "Bob", "b%_", "\u{1F600}"].map { Record(id: .string($0), fields: ["email": .string($0 + "@example.com")]) }
        try await original.write { tx in
            try tx.prepare(CollectionSchema(name: people, idKind: .string, uniqueConstraints: [UniqueConstraint(["email"])]))
            for r in books300 { try tx.insert(r, into: books) }
            for r in personRecords { try tx.insert(r, into: people) }
        }
        try await original.close()

        let target = try PostgresTestServer.storeString(for: "copy-\(UUID().uuidString)")
        let password = try PostgresTestServer.server().password ?? "\u{0}"
        let there = try await Self.depot(["copy", "sqlite:\(scratch)/source.sqlite", target])
        #expect(there.status == .exited(0), "copy to postgres: \(there.err)")
        let back = try await Self.depot(["copy", target, "sqlite:\(scratch)/back.sqlite"])
        #expect(back.status == .exited(0), "copy back: \(back.err)")
        let info = try await Self.depot(["info", target])
        #expect(info.status == .exited(0), "info: \(info.err)")
        for run in [there, back, info] {
            #expect(!(run.out + run.err).contains(password), "the password never appears in depot's output")
        }
        #expect(info.out.contains("books"))

        let copy = try await SQLiteDriver(StoreLocation("sqlite:\(scratch)/back.sqlite"))
        let (gotBooks, gotPeople, schema) = try await copy.read { tx in
            (try tx.query(Query(), in: books), try tx.query(Query(), in: people), try tx.schema(of: people))
        }
        try await copy.close()
        #expect(gotBooks == bookRecords)
        #expect(gotPeople == personRecords.sorted { $0.id < $1.id })
        #expect(schema?.uniqueConstraints == [UniqueConstraint(["email"])])
    }
}
