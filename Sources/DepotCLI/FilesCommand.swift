import ArgumentParser
import Depot
import DepotCLIParsers
import Foundation

/// `depot files put|get|ls|rm`: moves files to and from a server's `/_files` routes
/// (Docs/Remote.md, "Files") with ``FileClient``.
struct FilesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "files",
        abstract: "Upload, download, list and delete files on a Depot server (/_files).",
        discussion: """
            The server is started with 'depot serve STORE --files DIR'. Transfers stream from \
            and to disk, show a progress bar on a terminal (nothing on a pipe), are retried with \
            backoff, and are checked with SHA-256. 'get' writes LOCAL_PATH.part first and renames \
            it only when whole and verified; run it again after an interruption to resume. \
            put and get print one JSON line: name, size, sha256, etag. See Docs/Remote.md, "Files".

            Examples:
              depot files put http://127.0.0.1:8080 ./photo.jpg photo.jpg
              depot files get http://127.0.0.1:8080 photo.jpg ./copy.jpg
              depot files ls http://127.0.0.1:8080
              depot files rm http://127.0.0.1:8080 photo.jpg
            """,
        subcommands: [Put.self, Get.self, List.self, Remove.self]
    )

    /// Options every files subcommand shares.
    struct Remote: ParsableArguments {
        @Flag(help: "Allow plain http:// to a host other than loopback.")
        var allowInsecureHTTP = false

        @Option(help: ArgumentHelp("Attempts per transfer before giving up (with backoff between them).", valueName: "N"))
        var attempts = 6

        func client(_ url: String) throws -> FileClient {
            guard let base = URL(string: url), let scheme = base.scheme?.lowercased(), ["http", "https"].contains(scheme), base.host != nil else {
                throw CLIFailure.usage("URL must be an http:// or https:// URL", "for example http://127.0.0.1:8080")
            }
            guard SyncEndpoint.isAllowed(base, allowInsecureHTTP: allowInsecureHTTP) else {
                throw CLIFailure.usage("plain http:// to a host other than loopback", "use https:// or --allow-insecure-http")
            }
            guard attempts >= 1 else { throw CLIFailure.usage("--attempts must be 1 or more", "for example --attempts 6") }
            return FileClient(baseURL: base, allowInsecureHTTP: allowInsecureHTTP, retryPolicy: RetryPolicy(maxAttempts: attempts))
        }
    }

    /// Runs `body`, turning a ``DepotError`` into a failure line with a hint about files.
    static func guarded<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as DepotError {
            let hint: String
            switch error.code {
            case .invalidName: throw CLIFailure.usage(error.message, "file names are 1 to 200 bytes, not starting with '.', without '/' or control characters")
            case .notFound: hint = "check the name with 'depot files ls URL' and the local path"
            case .conflict: hint = "read the current ETag with 'depot files ls URL'"
            case .corrupted: hint = "run the command again to transfer the file anew"
            case .remote: hint = "check that the server runs with --files DIR; run 'get' again to resume"
            case .cancelled: hint = "run the command again ('get' resumes)"
            default: throw CLIFailure.from(error)
            }
            throw CLIFailure.failed(error.description, hint)
        }
    }

    /// Shows a transfer's progress (on a terminal) and prints its result as one JSON line.
    static func follow(_ transfer: FileTransfer, label: String, context: CommandContext) async throws -> FileTransferResult {
        let watcher = Task {
            var bar: Progress?
            for await step in transfer {
                if bar == nil { bar = context.progress(label, total: step.totalBytes.map { Int($0) }, unit: "B") }
                bar?.set(Int(step.bytesDone))
            }
            bar?.finish()
        }
        defer { watcher.cancel() }
        let result = try await transfer.result()
        await watcher.value
        var object: [String: FieldValue] = ["name": .string(result.name), "size": .int(result.size), "sha256": .string(result.sha256)]
        if let etag = result.etag { object["etag"] = .string(etag) }
        Console.print(JSONText.serialize(.object(object)))
        return result
    }

    struct Put: DepotSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "put", abstract: "Upload LOCAL_PATH as NAME.", usage: "depot files put URL LOCAL_PATH NAME [--if-match ETAG]")
        @Argument(help: "The server's base URL.") var url: String
        @Argument(help: "The file to upload.") var localPath: String
        @Argument(help: "Its name on the server.") var name: String
        @Option(help: ArgumentHelp("Replace only the version with this ETag.", valueName: "ETAG")) var ifMatch: String?
        @OptionGroup var remote: Remote
        @OptionGroup var global: GlobalOptions

        func execute(_ context: CommandContext) async throws -> Int32 {
            let client = try remote.client(url)
            _ = try await FilesCommand.guarded {
                try await FilesCommand.follow(client.upload(from: URL(fileURLWithPath: localPath), name: name, ifMatch: ifMatch), label: "put \(name)", context: context)
            }
            return ExitStatus.success
        }
    }

    struct Get: DepotSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "get", abstract: "Download NAME to LOCAL_PATH, resuming LOCAL_PATH.part if there is one.",
            usage: "depot files get URL NAME LOCAL_PATH")
        @Argument(help: "The server's base URL.") var url: String
        @Argument(help: "The file's name on the server.") var name: String
        @Argument(help: "Where to write it.") var localPath: String
        @OptionGroup var remote: Remote
        @OptionGroup var global: GlobalOptions

        func execute(_ context: CommandContext) async throws -> Int32 {
            let client = try remote.client(url)
            _ = try await FilesCommand.guarded {
                try await FilesCommand.follow(client.download(name: name, to: URL(fileURLWithPath: localPath)), label: "get \(name)", context: context)
            }
            return ExitStatus.success
        }
    }

    struct List: DepotSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "ls", abstract: "List the server's files, one JSON line each (name, size, etag).", usage: "depot files ls URL")
        @Argument(help: "The server's base URL.") var url: String
        @OptionGroup var remote: Remote
        @OptionGroup var global: GlobalOptions

        func execute(_ context: CommandContext) async throws -> Int32 {
            let client = try remote.client(url)
            for entry in try await FilesCommand.guarded({ try await client.list() }) {
                Console.print(JSONText.serialize(.object(["name": .string(entry.name), "size": .int(entry.size), "etag": .string(entry.etag)])))
            }
            return ExitStatus.success
        }
    }

    struct Remove: DepotSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "rm", abstract: "Delete NAME on the server.", usage: "depot files rm URL NAME [--if-match ETAG]")
        @Argument(help: "The server's base URL.") var url: String
        @Argument(help: "The file's name on the server.") var name: String
        @Option(help: ArgumentHelp("Delete only the version with this ETag.", valueName: "ETAG")) var ifMatch: String?
        @OptionGroup var remote: Remote
        @OptionGroup var global: GlobalOptions

        func execute(_ context: CommandContext) async throws -> Int32 {
            let client = try remote.client(url)
            try await FilesCommand.guarded { try await client.delete(name: name, ifMatch: ifMatch) }
            return ExitStatus.success
        }
    }
}
