import Depot
import Foundation
import Testing

@testable import DepotCLI

@Suite("depot sql")
struct SQLCommandTests {
    @Test("runs a statement with JSON or text parameters and prints rows as JSON Lines")
    func runsStatements() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = directory.storeString("sqlite", "books")
        let file = try directory.file("in.jsonl", "{\"id\":1,\"title\":\"Dune\",\"year\":1965}\n{\"id\":2,\"title\":\"Emma\",\"year\":1815}\n")
        #expect(try await CLI.run(["load", store, "books", file]).status == 0)

        let select = try await CLI.run(["sql", store, "SELECT id, title, year FROM books WHERE year > ? AND title <> ? ORDER BY id", "1800", "Ubik"])
        #expect(select.status == 0, "\(select)")
        #expect(select.lines == [#"{"id":1,"title":"Dune","year":1965}"#, #"{"id":2,"title":"Emma","year":1815}"#], "\(select)")

        // "1965" quoted as JSON is the string, which no year equals; plain text is a string too.
        let typed = try await CLI.run(["sql", store, "SELECT count(*) AS n, ? AS p FROM books WHERE year = ?", "x:y", #""1965""#])
        #expect(typed.lines == [#"{"n":0,"p":"x:y"}"#], "\(typed)")

        let update = try await CLI.run(["sql", store, "UPDATE books SET year = ? WHERE id = ?", "1966", "1"])
        #expect(update.status == 0 && update.lines == [#"{"changes":1}"#], "\(update)")
        let dumped = try await CLI.run(["query", store, "books", "--where", "id = 1"])
        #expect(dumped.lines == [#"{"id":1,"title":"Dune","year":1966}"#])

        // Duplicate column names stay apart; NULL is null.
        let dup = try await CLI.run(["sql", store, "SELECT 1 AS a, 2 AS a, NULL AS b"])
        #expect(dup.lines == [#"{"a":1,"a_2":2,"b":null}"#], "\(dup)")

        // DEPOT_STORE names the store when the first argument is not a store string.
        let viaEnvironment = try await CLI.run(["sql", "SELECT ':' AS colon"], environment: ["DEPOT_STORE": store])
        #expect(viaEnvironment.lines == [#"{"colon":":"}"#], "\(viaEnvironment)")

        let plan = try await CLI.run(["sql", store, "SELECT title FROM books WHERE id = ?", "1", "--explain"])
        #expect(plan.status == 0 && plan.stdout.contains("driver:   sqlite") && plan.stdout.contains("indexes:  id"), "\(plan)")

        let refused = try await CLI.run(["sql", store, "DROP TABLE books"])
        #expect(refused.status == 1 && refused.stderr.contains("cannot drop table"), "\(refused)")
        let bad = try await CLI.run(["sql", store, "SELEC 1"])
        #expect(bad.status == 2 && bad.stderr.contains("syntax error"), "\(bad)")
        let missing = try await CLI.run(["sql", store])
        #expect(missing.status == 2 && missing.stderr.contains("no SQL statement"), "\(missing)")
    }

    @Test("stores without SQL fail with exit 1 naming the driver")
    func unsupportedDrivers() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        for scheme in try await CLI.persistentSchemes() where scheme != "sqlite" {
            let store = directory.storeString(scheme, "nosql")
            let file = try directory.file("one.jsonl", "{\"id\":1}\n")
            #expect(try await CLI.run(["load", store, "things", file]).status == 0)
            let run = try await CLI.run(["sql", store, "SELECT 1"])
            #expect(run.status == 1 && run.stderr.contains("the \(scheme) driver") && run.stderr.contains("does not run SQL"), "\(run)")
            #expect(run.stdout.isEmpty)
        }
    }

    @Test("parameters are JSON values, or else text")
    func parameters() {
        #expect(SQLCommand.parameter("42") == 42)
        #expect(SQLCommand.parameter("1.5") == 1.5)
        #expect(SQLCommand.parameter("true") == true)
        #expect(SQLCommand.parameter("null") == .null)
        #expect(SQLCommand.parameter(#""42""#) == "42")
        #expect(SQLCommand.parameter(#"{"$bytes":"AAE="}"#) == .bytes(Data([0, 1])))
        #expect(SQLCommand.parameter("Ursula K. Le Guin") == "Ursula K. Le Guin")
        #expect(SQLCommand.parameter("") == "")
        #expect(SQLCommand.uniqueKeys(["a", "a", "a_2", "b"]) == ["a", "a_2", "a_2_2", "b"])
    }
}
