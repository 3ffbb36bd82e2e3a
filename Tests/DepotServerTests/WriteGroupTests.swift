import DepotCore
import Foundation
import Testing

@testable import DepotServer

/// Single write requests that arrive while a transaction runs share the next one
/// (Docs/Server.md, "Group commit"), each answered as it would have been alone.
@Suite("DepotServer group commit")
struct WriteGroupTests {
    /// A stand-in for `applyAll`: records each group's writes (by fingerprint) and answers
    /// each write with its own fingerprint; the first group waits until it is let go.
    final class Recorder: Sendable {
        let groups = Locked<[[String]]>([])
        let gate = Locked<CheckedContinuation<Void, Never>?>(nil)
        let holdFirst = Locked(true)

        func apply(_ writes: [PlannedWrite]) async -> [WireResponse] {
            groups.withLock { $0.append(writes.map(\.fingerprint)) }
            if holdFirst.withLock({ hold in defer { hold = false }; return hold }) {
                await withCheckedContinuation { continuation in gate.withLock { $0 = continuation } }
            }
            // A cancelled task's writes are refused here, as a driver that checks would.
            let status = Task.isCancelled ? 499 : 201
            return writes.map { WireResponse(status: status, headers: [("ETag", "\"\($0.fingerprint)\"")], body: $0.fingerprint) }
        }

        /// Lets the first group finish once it is waiting.
        func release() async {
            while true {
                if let continuation = gate.withLock({ gate in defer { gate = nil }; return gate }) {
                    continuation.resume()
                    return
                }
                await Task.yield()
            }
        }
    }

    static func write(_ name: String) -> PlannedWrite {
        PlannedWrite(key: nil, fingerprint: name) { _ in WireResponse(status: 500, headers: [], body: "not run here") }
    }

    static func waitUntil(_ group: WriteGroup, waiting count: Int) async {
        while group.waitingCount < count { await Task.yield() }
    }

    /// A lone request runs at once in a group of its own.
    @Test func aLoneWriteRunsAlone() async {
        let group = WriteGroup()
        let recorder = Recorder()
        recorder.holdFirst.withLock { $0 = false }
        let answer = await group.submit(Self.write("a"), recorder.apply)
        #expect(answer.body == "a")
        #expect(recorder.groups.withLock { $0 } == [["a"]])
        #expect(group.waitingCount == 0)
    }

