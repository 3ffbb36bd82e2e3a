/// A small log-linear histogram of latencies in nanoseconds, for p50/p99.
///
/// Values below 64 ns are counted exactly; above, each power of two is split into 32
/// buckets, so a reported percentile is at most about 3% below the true value
/// (it reports the bucket's lower bound). Recording is O(1) with no allocation.
public struct LatencyHistogram: Sendable, Hashable, Codable {
    static let subBuckets = 32
    private(set) var counts: [UInt64]
    /// The number of values recorded.
    public private(set) var count: UInt64 = 0
    /// The largest value recorded, in nanoseconds.
    public private(set) var max: UInt64 = 0

    /// An empty histogram.
    public init() { counts = [UInt64](repeating: 0, count: 64 + 59 * LatencyHistogram.subBuckets) }

    static func index(_ value: UInt64) -> Int {
        if value < 64 { return Int(value) }
        let exponent = 63 - value.leadingZeroBitCount // >= 6
        let shift = exponent - 5
        let mantissa = Int(value >> UInt64(shift)) - subBuckets // 0..<32
        return 64 + (shift - 1) * subBuckets + mantissa
    }

    static func lowerBound(_ index: Int) -> UInt64 {
        if index < 64 { return UInt64(index) }
        let shift = (index - 64) / subBuckets + 1
        let mantissa = (index - 64) % subBuckets + subBuckets
        return UInt64(mantissa) << UInt64(shift)
    }

    /// Records one latency.
    public mutating func record(_ nanoseconds: UInt64) {
        let i = Swift.min(LatencyHistogram.index(nanoseconds), counts.count - 1)
        counts[i] += 1
        count += 1
        if nanoseconds > max { max = nanoseconds }
    }

    /// Adds every value of `other`.
    public mutating func merge(_ other: LatencyHistogram) {
        for i in counts.indices { counts[i] += other.counts[i] }
        count += other.count
        max = Swift.max(max, other.max)
    }

    /// The latency at `percentile` (0–100) in nanoseconds, `nil` when empty.
    public func value(atPercentile percentile: Double) -> UInt64? {
        guard count > 0 else { return nil }
        let rank = Swift.max(1, UInt64((percentile / 100 * Double(count)).rounded(.up)))
        var seen: UInt64 = 0
        for (i, c) in counts.enumerated() where c > 0 {
            seen += c
            if seen >= rank { return Swift.min(LatencyHistogram.lowerBound(i), max) }
        }
        return max
    }
}
