import Metrics

/// The metrics every push client records, whatever its service: `ringrelay_push_total` by
/// channel, kind, outcome and reason, and `ringrelay_push_duration_seconds` by channel and kind.
/// Their handles are made once per label set (``HandleCache``).
public struct PushMetrics: Sendable {
    /// `apns` or `fcm`.
    public let channel: String
    public let factory: any MetricsFactory
    private let outcomes = HandleCache<Outcome, Counter>()
    private let latencies = HandleCache<String, Timer>()

    private struct Outcome: Hashable, Sendable {
        var kind: String
        var disposition: String
        var reason: String?
    }

    public init(channel: String, factory: any MetricsFactory) {
        self.channel = channel
        self.factory = factory
    }

    /// Counts a push's final outcome by kind, disposition and reason.
    public func record(_ outcome: PushOutcome, kind: String) {
        let key = Outcome(kind: kind, disposition: outcome.disposition.metricName, reason: outcome.reason)
        outcomes.value(for: key) {
            Counter(
                label: "ringrelay_push_total",
                dimensions: [("channel", channel), ("kind", kind), ("outcome", key.disposition), ("reason", key.reason ?? "none")],
                factory: factory)
        }.increment()
    }

    /// Records one attempt's send-to-answer time.
    public func recordLatency(_ latency: Duration, kind: String) {
        latencies.value(for: kind) {
            Timer(label: "ringrelay_push_duration_seconds", dimensions: [("channel", channel), ("kind", kind)], factory: factory)
        }.recordNanoseconds(latency.nanoseconds)
    }
}
