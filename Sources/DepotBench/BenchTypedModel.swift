import DepotCore

// The "@Model" side of the typed-model workloads (Docs/Benchmarks.md, "Typed models").
//
// `depot bench` cannot use the macro itself: the CLI must not depend on the DepotModel
// product (it would build swift-syntax). So the MODEL EXPANSION region below is the
// macro's expansion of the MODEL INPUT declaration, written out; DepotModelMacrosTests
// expands the input with the real macro and requires the region exactly, so the two
// cannot drift apart. It stores exactly what the Codable `IntegerRecord` stores (same
// collection, same field names, same values), so either type reads what the other wrote.

// MODEL INPUT BEGIN
// @Model(collection: "integers")
// public struct GeneratedIntegerRecord: Hashable {
//     public var id: Int64
//     public var a: Int64
//     public var b: Int64
//     public var c: Int64
//     public var d: Int64
//     public var e: Int64
//     public var f: Int64
//     public var g: Int64
//     public var h: Int64
//     public var i: Int64
//     public var j: Int64
// }
// MODEL INPUT END

// MODEL EXPANSION BEGIN
public struct GeneratedIntegerRecord: Hashable {
    public var id: Int64
    public var a: Int64
    public var b: Int64
    public var c: Int64
    public var d: Int64
    public var e: Int64
    public var f: Int64
    public var g: Int64
    public var h: Int64
    public var i: Int64
    public var j: Int64
}

extension GeneratedIntegerRecord: DepotCore.StoredModel {
    public typealias ID = Int64
    public static var collectionName: String {
        "integers"
    }
    public var storedRecordID: DepotCore.RecordID? {
        self.id.recordID
    }
    public func encodeRecord(into sink: any DepotCore.FieldSink) throws -> DepotCore.RecordID? {
        try sink.set(DepotCore.ModelCoding.encode(self.a, field: "a"), forField: "a")
        try sink.set(DepotCore.ModelCoding.encode(self.b, field: "b"), forField: "b")
        try sink.set(DepotCore.ModelCoding.encode(self.c, field: "c"), forField: "c")
        try sink.set(DepotCore.ModelCoding.encode(self.d, field: "d"), forField: "d")
        try sink.set(DepotCore.ModelCoding.encode(self.e, field: "e"), forField: "e")
        try sink.set(DepotCore.ModelCoding.encode(self.f, field: "f"), forField: "f")
        try sink.set(DepotCore.ModelCoding.encode(self.g, field: "g"), forField: "g")
        try sink.set(DepotCore.ModelCoding.encode(self.h, field: "h"), forField: "h")
        try sink.set(DepotCore.ModelCoding.encode(self.i, field: "i"), forField: "i")
        try sink.set(DepotCore.ModelCoding.encode(self.j, field: "j"), forField: "j")
        return self.id.recordID
    }
    public init(record source: any DepotCore.FieldSource) throws {
        self.id = try ID(recordID: source.recordID)
        self.a = try DepotCore.ModelCoding.decode(Int64.self, from: source, field: "a")
        self.b = try DepotCore.ModelCoding.decode(Int64.self, from: source, field: "b")
        self.c = try DepotCore.ModelCoding.decode(Int64.self, from: source, field: "c")
        self.d = try DepotCore.ModelCoding.decode(Int64.self, from: source, field: "d")
        self.e = try DepotCore.ModelCoding.decode(Int64.self, from: source, field: "e")
        self.f = try DepotCore.ModelCoding.decode(Int64.self, from: source, field: "f")
        self.g = try DepotCore.ModelCoding.decode(Int64.self, from: source, field: "g")
        self.h = try DepotCore.ModelCoding.decode(Int64.self, from: source, field: "h")
        self.i = try DepotCore.ModelCoding.decode(Int64.self, from: source, field: "i")
        self.j = try DepotCore.ModelCoding.decode(Int64.self, from: source, field: "j")
    }
    public func assigningID(_ id: DepotCore.RecordID) throws -> Self {
        var copy = self
        copy.id = try ID(recordID: id)
        return copy
    }
}
// MODEL EXPANSION END

extension GeneratedIntegerRecord {
    /// Record `n`: the same id and values as `IntegerRecord(n)`.
    public init(_ n: Int) {
        let model = IntegerRecord(n)
        self.init(id: model.id, a: model.a, b: model.b, c: model.c, d: model.d, e: model.e, f: model.f, g: model.g, h: model.h, i: model.i, j: model.j)
    }

    /// The ten values in column order.
    public var values: [Int64] { [a, b, c, d, e, f, g, h, i, j] }
}
