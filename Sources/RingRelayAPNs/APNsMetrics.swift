import Metrics
import RingRelayCore

/// APNs metrics, recorded through swift-metrics into the factory the server passes in.
struct APNsMetrics: Sendable {
    let factory: any MetricsFactory
    /// The handles each push records into, made once each.
    private let outcomes = HandleCache<Outcome, Counter>()
    private let latencies = HandleCache<APNsPushKind, Timer>()

    private struct Outcome: Hashable, Sendable {
        var kind: APNsPushKind
        var disposition: String
        var reason: String?
    }

    init(factory: any MetricsFactory) {
        self.factory = factory
    }

    /// Counts a push's final outcome by kind, disposition and reason.
    func record(_ outcome: PushOutcome, kind: APNsPushKind) {
        let key = Outcome(kind: kind, disposition: outcome.disposition.metricName, reason: outcome.reason)
        outcomes.value(for: key) {
            Counter(
                label: "ringrelay_push_total",
                dimensions: [("channel", "apns"), ("kind", kind.rawValue), ("outcome", key.disposition), ("reason", key.reason ?? "none")],
                factory: factory)
        }.increment()
    }

    /// Records one attempt's send-to-answer time.
    func recordLatency(_ latency: Duration, kind: APNsPushKind) {
        latencies.value(for: kind) {
            Timer(label: "ringrelay_push_duration_seconds", dimensions: [("channel", "apns"), ("kind", kind.rawValue)], factory: factory)
        }.recordNanoseconds(latency.nanoseconds)
    }

    func connectionOpened(environment: String) {
        connections(environment).increment()
    }

    func connectionClosed(environment: String) {
        connections(environment).decrement()
    }

    func tokenMinted() {
        Counter(label: "ringrelay_apns_jwt_mints_total", factory: factory).increment()
    }

    func pingSent() {
        Counter(label: "ringrelay_apns_pings_total", factory: factory).increment()
    }

    private func connections(_ environment: String) -> Meter {
        Meter(label: "ringrelay_apns_connections", dimensions: [("environment", environment)], factory: factory)
    }
}
