import DepotCore

/// Makes new inputs from old ones without coverage feedback: byte and bit flips, inserted,
/// deleted and duplicated runs, splices of two inputs, dictionary tokens, interesting
/// integers, length extremes and deep nesting. Every choice comes from one ``SplitMix64``,
/// so a seed replays the same inputs.
public struct Mutator: Sendable {
    /// The random source; its seed is printed with every run.
    public var random: SplitMix64
    /// The longest input made (longer results are cut).
    public var maximumLength: Int
    /// Tokens to insert (the target's dictionary plus a few generic ones).
    public let dictionary: [[UInt8]]
    /// One level of nesting, if the format has one.
    public let nesting: (open: [UInt8], close: [UInt8])?

    /// A mutator for `target` with `seed`.
    public init(seed: UInt64, dictionary: [[UInt8]], nesting: (open: [UInt8], close: [UInt8])?, maximumLength: Int = 4096) {
        random = SplitMix64(seed: seed)
        self.maximumLength = maximumLength
        self.dictionary = dictionary.filter { !$0.isEmpty } + Mutator.genericTokens
        self.nesting = nesting
    }

    /// Bytes that break text and binary formats alike.
    static let interestingBytes: [UInt8] = [0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE, 0xC0, 0xED, 0xF4, 0x0A, 0x0D, 0x09, 0x20, 0x22, 0x5C, 0x25, 0x2C, 0x3A, 0x3D, 0x26, 0x3F, 0x2D, 0x30, 0x39]

    /// Tokens every target gets: extreme numbers, invalid UTF-8, line breaks.
    static let genericTokens: [[UInt8]] = [
        "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
        "18446744073709551616", "1e308", "1e309", "-1e400", "4.9e-324", "0.0", "-0", "NaN", "Infinity",
        "\r\n", "\u{FEFF}", "%", "%00", "%ff", "%C3%A9", "\\u0000", "\\ud800", "\\udc00",
    ].map { Array($0.utf8) } + [[0xC3], [0xE2, 0x82], [0xF0, 0x9F, 0x98], [0xED, 0xA0, 0x80], [0xF8, 0x88, 0x80, 0x80, 0x80]]

    private mutating func below(_ n: Int) -> Int { n <= 1 ? 0 : Int(random.next() % UInt64(n)) }
    private mutating func chance(_ percent: Int) -> Bool { below(100) < percent }

    /// Little-endian integers at the edges of their widths.
    private mutating func interestingInteger() -> [UInt8] {
        let values: [UInt64] = [0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, UInt64(Int64.max), UInt64(bitPattern: Int64.min), UInt64.max]
        let value = values[below(values.count)]
        let width = [1, 2, 4, 8][below(4)]
        return (0..<width).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
    }

    /// A varint of an interesting size, as the binary formats write lengths.
    private mutating func interestingVarint() -> [UInt8] {
        let values: [UInt64] = [0, 1, 127, 128, 255, 16_384, 1 << 31, UInt64(Int.max), UInt64.max]
        var v = values[below(values.count)]
        var out: [UInt8] = []
        repeat {
            var b = UInt8(v & 0x7F)
            v >>= 7
            if v != 0 { b |= 0x80 }
            out.append(b)
        } while v != 0
        return out
    }

    /// A new input made from `input` (and, for splices, from `other`) by one to four
    /// mutations.
    public mutating func mutate(_ input: [UInt8], other: [UInt8]) -> [UInt8] {
        var data = input
        let count = 1 + below(4)
        for _ in 0..<count { mutateOnce(&data, other: other) }
        if data.count > maximumLength { data.removeLast(data.count - maximumLength) }
        return data
    }

    private mutating func mutateOnce(_ data: inout [UInt8], other: [UInt8]) {
        let position = below(data.count + 1)
        switch below(16) {
        case 0 where !data.isEmpty:  // flip a bit
            let i = below(data.count)
            data[i] ^= 1 << UInt8(below(8))
        case 1 where !data.isEmpty:  // set an interesting byte
            data[below(data.count)] = Mutator.interestingBytes[below(Mutator.interestingBytes.count)]
        case 2 where !data.isEmpty:  // set a random byte
            data[below(data.count)] = UInt8(truncatingIfNeeded: random.next())
        case 3:  // insert random bytes
            let n = 1 + below(8)
            data.insert(contentsOf: (0..<n).map { _ in UInt8(truncatingIfNeeded: random.next()) }, at: position)
        case 4 where !data.isEmpty:  // delete a run
            let start = below(data.count)
            let n = 1 + below(min(16, data.count - start))
            data.removeSubrange(start..<start + n)
        case 5 where !data.isEmpty:  // duplicate a run elsewhere
            let start = below(data.count)
            let n = 1 + below(min(64, data.count - start))
            let run = Array(data[start..<start + n])
            data.insert(contentsOf: run, at: below(data.count + 1))
        case 6:  // splice: a head of this input and a tail of the other
            let head = data.prefix(position)
            let tail = other.suffix(below(other.count + 1))
            data = Array(head) + Array(tail)
        case 7, 8:  // insert a dictionary token
            data.insert(contentsOf: dictionary[below(dictionary.count)], at: position)
        case 9 where !data.isEmpty:  // overwrite with a token
            let token = dictionary[below(dictionary.count)]
            let start = min(position, data.count - 1)
            let end = min(data.count, start + token.count)
            data.replaceSubrange(start..<end, with: token)
        case 10:  // an interesting integer, in place or inserted
            let value = chance(50) ? interestingInteger() : interestingVarint()
            if chance(50), position + value.count <= data.count {
                data.replaceSubrange(position..<position + value.count, with: value)
            } else {
                data.insert(contentsOf: value, at: position)
            }
        case 11:  // length extremes: cut short, or grow by repeating a run
            if chance(50) || data.isEmpty {
                data.removeLast(data.count - below(data.count + 1))
            } else {
                let start = below(data.count)
                let run = Array(data[start..<min(data.count, start + 1 + below(32))])
                let times = 1 + below(max(1, maximumLength / max(1, run.count)))
                var grown = Array(data.prefix(position))
                grown.reserveCapacity(min(maximumLength, data.count + run.count * times))
                for _ in 0..<times where grown.count < maximumLength { grown += run }
                grown += data.suffix(from: position)
                data = grown
            }
        case 12 where nesting != nil:  // deep nesting around a run
            guard let nesting else { return }
            let depth = [2, 8, 63, 64, 65, 66, 67, 100, 1000, 5000][below(10)]
            let end = position + below(data.count - position + 1)
            var nested: [UInt8] = Array(data.prefix(position))
            for _ in 0..<depth { nested += nesting.open }
            nested += data[position..<end]
            if chance(80) { for _ in 0..<depth { nested += nesting.close } }
            nested += data.suffix(from: end)
            data = nested
        case 13 where !data.isEmpty:  // swap two bytes
            data.swapAt(below(data.count), below(data.count))
        case 14 where !data.isEmpty:  // replace a run with the same byte
            let start = below(data.count)
            let n = 1 + below(min(32, data.count - start))
            let byte = Mutator.interestingBytes[below(Mutator.interestingBytes.count)]
            for i in start..<start + n { data[i] = byte }
        default:  // insert an interesting byte
            data.insert(Mutator.interestingBytes[below(Mutator.interestingBytes.count)], at: position)
        }
    }
}
