import DepotCore
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A target whose records several clients can read at the same time: `depot bench
/// --clients`.
///
/// Depot's side is N tasks sharing one open store (what an app with several reading tasks
/// does); a raw baseline's side is N threads with one connection or handle each (what a
/// hand-written program does). Both replay the same reads, split round-robin among the
/// clients, so the wall time of the slowest client is what a ratio compares.
public protocol ConcurrentReadTarget: BenchTarget {
    /// Opens what `count` concurrent readers need (connections, handles), untimed. Between
    /// this and ``closeReaders()`` only ``readConcurrently(_:)`` is called.
    /// - Throws: the engine's error.
    func openReaders(_ count: Int) async throws
    /// Runs every client's reads at once: client `i` reads the records `shares[i]` in order,
    /// each read its own transaction. Returns what each client measured, in client order.
    /// - Throws: the engine's error, or ``BenchError`` when a record is missing.
    func readConcurrently(_ shares: [[Int]]) async throws -> [ClientRun]
    /// Closes the readers; the target is then used by one task again.
    /// - Throws: the engine's error.
    func closeReaders() async throws
}

/// What one client of the concurrent reads measured.
public struct ClientRun: Sendable {
    /// The latency of each of its reads.
    public var histogram = LatencyHistogram()
    /// When its first read started (CLOCK_MONOTONIC, nanoseconds).
    public var start: UInt64 = 0
    /// When its last read ended.
    public var end: UInt64 = 0

    /// Runs `read` on each of `share` in order, timing each call and the whole.
    /// - Throws: what `read` throws.
    static func measure(_ share: [Int], _ read: (Int) throws -> Void) rethrows -> ClientRun {
        var run = ClientRun()
        run.start = monotonicNanoseconds()
        var t0 = run.start
        for n in share {
            try read(n)
            let t1 = monotonicNanoseconds()
            run.histogram.record(t1 - t0)
            t0 = t1
        }
        run.end = t0
        return run
    }
}

/// One workload at one number of clients: the key of the concurrent-read figures.
struct ClientsKey: Hashable, Sendable {
    var workload: Workload
    var clients: Int
}

/// The workloads `--clients` runs concurrently: the read-only ones. Writers serialize on
/// one writer on every embedded engine, so concurrent writes would measure the lock.
let concurrentWorkloads: [Workload] = [.pointReads, .ycsbC]

/// Splits `reads` among `clients` round-robin: client `i` gets reads `i`, `i + clients`, ….
func shares(of reads: [Int], clients: Int) -> [[Int]] {
    var out = [[Int]](repeating: [], count: clients)
    for (i, n) in reads.enumerated() { out[i % clients].append(n) }
    return out
}

/// The concurrent reads of one round on `target`: for each read-only workload in `options`,
/// the same reads at each client count of ``BenchOptions/clientCounts`` (ascending in odd
/// rounds, descending in even ones), timed from the first read's start to the last one's end.
/// - Throws: the target's errors.
func measureConcurrentReads(_ target: any ConcurrentReadTarget, options: BenchOptions, round: Int, records: Int, inserted: Int) async throws -> [ClientsKey: Measurement] {
    var out: [ClientsKey: Measurement] = [:]
    let counts = round % 2 == 1 ? options.clientCounts : options.clientCounts.reversed()
    for workload in concurrentWorkloads where options.workloads.contains(workload) {
        let (ops, _) = OperationPlan(records: records, inserted: inserted).operations(workload, count: options.operations(workload, for: target.engine), seed: options.seed &+ UInt64(round))
        var reads: [Int] = []
        reads.reserveCapacity(ops.count)
        for op in ops {
            guard case .read(let n) = op else { throw BenchError("\(workload.label) is not read-only") }
            reads.append(n)
        }
        for clients in counts {
            try await target.openReaders(clients)
            let runs: [ClientRun]
            do {
                runs = try await target.readConcurrently(shares(of: reads, clients: clients))
            } catch {
                try? await target.closeReaders()
                throw error
            }
            try await target.closeReaders()
            // From the first client's first read to the last client's last: thread start-up
            // and task creation are not timed.
            let clientRuns = runs.filter { $0.histogram.count > 0 }
            let ns = (clientRuns.map(\.end).max() ?? 0) - (clientRuns.map(\.start).min() ?? 0)
            var merged = LatencyHistogram()
            for run in runs { merged.merge(run.histogram) }
            guard merged.count == UInt64(reads.count) else {
                throw BenchError("\(target.displayName): \(clients) clients made \(merged.count) of \(reads.count) reads")
            }
            out[ClientsKey(workload: workload, clients: clients)] = Measurement(operations: reads.count, nanoseconds: Double(ns), histogram: merged)
        }
    }
    return out
}

