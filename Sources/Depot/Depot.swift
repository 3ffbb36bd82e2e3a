@_exported import DepotCore
@_exported import DepotGDBM
@_exported import DepotJSONFile
@_exported import DepotMemory
@_exported import DepotSQLite
@_exported import DepotSync

extension DriverRegistry {
    /// Every driver that ships with Depot: `memory:`, `sqlite:PATH` (and `sqlite::memory:`),
    /// `gdbm:DIR`, `json:FILE`. Every store opened through it records the sync outbox of
    /// its attached collections (``OutboxRecorder``) from its first write, whether or not a
    /// ``SyncCoordinator`` is made in the process; a registry built from this one (a
    /// third-party driver added) keeps that.
    public static var standard: DriverRegistry {
        var registry = DriverRegistry()
        registry.onOpen { store in _ = OutboxRecorder.installed(on: store) }
        MemoryDriver.register(in: &registry)
        SQLiteDriver.register(in: &registry)
        GDBMDriver.register(in: &registry)
        JSONFileDriver.register(in: &registry)
        return registry
    }
}

extension Store {
    /// Opens a store from a store string with every built-in driver available:
    /// `memory:`, `sqlite:PATH`, `gdbm:DIR`, `json:FILE` (``DriverRegistry/standard``, so the
    /// store records the sync outbox of its attached collections).
    ///
    /// ```swift
    /// let store = try await Store.open(ProcessInfo.processInfo.environment["DEPOT_STORE"] ?? "sqlite:app.db")
    /// ```
    /// - Throws: ``DepotError`` `.invalidStore` naming the problem, or the driver's error.
    public static func open(_ string: String) async throws -> Store {
        try await open(string, registry: .standard)
    }
}
