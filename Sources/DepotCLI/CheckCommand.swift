import ArgumentParser
import Depot
import DepotCLIParsers
import Foundation

/// `depot check [STORE]`: the driver's integrity check plus a read of every record.
struct CheckCommand: DepotSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check a store: the driver's integrity check, then read and validate every record.",
        usage: "depot check [STORE]",
        discussion: """
            Prints each problem found on its own line ("problem: ..."), then a summary. Exit \
            status 0 when the store is sound, 1 when problems were found (a store that cannot be \
            opened because it is damaged counts as one), 2 for usage errors.

            Example:
              depot check sqlite:app.db || echo "damaged: restore from a copy"
            """
    )

    @Argument(help: ArgumentHelp("[STORE]", valueName: "store"))
    var arguments: [String] = []

    @OptionGroup var global: GlobalOptions

    func execute(_ context: CommandContext) async throws -> Int32 {
        let (stores, _) = try StoreArguments.split(arguments, stores: 1, rest: 0...0, usage: "depot check [STORE]")
        let shown = StoreArguments.shown(stores[0])
        let store: Store
        do {
            store = try await StoreArguments.open(stores[0], context, mustExist: true)
        } catch let error as DepotError where error.code != .invalidStore {
            Console.print("problem: the store cannot be opened: \(error.description)")
            Console.print("store \(shown): 1 problem found")
            return ExitStatus.failure
        } catch let failure as CLIFailure where failure.status == ExitStatus.failure {
            // No store of the driver at the path (nothing was opened or created there).
            Console.print("problem: \(failure.message)")
            Console.print("store \(shown): 1 problem found")
            return ExitStatus.failure
        }
        return try await StoreArguments.using(store) { store in
            var problems: [String] = []
            do {
                problems += try await store.driver.integrityCheck()
            } catch let error as DepotError {
                problems.append("the integrity check failed: \(error.description)")
            }
            var collections = 0, records = 0
            let names: [CollectionName]
            do {
                names = try await store.collectionNames(includingReserved: true)
            } catch let error as DepotError {
                names = []
                problems.append("the collections cannot be listed: \(error.description)")
            }
            let progress = context.progress("check", total: nil)
            for name in names {
                collections += 1
                var seen = 0
                do {
                    for try await record in try store.collection(name).stream() {
                        seen += 1
                        progress.advance()
                        do {
                            try record.validate(collection: name.rawValue)
                        } catch let error as DepotError {
                            problems.append("\(name) record \(record.id): \(error.message)")
                        }
                    }
                    let counted = try await store.collection(name).count()
                    if counted != seen { problems.append("\(name): count says \(counted) records, reading found \(seen)") }
                } catch let error as DepotError {
                    problems.append("\(name): reading failed after \(seen) records: \(error.description)")
                }
                records += seen
            }
            do {
                _ = try await store.schemaVersion()
            } catch let error as DepotError {
                problems.append("the schema version cannot be read: \(error.description)")
            }
            progress.finish()
            for problem in problems { Console.print("problem: \(problem)") }
            if problems.isEmpty {
                Console.print("store \(shown) is sound (\(collections) collection\(collections == 1 ? "" : "s"), \(records) record\(records == 1 ? "" : "s") read)")
                return ExitStatus.success
            }
            Console.print("store \(shown): \(problems.count) problem\(problems.count == 1 ? "" : "s") found")
            return ExitStatus.failure
        }
    }
}