/// Runs `body(i)` for each `i` in `0..<count` on a thread of its own, all at once, and
/// returns their results in order once every thread has finished; the first error thrown
/// (by index) is rethrown. The raw baselines' clients: plain threads, as a hand-written
/// program would use, off Swift's cooperative pool. No `body` starts before every thread
/// is running (a spinning start barrier), so the first does not run alone.
func onThreads<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) throws -> T) async throws -> [T] {
    guard count > 0 else { return [] }
    let results = ThreadResults<T>(count)
    let finished: [Result<T, any Error>?] = await withCheckedContinuation { continuation in
        for i in 0..<count {
            let thread = Thread {
                results.ready.withLock { $0 += 1 }
                while results.ready.withLock({ $0 }) < count { sched_yield() }
                let value = Result { try body(i) }
                let done: [Result<T, any Error>?]? = results.slots.withLock { state in
                    state.values[i] = value
                    state.remaining -= 1
                    return state.remaining == 0 ? state.values : nil
                }
                if let done { continuation.resume(returning: done) }
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }
    var out: [T] = []
    out.reserveCapacity(count)
    for slot in finished {
        guard let slot else { throw BenchError("a reader thread gave no result") }
        out.append(try slot.get())
    }
    return out
}

/// A raw baseline's concurrent reads: client `i` reads `shares[i]` on a thread of its own
/// with `readers[i]` (a connection or handle only that thread uses), each read timed.
/// - Throws: ``BenchError`` when fewer readers are open than clients; what `read` throws.
func readOnThreads<Reader: Sendable>(_ readers: [Reader], _ shares: [[Int]], target: String, _ read: @escaping @Sendable (Reader, Int) throws -> Void) async throws -> [ClientRun] {
    guard shares.count <= readers.count else { throw BenchError("\(target): \(shares.count) clients but \(readers.count) readers open") }
    return try await onThreads(shares.count) { client in
        let reader = readers[client]
        return try ClientRun.measure(shares[client]) { try read(reader, $0) }
    }
}

/// What ``onThreads(_:_:)``'s threads have returned so far, and how many are still running.
private final class ThreadResults<T: Sendable>: Sendable {
    let slots: Locked<(remaining: Int, values: [Result<T, any Error>?])>
    /// Threads that have started (the start barrier).
    let ready = Locked(0)
    init(_ count: Int) { slots = Locked((count, Array(repeating: nil, count: count))) }
}

extension DepotStoreTarget: ConcurrentReadTarget {
    /// Nothing to open: Depot's clients share the open store (its driver's reader pool).
    public func openReaders(_ count: Int) async throws {}

    /// One task per client, each getting its records through the shared ``Collection``.
    public func readConcurrently(_ shares: [[Int]]) async throws -> [ClientRun] {
        let (_, collection) = try opened()
        let engine = self.engine
        return try await withThrowingTaskGroup(of: (Int, ClientRun).self) { group in
            for (client, share) in shares.enumerated() {
                group.addTask {
                    var run = ClientRun()
                    run.start = monotonicNanoseconds()
                    var t0 = run.start
                    for n in share {
                        guard try await collection.get(.string(YCSB.key(n))) != nil else { throw BenchError("\(engine): record \(n) is missing.") }
                        let t1 = monotonicNanoseconds()
                        run.histogram.record(t1 - t0)
                        t0 = t1
                    }
                    run.end = t0
                    return (client, run)
                }
            }
            var out = [ClientRun](repeating: ClientRun(), count: shares.count)
            for try await (client, run) in group { out[client] = run }
            return out
        }
    }

    public func closeReaders() async throws {}
}
