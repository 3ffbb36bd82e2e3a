import DepotCore
import Foundation
import Synchronization
import Testing

@Suite("SplitMix64: the one seeded generator")
struct SplitMix64Tests {
    @Test("the sequence is pinned: recorded seeds must keep replaying")
    func pinnedSequence() {
        // Seed 0 gives the reference implementation's published first values.
        var zero = SplitMix64(seed: 0)
        #expect(zero.next() == 0xE220_A839_7B1D_CDAF)
        #expect(zero.next() == 0x6E78_9E6A_A1B9_65F4)
        #expect(zero.next() == 0x06C4_5D18_8009_454F)
        var fortyTwo = SplitMix64(seed: 42)
        #expect(fortyTwo.next() == 0xBDD7_3226_2FEB_6E95)
        #expect(fortyTwo.next() == 0x28EF_E333_B266_F103)
    }

    @Test("nextUnit is the top 53 bits of next() scaled into 0..<1")
    func unitInterval() {
        var a = SplitMix64(seed: 42)
        var b = SplitMix64(seed: 42)
        for _ in 0..<1000 {
            let unit = a.nextUnit()
            #expect(unit == Double(b.next() >> 11) / Double(1 << 53))
            #expect(unit >= 0 && unit < 1)
        }
    }

    @Test("uniform stays in its range and replays for the same seed")
    func uniformReplays() {
        var a = SplitMix64(seed: 7)
        var b = SplitMix64(seed: 7)
        for _ in 0..<1000 {
            let value = a.uniform(3...9)
            #expect((3...9).contains(value))
            #expect(value == Int.random(in: 3...9, using: &b))
        }
    }
}

/// How many of a test's tasks have finished.
private final class FinishedCount: Sendable {
    let count = Atomic<Int>(0)
    /// Jobs that have run, across the tasks: the stall check's sign of progress.
    let jobs = Atomic<Int>(0)
}

@Suite("BlockingExecutor: the drivers' threads")
struct BlockingExecutorTests {
    struct Boom: Error {}

    @Test("one worker runs jobs one at a time in submission order")
    func fifoOnOneWorker() async throws {
        let executor = BlockingExecutor(name: "test.fifo", closedMessage: "closed")
        defer { executor.stop() }
        let order = Locked<[Int]>([])
        for n in 0..<200 { executor.submit { order.withLock { $0.append(n) } } }
        let last = try await executor.run { order.withLock { $0.count } }
        #expect(last == 200)
        #expect(order.withLock { $0 } == Array(0..<200))
    }

    @Test("run returns the result or rethrows the error of its closure")
    func resultsAndErrors() async throws {
        let executor = BlockingExecutor(name: "test.results", closedMessage: "closed")
        defer { executor.stop() }
        #expect(try await executor.run { 6 * 7 } == 42)
        await #expect(throws: Boom.self) { try await executor.run { () throws -> Int in throw Boom() } }
        #expect(try executor.runBlocking { "plain thread" } == "plain thread")
    }

    @Test("jobs run off the caller's thread; only the worker itself is isCurrent")
    func isCurrent() async throws {
        let executor = BlockingExecutor(name: "test.current", closedMessage: "closed")
        defer { executor.stop() }
        #expect(try await executor.run { executor.isCurrent })
        #expect(!executor.isCurrent)
        let pool = BlockingExecutor(name: "test.pool", workers: 2, closedMessage: "closed")
        defer { pool.stop() }
        #expect(try await pool.run { pool.isCurrent } == false)
    }

