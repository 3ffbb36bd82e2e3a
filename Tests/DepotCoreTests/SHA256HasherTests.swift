import DepotCore
import Foundation
import Testing

/// SHA256Hasher against the FIPS 180-4 example messages and the NIST byte-oriented test
/// vectors (the digests below are the published ones), fed whole and in pieces.
@Suite("SHA256Hasher")
struct SHA256HasherTests {
    static let vectors: [(String, String)] = [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
        (
            "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"
        ),
    ]

    @Test("the FIPS 180-4 examples, whole")
    func examples() {
        for (message, digest) in Self.vectors {
            #expect(SHA256Hasher.hash(Array(message.utf8)) == digest, "message \(message.count) bytes")
        }
    }

    @Test("the FIPS 180-4 examples fed one byte at a time and in every two-piece split")
    func pieces() {
        for (message, digest) in Self.vectors {
            let bytes = Array(message.utf8)
            var single = SHA256Hasher()
            for byte in bytes { single.update([byte]) }
            #expect(single.finalize() == digest)
            for cut in 0...bytes.count {
                var split = SHA256Hasher()
                split.update(Array(bytes[..<cut]))
                split.update(Array(bytes[cut...]))
                #expect(split.finalize() == digest, "cut at \(cut)")
            }
        }
    }

    @Test("one million 'a' in uneven pieces (the long-message vector)")
    func millionA() {
        var hasher = SHA256Hasher()
        let piece = [UInt8](repeating: 0x61, count: 997)
        var left = 1_000_000
        while left > 0 {
            let n = min(left, piece.count)
            hasher.update(Array(piece[..<n]))
            left -= n
        }
        #expect(hasher.byteCount == 1_000_000)
        #expect(hasher.finalize() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test("NIST SHAVS short messages: one byte 0xbd, four bytes c98c8e55")
    func shavs() {
        #expect(SHA256Hasher.hash([0xbd]) == "68325720aabd7c82f30f554b313d0570c95accbb7dc4b5aae11204c08ffe732b")
        #expect(SHA256Hasher.hash([0xc9, 0x8c, 0x8e, 0x55]) == "7abc22c0ae5af26ce93dbb94433a0e0b2e119d014f8e7f65bd56c61ccccd9504")
    }

    @Test("the padding boundaries: 55, 56, 57 and 64 zero bytes (digests from coreutils sha256sum)")
    func paddingBoundaries() {
        #expect(SHA256Hasher.hash([UInt8](repeating: 0, count: 55)) == "02779466cdec163811d078815c633f21901413081449002f24aa3e80f0b88ef7")
        #expect(SHA256Hasher.hash([UInt8](repeating: 0, count: 56)) == "d4817aa5497628e7c77e6b606107042bbba3130888c5f47a375e6179be789fbb")
        #expect(SHA256Hasher.hash([UInt8](repeating: 0, count: 57)) == "65a16cb7861335d5ace3c60718b5052e44660726da4cd13bb745381b235a1785")
        #expect(SHA256Hasher.hash([UInt8](repeating: 0, count: 64)) == "f5a5fd42d16a20302798ef6ed309979b43003d2320d9f0e8ea9831a92759fb4b")
    }

    @Test("isDigest accepts 64 lowercase hex digits only")
    func digestForm() {
        #expect(SHA256Hasher.isDigest(SHA256Hasher.hash([])))
        #expect(!SHA256Hasher.isDigest(SHA256Hasher.hash([]).uppercased()))
        #expect(!SHA256Hasher.isDigest(String(SHA256Hasher.hash([]).dropLast())))
        #expect(!SHA256Hasher.isDigest(String(repeating: "g", count: 64)))
    }

    @Test("the FIPS 180-4 examples and the long-message vector on the portable path too")
    func portablePath() {
        for (message, digest) in Self.vectors {
            var hasher = SHA256Hasher(hardwareAcceleration: false)
            hasher.update(Array(message.utf8))
            #expect(hasher.finalize() == digest)
        }
        var hasher = SHA256Hasher(hardwareAcceleration: false)
        hasher.update([UInt8](repeating: 0x61, count: 1_000_000))
        #expect(hasher.finalize() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test("the processor's SHA-256 instructions and the portable code agree on random messages cut at random places")
    func hardwareMatchesPortable() {
        var random = SplitMix64(seed: 0x5348_4132)
        var lengths = Array(0...200) + [4095, 4096, 4097, 65_536 + 3]
        lengths.append(1 << 20)
        for length in lengths {
            let bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            var portable = SHA256Hasher(hardwareAcceleration: false)
            var fast = SHA256Hasher()
            var at = 0
            while at < length {
                // The same message in pieces of different sizes on each side.
                let a = min(length - at, Int(random.next() % 300))
                portable.update(Array(bytes[at..<(at + a)]))
                at += a
            }
            fast.update(bytes)
            #expect(fast.finalize() == portable.finalize(), "length \(length)")
        }
    }

    @Test("the x86 SHA extensions are used where the processor has them")
    func acceleratedWhereAvailable() throws {
        #if os(Linux) && arch(x86_64)
        // /proc/cpuinfo lists the 'sha_ni' flag where the processor has the instructions.
        let cpuinfo = try String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)
        let flags = cpuinfo.split(separator: "\n").first { $0.hasPrefix("flags") }.map { $0.split(separator: " ").map(String.init) } ?? []
        #expect(SHA256Hasher.isHardwareAccelerated == flags.contains("sha_ni"))
        #elseif !arch(x86_64)
        #expect(!SHA256Hasher.isHardwareAccelerated)
        #endif
    }
}
