/// The fields of the record a typed point read decodes, looked up by name without hashing
/// the name when it is short.
///
/// A model asks for each of its fields by name. Through the record's dictionary every ask
/// hashes the name, and the first touch of each key and value misses the cache: a stored
/// record was last used long ago, and its dictionary's buckets lie wherever their hashes
/// put them. ``offer(_:)`` instead walks the record's storage once, in order (independent
/// loads, so the misses overlap), and notes each key's two words and its index; a name is
/// then found by comparing words. A field name of up to 15 bytes is stored inside the
/// string's two words (every valid field name is ASCII, Docs/Semantics.md), so equal short names
/// have equal words; a name not found that way (a longer name, which the words only point
/// to, or an absent field) is looked up in the dictionary as before, so the answers are
/// always the dictionary's. Records of more than ``capacity`` fields are not noted at all.
/// Used by the memory and JSON drivers' typed point reads and by ``RecordFieldSource``;
/// measured in Docs/measurements/2026-12-01-memory-model-reads.md.
package struct OfferedFields: ~Copyable {
    /// The record's fields, as stored.
    package private(set) var fields: [String: FieldValue] = [:]

    /// The most keys noted; a record with more is only looked up by hashing.
    package static let capacity = 16

    package init() {}

    private typealias Words = (UInt64, UInt64)
    /// A key's two words and its index in ``fields``.
    private struct Entry {
        var words: Words
        var slot: Dictionary<String, FieldValue>.Index
    }

    /// ``capacity`` entries, allocated by the first ``offer(_:)`` of a record that fits (an
    /// untyped read never pays for them); the first `count` are initialized.
    private var entries: UnsafeMutablePointer<Entry>?
    private var count = 0
    /// A sum over the keys and values ``offer(_:)`` read, kept so that its loads are not
    /// optimized away.
    private var touched = 0

    /// Whether a string's two words can be compared (64-bit platforms).
    private static var wordsComparable: Bool { MemoryLayout<String>.size == MemoryLayout<Words>.size }

    /// Offers `fields`: notes the words and index of each key when there are at most
    /// ``capacity`` of them.
    package mutating func offer(_ fields: [String: FieldValue]) {
        self.fields = fields
        forgetEntries()
        guard Self.wordsComparable, fields.count <= Self.capacity else { return }
        let entries: UnsafeMutablePointer<Entry>
        if let existing = self.entries {
            entries = existing
        } else {
            entries = .allocate(capacity: Self.capacity)
            self.entries = entries
        }
        var noted = 0
        var sum = 0
        var index = fields.startIndex
        while index != fields.endIndex {
            let (key, value) = fields[index]
            // Reading the value's tag brings its line in with the key's.
            sum &+= value.isNull ? 1 : 0
            (entries + noted).initialize(to: Entry(words: unsafeBitCast(key, to: Words.self), slot: index))
            noted += 1
            fields.formIndex(after: &index)
        }
        count = noted
        touched = sum
    }

    /// The value of the field `name`, `nil` when the record has no such field: exactly
    /// `fields[name]`.
    package func value(_ name: String) -> FieldValue? {
        if let entries, count > 0 {
            let wanted = unsafeBitCast(name, to: Words.self)
            for position in 0..<count where entries[position].words == wanted {
                return fields.values[entries[position].slot]
            }
        }
        return fields[name]
    }

    private mutating func forgetEntries() {
        if let entries, count > 0 { entries.deinitialize(count: count) }
        count = 0
    }

    deinit {
        if let entries {
            if count > 0 { entries.deinitialize(count: count) }
            entries.deallocate()
        }
    }

    /// Forgets the offered record.
    package mutating func clear() {
        fields = [:]
        forgetEntries()
    }
}
