import Depot
#if PostgreSQL
import DepotPostgres
#endif

extension DriverRegistry {
    /// The drivers `depot` opens: the built-in ones (``DriverRegistry/standard``) and the
    /// PostgreSQL driver (`postgres://` and `postgresql://`, Docs/PostgresDriver.md), which
    /// the `Depot` module leaves out so that embedded use never builds NIO. A build without
    /// the package's `PostgreSQL` trait (what `scripts/tour` builds) answers those schemes
    /// with an error that says how to get a build that has it.
    static var cli: DriverRegistry {
        var registry = DriverRegistry.standard
        #if PostgreSQL
        PostgresDriver.register(in: &registry)
        #else
        for scheme in ["postgres", "postgresql"] {
            registry.register(scheme) { _ in
                throw DepotError(.unsupported, "This depot was built without PostgreSQL; " + PostgresAvailability.advice + ".")
            }
        }
        #endif
        return registry
    }
}

/// What a build of `depot` without the PostgreSQL driver (the package trait `PostgreSQL`,
/// on by default; Docs/CLI.md, "Builds") tells a user who asks for it.
enum PostgresAvailability {
    /// How to get a build with it.
    static let advice = "build depot with the PostgreSQL trait (the default: swift build -c release --product depot)"
}
