import Foundation

/// An asynchronous sequence of query results that never holds more than a small buffer.
///
/// Drivers make one in two ways:
/// - from records already in memory: `RecordStream(records)`;
/// - from a producer that runs on the driver's own thread and hands records to a
///   ``RecordSink``; the sink blocks the producer while the buffer is full, so memory
///   stays bounded however many records the query has.
///
/// ```swift
/// for try await record in driver.stream(Query(), from: users) { print(record.id) }
/// ```
///
/// Ending the loop early (or cancelling the task) stops the producer at its next `send`.
public struct RecordStream: AsyncSequence, Sendable {
    /// Each element is one query result.
    public typealias Element = Record

    private enum Source: Sendable {
        case records([Record])
        case deferred(@Sendable () async throws -> [Record])
        case channel(@Sendable () -> RecordChannel)
        case failure(DepotError)
    }

    private let source: Source

    /// A stream over records already in memory.
    public init(_ records: [Record]) { source = .records(records) }

    /// A stream over records that `load` computes in memory when iteration starts (for a
    /// driver that cannot take its snapshot when the stream is made).
    public init(deferred load: @escaping @Sendable () async throws -> [Record]) { source = .deferred(load) }

    /// A stream that fails at once with `error`.
    public init(failing error: DepotError) { source = .failure(error) }

    /// A stream fed by `produce`, started when iteration starts.
    ///
    /// `produce` runs in a new task; it should hop to the driver's own thread (for example
    /// through the driver's `read`) and call ``RecordSink/send(_:)`` for each record.
    /// `send` blocks while `bufferSize` records wait, so never call it on the
    /// cooperative thread pool. Return normally to end the stream; throw to fail it.
    public init(bufferSize: Int = 256, produce: @escaping @Sendable (RecordSink) async throws -> Void) {
        source = .channel {
            let channel = RecordChannel(capacity: Swift.max(1, bufferSize))
            Task {
                do {
                    try await produce(RecordSink(channel: channel))
                    channel.finish(nil)
                } catch {
                    channel.finish(error)
                }
            }
            return channel
        }
    }

    /// Begins iterating; a stream fed by a producer starts its producer here, not when the
    /// stream is made.
    public func makeAsyncIterator() -> AsyncIterator {
        switch source {
        case .records(let records): return AsyncIterator(state: .records(records, 0))
        case .deferred(let load): return AsyncIterator(state: .deferred(load))
        case .failure(let error): return AsyncIterator(state: .failure(error))
        case .channel(let start): return AsyncIterator(state: .channel(ChannelHandle(start())))
        }
    }

    /// Iterates the stream's results in the query's order.
    public struct AsyncIterator: AsyncIteratorProtocol {
        enum State {
            case records([Record], Int)
            case deferred(@Sendable () async throws -> [Record])
            case channel(ChannelHandle)
            case failure(DepotError)
            case done
        }
        var state: State

        /// The next result, or `nil` at the end.
        /// - Throws: the error the stream failed with (for example the driver's, or
        ///   `.invalidQuery`); after it, the stream ends.
        public mutating func next() async throws -> Record? {
            switch state {
            case .deferred(let load):
                do {
                    state = .records(try await load(), 0)
                } catch {
                    state = .done
                    throw error
                }
                return try await next()
            case .records(let records, let index):
                guard index < records.count else { state = .done; return nil }
                state = .records(records, index + 1)
                return records[index]
            case .channel(let handle):
                let record = try await handle.channel.next()
                if record == nil { state = .done }
                return record
            case .failure(let error):
                state = .done
                throw error
            case .done:
                return nil
            }
        }
    }

    /// Cancels the producer when the iterator goes away.
    final class ChannelHandle: Sendable {
        let channel: RecordChannel
        init(_ channel: RecordChannel) { self.channel = channel }
        deinit { channel.cancel() }
    }
}

/// Where a producer hands records to a ``RecordStream``.
public struct RecordSink: Sendable {
    let channel: RecordChannel

    /// Hands one record to the consumer, blocking while the buffer is full.
    /// - Throws: `CancellationError` once the consumer has stopped; stop producing then.
    public func send(_ record: Record) throws { try channel.send(record) }
}

/// A bounded single-producer single-consumer queue: the producer blocks (it runs on a
/// driver thread), the consumer suspends.
final class RecordChannel: @unchecked Sendable {
    // @unchecked: every stored property below is read and written only while `condition`
    // is locked; continuations are resumed after unlocking.
    private let condition = NSCondition()
    private var buffer: [Record] = []
    private var head = 0
    private var finished = false
    private var failure: (any Error)?
    private var cancelled = false
    private var waiter: CheckedContinuation<Void, Never>?
    private let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    func send(_ record: Record) throws {
        condition.lock()
        while buffer.count - head >= capacity && !cancelled { condition.wait() }
        if cancelled {
            condition.unlock()
            throw CancellationError()
        }
        if head > capacity {
            buffer.removeFirst(head)
            head = 0
        }
        buffer.append(record)
        let toResume = waiter
        waiter = nil
        condition.unlock()
        toResume?.resume()
    }

    func finish(_ error: (any Error)?) {
        condition.lock()
        finished = true
        if failure == nil, let error, !(error is CancellationError && cancelled) { failure = error }
        let toResume = waiter
        waiter = nil
        condition.unlock()
        toResume?.resume()
    }

    func cancel() {
        condition.lock()
        cancelled = true
        let toResume = waiter
        waiter = nil
        condition.broadcast()
        condition.unlock()
        toResume?.resume()
    }

    private enum Take {
        case record(Record)
        case end
        case failed(any Error)
        case wait
    }

    /// Takes the next buffered record, or says why there is none. Synchronous: locks briefly.
    private func take() -> Take {
        condition.lock()
        defer { condition.unlock() }
        if head < buffer.count {
            let record = buffer[head]
            head += 1
            condition.signal()
            return .record(record)
        }
        if finished {
            let error = failure
            failure = nil
            return error.map { .failed($0) } ?? .end
        }
        if cancelled { return .failed(CancellationError()) }
        return .wait
    }

    /// Parks `continuation` until something arrives; resumes it at once if something already has.
    private func park(_ continuation: CheckedContinuation<Void, Never>) {
        condition.lock()
        if head < buffer.count || finished || cancelled {
            condition.unlock()
            continuation.resume()
        } else {
            waiter = continuation
            condition.unlock()
        }
    }

    func next() async throws -> Record? {
        while true {
            try Task.checkCancellation()
            switch take() {
            case .record(let record): return record
            case .end: return nil
            case .failed(let error): throw error
            case .wait:
                await withTaskCancellationHandler {
                    await withCheckedContinuation { park($0) }
                } onCancel: {
                    self.cancel()
                }
            }
        }
    }
}
