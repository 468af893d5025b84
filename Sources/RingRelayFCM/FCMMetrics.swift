import Metrics
import RingRelayCore

/// FCM metrics, recorded through swift-metrics into the factory the server passes in.
struct FCMMetrics: Sendable {
    let factory: any MetricsFactory
    /// `ringrelay_push_total` and `ringrelay_push_duration_seconds`, shared with the APNs client.
    let push: PushMetrics

    init(factory: any MetricsFactory) {
        self.factory = factory
        push = PushMetrics(channel: "fcm", factory: factory)
    }

    /// Counts one access token minted at a token endpoint.
    func tokenMinted() {
        Counter(label: "ringrelay_fcm_oauth_mints_total", factory: factory).increment()
    }
}
