import NIOCore
import NIOPosix
import RingRelayCore
import ServiceLifecycle
import Synchronization

/// Whether the event loops still get to their timers: every request, ring and task of the
/// server runs on them (see `EventLoopGlobalExecutor`), and a loop kept busy by a chain of work
/// runs no timer until the chain ends (NIO runs its queued tasks before any timer).
///
/// Each loop runs a timer every ``interval``; ``overdue`` is how long the most late loop's
/// current timer is past due. A loop merely slowed by its load still fires its timers, a little
/// late, and its calls' own times show that (`CallTimes`); this sees a loop that stopped. A
/// measure costs one timer a loop per interval.
final class EventLoopLag: Service, Sendable, DescribedByNameOnly {
    /// When each loop's next timer is due.
    private let expected: Mutex<[NIODeadline]>
    private let loops: [any EventLoop]
    static let interval: TimeAmount = .milliseconds(50)

    init(group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        loops = Array(group.makeIterator())
        // Nothing is due until it runs.
        expected = Mutex(loops.map { _ in .distantFuture })
    }

    /// The longest any loop's current timer is past due; zero when every loop is on time.
    var overdue: Duration {
        let now = NIODeadline.now()
        let nanoseconds: Int64 = expected.withLock { expected in
            expected.map { due -> Int64 in now > due ? (now - due).nanoseconds : 0 }.max() ?? 0
        }
        return .nanoseconds(nanoseconds)
    }

    func run() async throws {
        let start = NIODeadline.now() + Self.interval
        expected.withLock { expected in for index in expected.indices { expected[index] = start } }
        let repeated = loops.indices.map { index in
            loops[index].scheduleRepeatedTask(initialDelay: Self.interval, delay: Self.interval) { _ in
                let next = NIODeadline.now() + Self.interval
                self.expected.withLock { $0[index] = next }
            }
        }
        defer {
            for timer in repeated { timer.cancel() }
            expected.withLock { expected in for index in expected.indices { expected[index] = .distantFuture } }
        }
        // Measures until the server stops.
        try? await gracefulShutdown()
    }
}
