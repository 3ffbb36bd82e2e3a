/// A parsed store string such as `sqlite:app.db?durability=normal`.
///
/// The form is `SCHEME:REST[?KEY=VALUE&...]`. What REST means belongs to the driver
/// (a path for the embedded drivers, `//user@host/db` for a server). Options are plain
/// `key=value` pairs, percent-decoded; unknown keys are an error the driver raises.
///
/// ```swift
/// let location = try StoreLocation("json:/tmp/db.json?durability=full")
/// location.scheme   // "json"
/// location.path     // "/tmp/db.json"
/// ```
public struct StoreLocation: Sendable, Hashable, CustomStringConvertible {
    /// The driver's name, lower-cased: the text before the first colon.
    public var scheme: String
    /// Everything between the scheme's colon and the `?`.
    public var path: String
    /// The `key=value` options after the `?`, percent-decoded.
    public var options: [String: String]

    /// Parses a store string.
    /// - Throws: ``DepotError`` `.invalidStore` when there is no scheme or an option is malformed.
    public init(_ string: String) throws {
        // Split on the bytes of ':', '?', '&' and '=' (all ASCII), never on Characters: a
        // Character may join one of them with a prepended or combining scalar ("\u{603}?"),
        // which hid it from a Character search (found by the store-location fuzz target,
        // Docs/Fuzzing.md). Cutting valid UTF-8 at ASCII bytes keeps every piece valid.
        let bytes = Array(string.utf8)
        func text(_ slice: ArraySlice<UInt8>) -> String { String(decoding: slice, as: UTF8.self) }
        guard let colon = bytes.firstIndex(of: 0x3A) else {
            throw DepotError(.invalidStore, "A store string starts with a driver scheme, such as 'sqlite:app.db', 'json:data.json', 'gdbm:dir' or 'memory:'.")
        }
        let scheme = text(bytes[..<colon]).lowercased()
        guard !scheme.isEmpty, scheme.utf8.allSatisfy({ isLetter($0) || isDigit($0) || $0 == 0x2B || $0 == 0x2D || $0 == 0x2E }) else {
            throw DepotError(.invalidStore, "The store string's scheme is not valid.")
        }
        var rest = bytes[(colon + 1)...]
        var options: [String: String] = [:]
        // `sqlite::memory:` has no options; a '?' starts them elsewhere.
        if let question = rest.firstIndex(of: 0x3F) {
            let query = rest[(question + 1)...]
            rest = rest[..<question]
            for pair in query.split(separator: 0x26, omittingEmptySubsequences: true) {
                let parts = pair.split(separator: 0x3D, maxSplits: 1, omittingEmptySubsequences: false)
                guard parts.count == 2, !parts[0].isEmpty,
                    let key = text(parts[0]).removingPercentEncodingSafely,
                    let value = text(parts[1]).removingPercentEncodingSafely
                else {
                    throw DepotError(.invalidStore, "Store option '\(CollectionName.quotedForMessage(String(text(pair).prefix(40))))' is not KEY=VALUE.")
                }
                guard options[key] == nil else { throw DepotError(.invalidStore, "Store option '\(key)' is given twice.") }
                options[key] = value
            }
        }
        self.scheme = scheme
        self.path = text(rest)
        self.options = options
    }

    /// Makes a location from its parts, without parsing.
    public init(scheme: String, path: String, options: [String: String] = [:]) {
        self.scheme = scheme
        self.path = path
        self.options = options
    }

    /// The durability option (`durability=full|normal`), ``Durability/full`` by default.
    /// - Throws: `.invalidStore` for any other value.
    public func durability() throws -> Durability {
        guard let text = options["durability"] else { return .full }
        guard let value = Durability(rawValue: text) else {
            throw DepotError(.invalidStore, "Option durability must be 'full' or 'normal'.")
        }
        return value
    }

    /// Throws `.invalidStore` naming the first option not in `known`.
    public func rejectUnknownOptions(_ known: Set<String>) throws {
        for key in options.keys.sorted() where !known.contains(key) {
            throw DepotError(.invalidStore, "The \(scheme) driver has no option '\(CollectionName.quotedForMessage(key))'; it knows: \(known.sorted().joined(separator: ", ")).")
        }
    }

