import NIOCore
import NIOPosix
import Synchronization

/// Runs submitted items in rounds, one round at a time: everything submitted while a round is
/// written goes in the next one. Under load one statement and one commit serve many callers;
/// alone, a caller writes its own item at once, in its own task, with no hop to another. When
/// items come close together, the caller that starts a round first lets the work queued on its
/// thread run — under `EventLoopGlobalExecutor`, the other requests its event loop read in the same
/// tick — so that they join its round rather than each commit alone (docs/BENCHMARKS.md).
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
        /// When the last item was submitted; `nil` before the first.
        var lastSubmission: NIODeadline?
    }

    private struct Waiter {
        var item: Item
        var write: Write
        var continuation: CheckedContinuation<Output, any Error>
        /// The event loop the submitter ran on: it resumes there.
        var home: (any EventLoop)?
    }

    private let state = Mutex(State())
    /// Items submitted less than this apart make a busy store, where a writer lets the work
    /// queued behind it run first.
    private let busyGap: TimeAmount
    /// Lets the work queued on the calling thread run, and comes back.
    private let letQueuedWorkRun: @Sendable () async -> Void
    /// The event loop the calling thread runs, if it is one.
    private let currentLoop: @Sendable () -> (any EventLoop)?

    /// - Parameters:
    ///   - busyGap: submissions closer together than this make the store busy (tests set it).
    ///   - letQueuedWorkRun: what a busy writer awaits before it takes its round (tests wait for
    ///     waiters instead of the thread's queue).
    ///   - currentLoop: the event loop the calling thread runs (tests name one).
    init(
        busyGap: TimeAmount = .microseconds(100),
        letQueuedWorkRun: @escaping @Sendable () async -> Void = { await Task.yield() },
        currentLoop: @escaping @Sendable () -> (any EventLoop)? = { MultiThreadedEventLoopGroup.currentEventLoop }
    ) {
        self.busyGap = busyGap
        self.letQueuedWorkRun = letQueuedWorkRun
        self.currentLoop = currentLoop
    }

    /// How many submissions wait for the next round.
    var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// Writes `item` in the next round and returns its result.
    func submit(_ item: Item, write: @escaping Write) async throws -> Output {
        let now = NIODeadline.now()
        let (leads, busy) = state.withLock { state in
            defer {
                state.writing = true
                state.lastSubmission = now
            }
            // Not `distantPast` for "never": that is the machine's boot, and a store opened less
            // than `busyGap` after it would take its first item for one of a busy stream.
            return (!state.writing, state.lastSubmission.map { now - $0 < busyGap } ?? false)
        }
        if leads {
            // Nothing was being written, so nobody waits either (a waiter always has a writer):
            // this caller writes. When items are coming close together, it first lets the work
            // already queued on its thread run: the other requests read in the same event-loop
            // tick reach here meanwhile and join its round, instead of each committing alone, one
            // after the other. (Alone, it writes at once: waiting would only let an item from
            // another loop join now and then, and answering that one from here costs a wake-up.)
            if busy { await letQueuedWorkRun() }
            let joined = takeWaiting(stoppingIfNone: false)
            let results = await Self.run(write, [item] + joined.map(\.item))
            resume(joined, with: results.dropFirst())
            handOff()
            return try results[0].get()
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

    /// The waiters so far, taken for a round. With `stoppingIfNone`, finding none ends the
    /// writing in the same step, so that the next submitter writes.
    private func takeWaiting(stoppingIfNone: Bool) -> [Waiter] {
        state.withLock { state in
            defer { state.waiting.removeAll(keepingCapacity: true) }
            if stoppingIfNone, state.waiting.isEmpty { state.writing = false }
            return state.waiting
        }
    }

    /// Writes round after round until nobody waits.
    private func drain() async {
        while true {
            let round = takeWaiting(stoppingIfNone: true)
            guard !round.isEmpty else { return }
            resume(round, with: await Self.run(round[0].write, round.map(\.item)))
        }
    }

    /// Answers each waiter of a round with its result, from its own event loop (see above).
    private func resume(_ waiters: [Waiter], with results: some Collection<Result<Output, any Error>>) {
        for (waiter, result) in zip(waiters, results) {
            if let home = waiter.home, !home.inEventLoop {
                home.execute { waiter.continuation.resume(with: result) }
            } else {
                waiter.continuation.resume(with: result)
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
