import Foundation
import NIOCore
import NIOPosix
@testable import RingRelayStore
import RingRelayTesting
import Synchronization
import Testing

/// The store's group commit: rounds of everyone who came while the last was written, each waiter
/// answered with its own result, from its own event loop.
@Suite(.timeLimit(.minutes(1))) struct GroupCommitTests {
    /// A gap between items longer than any machine has been up: every item after the first is one
    /// of a busy stream. (The first must still not be: with the time since boot taken for the time
    /// since the last item, a machine up less than the gap hung the busy-writer test.)
    static let alwaysBusy = TimeAmount.hours(24 * 365 * 100)

    /// Submits `items` to `commit` all at once, each from a task of its own; the task's value is
    /// each item's result, -1 for one that failed.
    static func submittingAtOnce(
        _ items: ClosedRange<Int>, to commit: GroupCommit<Int, Int>, write: @escaping GroupCommit<Int, Int>.Write
    ) -> Task<[Int: Int], any Error> {
        Task {
            try await withThrowingTaskGroup(of: (Int, Int).self) { group in
                for item in items { group.addTask { (item, (try? await commit.submit(item, write: write)) ?? -1) } }
                return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
        }
    }

    @Test func whoeverComesDuringARoundIsWrittenInTheNextTogether() async throws {
        let commit = GroupCommit<Int, Int>()
        let gate = Gate()
        let rounds = Mutex<[[Int]]>([])
        let write: GroupCommit<Int, Int>.Write = { items in
            rounds.withLock { $0.append(items) }
            if items == [0] { await gate.wait() }
            return items.map { $0 == 3 ? .failure(CancellationError()) : .success($0 * 10) }
        }
        async let first = commit.submit(0, write: write)
        while rounds.withLock({ $0.isEmpty }) { await Task.yield() }
        let later = Self.submittingAtOnce(1...4, to: commit, write: write)
        // All four queue behind the first round.
        while commit.waitingCount < 4 { try await Task.sleep(for: .milliseconds(5)) }
        gate.open()
        #expect(try await first == 0)
        let results = try await later.value
        #expect(results == [1: 10, 2: 20, 3: -1, 4: 40], "each its own result; one item's failure is its own")
        #expect(rounds.withLock { $0.count } == 2)
        #expect(rounds.withLock { $0.last.map(Set.init) } == [1, 2, 3, 4])
    }

    @Test func aBusyWriterTakesWhoeverCameWhileQueuedWorkRanIntoItsOwnRound() async throws {
        // Under load the writer of a new round first lets the work queued on its thread run (the
        // other requests of its event-loop tick), and whoever submitted meanwhile is in its round.
        let queuedWorkRuns = Gate()
        let entered = Mutex(false)
        let commit = GroupCommit<Int, Int>(
            busyGap: Self.alwaysBusy,
            letQueuedWorkRun: {
                entered.withLock { $0 = true }
                await queuedWorkRuns.wait()
            })
        let rounds = Mutex<[[Int]]>([])
        let write: GroupCommit<Int, Int>.Write = { items in
            rounds.withLock { $0.append(items) }
            return items.map { $0 == 3 ? .failure(CancellationError()) : .success($0 * 10) }
        }
        // The first item of all finds the store idle: written at once, without letting anything in.
        #expect(try await commit.submit(0, write: write) == 0)
        #expect(!entered.withLock { $0 })
        async let first = commit.submit(1, write: write)
        while !entered.withLock({ $0 }) { await Task.yield() }
        let later = Self.submittingAtOnce(2...4, to: commit, write: write)
        while commit.waitingCount < 3 { try await Task.sleep(for: .milliseconds(5)) }
        queuedWorkRuns.open()
        #expect(try await first == 10)
        #expect(try await later.value == [2: 20, 3: -1, 4: 40], "each its own result; one item's failure is its own")
        let written = rounds.withLock { $0 }
        #expect(written.count == 2, "one round for the four: \(written)")
        #expect(written.last?.first == 1 && written.last.map(Set.init) == [1, 2, 3, 4])
    }

    @Test func itemsFarApartAreWrittenAtOnce() async throws {
        let waits = Mutex(0)
        let write: GroupCommit<Int, Int>.Write = { items in items.map { .success($0) } }
        let spaced = GroupCommit<Int, Int>(busyGap: .zero, letQueuedWorkRun: { waits.withLock { $0 += 1 } })
        for item in 0..<3 { #expect(try await spaced.submit(item, write: write) == item) }
        #expect(waits.withLock { $0 } == 0, "an idle store's writer lets nothing in first")
        let close = GroupCommit<Int, Int>(busyGap: Self.alwaysBusy, letQueuedWorkRun: { waits.withLock { $0 += 1 } })
        for item in 0..<3 { #expect(try await close.submit(item, write: write) == item) }
        #expect(waits.withLock { $0 } == 2, "every writer after the first lets queued work run")
    }

    @Test func aWaiterGoesOnFromTheEventLoopItCameFrom() async throws {
        // Under `EventLoopGlobalExecutor` a task continues where it is resumed: a waiter resumed
        // by the round's writer would go on on the writer's loop. So it is resumed from its own,
        // here a loop the test keeps busy: until that loop is free, the waiter is not answered.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let home = group.next()
        let commit = GroupCommit<Int, Int>(currentLoop: { home })
        let gate = Gate()
        let started = Mutex(false)
        let write: GroupCommit<Int, Int>.Write = { items in
            if items == [0] {
                started.withLock { $0 = true }
                await gate.wait()
            }
            return items.map { .success($0) }
        }
        async let first = commit.submit(0, write: write)
        while !started.withLock({ $0 }) { await Task.yield() }
        let answered = Mutex(false)
        let waiter = Task {
            let result = try await commit.submit(1, write: write)
            answered.withLock { $0 = true }
            return result
        }
        while commit.waitingCount < 1 { try await Task.sleep(for: .milliseconds(5)) }
        // The home loop is busy until `free` is signalled.
        let free = DispatchSemaphore(value: 0)
        let busy = home.submit { free.wait() }
        gate.open()
        #expect(try await first == 0)
        try await Task.sleep(for: .milliseconds(200))
        #expect(!answered.withLock { $0 }, "answered while its event loop was busy: not resumed from there")
        free.signal()
        try await busy.get()
        #expect(try await waiter.value == 1)
        try await group.shutdownGracefully()
    }
}
