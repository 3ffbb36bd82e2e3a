import DepotCore
import Testing

@testable import DepotGDBM

/// Folds and rebuilds replay the journal through ``FileOpCoalescer``: the reduced ops must
/// leave every file exactly as replaying all of them does.
@Suite struct FileOpCoalescerTests {
    /// Files as a model: file → key → value (a missing file is absent).
    typealias Files = [FileID: [[UInt8]: [UInt8]]]

    static func apply(_ op: FileOp, to files: inout Files) {
        switch op {
        case .put(let file, let key, let value): files[file, default: [:]][key] = value
        case .delete(let file, let key): files[file]?[key] = nil
        case .drop(let file): files[file] = nil
        }
    }

    @Test(arguments: 1...40)
    func reducedOpsLeaveTheSameFiles(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        let files: [FileID] = [.catalog, .records(try CollectionName("a")), .index(try CollectionName("a"))]
        var ops: [FileOp] = []
        for _ in 0..<Int.random(in: 1...400, using: &random) {
            let file = files.randomElement(using: &random) ?? .catalog
            let key: [UInt8] = [UInt8.random(in: 0..<6, using: &random)]
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<3: ops.append(.drop(file))
            case 3..<30: ops.append(.delete(file, key: key))
            default: ops.append(.put(file, key: key, value: [UInt8.random(in: 0...255, using: &random), UInt8(ops.count & 0xFF)]))
            }
        }
        var everyOp: Files = [.records(try CollectionName("a")): [[9]: [9]]]
        var reduced = everyOp
        for op in ops { Self.apply(op, to: &everyOp) }

        var coalescer = FileOpCoalescer()
        var appliedOps: [FileOp] = []
        for op in ops { coalescer.add(op) { appliedOps.append($0) } }
        // What is kept is what the flush applies, byte for byte.
        let pendingBytes = coalescer.keptBytes
        var flushedBytes = 0
        coalescer.flush { op in
            appliedOps.append(op)
            switch op {
            case .put(_, let key, let value): flushedBytes += key.count + value.count
            case .delete(_, let key): flushedBytes += key.count
            case .drop: Issue.record("a flush applied a drop")
            }
        }
        #expect(pendingBytes == flushedBytes, "seed \(seed)")
        #expect(coalescer.keptBytes == 0)
        for op in appliedOps { Self.apply(op, to: &reduced) }

        #expect(reduced == everyOp, "seed \(seed)")
        #expect(coalescer.added == ops.count)
        #expect(coalescer.applied == appliedOps.count)
        // Eighteen (file, key) slots and few drops: long sequences must shrink.
        if ops.count > 100 { #expect(appliedOps.count < ops.count, "seed \(seed): nothing was coalesced") }
    }

    /// A drop ends a run: puts before it are applied before it, puts after it after it; a
    /// delete after a put keeps the put, which created the file.
    @Test func aDropKeepsItsPlace() throws {
        let file = FileID.records(try CollectionName("a"))
        var coalescer = FileOpCoalescer()
        var applied: [String] = []
        func note(_ op: FileOp) {
            switch op {
            case .put(_, let key, let value): applied.append("put \(key) \(value)")
            case .delete(_, let key): applied.append("delete \(key)")
            case .drop: applied.append("drop")
            }
        }
        coalescer.add(.put(file, key: [1], value: [1]), apply: note)
        coalescer.add(.put(file, key: [1], value: [2]), apply: note)
        coalescer.add(.put(file, key: [2], value: [1]), apply: note)
        coalescer.add(.drop(file), apply: note)
        coalescer.add(.put(file, key: [2], value: [3]), apply: note)
        coalescer.add(.delete(file, key: [2]), apply: note)
        coalescer.add(.put(file, key: [1], value: [4]), apply: note)
        coalescer.flush(apply: note)
        // The put of [2] before its delete stays: a delete alone would not create the file.
        #expect(applied == ["put [1] [2]", "put [2] [1]", "drop", "put [2] [3]", "delete [2]", "put [1] [4]"])
        #expect(coalescer.added == 7)
        #expect(coalescer.applied == 6)
    }
}
