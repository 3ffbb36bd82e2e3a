import DepotCore

// The "@Model" side of the typed-model workloads (Docs/Benchmarks.md, "Typed models").
//
// The declaration:
//
//     @Model
//     public struct GeneratedIntegerRecord: Hashable {
//         public static var collectionName: String { "integers" }
//         public var id: Int64
//         public var a, b, c, d, e, f, g, h, i, j: Int64
//     }
//
// Everything in the extension below is THE EXPANSION OF THE @Model DECLARATION ABOVE,
// written by hand in the form the macro generates (each field written straight to the
// FieldSink in declaration order, each read from the FieldSource by name, no Codable);
// replaced by the macro's verified output when it lands. `depot bench` cannot use the macro
// itself: the CLI must not depend on the DepotModel product (it would build swift-syntax).
//
// It stores exactly what the Codable `IntegerRecord` stores (same collection, same field
// names, same values), so either type reads what the other wrote.

/// The model of the typed-model workloads as `@Model` generates it: an integer id and ten
/// integer fields, mapped by hand-written code in the macro's form instead of `Codable`.
public struct GeneratedIntegerRecord: Hashable, Sendable {
    /// The collection shared with ``IntegerRecord``.
    public static var collectionName: String { "integers" }
    /// The record id.
    public var id: Int64
    /// The ten stored fields, in declaration (and column) order.
    public var a, b, c, d, e, f, g, h, i, j: Int64

    /// Record `n`: the same id and values as `IntegerRecord(n)`.
    public init(_ n: Int) {
        let model = IntegerRecord(n)
        self.init(id: model.id, a: model.a, b: model.b, c: model.c, d: model.d, e: model.e, f: model.f, g: model.g, h: model.h, i: model.i, j: model.j)
    }

    /// A record with every value given.
    public init(id: Int64, a: Int64, b: Int64, c: Int64, d: Int64, e: Int64, f: Int64, g: Int64, h: Int64, i: Int64, j: Int64) {
        self.id = id
        self.a = a; self.b = b; self.c = c; self.d = d; self.e = e
        self.f = f; self.g = g; self.h = h; self.i = i; self.j = j
    }

    /// The ten values in column order.
    public var values: [Int64] { [a, b, c, d, e, f, g, h, i, j] }
}

// MARK: - Expansion of @Model (hand-written; replaced by the macro's verified output when it lands)

extension GeneratedIntegerRecord: StoredModel {
    /// The id's type.
    public typealias ID = Int64

    /// ``id`` as a record id.
    public var storedRecordID: RecordID? { id.recordID }

    /// Writes the ten fields to `sink` in declaration order and returns the id.
    /// - Throws: what `sink` throws.
    public func encodeRecord(into sink: any FieldSink) throws -> RecordID? {
        try sink.set(.int(Int64(a)), forField: "a")
        try sink.set(.int(Int64(b)), forField: "b")
        try sink.set(.int(Int64(c)), forField: "c")
        try sink.set(.int(Int64(d)), forField: "d")
        try sink.set(.int(Int64(e)), forField: "e")
        try sink.set(.int(Int64(f)), forField: "f")
        try sink.set(.int(Int64(g)), forField: "g")
        try sink.set(.int(Int64(h)), forField: "h")
        try sink.set(.int(Int64(i)), forField: "i")
        try sink.set(.int(Int64(j)), forField: "j")
        return id.recordID
    }

    /// Reads the id and the ten fields from `source`.
    /// - Throws: `.decoding` naming the field that is missing or not an integer, or the
    ///   source's `.corrupted`.
    public init(record source: any FieldSource) throws {
        self.id = try Int64(recordID: source.recordID)
        switch try source.value(forField: "a") {
        case .int(let value)?: self.a = Int64(value)
        case let other: throw _modelFieldMismatch("a", Int64.self, other)
        }
        switch try source.value(forField: "b") {
        case .int(let value)?: self.b = Int64(value)
        case let other: throw _modelFieldMismatch("b", Int64.self, other)
        }
        switch try source.value(forField: "c") {
        case .int(let value)?: self.c = Int64(value)
        case let other: throw _modelFieldMismatch("c", Int64.self, other)
        }
        switch try source.value(forField: "d") {
        case .int(let value)?: self.d = Int64(value)
        case let other: throw _modelFieldMismatch("d", Int64.self, other)
        }
        switch try source.value(forField: "e") {
        case .int(let value)?: self.e = Int64(value)
        case let other: throw _modelFieldMismatch("e", Int64.self, other)
        }
        switch try source.value(forField: "f") {
        case .int(let value)?: self.f = Int64(value)
        case let other: throw _modelFieldMismatch("f", Int64.self, other)
        }
        switch try source.value(forField: "g") {
        case .int(let value)?: self.g = Int64(value)
        case let other: throw _modelFieldMismatch("g", Int64.self, other)
        }
        switch try source.value(forField: "h") {
        case .int(let value)?: self.h = Int64(value)
        case let other: throw _modelFieldMismatch("h", Int64.self, other)
        }
        switch try source.value(forField: "i") {
        case .int(let value)?: self.i = Int64(value)
        case let other: throw _modelFieldMismatch("i", Int64.self, other)
        }
        switch try source.value(forField: "j") {
        case .int(let value)?: self.j = Int64(value)
        case let other: throw _modelFieldMismatch("j", Int64.self, other)
        }
    }

    /// This model with the id `id`.
    /// - Throws: `.decoding` when `id` is not an integer id.
    public func assigningID(_ id: RecordID) throws -> GeneratedIntegerRecord {
        var copy = self
        copy.id = try Int64(recordID: id)
        return copy
    }
}

/// The `.decoding` error of a generated `init(record:)` for the field `name`, which is
/// missing (`found == nil`) or holds a value that is not a `T`. Stands in for the helper the
/// macro's expansion calls.
func _modelFieldMismatch<T>(_ name: String, _ type: T.Type, _ found: FieldValue?) -> DepotError {
    guard let found else {
        return DepotError(.decoding, "The field '\(name)' is missing; it must hold a \(T.self).")
    }
    return DepotError(.decoding, "The field '\(name)' holds \(found.kindName), not a \(T.self).")
}

extension FieldValue {
    /// The kind of value, for error messages.
    fileprivate var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .int: "an integer"
        case .double: "a double"
        case .string: "a string"
        case .bytes: "bytes"
        case .array: "an array"
        case .object: "an object"
        }
    }
}
