@_exported import DepotCore
@_exported import DepotMemory
@_exported import DepotSQLite
@_exported import DepotGDBM
@_exported import DepotJSONFile

extension DriverRegistry {
    /// Every driver that ships with Depot: `memory:`, `sqlite:PATH`, `gdbm:PATH`, `json:PATH`.
    public static var standard: DriverRegistry {
        var registry = DriverRegistry()
        MemoryDriver.register(in: &registry)
        SQLiteDriver.register(in: &registry)
        GDBMDriver.register(in: &registry)
        JSONFileDriver.register(in: &registry)
        return registry
    }
}

extension Store {
    /// Opens a store from a store string with every built-in driver available:
    /// `memory:`, `sqlite:PATH`, `gdbm:DIR`, `json:FILE`.
    ///
    /// ```swift
    /// let store = try await Store.open(ProcessInfo.processInfo.environment["DEPOT_STORE"] ?? "sqlite:app.db")
    /// ```
    /// - Throws: ``DepotError`` `.invalidStore` naming the problem, or the driver's error.
    public static func open(_ string: String) async throws -> Store {
        try await open(string, registry: .standard)
    }
}
