import Foundation

/// The folder where an app keeps its data, which store strings name with `@data/`:
/// `sqlite:@data/books.db`, `gdbm:@data/cache`, `json:@data/settings.json`
/// (Docs/Semantics.md, "Stores and collections").
///
/// - Apple platforms: `Application Support/<name>` in the user's domain, where the name
///   is the main bundle's identifier, or the process name for a tool without a bundle.
/// - Linux and others: `$XDG_DATA_HOME/<name>` (`~/.local/share/<name>` when
///   `XDG_DATA_HOME` is unset, empty or relative, as the XDG spec says), the name being the
///   process name.
///
/// ```swift
/// let store = try await Store.open("sqlite:@data/books.db")   // ~/.local/share/MyTool/books.db
/// ```
///
/// The path after `@data/` is relative and may not leave the folder: `..` components and
/// absolute paths are refused. The folder, and the folders between it and the store, are
/// created when the store is opened.
public struct DataFolder: Sendable, Hashable {
    /// The folder's absolute path.
    public var path: String

    /// The prefix of a store path inside the data folder.
    public static let prefix = "@data/"

    /// A data folder at `path` (for tests, or an app that keeps its data elsewhere).
    /// - Throws: `.invalidStore` when `path` is not absolute or holds a NUL byte.
    public init(path: String) throws {
        guard path.hasPrefix("/"), !path.utf8.contains(0) else {
            throw DepotError(.invalidStore, "A data folder is an absolute path.")
        }
        self.path = path
    }

    /// The app's data folder on this platform (see ``DataFolder``).
    /// - Throws: `.invalidStore` when the platform gives no home or data folder.
    public static func standard() throws -> DataFolder {
        #if canImport(Darwin)
            guard let support = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first else {
                throw DepotError(.invalidStore, "This system has no Application Support folder for @data/ stores.")
            }
            let name = Bundle.main.bundleIdentifier ?? ProcessInfo.processInfo.processName
            return try DataFolder(path: support.appendingPathComponent(appFolderName(name), isDirectory: true).path)
        #else
            return try standard(environment: ProcessInfo.processInfo.environment, processName: ProcessInfo.processInfo.processName)
        #endif
    }

    /// The data folder the XDG rules give for `environment` and an app called `processName`:
    /// `$XDG_DATA_HOME/<name>` when `XDG_DATA_HOME` is an absolute path, else
    /// `$HOME/.local/share/<name>`.
    /// - Throws: `.invalidStore` when neither variable gives an absolute path.
    public static func standard(environment: [String: String], processName: String) throws -> DataFolder {
        let base: String
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            base = xdg
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            base = join(home, ".local/share")
        } else {
            throw DepotError(.invalidStore, "Neither XDG_DATA_HOME nor HOME is an absolute path, so @data/ stores have no folder.")
        }
        return try DataFolder(path: join(base, appFolderName(processName)))
    }

    /// A folder name for an app name: path separators and NUL replaced, never empty, `.`
    /// or `..`.
    static func appFolderName(_ name: String) -> String {
        let cleaned = String(name.map { $0 == "/" || $0 == "\0" ? "_" : $0 })
        return cleaned.isEmpty || cleaned == "." || cleaned == ".." ? "depot" : cleaned
    }

    static func join(_ base: String, _ component: String) -> String {
        base.hasSuffix("/") ? base + component : base + "/" + component
    }

    /// The absolute path of `relative` inside the folder.
    /// - Throws: `.invalidStore` for an empty or absolute path, a `..` component, or a NUL byte.
    public func resolve(_ relative: String) throws -> String {
        guard !relative.isEmpty, !relative.hasPrefix("/"), !relative.utf8.contains(0) else {
            throw DepotError(.invalidStore, "Write @data/NAME with a relative NAME, such as sqlite:@data/app.db.")
        }
        let components = relative.split(separator: "/", omittingEmptySubsequences: true)
        guard !components.contains("..") else {
            throw DepotError(.invalidStore, "A path after @data/ may not contain '..': it stays inside the data folder.")
        }
        let kept = components.filter { $0 != "." }
        guard !kept.isEmpty else {
            throw DepotError(.invalidStore, "Write @data/NAME with a file or folder NAME, such as sqlite:@data/app.db.")
        }
        return DataFolder.join(path, kept.joined(separator: "/"))
    }

    /// Creates the folder that will hold `resolved` (a path ``resolve(_:)`` gave), and the
    /// data folder itself, when they are missing.
    /// - Throws: `.io` when they cannot be created.
    public func createParent(of resolved: String) throws {
        let parent = URL(fileURLWithPath: resolved).deletingLastPathComponent().path
        do {
            try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        } catch {
            throw DepotError(.io, "The data folder for an @data/ store could not be created.", cause: DataFolderError(description: "\(error)"), detail: parent)
        }
    }
}

/// Why a data folder could not be created (the file system's own message).
struct DataFolderError: Error, Sendable, CustomStringConvertible {
    let description: String
}

extension StoreLocation {
    /// `true` when the path names a place in the app's data folder (`@data/…`).
    public var isInDataFolder: Bool { path.hasPrefix(DataFolder.prefix) || path == "@data" }

    /// The location with an `@data/…` path replaced by the absolute path inside `folder`
    /// (``DataFolder/standard()`` when `nil`), whose parent folders are created when `create`
    /// is `true`; any other location unchanged.
    /// - Throws: `.invalidStore` for a path that would leave the folder; `.io` when a folder
    ///   cannot be created.
    public func resolvingDataFolder(_ folder: DataFolder? = nil, create: Bool = true) throws -> StoreLocation {
        guard isInDataFolder else { return self }
        let base = try folder ?? DataFolder.standard()
        let resolved = try base.resolve(String(path.dropFirst(min(path.count, DataFolder.prefix.count))))
        if create { try base.createParent(of: resolved) }
        var copy = self
        copy.path = resolved
        return copy
    }
}
