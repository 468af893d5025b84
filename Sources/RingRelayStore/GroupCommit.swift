import NIOCore
import NIOPosix
import Synchronization

/// Runs submitted items in rounds, one round at a time: everything submitted while a round is
/// written goes in the next one. Under load one statement and one commit serve many callers;
/// alone, a caller writes its own item at once, in its own task, with no hop to another.
///
/// A `write` gets a round's items in submission order and answers one result per item, in the same
/// order; if it throws, the whole round failed and every item gets that error. Every submission
/// passes the same write; a round is written with its first item's.
///
/// A waiter is resumed from the event loop it submitted on, not from the one that wrote its round:
/// a task continues where it is woken (`EventLoopGlobalExecutor`), so otherwise every caller of a
/// round would go on, to its push and its HTTP answer, on the writer's loop, and answer through
/// a hop back to its connection's, while its own loop idled: at full speed, resumed from their own
/// loops, webhooks per second rose in 7 of 8 alternating pairs, by 11 % at the median (docs/BENCHMARKS.md).
final class GroupCommit<Item: Sendable, Output: Sendable>: Sendable {
    typealias Write = @Sendable ([Item]) async throws -> [Result<Output, any Error>]

    private struct State {
        var waiting: [Waiter] = []
        /// Whether a round is being written (by a caller, or by a task draining the waiters).
        var writing = false
    }

    private struct Waiter {
        var item: Item
        var write: Write
        var continuation: CheckedContinuation<Output, any Error>
        /// The event loop the submitter ran on: it resumes there.
        var home: (any EventLoop)?
    }

    private let state = Mutex(State())
    /// The event loop the calling thread runs, if it is one.
    private let currentLoop: @Sendable () -> (any EventLoop)?

    /// - Parameter currentLoop: the event loop the calling thread runs (tests name one).
    init(currentLoop: @escaping @Sendable () -> (any EventLoop)? = { MultiThreadedEventLoopGroup.currentEventLoop }) {
        self.currentLoop = currentLoop
    }

    /// How many submissions wait for the next round.
    var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// Writes `item` in the next round and returns its result.
    func submit(_ item: Item, write: @escaping Write) async throws -> Output {
        let leads = state.withLock { state in
            defer { state.writing = true }
            return !state.writing
        }
        if leads {
            // Nothing was being written, so nobody waits either (a waiter always has a writer):
            // this caller writes its own item, at once.
            let result = await Self.run(write, [item])[0]
            handOff()
            return try result.get()
        }
        return try await withCheckedThrowingContinuation { continuation in
            let home = currentLoop()
            let startDrain = state.withLock { state in
                state.waiting.append(Waiter(item: item, write: write, continuation: continuation, home: home))
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
            let results = await Self.run(round[0].write, round.map(\.item))
            for (waiter, result) in zip(round, results) {
                // Each waiter goes on from its own event loop (see above).
                if let home = waiter.home, !home.inEventLoop {
                    home.execute { waiter.continuation.resume(with: result) }
                } else {
                    waiter.continuation.resume(with: result)
                }
            }
        }
    }

    /// One round: the write's results, or its error for every item.
    private static func run(_ write: Write, _ items: [Item]) async -> [Result<Output, any Error>] {
        do {
            return try await write(items)
        } catch {
            return items.map { _ in .failure(error) }
        }
    }
}
