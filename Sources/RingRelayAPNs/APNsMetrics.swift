import Metrics
import RingRelayCore

/// APNs metrics, recorded through swift-metrics into the factory the server passes in.
struct APNsMetrics: Sendable {
    let factory: any MetricsFactory
    /// `ringrelay_push_total` and `ringrelay_push_duration_seconds`, shared with the FCM client.
    let push: PushMetrics

    init(factory: any MetricsFactory) {
        self.factory = factory
        push = PushMetrics(channel: "apns", factory: factory)
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

    /// `ringrelay_apns_connections_retired_total`: connections closed because they went silent or broke the protocol.
    func connectionRetired() {
        Counter(label: "ringrelay_apns_connections_retired_total", factory: factory).increment()
    }

    func pingSent() {
        Counter(label: "ringrelay_apns_pings_total", factory: factory).increment()
    }

    private func connections(_ environment: String) -> Meter {
        Meter(label: "ringrelay_apns_connections", dimensions: [("environment", environment)], factory: factory)
    }
}
