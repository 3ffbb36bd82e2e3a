@_exported import DepotCore
@_exported import DepotMemory
@_exported import DepotGDBM

extension DriverRegistry {
    /// Every driver that ships with Depot: `memory:`, `gdbm:PATH`.
    public static var standard: DriverRegistry {
        var registry = DriverRegistry()
        MemoryDriver.register(in: &registry)
        GDBMDriver.register(in: &registry)
        return registry
    }
}