    /// Requests that arrive while the first one's transaction runs wait, then run together
    /// in one group; every request gets its own answer.
    @Test func writesArrivingDuringATransactionShareTheNext() async {
        let group = WriteGroup()
        let recorder = Recorder()
        async let first = group.submit(Self.write("a"), recorder.apply)
        while recorder.groups.withLock({ $0.count }) < 1 { await Task.yield() }
        let names = (0..<20).map { "w\($0)" }
        let answers = Task {
            await withTaskGroup(of: (String, WireResponse).self) { tasks in
                for name in names { tasks.addTask { (name, await group.submit(Self.write(name), recorder.apply)) } }
                var out: [String: WireResponse] = [:]
                for await (name, answer) in tasks { out[name] = answer }
                return out
            }
        }
        await Self.waitUntil(group, waiting: names.count)
        await recorder.release()
        #expect(await first.body == "a")
        let byName = await answers.value
        for name in names { #expect(byName[name]?.body == name && byName[name]?.headers.first?.1 == "\"\(name)\"") }
        let groups = recorder.groups.withLock { $0 }
        #expect(groups.count == 2)
        #expect(groups.first == ["a"])
        #expect(Set(groups.last ?? []) == Set(names) && groups.last?.count == names.count)
        #expect(group.waitingCount == 0)
    }

    /// More waiting requests than a group holds run in several groups, in arrival order.
    @Test func aGroupHoldsAtMostItsMaximum() async {
        let group = WriteGroup()
        let recorder = Recorder()
        async let first = group.submit(Self.write("first"), recorder.apply)
        while recorder.groups.withLock({ $0.count }) < 1 { await Task.yield() }
        let count = WriteGroup.maximumGroup * 2 + 7
        let answers = Task {
            await withTaskGroup(of: Bool.self) { tasks in
                for n in 0..<count { tasks.addTask { await group.submit(Self.write("n\(n)"), recorder.apply).body == "n\(n)" } }
                var right = 0
                for await ok in tasks where ok { right += 1 }
                return right
            }
        }
        await Self.waitUntil(group, waiting: count)
        await recorder.release()
        _ = await first
        #expect(await answers.value == count)
        let sizes = recorder.groups.withLock { $0.map(\.count) }
        #expect(sizes == [1, WriteGroup.maximumGroup, WriteGroup.maximumGroup, 7])
    }

    /// The request that leads a group being cancelled (its client gone) does not reach the
    /// other requests of the group: their writes run and are answered as usual.
    @Test func aCancelledLeaderDoesNotCancelItsGroup() async {
        let group = WriteGroup()
        let recorder = Recorder()
        async let first = group.submit(Self.write("a"), recorder.apply)
        while recorder.groups.withLock({ $0.count }) < 1 { await Task.yield() }
        let leader = Task { await group.submit(Self.write("b"), recorder.apply) }
        await Self.waitUntil(group, waiting: 1)
        let others = (0..<5).map { n in Task { await group.submit(Self.write("o\(n)"), recorder.apply) } }
        await Self.waitUntil(group, waiting: 6)
        leader.cancel()
        await recorder.release()
        #expect(await first.status == 201)
        for other in others { #expect(await other.value.status == 201) }
        #expect(await leader.value.status == 201)
        #expect(recorder.groups.withLock { $0.map(\.count) } == [1, 6])
    }

    /// Through a live server: concurrent POSTs, some taking an id another already has and
    /// some repeating an idempotency key, each answered as alone, and the store holds
    /// exactly the records answered 201.
    @Test func concurrentRequestsAreAnsweredAsAlone() async throws {
        let live = try await LiveServer.start()
        defer { Task { await live.stop() } }
        _ = try await live.send("POST", "/notes", json: #"{"id":"seed","v":0}"#)
        let answers = try await withThrowingTaskGroup(of: (Int, Answer).self) { tasks in
            for n in 0..<48 {
                tasks.addTask {
                    switch n % 4 {
                    case 0: return (n, try await live.send("POST", "/notes", json: "{\"id\":\"n\(n)\",\"v\":\(n)}"))
                    case 1: return (n, try await live.send("POST", "/notes", json: #"{"id":"seed","v":1}"#))
                    case 2: return (n, try await live.send("POST", "/notes", json: #"{"id":"k","v":2}"#, headers: ["Idempotency-Key": "key-k"]))
                    default: return (n, try await live.send("PATCH", "/notes/seed", json: "{\"p\(n)\":\(n)}"))
                    }
                }
            }
            var out: [Int: Answer] = [:]
            for try await (n, answer) in tasks { out[n] = answer }
            return out
        }
        for (n, answer) in answers {
            switch n % 4 {
            case 0: #expect(answer.status == 201 && answer.json.objectValue?["id"] == .string("n\(n)"))
            case 1: #expect(answer.status == 409 && answer.errorCode == "alreadyExists")
            case 2: #expect(answer.status == 201 && answer.json.objectValue?["id"] == .string("k"))
            default: #expect(answer.status == 200 && answer.json.objectValue?["p\(n)"] == .int(Int64(n)))
            }
        }
        let replayed = answers.filter { $0.key % 4 == 2 && $0.value.header("Idempotent-Replayed") == "true" }.count
        #expect(replayed == 11)
        let stored = try await live.store.collection("notes").query(Query())
        #expect(Set(stored.map(\.id)) == Set((0..<48).filter { $0 % 4 == 0 }.map { RecordID.string("n\($0)") } + [.string("seed"), .string("k")]))
        let seed = try await live.store.collection("notes").get("seed")
        #expect((0..<48).filter { $0 % 4 == 3 }.allSatisfy { seed?["p\($0)"] == .int(Int64($0)) })
    }
}
