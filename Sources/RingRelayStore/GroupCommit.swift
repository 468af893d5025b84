import Synchronization

/// Runs submitted items in rounds, one round at a time: everything submitted while a round is
/// written goes in the next one. Under load one statement and one commit serve many callers;
/// alone, a caller writes its own item at once, in its own task, with no hop to another.
///
/// A `write` gets a round's items in submission order and answers one result per item, in the same
/// order (a failure of the whole round is every item's failure). Every submission passes the same
/// write; a round is written with its first item's.
final class GroupCommit<Item: Sendable, Output: Sendable>: Sendable {
    typealias Write = @Sendable ([Item]) async -> [Result<Output, any Error>]

    private struct State {
        var waiting: [(item: Item, write: Write, continuation: CheckedContinuation<Output, any Error>)] = []
        /// Whether a round is being written (by a caller, or by a task draining the waiters).
        var writing = false
    }

    private let state = Mutex(State())

    init() {}

    /// Writes `item` in the next round and returns its result.
    func submit(_ item: Item, write: @escaping Write) async throws -> Output {
        let leads = state.withLock { state in
            defer { state.writing = true }
            return !state.writing
        }
        if leads {
            // Nothing was being written: this caller writes its item (with any that came meanwhile).
            let others = state.withLock { state in
                defer { state.waiting.removeAll(keepingCapacity: true) }
                return state.waiting
            }
            let results = await write([item] + others.map(\.item))
            for (other, result) in zip(others, results.dropFirst()) { other.continuation.resume(with: result) }
            handOff()
            return try results[0].get()
        }
        return try await withCheckedThrowingContinuation { continuation in
            let startDrain = state.withLock { state in
                state.waiting.append((item, write, continuation))
                // The round being written ended in between: nobody would take this item.
                defer { state.writing = true }
                return !state.writing
            }
            if startDrain { Task { await self.drain() } }
        }
    }

    /// After a caller's round: whoever came meanwhile is written by a task of its own, so the
    /// caller is not held up by later rounds.
    private func handOff() {
        let more = state.withLock { state in
            if state.waiting.isEmpty { state.writing = false }
            return state.writing
        }
        if more { Task { await self.drain() } }
    }

    /// Writes round after round until nobody waits.
    private func drain() async {
        while true {
            let round = state.withLock { state in
                defer { state.waiting.removeAll(keepingCapacity: true) }
                if state.waiting.isEmpty { state.writing = false }
                return state.waiting
            }
            guard !round.isEmpty else { return }
            let results = await round[0].write(round.map(\.item))
            for (waiter, result) in zip(round, results) { waiter.continuation.resume(with: result) }
        }
    }
}
