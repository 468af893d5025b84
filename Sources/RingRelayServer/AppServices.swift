import Foundation
import Logging
import RingRelayAPNs
import RingRelayCore
import ServiceLifecycle

/// The concrete collaborators every controller shares, chosen once in ``buildApplication(configuration:store:clock:logger:metrics:)``.
struct AppServices: Sendable {
    /// Storage.
    var store: any DataStore
    /// Device access token signer.
    var signer: AccessTokenSigner
    /// The admin bearer token.
    var adminToken: String
    /// Time source for expiry decisions.
    var clock: any WallClock
    /// Validated configuration.
    var configuration: ServerConfiguration
    /// Metrics recorded by the server.
    var metrics: ServerMetrics
    /// Sends pushes and applies their dispositions.
    var pusher: BindingPusher
    /// Credential problems reported by the push services.
    var faults: ConfigurationFaults
    /// Rings devices and tracks deliveries still in flight.
    var engine: RingEngine
    /// Per-account rate limit for webhooks and calls.
    var limiter: RateLimiter
    /// Live connections of this instance.
    var hub: LiveHub
    /// The server's logger.
    var logger: Logger

    /// Rings a callee's devices with this server's settings.
    var ringer: Ringer {
        Ringer(
            store: store, engine: engine, pusher: pusher, hub: hub, clock: clock, metrics: metrics, logger: logger,
            ringTimeout: configuration.ringTimeout, answerWait: configuration.webhookWait, liveFallback: configuration.liveFallback)
    }

    /// Native calls and their commands.
    var calls: CallService {
        CallService(store: store, ringer: ringer, hub: hub, clock: clock, metrics: metrics, logger: logger)
    }

    /// Long-lived services, in start order; they stop in reverse, after the HTTP server: first the
    /// drain of deliveries in flight, then the pruner, then the push clients.
    var lifecycleServices: [any Service] {
        [
            pusher.apns,
            pusher.fcm,
            CallPruner(store: store, retention: configuration.callRetention, clock: clock, logger: logger),
            RingTimeoutSweeper(calls: calls, hub: hub, metrics: metrics, logger: logger),
            RingDrainService(engine: engine, logger: logger),
        ]
    }
}