    /// The store string with any password (`user:secret@`) and secret-looking options hidden,
    /// safe for logs and messages.
    public var description: String {
        var shown = path
        // Bytes, not Characters, as in init(_:): a scalar joined to ':' or '@' must not keep
        // a password from being hidden.
        let bytes = Array(path.utf8)
        if bytes.starts(with: [0x2F, 0x2F]), let at = bytes.firstIndex(of: 0x40),
            let colon = bytes[2..<at].firstIndex(of: 0x3A) {
            shown = String(decoding: bytes[..<colon], as: UTF8.self) + ":***" + String(decoding: bytes[at...], as: UTF8.self)
        }
        let secretKeys: Set<String> = ["password", "token", "secret", "key"]
        let opts = options.keys.sorted().map { secretKeys.contains($0.lowercased()) ? "\($0)=***" : "\($0)=\(options[$0] ?? "")" }
        return scheme + ":" + shown + (opts.isEmpty ? "" : "?" + opts.joined(separator: "&"))
    }
}

/// How hard a commit works to survive failures. One setting, honest on every driver.
public enum Durability: String, Sendable, Hashable, CaseIterable {
    /// An acknowledged commit survives power loss (fsync of data and directory).
    case full
    /// An acknowledged commit survives a process crash (kill -9) and the store never
    /// corrupts, but the newest commits may be lost on power loss.
    case normal
}

extension String {
    var removingPercentEncodingSafely: String? {
        if !contains("%") { return self }
        var bytes: [UInt8] = []
        var iterator = utf8.makeIterator()
        while let byte = iterator.next() {
            if byte == 0x25 {
                guard let h = iterator.next(), let l = iterator.next(), let hv = hexValue(h), let lv = hexValue(l) else { return nil }
                bytes.append(hv << 4 | lv)
            } else {
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}

private func hexValue(_ b: UInt8) -> UInt8? {
    switch b {
    case 0x30...0x39: b - 0x30
    case 0x41...0x46: b - 0x41 + 10
    case 0x61...0x66: b - 0x61 + 10
    default: nil
    }
}

/// Maps store-string schemes to driver factories, so a program picks its backend from
/// configuration and a third party can add its own driver.
///
/// ```swift
/// var registry = DriverRegistry.standard          // from the Depot module
/// registry.register("mydb") { location in try MyDriver(location) }
/// let store = try await Store.open("mydb:/data", registry: registry)
/// ```
public struct DriverRegistry: Sendable {
    /// Makes a driver for a parsed store string.
    public typealias Factory = @Sendable (StoreLocation) async throws -> any StorageDriver

    private var factories: [String: Factory] = [:]
    /// The folder `@data/…` store paths are resolved in; `nil`, the default, is the app's
    /// ``DataFolder/standard()``.
    public var dataFolder: DataFolder?
    /// What every store opened through this registry gets before it is handed out.
    private(set) var storeSetups: [@Sendable (Store) -> Void] = []

    /// An empty registry; `DriverRegistry.standard` in the `Depot` module has every built-in driver.
    public init() {}

    /// Adds or replaces the factory for `scheme` (lowercase).
    public mutating func register(_ scheme: String, factory: @escaping Factory) {
        factories[scheme.lowercased()] = factory
    }

    /// Adds work that ``Store/open(_:registry:)`` does on every store it opens, before
    /// returning it: how layers above the core attach their write observers (the sync
    /// outbox of `DriverRegistry.standard`) to stores opened from a string.
    public mutating func onOpen(_ setup: @escaping @Sendable (Store) -> Void) {
        storeSetups.append(setup)
    }

    /// The registered schemes, sorted.
    public var schemes: [String] { factories.keys.sorted() }

    /// Opens a driver for a store string. A path `@data/…` is resolved in ``dataFolder``
    /// (whose folders are created when missing) before the driver sees it.
    /// - Throws: `.invalidStore` for an unknown scheme or malformed string, or the driver's error.
    public func makeDriver(_ string: String) async throws -> any StorageDriver {
        let parsed = try StoreLocation(string)
        guard let factory = factories[parsed.scheme] else {
            throw DepotError(.invalidStore, "No driver is registered for '\(CollectionName.quotedForMessage(parsed.scheme))'; known: \(schemes.joined(separator: ", ")).")
        }
        return try await factory(try parsed.resolvingDataFolder(dataFolder))
    }
}
