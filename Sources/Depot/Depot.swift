@_exported import DepotCore
@_exported import DepotMemory

extension DriverRegistry {
    /// Every driver that ships with Depot: `memory:`.
    public static var standard: DriverRegistry {
        var registry = DriverRegistry()
        MemoryDriver.register(in: &registry)
        return registry
    }
}
