import Logging
import RingRelayCore

/// Refuses new calls while the server is behind, so that a call answered `201` is one it can
/// ring in time.
///
/// Three lines are watched: the event loops' (how late their timers fire, ``EventLoopLag``: the
/// CPU cannot keep up), the database's (how long the request first in line for a connection has
/// waited, ``DataStore/queueDelay``) and the instances' bus (how long this instance's own notices
/// take to come back, ``ClusterBus/lag``; relayed rings and their acknowledgements travel the same
/// way). Any past ``limit`` means work already accepted is waiting, and more would only wait
/// longer: the call is refused `503 overloaded` with `Retry-After`, before anything is stored or
/// rung. Commands on existing calls, and their rings, are never refused.
struct Admission: Sendable {
    let loops: EventLoopLag
    let store: any DataStore
    let bus: any ClusterBus
    /// The wait past which new calls are refused: a quarter of the live ring's acknowledgement
    /// window by default, so that a relayed ring admitted now still has time to be acknowledged.
    let limit: Duration
    let metrics: ServerMetrics
    let logger: Logger
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
        default: "the instances' bus answers"
        }
    }

    /// Throws `503 overloaded` when a line is longer than ``limit``.
    func admit() throws(RingRelayError) {
        let waits = [("event_loops", loops.lag), ("database", store.queueDelay), ("cluster_bus", bus.lag)]
        guard let (behind, wait) = waits.first(where: { $0.1 > limit }) else { return }
        metrics.recordCallRefused(behind: behind)
        let milliseconds = Int(wait.timeInterval * 1000)
        refusals.warning(
            "refusing new calls: the server is behind", metadata: ["behind": .string(behind), "wait.ms": .stringConvertible(milliseconds)],
            logger: logger)
        throw RingRelayError(
            .unavailable, code: .overloaded,
            "The server is behind (\(Self.describe(behind)) \(milliseconds) ms late) and takes no new call now; retry after \(Int(Self.retryAfter.timeInterval)) s.",
            retryAfter: Self.retryAfter)
    }
}
