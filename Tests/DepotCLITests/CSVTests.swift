import Depot
import DepotCLIParsers
import DepotConformance
import Foundation
import Testing

@testable import DepotCLI

@Suite("depot load/dump --format csv")
struct CSVTests {
    /// A header with CRLF, a quoted field with a line break, a comma and doubled quotes,
    /// values that must stay strings ("007", "-0", "1e3"), an empty cell, a row without an id.
    static let input = "id,title,year,price,ok,note,code\r\n1,Dune,1965,9.5,true,\"multi\nline, with \"\"quotes\"\"\",007\n2,Emma,,1e3,false,,-0\n,\"No id\",2000,,,plain,x\n"

    static let expectedJSON = """
        {"code":"007","id":1,"note":"multi\\nline, with \\"quotes\\"","ok":true,"price":9.5,"title":"Dune","year":1965}
        {"code":"-0","id":2,"ok":false,"price":"1e3","title":"Emma"}
        {"code":"x","id":3,"note":"plain","title":"No id","year":2000}

        """

    static let expectedCSV = "id,code,note,ok,price,title,year\n1,007,\"multi\nline, with \"\"quotes\"\"\",true,9.5,Dune,1965\n2,-0,,false,1e3,Emma,\n3,x,plain,,,No id,2000\n"

