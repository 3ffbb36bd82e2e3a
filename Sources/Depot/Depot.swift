@_exported import DepotCore
@_exported import DepotMemory
@_exported import DepotSQLite

extension DriverRegistry {
    /// Every driver that ships with Depot: `memory:`, `sqlite:`.
    public static var standard: DriverRegistry {
        var registry = DriverRegistry()
        MemoryDriver.register(in: &registry)
        SQLiteDriver.register(in: &registry)
        return registry
    }
}
