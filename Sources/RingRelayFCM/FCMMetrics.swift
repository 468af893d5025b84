import Metrics
import RingRelayCore

/// FCM metrics, recorded through swift-metrics into the factory the server passes in.
struct FCMMetrics: Sendable {
    let factory: any MetricsFactory
    /// The handles each push records into, made once each.
    private let outcomes = HandleCache<Outcome, Counter>()
    private let latencies = HandleCache<String, Timer>()

    private struct Outcome: Hashable, Sendable {
        var kind: String
        var disposition: String
        var reason: String?
    }

    init(factory: any MetricsFactory) {
        self.factory = factory
    }

    /// Counts a message's final outcome by disposition and reason (the same metric as APNs).
    func record(_ outcome: PushOutcome, kind: String) {
        let key = Outcome(kind: kind, disposition: outcome.disposition.metricName, reason: outcome.reason)
        outcomes.value(for: key) {
            Counter(
                label: "ringrelay_push_total",
                dimensions: [("channel", "fcm"), ("kind", kind), ("outcome", key.disposition), ("reason", key.reason ?? "none")],
                factory: factory)
        }.increment()
    }

    /// Records one send attempt's send-to-answer time.
    func recordLatency(_ latency: Duration, kind: String) {
        latencies.value(for: kind) {
            Timer(label: "ringrelay_push_duration_seconds", dimensions: [("channel", "fcm"), ("kind", kind)], factory: factory)
        }.recordNanoseconds(latency.nanoseconds)
    }

    /// Counts one access token minted at a token endpoint.
    func tokenMinted() {
        Counter(label: "ringrelay_fcm_oauth_mints_total", factory: factory).increment()
    }
}
