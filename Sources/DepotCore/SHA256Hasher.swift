import CDepotSHA256

/// An incremental SHA-256 (FIPS 180-4) in plain Swift, with no I/O: feed bytes with
/// ``update(_:)`` in pieces of any size, then read ``finalize()`` once.
///
/// File transfers (Docs/Remote.md, "Files") verify every upload and download with it, on the
/// client and on the server, so neither needs a cryptography package. It holds 64 bytes of
/// pending input at most, whatever the message size. Where the processor has SHA-256
/// instructions (x86's SHA extensions) a small C routine uses them, chosen at run time; the
/// digests are the same either way.
///
/// ```swift
/// var hasher = SHA256Hasher()
/// hasher.update(Array("ab".utf8))
/// hasher.update(Array("c".utf8))
/// hasher.finalize()   // "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
/// ```
public struct SHA256Hasher: Sendable {
    /// `true` when this processor's SHA-256 instructions do the compression (x86's SHA
    /// extensions, chosen at run time); `false` when the portable Swift code does.
    public static var isHardwareAccelerated: Bool { depot_sha256_hw_available() == 1 }

    private var h0: UInt32 = 0x6a09_e667, h1: UInt32 = 0xbb67_ae85, h2: UInt32 = 0x3c6e_f372, h3: UInt32 = 0xa54f_f53a
    private var h4: UInt32 = 0x510e_527f, h5: UInt32 = 0x9b05_688c, h6: UInt32 = 0x1f83_d9ab, h7: UInt32 = 0x5be0_cd19
    /// Input not yet compressed (fewer than 64 bytes).
    private var pending: [UInt8] = []
    /// Bytes fed so far.
    private var length: UInt64 = 0
    /// Whether the processor's SHA-256 instructions may be used.
    private let hardware: Bool

    /// Makes a hasher for a new message.
    ///
    /// - Parameter hardwareAcceleration: `false` keeps to the portable Swift compression even
    ///   where the processor has SHA-256 instructions (both give the same digests; the tests
    ///   compare them).
    public init(hardwareAcceleration: Bool = true) {
        hardware = hardwareAcceleration
        pending.reserveCapacity(64)
    }

    /// The number of bytes fed so far.
    public var byteCount: UInt64 { length }

    /// Adds bytes to the message.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard var base = bytes.baseAddress else { return }
        var count = bytes.count
        length &+= UInt64(count)
        if !pending.isEmpty {
            let take = min(64 - pending.count, count)
            pending.append(contentsOf: UnsafeRawBufferPointer(start: base, count: take))
            base += take
            count -= take
            if pending.count == 64 {
                let block = pending
                block.withUnsafeBytes { compress($0.baseAddress.unsafelyUnwrapped, blocks: 1) }
                pending.removeAll(keepingCapacity: true)
            } else {
                return
            }
        }
        let whole = count / 64
        if whole > 0 {
            compress(base, blocks: whole)
            base += whole * 64
            count -= whole * 64
        }
        if count > 0 { pending.append(contentsOf: UnsafeRawBufferPointer(start: base, count: count)) }
    }

    /// Adds bytes to the message.
    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The digest of everything fed, as 32 bytes. The hasher must not be fed afterwards.
    public mutating func finalizeBytes() -> [UInt8] {
        let bits = length &* 8
        var tail = pending
        tail.append(0x80)
        while tail.count % 64 != 56 { tail.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        tail.withUnsafeBytes { compress($0.baseAddress.unsafelyUnwrapped, blocks: tail.count / 64) }
        pending.removeAll()
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for word in [h0, h1, h2, h3, h4, h5, h6, h7] {
            out.append(UInt8(truncatingIfNeeded: word >> 24))
            out.append(UInt8(truncatingIfNeeded: word >> 16))
            out.append(UInt8(truncatingIfNeeded: word >> 8))
            out.append(UInt8(truncatingIfNeeded: word))
        }
        return out
    }

    /// The digest of everything fed, as 64 lowercase hex digits. The hasher must not be fed
    /// afterwards.
    public mutating func finalize() -> String {
        Self.hex(finalizeBytes())
    }

    /// The SHA-256 of `bytes` as 64 lowercase hex digits.
    public static func hash(_ bytes: [UInt8]) -> String {
        var hasher = SHA256Hasher()
        hasher.update(bytes)
        return hasher.finalize()
    }

    /// `true` when `text` is 64 lowercase hex digits, the form ``finalize()`` returns.
    public static func isDigest(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    @inline(__always)
    private static func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 &- n)) }

    /// Compresses `blocks` 64-byte blocks starting at `base` into the state.
    private mutating func compress(_ base: UnsafeRawPointer, blocks: Int) {
        var state = [h0, h1, h2, h3, h4, h5, h6, h7]
        let hardware = hardware
        state.withUnsafeMutableBufferPointer { statePointer in
            // About six times the portable code's speed where the processor has the instructions.
            if hardware, depot_sha256_compress_hw(statePointer.baseAddress, base.assumingMemoryBound(to: UInt8.self), blocks) == 1 { return }
            // The round constants, from the C target (one table for both paths).
            let k = depot_sha256_round_constants().unsafelyUnwrapped
            withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
                Self.run(base, blocks: blocks, state: statePointer.baseAddress.unsafelyUnwrapped, k: k, w: w.baseAddress.unsafelyUnwrapped)
            }
        }
        h0 = state[0]; h1 = state[1]; h2 = state[2]; h3 = state[3]
        h4 = state[4]; h5 = state[5]; h6 = state[6]; h7 = state[7]
    }

    /// The compression function over plain pointers, so no local is captured by a closure.
    private static func run(
        _ base: UnsafeRawPointer, blocks: Int, state: UnsafeMutablePointer<UInt32>, k: UnsafePointer<UInt32>, w: UnsafeMutablePointer<UInt32>
    ) {
        var a0 = state[0], b0 = state[1], c0 = state[2], d0 = state[3]
        var e0 = state[4], f0 = state[5], g0 = state[6], hh0 = state[7]
        for block in 0..<blocks {
            let p = base + block &* 64
            for i in 0..<16 {
                w[i] = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: i &* 4, as: UInt32.self))
            }
            for i in 16..<64 {
                let x = w[i &- 15], y = w[i &- 2]
                let s0 = rotr(x, 7) ^ rotr(x, 18) ^ (x >> 3)
                let s1 = rotr(y, 17) ^ rotr(y, 19) ^ (y >> 10)
                w[i] = w[i &- 16] &+ s0 &+ w[i &- 7] &+ s1
            }
            var a = a0, b = b0, c = c0, d = d0, e = e0, f = f0, g = g0, h = hh0
            for i in 0..<64 {
                let s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)
                let choice = (e & f) ^ (~e & g)
                let t1 = h &+ s1 &+ choice &+ k[i] &+ w[i]
                let s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)
                let majority = (a & b) ^ (a & c) ^ (b & c)
                h = g; g = f; f = e; e = d &+ t1
                d = c; c = b; b = a; a = t1 &+ s0 &+ majority
            }
            a0 &+= a; b0 &+= b; c0 &+= c; d0 &+= d
            e0 &+= e; f0 &+= f; g0 &+= g; hh0 &+= h
        }
        state[0] = a0; state[1] = b0; state[2] = c0; state[3] = d0
        state[4] = e0; state[5] = f0; state[6] = g0; state[7] = hh0
    }
}
