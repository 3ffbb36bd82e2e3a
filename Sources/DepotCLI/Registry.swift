import Depot
import DepotPostgres

extension DriverRegistry {
    /// The drivers `depot` opens: the built-in ones (``DriverRegistry/standard``) and the
    /// PostgreSQL driver (`postgres://` and `postgresql://`, Docs/PostgresDriver.md), which
    /// the `Depot` module leaves out so that embedded use never builds NIO.
    static var cli: DriverRegistry {
        var registry = DriverRegistry.standard
        PostgresDriver.register(in: &registry)
        return registry
    }
}
