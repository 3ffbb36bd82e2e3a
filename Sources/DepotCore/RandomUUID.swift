import Foundation

extension UUID {
    /// A random (version 4, RFC 9562) UUID from the standard library's system generator.
    ///
    /// Foundation's `UUID()` on Linux opens and reads `/dev/urandom` for every UUID, which
    /// showed as several percent of the server's CPU per POST; this takes the same kind of
    /// randomness from `SystemRandomNumberGenerator` (the `getrandom` call on Linux) with no
    /// file opened. Used where Depot makes ids and keys per write: the server's string ids,
    /// the sync outbox's idempotency keys.
    package static func random() -> UUID {
        var generator = SystemRandomNumberGenerator()
        let high: UInt64 = generator.next(), low: UInt64 = generator.next()
        func byte(_ value: UInt64, _ index: Int) -> UInt8 { UInt8(truncatingIfNeeded: value >> UInt64(56 - 8 * index)) }
        return UUID(uuid: (
            byte(high, 0), byte(high, 1), byte(high, 2), byte(high, 3), byte(high, 4), byte(high, 5),
            byte(high, 6) & 0x0F | 0x40, byte(high, 7),  // version 4
            byte(low, 0) & 0x3F | 0x80, byte(low, 1),  // variant 10
            byte(low, 2), byte(low, 3), byte(low, 4), byte(low, 5), byte(low, 6), byte(low, 7)
        ))
    }
}
