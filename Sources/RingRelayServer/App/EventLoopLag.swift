import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

/// How late the event loops run their work: every request, ring and task of the server runs on
/// them (see `EventLoopGlobalExecutor`), so when the CPU cannot keep up, this is where the line
/// forms, and a new call would wait in it before a byte of it is read.
///
/// Each loop runs a timer every ``interval``; how much later than asked it fires is that loop's
/// lateness. A loop's lag is the least lateness of its last ``window`` timers, so one long task or
/// a burst that clears does not count, only a line that stands; or, when its timer is overdue
/// now, how long overdue: a loop that never gets to its timers (NIO runs a chain of tasks before
/// any timer) reports no lateness until it does. ``lag`` is the largest of the loops'. A measure
/// costs one timer a loop per interval.
final class EventLoopLag: Service, Sendable {
    private struct Timer {
        var expected: NIODeadline
        /// The latest latenesses, in nanoseconds, oldest first.
        var latest: [Int64] = []
    }

    private let timers: Mutex<[Timer]>
    private let loops: [any EventLoop]
    static let interval: TimeAmount = .milliseconds(50)
    static let window = 5

    init(group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        loops = Array(group.makeIterator())
        // Nothing is expected until it runs.
        timers = Mutex(loops.map { _ in Timer(expected: .distantFuture) })
    }

    /// The largest of the loops' standing lateness.
    var lag: Duration {
        let now = NIODeadline.now()
        let nanoseconds: Int64 = timers.withLock { timers in
            timers.map { (timer: Timer) -> Int64 in
                let standing: Int64 = timer.latest.count < Self.window ? 0 : timer.latest.min() ?? 0
                let overdue: Int64 = now > timer.expected ? (now - timer.expected).nanoseconds : 0
                return max(standing, overdue)
            }.max() ?? 0
        }
        return .nanoseconds(nanoseconds)
    }

    func run() async throws {
        let start = NIODeadline.now() + Self.interval
        timers.withLock { timers in for index in timers.indices { timers[index] = Timer(expected: start) } }
        let repeated = loops.indices.map { index in
            loops[index].scheduleRepeatedTask(initialDelay: Self.interval, delay: Self.interval) { _ in
                let now = NIODeadline.now()
                self.timers.withLock { timers in
                    timers[index].latest.append(max(0, (now - timers[index].expected).nanoseconds))
                    if timers[index].latest.count > Self.window { timers[index].latest.removeFirst() }
                    timers[index].expected = now + Self.interval
                }
            }
        }
        defer {
            for timer in repeated { timer.cancel() }
            timers.withLock { timers in for index in timers.indices { timers[index] = Timer(expected: .distantFuture) } }
        }
        // Measures until the server stops.
        try? await gracefulShutdown()
    }
}
