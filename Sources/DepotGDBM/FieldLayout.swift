import DepotCore
import Foundation
import Synchronization

/// A set of field names, with a dictionary of them all mapped to null: decoding a record
/// whose names are exactly these copies the dictionary and sets each value through its
/// index, so no name is turned into a `String` or hashed per record.
///
/// Records store their names in the order of the dictionary they were written from, which
/// differs from record to record (Swift seeds each dictionary's hashing separately), so a
/// stored name is looked up among the layout's names: first at the same position, then by
/// a small hash table over each name's length and first 8 bytes, compared as integers (all
/// bytes only for longer names).
/// ``template`` and ``indices`` are a ``FieldTemplate``.
final class FieldLayout: Sendable {
    /// The names, field `i` at `names[i]`.
    let names: [String]
    /// The names' UTF-8 bytes, one after the other; field `i`'s are at `ranges[i]`.
    let nameBytes: [UInt8]
    let ranges: [Range<Int>]
    /// Field `i`'s first 8 bytes (zero-padded), for a quick comparison.
    let prefixes: [UInt64]
    /// Open addressing over (prefix, length): field index + 1, 0 when empty; a power of two
    /// at least twice ``count``.
    let table: [UInt8]
    let tableShift: UInt64
    /// Every name mapped to `.null`.
    let template: [String: FieldValue]
    /// The index of field `i`'s name in ``template``.
    let indices: [Dictionary<String, FieldValue>.Index]

    /// A layout of no names, which no record matches: a placeholder.
    static let empty = FieldLayout(names: [])!

    /// A layout of `names` (at most 255); `nil` when a name repeats.
    init?(names: [String]) {
        guard names.count < 256 else { return nil }
        let template = FieldTemplate(names: names)
        guard template.fields.count == names.count else { return nil }
        var bytes: [UInt8] = []
        var ranges: [Range<Int>] = []
        var prefixes: [UInt64] = []
        for name in names {
            let start = bytes.count
            bytes.append(contentsOf: name.utf8)
            ranges.append(start..<bytes.count)
            prefixes.append(bytes.withUnsafeBytes { FieldLayout.prefix(UnsafeRawBufferPointer(rebasing: $0[start...])) })
        }
        var bits: UInt64 = 1
        while (1 << bits) < 2 * names.count { bits += 1 }
        var table = [UInt8](repeating: 0, count: 1 << Int(bits))
        let mask = table.count - 1
        for i in names.indices {
            var slot = FieldLayout.slot(prefixes[i], ranges[i].count, shift: 64 - bits)
            while table[slot] != 0 { slot = (slot + 1) & mask }
            table[slot] = UInt8(i + 1)
        }
        self.names = names
        self.table = table
        self.tableShift = 64 - bits
        self.nameBytes = bytes
        self.ranges = ranges
        self.prefixes = prefixes
        self.template = template.fields
        self.indices = template.indices
    }

    @inline(__always) static func slot(_ prefix: UInt64, _ length: Int, shift: UInt64) -> Int {
        Int(truncatingIfNeeded: ((prefix ^ UInt64(truncatingIfNeeded: length)) &* 0x9E37_79B9_7F4A_7C15) >> shift)
    }

    var count: Int { ranges.count }

    /// The first 8 bytes of `bytes` as an integer, zero-padded.
    /// (One unaligned load for 8 bytes or more, a byte at a time below: no `memcpy` call.)
    @inline(__always) static func prefix(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        guard let base = bytes.baseAddress else { return 0 }
        if bytes.count >= 8 { return UInt64(littleEndian: base.loadUnaligned(as: UInt64.self)) }
        var value: UInt64 = 0
        for i in 0..<bytes.count { value |= UInt64(base.load(fromByteOffset: i, as: UInt8.self)) << UInt64(8 * i) }
        return value
    }

    /// The position of the name `bytes` (whose ``prefix(_:)`` is `prefix`), trying `hint`
    /// first; `nil` when the layout has no such name.
    @inline(__always) func position(of bytes: UnsafeRawBufferPointer, prefix: UInt64, hint: Int) -> Int? {
        if hint < count, matches(hint, bytes, prefix) { return hint }
        let mask = table.count - 1
        var slot = FieldLayout.slot(prefix, bytes.count, shift: tableShift)
        while true {
            let entry = table[slot]
            if entry == 0 { return nil }
            if matches(Int(entry) - 1, bytes, prefix) { return Int(entry) - 1 }
            slot = (slot + 1) & mask
        }
    }

    @inline(__always) private func matches(_ i: Int, _ bytes: UnsafeRawBufferPointer, _ prefix: UInt64) -> Bool {
        let range = ranges[i]
        guard range.count == bytes.count, prefixes[i] == prefix else { return false }
        if range.count <= 8 { return true }
        return nameBytes.withUnsafeBytes { own in
            memcmp(own.baseAddress! + range.lowerBound, bytes.baseAddress!, range.count) == 0
        }
    }
}

/// The few field layouts a store's records were last decoded with (a store's collections
/// usually hold records of one shape each). Shared by every thread of the store.
///
/// Once ``capacity`` layouts are kept, a record that matches none of them is learned only
/// if ``learnInterval`` such misses came since the last learning. Records of more shapes than
/// the cache holds (many optional fields) would otherwise build a layout on nearly every read
/// and evict it before its next use; this way they cost the general decoder plus, on one miss
/// in ``learnInterval``, one layout.
final class FieldLayoutCache: Sendable {
    private struct State {
        /// Most recently learned first.
        var layouts: [FieldLayout] = []
        /// Misses since the last layout was learned.
        var missesSinceLearning = 0
        /// Layouts learned so far (for tests and diagnostics).
        var learned = 0
    }

    private let state = Locked(State())
    /// Layouts kept at most.
    static let capacity = 8
    /// Records with more fields than this are decoded without a layout.
    static let maximumFields = 64
    /// With the cache full, one miss in this many is learned.
    static let learnInterval = 64

    /// The layouts, most recently learned first.
    func current() -> [FieldLayout] {
        state.withLock { $0.layouts }
    }

    /// Counts the layouts learned: a copy of ``current()`` taken at one count (with
    /// ``snapshot()``) is current until the count changes. Read without the lock: reader
    /// slots keep copies of their own (``ReaderHandles``), because a lock word or reference
    /// count written by two reading threads bounces between their cores.
    let version = Atomic<Int>(0)

    /// ``current()`` and the ``version`` it is current at.
    func snapshot() -> (version: Int, layouts: [FieldLayout]) {
        state.withLock { ($0.learned, $0.layouts) }
    }

    /// The number of layouts learned since the cache was made.
    var learnedCount: Int { state.withLock { $0.learned } }

    /// Called for a record that matched no layout: remembers the layout of `names` (see the
    /// type's comment for when), dropping the oldest past ``capacity``.
    func learn(_ names: [String]) {
        guard names.count >= 2, names.count <= FieldLayoutCache.maximumFields else { return }
        let due = state.withLock { state -> Bool in
            state.missesSinceLearning += 1
            guard state.layouts.count < FieldLayoutCache.capacity || state.missesSinceLearning >= FieldLayoutCache.learnInterval else { return false }
            state.missesSinceLearning = 0
            return true
        }
        guard due, let layout = FieldLayout(names: names) else { return }
        state.withLock { state in
            state.layouts.insert(layout, at: 0)
            if state.layouts.count > FieldLayoutCache.capacity { state.layouts.removeLast() }
            state.learned += 1
            version.store(state.learned, ordering: .releasing)
        }
    }
}
