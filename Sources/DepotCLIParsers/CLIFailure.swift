import DepotCore

/// The exit statuses of `depot`, documented in `depot --help` and Docs/CLI.md.
package enum ExitStatus {
    /// Everything asked for was done.
    package static let success: Int32 = 0
    /// The work failed, or `check` found problems.
    package static let failure: Int32 = 1
    /// The command line was wrong: nothing was changed.
    package static let usage: Int32 = 2
}

/// A failure the CLI reports as one line: what went wrong, then what to do.
package struct CLIFailure: Error {
    /// What went wrong, shown first.
    package var message: String
    /// What to do about it, shown in parentheses after the message.
    package var hint: String
    /// The exit status of `depot` for this failure (``ExitStatus``).
    package var status: Int32

    /// A failure with `message`, `hint` and exit `status`.
    package init(message: String, hint: String, status: Int32) {
        self.message = message
        self.hint = hint
        self.status = status
    }

    /// A usage error (exit status 2).
    package static func usage(_ message: String, _ hint: String) -> CLIFailure {
        CLIFailure(message: message, hint: hint, status: ExitStatus.usage)
    }

    /// A failure of the work itself (exit status 1).
    package static func failed(_ message: String, _ hint: String) -> CLIFailure {
        CLIFailure(message: message, hint: hint, status: ExitStatus.failure)
    }

    /// Turns any error into a one-line failure. A ``DepotError`` shows its `description`
    /// (never `debugDescription`, which may hold detail not meant for users); codes that mean
    /// the command line was wrong map to status 2.
    package static func from(_ error: any Error) -> CLIFailure {
        if let failure = error as? CLIFailure { return failure }
        let depot = DepotError.wrap(error, as: .internal, "Unexpected error.")
        let (hint, status): (String, Int32) =
            switch depot.code {
            case .invalidStore: ("check the store string, e.g. sqlite:app.db or memory:", ExitStatus.usage)
            case .invalidName: ("names are 1 to 63 ASCII letters, digits or '_', starting with a letter", ExitStatus.usage)
            case .invalidQuery: ("check --where, --sort, --limit and --offset", ExitStatus.usage)
            case .uniqueViolation: ("fix the duplicate values, or drop the constraint", ExitStatus.failure)
            case .locked: ("another program holds the store; try again later", ExitStatus.failure)
            case .corrupted: ("run 'depot check STORE' and restore from a copy if needed", ExitStatus.failure)
            case .schemaMismatch: ("use a matching program version, or a new collection", ExitStatus.failure)
            case .io: ("check the path, permissions and free space", ExitStatus.failure)
            case .decoding: ("fix the input or the stored data", ExitStatus.failure)
            case .cancelled: ("run the command again", ExitStatus.failure)
            default: ("run again with --verbose for more", ExitStatus.failure)
            }
        return CLIFailure(message: depot.description, hint: hint, status: status)
    }
}