    @Test("CSV loads with inferred types, dumps back to the same CSV, and reloads to the same records on every persistent driver")
    func roundTrip() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = try directory.file("books.csv", Self.input)
        for scheme in try await CLI.persistentSchemes() {
            let store = directory.storeString(scheme, "csv")
            let load = try await CLI.run(["load", store, "books", file, "--format", "csv"])
            #expect(load.status == 0 && load.stderr.contains("loaded 3 records"), "\(scheme): \(load)")
            let json = try await CLI.run(["dump", store, "books"])
            #expect(json.stdout == Self.expectedJSON, "\(scheme): \(json)")
            let csv = try await CLI.run(["dump", store, "books", "--format", "csv"])
            #expect(csv.status == 0 && csv.stdout == Self.expectedCSV, "\(scheme): \(csv)")
            let again = directory.storeString(scheme, "csv-again")
            let reload = try await CLI.run(["load", again, "books", "--format", "csv"], stdin: csv.stdout)
            #expect(reload.status == 0, "\(scheme): \(reload)")
            #expect(try await CLI.run(["dump", again, "books"]).stdout == Self.expectedJSON, "\(scheme)")
        }
    }

    @Test("bad CSV stops with its line number, commits nothing and leaves no store")
    func badInput() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cases: [(input: String, extra: [String], says: String)] = [
            ("id,a\n1,\"x\"y\n", [], "line 2: malformed CSV: field 2 has text after its closing quote"),
            ("id,a\n1,x\"y\n", [], "line 2: malformed CSV: field 2 has a quote"),
            ("id,a\n1,2\n2,\"open\n\n", [], "line 3: malformed CSV: a quoted field is not closed"),
            ("id,a\n1,2,3\n", [], "line 2: the row has 3 fields, the header 2"),
            ("id,a\n1,2\n2,x\n", ["--types", "a:int"], "line 3: column a: 'x' is not an integer"),
            ("id,a,a\n", [], "line 1: the header names 'a' twice"),
            ("id,bad name\n", [], "line 1: the header's 'bad name' is not a valid field name"),
        ]
        for scheme in try await CLI.persistentSchemes() {
            for (input, extra, says) in cases {
                let run = try await CLI.run(["load", directory.storeString(scheme, "bad"), "t", "--format", "csv"] + extra, stdin: input)
                #expect(run.status == 1 && run.stderr.contains(says) && run.stderr.contains("nothing was committed"), "\(scheme), \(input.debugDescription): \(run)")
                #expect(try treeSnapshot(directory.url, strict: false).isEmpty, "\(scheme): a failed CSV load left files")
            }
        }
        let usage = try await CLI.run(["load", "memory:", "t", "--types", "a:int"], stdin: "")
        #expect(usage.status == 2, "--types needs --format csv: \(usage)")
        let badType = try await CLI.run(["load", "memory:", "t", "--format", "csv", "--types", "a:date"], stdin: "")
        #expect(badType.status == 2, "\(badType)")
        let allCSV = try await CLI.run(["dump", "memory:", "--format", "csv"])
        #expect(allCSV.status == 2, "csv needs a collection: \(allCSV)")
    }

    @Test("--types overrides inference")
    func typeOverrides() async throws {
        let run = try await CLI.run(
            ["load", "memory:", "t", "--format", "csv", "--types", "id:string,zip:string,n:double", "--quiet"],
            stdin: "id,zip,n\n10,00501,5\n")
        #expect(run.status == 0, "\(run)")
        // memory: is gone when the process ends, so check the values the reader builds.
        var reader = CSVRecordReader(reader: try LineReaderFixture.reader("id,zip,n\n10,00501,5\n"), types: try CSV.types("id:string,zip:string,n:double"))
        let row = try #require(try reader.next())
        guard case .record(let record) = row.item else { Issue.record("expected a record with an id"); return }
        #expect(record.id == .string("10") && record.fields["zip"] == .string("00501") && record.fields["n"] == .double(5))
    }

    @Test("type inference is never lossy")
    func inference() throws {
        let cases: [(String, FieldValue?)] = [
            ("", nil), ("true", .bool(true)), ("false", .bool(false)), ("True", .string("True")),
            ("42", .int(42)), ("-7", .int(-7)), ("007", .string("007")), ("+5", .string("+5")), ("-0", .string("-0")),
            ("9223372036854775807", .int(.max)), ("9223372036854775808", .string("9223372036854775808")),
            ("2.5", .double(2.5)), ("1.0", .double(1)), ("1e3", .string("1e3")), ("0.1", .double(0.1)),
            ("nan", .string("nan")), ("inf", .string("inf")), ("1.50", .string("1.50")), (" 1", .string(" 1")),
        ]
        for (text, expected) in cases {
            #expect(try CSV.value(text, type: nil) == expected, "\(text.debugDescription)")
        }
        #expect(try CSV.fields(Array("a,\"b,\"\"c\"\"\",,\"\"".utf8)) == ["a", "b,\"c\"", "", ""])
        #expect(try CSV.fields(Array("\"open".utf8)) == nil)
        #expect(CSV.text(.array([1, "x"])) == "\"[1,\"\"x\"\"]\"")
    }

    /// Option texts split on Unicode scalars: U+0603 (a prepended concatenation mark) joins
    /// the next scalar into its Character, which hid the ':' or ',' after it from a split by
    /// Characters (`--types` then failed on a valid pair).
    @Test func optionSeparatorsAreFoundBesideJoiningScalars() throws {
        #expect(try CSV.types("a\u{0603}:int, b :string") == ["a\u{0603}": .int, "b": .string])
        #expect(try FieldListOption.fields("x , y", option: "--unique") == ["x", "y"])
        #expect(try WhereParser.sortKey("year:desc") == SortKey("year", descending: true))
        #expect(throws: CLIFailure.self) { try FieldListOption.fields("x,\u{0301}y", option: "--unique") }
    }

    /// A quoted field left open over many lines (found by the cli-csv fuzz target,
    /// Docs/Fuzzing.md): the record used to be split again for every line joined, so 100,000
    /// lines took about 10^10 steps. Now they are read once, and the row spanning lines
    /// still reads the same.
    // Under a sanitizer both limits are `testTimeoutScale` times longer (Docs/Testing.md,
    // "Sanitizers"): one pass took 249 s under ThreadSanitizer.
    @Test("a quoted field open over 100,000 lines is read in one pass", .timeLimit(.minutes(testTimeoutScale)))
    func openQuoteOverManyLines() throws {
        var input = Array("name,year\n\"Dune".utf8)
        for _ in 0..<100_000 { input += Array("\n1".utf8) }
        var reader = CSVRecordReader(reader: LineReader(bytes: input), types: [:])
        let clock = ContinuousClock()
        let start = clock.now
        #expect(throws: LoadLineError.self) { try reader.next() }
        #expect(clock.now - start < .seconds(20 * testTimeoutScale))

        var closed = CSVRecordReader(reader: LineReader(bytes: Array("name,year\n\"a\n\"\"b\"\"\nc\",1\n".utf8)), types: [:])
        let row = try #require(try closed.next())
        guard case .fields(let fields) = row.item else { Issue.record("expected fields"); return }
        #expect(row.line == 2)
        #expect(fields == ["name": .string("a\n\"b\"\nc"), "year": .int(1)])
    }
}

/// A ``LineReader`` over text, through a file (LineReader reads file descriptors).
enum LineReaderFixture {
    static func reader(_ text: String) throws -> LineReader {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("depot-csv-\(UUID().uuidString)").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        defer {
            do { try FileManager.default.removeItem(atPath: path) } catch { Issue.record("could not remove \(path): \(error)") }
        }
        return try LineReader(path: path)
    }
}
