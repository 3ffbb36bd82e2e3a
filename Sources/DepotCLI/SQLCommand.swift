import ArgumentParser
import Depot
import DepotCLIParsers
import Foundation

/// `depot sql [STORE] "STATEMENT" [PARAM]... [--explain]`: one raw SQL statement on a store
/// whose driver speaks SQL (Docs/CLI.md, "depot sql").
struct SQLCommand: DepotSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "sql",
        abstract: "Run one SQL statement on a SQL store (sqlite:); rows as JSON Lines.",
        usage: "depot sql [STORE] STATEMENT [PARAM]... [--explain]",
        discussion: """
            STATEMENT is one SQL statement with ? (or ?N) placeholders; each PARAM is bound to \
            one in order, never pasted into the text. A PARAM that is a JSON literal is that \
            value (42, 1.5, true, null, "text", {"$bytes":"AAE="}); anything else is a string.

            Each result row is one JSON object of its columns (NULLs as null). A statement \
            without result columns prints {"changes":N}, the rows it changed. The statement \
            runs in its own write transaction.

            A write made with SQL bypasses Depot: no change events, no sync outbox entry. \
            Transactions, PRAGMA settings, triggers and writes to Depot's own tables are \
            refused. Stores without SQL (memory:, gdbm:, json:) fail with exit status 1.

            --explain prints how SQLite would run the statement instead of running it.

            Examples:
              depot sql sqlite:app.db "SELECT author, count(*) AS n FROM books GROUP BY author"
              depot sql sqlite:app.db "SELECT title FROM books WHERE year >= ? AND author = ?" 1950 'Ursula K. Le Guin'
              depot sql sqlite:app.db "UPDATE books SET year = ? WHERE id = ?" 1966 1
            """
    )

    @Argument(help: ArgumentHelp("[STORE] STATEMENT [PARAM]...", valueName: "args"))
    var arguments: [String] = []

    @Flag(help: "Print how the engine would run the statement instead of running it.")
    var explain = false

    @OptionGroup var global: GlobalOptions

    func execute(_ context: CommandContext) async throws -> Int32 {
        let (storeString, statement, parameters) = try Self.split(arguments)
        let store = try await StoreArguments.open(storeString, context, mustExist: true)
        return try await StoreArguments.using(store) { store in
            guard store.driver.capabilities.contains(.rawSQL) else {
                throw CLIFailure.failed(
                    "the \(store.driver.backendName) driver of \(StoreArguments.shown(storeString)) does not run SQL",
                    "use 'depot query' on this store, or a SQL store such as sqlite:app.db")
            }
            if explain {
                QueryCommand.printPlan(try await store.explainSQL(statement, parameters))
                return ExitStatus.success
            }
            let result = try await store.sql(statement, parameters)
            let out = OutputBuffer()
            defer { out.flush() }
            if result.columns.isEmpty {
                out.line(JSONText.serialize(.object(["changes": .int(Int64(result.changes))])))
                return ExitStatus.success
            }
            let keys = Self.uniqueKeys(result.columns)
            for row in result.rows {
                var object: [String: FieldValue] = [:]
                for (key, value) in zip(keys, row.values) { object[key] = value }
                out.line(JSONText.serialize(.object(object)))
            }
            if result.changes > 0 { context.logger.notice("\(result.changes) rows changed") }
            return ExitStatus.success
        }
    }

    /// The store string (the first argument when it parses as one, else `DEPOT_STORE`), the
    /// statement and its parameters.
    /// - Throws: a usage ``CLIFailure`` when the store or the statement is missing.
    static func split(_ arguments: [String]) throws -> (store: String, statement: String, parameters: [FieldValue]) {
        let usage = "depot sql [STORE] STATEMENT [PARAM]..."
        var rest = arguments[...]
        let store: String
        // A statement may hold a colon too (`SELECT ':'`): only a parsable store string is a STORE.
        if let first = rest.first, isStoreString(first) {
            store = first
            rest = rest.dropFirst()
        } else if let fallback = ProcessInfo.processInfo.environment[StoreArguments.environmentKey], !fallback.isEmpty {
            store = fallback
        } else {
            throw CLIFailure.usage("no store given", "name one, such as sqlite:app.db, or set \(StoreArguments.environmentKey); usage: \(usage)")
        }
        guard let statement = rest.first, !statement.allSatisfy(\.isWhitespace) else {
            throw CLIFailure.usage("no SQL statement given", "usage: \(usage)")
        }
        return (store, statement, rest.dropFirst().map(parameter))
    }

    /// `true` when `argument` parses as a store string with a scheme.
    static func isStoreString(_ argument: String) -> Bool {
        guard StoreArguments.isStoreString(argument) else { return false }
        do {
            _ = try StoreLocation(argument)
            return true
        } catch {
            return false
        }
    }

    /// A parameter given on the command line: its JSON value when it is a JSON literal,
    /// otherwise the text itself.
    static func parameter(_ text: String) -> FieldValue {
        do {
            return try JSONText.parse(text)
        } catch {
            return .string(text)
        }
    }

    /// The column names as JSON keys: a name seen before gets `_2`, `_3`... (`SELECT 1, 1`).
    static func uniqueKeys(_ columns: [String]) -> [String] {
        var seen = Set<String>()
        return columns.map { column in
            var key = column
            var n = 2
            while seen.contains(key) {
                key = "\(column)_\(n)"
                n += 1
            }
            seen.insert(key)
            return key
        }
    }
}
