import Logging
import RingRelayCore

/// Refuses new calls while the server is behind, so that a call answered `201` is one it can
/// ring in time.
///
/// Two lines are watched: the database's (how long the request first in line for a connection
/// has waited, ``DataStore/queueDelay``) and the instances' bus (how long this instance's own
/// notices take to come back, ``ClusterBus/lag``; relayed rings and their acknowledgements
/// travel the same way). Either past ``limit`` means work already accepted is waiting, and more
/// would only wait longer: the call is refused `503 overloaded` with `Retry-After`, before
/// anything is stored or rung. Commands on existing calls, and their rings, are never refused.
struct Admission: Sendable {
    let store: any DataStore
    let bus: any ClusterBus
    /// The wait past which new calls are refused: a quarter of the live ring's acknowledgement
    /// window by default, so that a relayed ring admitted now still has time to be acknowledged.
    let limit: Duration
    let metrics: ServerMetrics
    let logger: Logger
    private let refusals = RateLimitedLog(interval: .seconds(10), notLoggedKey: "calls.refused_not_logged")

    init(store: any DataStore, bus: any ClusterBus, limit: Duration, metrics: ServerMetrics, logger: Logger) {
        self.store = store
        self.bus = bus
        self.limit = limit
        self.metrics = metrics
        self.logger = logger
    }

    /// When a client may try again: long enough for a line a little past ``limit`` to clear.
    static let retryAfter: Duration = .seconds(1)

    /// Throws `503 overloaded` when the database's or the bus's line is longer than ``limit``.
    func admit() throws(RingRelayError) {
        let waits = [("database", store.queueDelay), ("cluster_bus", bus.lag)]
        guard let (behind, wait) = waits.first(where: { $0.1 > limit }) else { return }
        metrics.recordCallRefused(behind: behind)
        let milliseconds = Int(wait.timeInterval * 1000)
        refusals.warning(
            "refusing new calls: the server is behind", metadata: ["behind": .string(behind), "wait.ms": .stringConvertible(milliseconds)],
            logger: logger)
        throw RingRelayError(
            .unavailable, code: .overloaded,
            "The server is behind (its \(behind == "database" ? "database" : "instances' bus") answers \(milliseconds) ms late) and takes no new call now; retry after \(Int(Self.retryAfter.timeInterval)) s.",
            retryAfter: Self.retryAfter)
    }
}
