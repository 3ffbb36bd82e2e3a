/// SplitMix64 (Steele, Lea and Flood, 2014): a small, fast generator whose whole sequence
/// follows from one 64-bit seed.
///
/// Depot's one seeded random source: the conformance suite's differential checks and crash
/// trials, the crash helper, `depot bench` and its YCSB generators, the server's seeded fault
/// plans and the sync tests all draw from it, so a seed printed by a failing run replays the
/// same run exactly. Not for anything that must be unpredictable (use
/// `SystemRandomNumberGenerator`).
///
/// The sequence is part of the contract: recorded seeds (test failures, benchmark reports)
/// must keep replaying, so the algorithm, the constants and the way `next()` advances the
/// state never change.
///
/// ```swift
/// var random = SplitMix64(seed: 42)
/// let roll = Int.random(in: 1...6, using: &random)   // the same on every run
/// ```
///
/// Public because `DepotBench`'s public YCSB generators take one and the `Benchmarks/`
/// packages make their own.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    /// The state: the seed plus the golden-ratio increment once per value drawn.
    @usableFromInline var state: UInt64

    /// A generator that produces the same sequence every time it is made with `seed`.
    @inlinable
    public init(seed: UInt64) { state = seed }

    /// The next 64 random bits.
    @inlinable
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform double in `0..<1`: the top 53 bits of ``next()`` scaled by 2⁻⁵³ (exact, so
    /// every double it returns is a multiple of 2⁻⁵³).
    @inlinable
    public mutating func nextUnit() -> Double { Double(next() >> 11) * 0x1.0p-53 }

    /// A uniform integer in `range`, as `Int.random(in:using:)` draws it from this generator.
    @inlinable
    public mutating func uniform(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self) }
}
