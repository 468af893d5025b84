import Logging
import RingRelayCore
import Synchronization

/// Refuses new calls while the server is behind, so that a call answered `201` is one it can
/// ring in time.
///
/// Four lines are watched: the event loops' (whether they still run their timers,
/// ``EventLoopLag``), the database's (how long the request first in line for a connection has
/// waited, ``DataStore/queueDelay``), the instances' bus (how long this instance's own notices
/// take to come back, ``ClusterBus/lag``; relayed rings and their acknowledgements travel the same
/// way), and the calls' own: the least time any of the last second's `POST /v1/calls` took to
/// start ringing (``CallTimes``), which sees what the others only see a part of each (a call
/// waits for the database several times). Any past ``limit`` means work already accepted is
/// waiting, and more would only wait longer: the call is refused `503 overloaded` with
/// `Retry-After`, before anything is stored or rung. Commands on existing calls, and their rings,
/// are never refused.
struct Admission: Sendable {
    let loops: EventLoopLag
    let store: any DataStore
    let bus: any ClusterBus
    /// The wait past which new calls are refused: a quarter of the live ring's acknowledgement
    /// window by default, so that a relayed ring admitted now still has time to be acknowledged.
    let limit: Duration
    let metrics: ServerMetrics
    let logger: Logger
    /// How long the latest calls took to start ringing.
    let calls = CallTimes()
    private let refusals = RateLimitedLog(interval: .seconds(10), notLoggedKey: "calls.refused_not_logged")

    init(loops: EventLoopLag, store: any DataStore, bus: any ClusterBus, limit: Duration, metrics: ServerMetrics, logger: Logger) {
        self.loops = loops
        self.store = store
        self.bus = bus
        self.limit = limit
        self.metrics = metrics
        self.logger = logger
    }

    /// When a client may try again: long enough for a line a little past ``limit`` to clear.
    static let retryAfter: Duration = .seconds(1)

    private static func describe(_ behind: String) -> String {
        switch behind {
        case "event_loops": "it runs its work"
        case "database": "its database answers"
        case "calls": "its calls start ringing"
        default: "the instances' bus answers"
        }
    }

    /// Throws `503 overloaded` when a line is longer than ``limit``.
    func admit() throws(RingRelayError) {
        // A loop's timer overdue by four times the limit (a second by default) is a loop that
        // stopped; a loop merely slow shows in the calls' own times.
        let waits = [
            ("event_loops", loops.overdue / 4), ("database", store.queueDelay), ("cluster_bus", bus.lag), ("calls", calls.standing),
        ]
        guard let (behind, wait) = waits.first(where: { $0.1 > limit }) else { return }
        metrics.recordCallRefused(behind: behind)
        let milliseconds = Int(wait.timeInterval * 1000)
        refusals.warning(
            "refusing new calls: the server is behind", metadata: ["behind": .string(behind), "wait.ms": .stringConvertible(milliseconds)],
            logger: logger)
        throw RingRelayError(
            .unavailable, code: .overloaded,
            "The server is behind (\(Self.describe(behind)) \(behind == "event_loops" ? milliseconds * 4 : milliseconds) ms late) and takes no new call now; retry after \(Int(Self.retryAfter.timeInterval)) s.",
            retryAfter: Self.retryAfter)
    }
}

/// How long the calls of the last ``window`` took to start ringing (`POST /v1/calls`, from its
/// arrival to its answer), and the least of them: when even the quickest call of a second full of
/// them was slow, a line stands; one slow call among quick ones is not a line.
final class CallTimes: Sendable {
    private let times = Mutex<[(at: ContinuousClock.Instant, took: Duration)]>([])
    /// How far back calls count.
    static let window: Duration = .seconds(1)
    /// Fewer calls than this in the window say nothing.
    static let enough = 8

    /// A call took `took` to start ringing.
    func record(_ took: Duration) {
        let now = ContinuousClock.now
        times.withLock { times in
            times.removeAll { now - $0.at > Self.window }
            if times.count >= 256 { times.removeFirst() }
            times.append((now, took))
        }
    }

    /// The least time of the window's calls, when there were enough; zero otherwise.
    var standing: Duration {
        let now = ContinuousClock.now
        return times.withLock { times in
            let recent = times.filter { now - $0.at <= Self.window }
            guard recent.count >= Self.enough else { return .zero }
            return recent.map(\.took).min() ?? .zero
        }
    }
}
