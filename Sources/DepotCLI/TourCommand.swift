import ArgumentParser
import Depot
import DepotCLIParsers
import Foundation

/// `depot tour [--dir DIR]`: the main job, walked through for a new user.
struct TourCommand: DepotSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "tour",
        abstract: "A guided tour: a Codable model saved and queried, the same queries on every driver, a rough comparison.",
        usage: "depot tour [--dir DIR]",
        discussion: """
            Uses the embedded default store (SQLite when this build has it, else memory:), then \
            every driver of this build. Takes a few seconds. Stores go to a temporary directory \
            that is removed at the end, unless --dir names a directory to keep them in (then \
            look at them with 'depot info' and 'depot dump').

            Example:
              depot tour --dir /tmp/depot-tour && depot info sqlite:/tmp/depot-tour/tour.sqlite
            """
    )

    @Option(help: ArgumentHelp("Keep the tour's stores in DIR instead of a temporary directory.", valueName: "DIR"))
    var dir: String?

    @OptionGroup var global: GlobalOptions

    func execute(_ context: CommandContext) async throws -> Int32 {
        let fileManager = FileManager.default
        let directory: URL
        if let dir {
            directory = URL(fileURLWithPath: dir, isDirectory: true)
            do {
                try fileManager.createDirectory(at: directory, withIntermediateDirectories: true)
            } catch {
                throw CLIFailure.failed("cannot create the directory \(WhereParser.quoted(dir))", "check the path and its permissions")
            }
        } else {
            directory = fileManager.temporaryDirectory.appendingPathComponent("depot-tour-\(UUID().uuidString)", isDirectory: true)
            try fileManager.createDirectory(at: directory, withIntermediateDirectories: true)
        }
        let tour = Tour(directory: directory, keep: dir != nil, context: context)
        do {
            let status = try await tour.run()
            if dir == nil { try? fileManager.removeItem(at: directory) }
            return status
        } catch {
            if dir == nil { try? fileManager.removeItem(at: directory) }
            throw error
        }
    }
}