    @Test("stop lets queued jobs finish, then refuses new ones with .closed")
    func stopDrainsThenRefuses() async throws {
        let executor = BlockingExecutor(name: "test.stop", closedMessage: "The test store is closed.")
        let gate = DispatchSemaphore(value: 0)
        let ran = Locked(0)
        executor.submit { gate.wait() }
        for _ in 0..<10 { executor.submit { ran.withLock { $0 += 1 } } }
        executor.stop()
        let accepted = executor.submit {}
        #expect(!accepted)
        gate.signal()
        do {
            _ = try await executor.run { 1 }
            Issue.record("a stopped executor ran a job")
        } catch let error as DepotError {
            #expect(error.code == .closed)
            #expect(error.message == "The test store is closed.")
        }
        #expect(throws: DepotError.self) { try executor.runBlocking { 1 } }
        // The ten queued jobs still run.
        let deadline = ContinuousClock.now + .seconds(10)
        while ran.withLock({ $0 }) < 10 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(ran.withLock { $0 } == 10)
    }

    @Test("several workers run jobs side by side")
    func workersRunConcurrently() async throws {
        let pool = BlockingExecutor(name: "test.side", workers: 4, closedMessage: "closed")
        defer { pool.stop() }
        // The first job waits for the second: with one worker this would never finish.
        let second = DispatchSemaphore(value: 0)
        async let first: Bool = pool.run { second.wait(timeout: .now() + 10) == .success }
        _ = try await pool.run { second.signal() }
        #expect(try await first)
    }

    /// Every `run` below waits for its job, so the workers park between jobs and each
    /// submission races a worker going to sleep. A lost wake-up leaves a job queued while
    /// every worker sleeps, and then no job runs any more; the check watches for that state
    /// and fails when it holds, with not one job run, for 2 s (a signal on its way takes
    /// microseconds, a descheduled submitter milliseconds), then `stop()` wakes the workers
    /// so the stuck jobs run and the test ends. Only that state counts, not the time the
    /// tasks take: in a full test run other tests hold the cooperative pool for tens of
    /// seconds, this watcher included, and two looks at the state on either side of such a
    /// pause, each catching a job on its way, are not a stall when jobs ran in between.
    /// (The signal is sent after the queue's lock is released: Docs/SQLiteDriver.md,
    /// "The hand-off".)
    @Test("a job queued while its worker parks is never lost")
    func noLostWakeUps() async throws {
        let perTask = 1_000
        for workers in [1, 2] {
            let executor = BlockingExecutor(name: "test.wake", workers: workers, closedMessage: "closed")
            let finished = FinishedCount()
            let tasks = (0..<4).map { t in
                Task {
                    var sum = 0
                    for i in 0..<perTask {
                        sum += try await executor.run {
                            finished.jobs.add(1, ordering: .relaxed)
                            return i * 4 + t
                        }
                    }
                    finished.count.add(1, ordering: .relaxed)
                    return sum
                }
            }
            // When the stuck-looking state was first seen, and how many jobs had run then.
            var stalledSince: (instant: ContinuousClock.Instant, jobs: Int)?
            var stalled = false
            while finished.count.load(ordering: .relaxed) < tasks.count {
                let jobs = finished.jobs.load(ordering: .relaxed)
                if !executor.isIdle && executor.parkedWorkers == workers {
                    if let since = stalledSince, since.jobs == jobs {
                        if ContinuousClock.now - since.instant > .seconds(2) {
                            stalled = true
                            break
                        }
                    } else {
                        stalledSince = (ContinuousClock.now, jobs)
                    }
                } else {
                    stalledSince = nil
                }
                try await Task.sleep(for: .milliseconds(1))
            }
            #expect(!stalled, "\(workers) worker(s): a job stayed queued for 2 s while every worker waited")
            executor.stop()
            if stalled {
                for task in tasks { _ = await task.result }
                continue
            }
            var total = 0
            for task in tasks { total += try await task.value }
            // The jobs return 0 ..< 4 * perTask, each once.
            #expect(total == (0..<(4 * perTask)).reduce(0, +), "\(workers) worker(s)")
        }
    }

    @Test("a task that prefers the executor runs on its worker")
    func taskExecutorPreference() async throws {
        let executor = BlockingExecutor(name: "test.task", closedMessage: "closed")
        defer { executor.stop() }
        let onWorker = await withTaskExecutorPreference(executor) { executor.isCurrent }
        #expect(onWorker)
    }
}
