import DepotCore

/// Group commit for single write requests (Docs/Server.md, "Group commit").
///
/// A write request that arrives while another's transaction is running waits, and the waiting
/// ones then run together in the next transaction, applied as a batch's entries are
/// (``RequestHandler/applyAll(_:)``): each is answered exactly as it would have been alone, a
/// failing one takes no other with it, and none is answered before the transaction holding it
/// has committed. Under concurrent writers this turns many small commits (each writing its own
/// pages to SQLite's log, or syncing a file at durability full) into a few larger ones.
///
/// There is no timer: a request that finds no transaction running starts one at once, so a
/// lone writer waits for nothing.
final class WriteGroup: Sendable {
    /// At most this many requests share one transaction.
    static let maximumGroup = 128

    private enum Turn {
        /// The write was applied in another request's group: its answer.
        case answered(WireResponse)
        /// This request runs the next group (its own entry among them).
        case lead(Int)
    }

    private struct Waiting {
        var id: Int
        var write: PlannedWrite
        var turn: CheckedContinuation<Turn, Never>
    }

    private struct State {
        var waiting: [Waiting] = []
        var running = false
        var nextID = 0
    }

    private let state = Locked(State())

    /// How many requests wait for the next group (for tests).
    var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// Applies `write` alone or in a group and returns its answer; `apply` runs a group
    /// (``RequestHandler/applyAll(_:)``), answers in the order of the writes given.
    func submit(_ write: PlannedWrite, _ apply: @escaping @Sendable ([PlannedWrite]) async -> [WireResponse]) async -> WireResponse {
        let turn: Turn = await withCheckedContinuation { continuation in
            let lead: Int? = state.withLock { state in
                let id = state.nextID
                state.nextID &+= 1
                state.waiting.append(Waiting(id: id, write: write, turn: continuation))
                if state.running { return nil }
                state.running = true
                return id
            }
            if let lead { continuation.resume(returning: .lead(lead)) }
        }
        switch turn {
        case .answered(let response): return response
        case .lead(let id): return await lead(id, apply)
        }
    }

    /// Runs the waiting writes (the leader's `id` among them) as one group, answers the
    /// others, and hands the lead to the first that arrived meanwhile.
    private func lead(_ id: Int, _ apply: @escaping @Sendable ([PlannedWrite]) async -> [WireResponse]) async -> WireResponse {
        let group: [Waiting] = state.withLock { state in
            let count = min(state.waiting.count, WriteGroup.maximumGroup)
            let group = Array(state.waiting.prefix(count))
            state.waiting.removeFirst(count)
            return group
        }
        let writes = group.map(\.write)
        // A group holding other requests runs in a task of its own: the leader's request
        // being cancelled (its client gone) must not reach the writes of the others.
        let answers = writes.count == 1 ? await apply(writes) : await Task { await apply(writes) }.value
        var own: WireResponse?
        for (index, waiting) in group.enumerated() {
            let answer = index < answers.count ? answers[index] : WireResponse.internalFailure
            if waiting.id == id { own = answer } else { waiting.turn.resume(returning: .answered(answer)) }
        }
        let next: Waiting? = state.withLock { state in
            if let first = state.waiting.first { return first }
            state.running = false
            return nil
        }
        if let next { next.turn.resume(returning: .lead(next.id)) }
        return own ?? WireResponse.internalFailure
    }
}
