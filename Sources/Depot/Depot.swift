@_exported import DepotCore
@_exported import DepotMemory
@_exported import DepotJSONFile

extension DriverRegistry {
    /// Every driver that ships with Depot: `memory:`, `json:PATH`.
    public static var standard: DriverRegistry {
        var registry = DriverRegistry()
        MemoryDriver.register(in: &registry)
        JSONFileDriver.register(in: &registry)
        return registry
    }
}
