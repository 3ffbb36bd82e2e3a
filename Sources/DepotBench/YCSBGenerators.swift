import DepotCore

/// The number generators of the YCSB core workloads, written after YCSB's own
/// (`site.ycsb.generator`): FNV-1a hashing of record numbers, a seeded random source,
/// the zipfian generator (Gray et al., "Quickly generating billion-record synthetic
/// databases"), its scrambled form, and the "latest" distribution.
///
/// Everything is deterministic for a seed, so both sides of a ratio replay the same
/// operations in the same order.
public enum YCSB {
    /// The zipfian constant of the core workloads.
    public static let zipfianConstant = 0.99
    /// Fields per record in the core workloads.
    public static let fieldCount = 10
    /// Bytes per field in the core workloads.
    public static let fieldLength = 100
    /// The longest scan of workload E (scan lengths are uniform in 1...this).
    public static let maxScanLength = 100

    /// The field names `field0` … `field9`.
    public static let fieldNames: [String] = (0..<fieldCount).map { "field\($0)" }

    /// FNV-1a, 64 bits, over the eight little-endian bytes of `value`. For a fixed input
    /// length every step is a bijection, so distinct record numbers give distinct hashes.
    public static func fnv1a64(_ value: UInt64) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        var v = value
        for _ in 0..<8 {
            hash ^= v & 0xFF
            hash = hash &* 0x0000_0100_0000_01B3
            v >>= 8
        }
        return hash
    }

    /// The key of record number `n`: `"user"` followed by the decimal FNV-1a hash of `n`,
    /// as YCSB's `orderedinserts=false` (hashed) key order.
    public static func key(_ n: Int) -> String { "user" + String(fnv1a64(UInt64(n))) }

    /// The 100-byte value of field `field` of record `n` in version `version`: printable
    /// ASCII derived from a seeded generator, so no data set is kept in memory.
    public static func value(record n: Int, field: Int, version: UInt64 = 0) -> String {
        var random = SplitMix64(seed: UInt64(n) &* 31 &+ UInt64(field) &+ version &* 0x9E37_79B9)
        var bytes = [UInt8](repeating: 0, count: fieldLength)
        var word: UInt64 = 0
        for i in 0..<fieldLength {
            if i % 8 == 0 { word = random.next() }
            bytes[i] = 0x21 + UInt8((word & 0xFF) % 94)
            word >>= 8
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The ten field values of record `n`.
    public static func fields(record n: Int) -> [String] {
        (0..<fieldCount).map { value(record: n, field: $0) }
    }
}

/// YCSB's zipfian generator over `0..<items`: item 0 is the most popular.
///
/// When the number of items grows (inserts in workload D), `zeta` is extended
/// incrementally, as YCSB does.
public struct ZipfianGenerator: Sendable {
    public private(set) var items: Int
    let theta: Double
    let zeta2: Double
    var zetaN: Double
    var alpha: Double
    var eta: Double

    /// A generator over `items` items with the zipfian constant `theta`.
    public init(items: Int, theta: Double = YCSB.zipfianConstant) {
        precondition(items > 0, "a zipfian generator needs at least one item")
        self.items = items
        self.theta = theta
        zeta2 = ZipfianGenerator.zeta(from: 0, to: 2, theta: theta, initial: 0)
        zetaN = ZipfianGenerator.zeta(from: 0, to: items, theta: theta, initial: 0)
        alpha = 1.0 / (1.0 - theta)
        eta = (1 - pow(2.0 / Double(items), 1 - theta)) / (1 - zeta2 / zetaN)
    }

    static func zeta(from start: Int, to end: Int, theta: Double, initial: Double) -> Double {
        var sum = initial
        if start < end {
            for i in start..<end { sum += 1 / pow(Double(i + 1), theta) }
        }
        return sum
    }

    /// Grows the item count to `newItems` (never shrinks).
    public mutating func grow(to newItems: Int) {
        guard newItems > items else { return }
        zetaN = ZipfianGenerator.zeta(from: items, to: newItems, theta: theta, initial: zetaN)
        items = newItems
        eta = (1 - pow(2.0 / Double(items), 1 - theta)) / (1 - zeta2 / zetaN)
    }

    /// The next item number in `0..<items`.
    public mutating func next(_ random: inout SplitMix64) -> Int {
        let u = random.nextUnit()
        let uz = u * zetaN
        if uz < 1 { return 0 }
        if uz < 1 + pow(0.5, theta) { return min(1, items - 1) }
        let value = Int(Double(items) * pow(eta * u - eta + 1, alpha))
        return min(max(value, 0), items - 1)
    }
}

/// YCSB's scrambled zipfian: zipfian popularity, but the popular items are spread over
/// the key space by hashing, so they are not all adjacent.
public struct ScrambledZipfianGenerator: Sendable {
    var zipfian: ZipfianGenerator
    let items: Int

    /// A generator over `0..<items`.
    public init(items: Int) {
        self.items = items
        zipfian = ZipfianGenerator(items: items)
    }

    /// The next item number in `0..<items`.
    public mutating func next(_ random: inout SplitMix64) -> Int {
        Int(YCSB.fnv1a64(UInt64(zipfian.next(&random))) % UInt64(items))
    }
}

/// YCSB's "latest" distribution (workload D): the most recently inserted records are the
/// most popular.
public struct SkewedLatestGenerator: Sendable {
    var zipfian: ZipfianGenerator

    /// A generator over `0..<items`, where `items - 1` is the newest record.
    public init(items: Int) { zipfian = ZipfianGenerator(items: items) }

    /// The next record number, given that `items` records exist now.
    public mutating func next(_ random: inout SplitMix64, items: Int) -> Int {
        zipfian.grow(to: items)
        return max(0, items - 1 - zipfian.next(&random))
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
