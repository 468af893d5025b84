import Foundation
import Hummingbird
import Metrics
import Prometheus
import RingRelayCore
import RingRelayWire

/// The server's metrics, recorded through swift-metrics into its own Prometheus registry.
///
/// Each application owns a registry (no global bootstrap), so tests build as many servers as they
/// like and read exactly what each recorded.
struct ServerMetrics: Sendable {
    /// Where everything is collected; rendered at `/metrics`.
    let registry: PrometheusCollectorRegistry
    /// The swift-metrics factory writing into ``registry``.
    let factory: PrometheusMetricsFactory
    /// The handles recorded into per request, webhook and ring, made once each.
    private let handles = Handles()

    private final class Handles: Sendable {
        struct Route: Hashable, Sendable {
            var route: String
            var method: String
        }

        struct Request: Hashable, Sendable {
            var route: Route
            var status: Int
        }

        struct Webhook: Hashable, Sendable {
            var provider: String
            var result: String
        }

        let requests = HandleCache<Request, Metrics.Counter>()
        let requestDurations = HandleCache<Route, Metrics.Timer>()
        let webhooks = HandleCache<Webhook, Metrics.Counter>()
        let calls = HandleCache<CallState, Metrics.Counter>()
        let single = HandleCache<String, Metrics.Recorder>()
        let timers = HandleCache<String, Metrics.Timer>()
    }

    init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5),
            .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
            .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5),
        ]
        self.factory = factory
    }

    /// Counts one finished HTTP request and records its latency.
    func recordRequest(route: String, method: String, status: Int, nanoseconds: Int64) {
        let key = Handles.Route(route: route, method: method)
        handles.requests.value(for: Handles.Request(route: key, status: status)) {
            Counter(
                label: "ringrelay_http_requests_total", dimensions: [("route", route), ("method", method), ("status", String(status))],
                factory: factory)
        }.increment()
        handles.requestDurations.value(for: key) {
            Metrics.Timer(label: "ringrelay_http_request_duration_seconds", dimensions: [("route", route), ("method", method)], factory: factory)
        }.recordNanoseconds(nanoseconds)
    }

    /// Counts a provider webhook by its answer.
    func recordWebhook(provider: String, status: Int) {
        let result =
            switch status {
            case 200: "rang"
            case 404: "unreachable"
            case 403: "bad_signature"
            case 429: "rate_limited"
            default: status < 500 ? "rejected" : "error"
            }
        handles.webhooks.value(for: Handles.Webhook(provider: provider, result: result)) {
            Counter(label: "ringrelay_webhooks_total", dimensions: [("provider", provider), ("result", result)], factory: factory)
        }.increment()
    }

    /// Records how many devices one ring reached for.
    func recordFanout(_ devices: Int) {
        handles.single.value(for: "ringrelay_ring_fanout") { Recorder(label: "ringrelay_ring_fanout", factory: factory) }.record(devices)
    }

    /// Counts a new call refused because the server is behind, by what was behind (`database`, `cluster_bus`).
    func recordCallRefused(behind: String) {
        Counter(label: "ringrelay_calls_refused_total", dimensions: [("behind", behind)], factory: factory).increment()
    }

    /// Records the time from a call's arrival to its first push answer.
    func recordFirstPush(_ seconds: TimeInterval) {
        timer("ringrelay_call_to_first_push_seconds").recordSeconds(seconds)
    }

    /// Counts a call reaching an outcome (`accepted`, `rejected`, `cancelled`, `missed`, `unreachable`, `ended`).
    func recordCallOutcome(_ state: CallState) {
        handles.calls.value(for: state) {
            Counter(label: "ringrelay_calls_total", dimensions: [("outcome", state.rawValue)], factory: factory)
        }.increment()
    }

    /// Records the time from a call's arrival to its answer.
    func recordTimeToAnswer(_ seconds: TimeInterval) {
        timer("ringrelay_call_answer_seconds").recordSeconds(seconds)
    }

    private func timer(_ label: String) -> Metrics.Timer {
        handles.timers.value(for: label) { Metrics.Timer(label: label, factory: factory) }
    }

    /// Counts pushes sent because a live ring was not acknowledged in time.
    func recordLiveFallback(_ pushes: Int) {
        Counter(label: "ringrelay_live_fallback_pushes_total", factory: factory).increment(by: pushes)
    }

    /// Sets the number of open live connections.
    func recordLiveConnections(_ count: Int) {
        Gauge(label: "ringrelay_live_connections", factory: factory).record(count)
    }

    /// Deliveries the ring executor is still running (a push retrying, a live ring awaiting its ack).
    func recordDeliveriesInFlight(_ count: Int) {
        Gauge(label: "ringrelay_deliveries_in_flight", factory: factory).record(count)
    }

    /// Sets the bindings gauge from fresh counts; cells with no bindings read 0.
    func recordBindingCounts(_ counts: [BindingCount]) {
        for type in BindingType.allCases {
            for status in BindingStatus.allCases {
                let count = counts.first { $0.type == type && $0.status == status }?.count ?? 0
                Gauge(label: "ringrelay_bindings", dimensions: [("type", type.rawValue), ("status", status.rawValue)], factory: factory)
                    .record(count)
            }
        }
    }
}

/// Records every request's route template, method, status and latency.
///
/// It sits outside ``ErrorMiddleware`` so it sees the status errors were turned into.
struct MetricsMiddleware: RouterMiddleware {
    typealias Context = RingRelayRequestContext
    let metrics: ServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        let nanoseconds = (ContinuousClock.now - start).nanoseconds
        // The route template, never the raw path: ids in paths would explode label cardinality.
        metrics.recordRequest(
            route: context.endpointPath ?? "unmatched", method: request.method.rawValue, status: response.status.code,
            nanoseconds: nanoseconds)
        return response
    }
}
