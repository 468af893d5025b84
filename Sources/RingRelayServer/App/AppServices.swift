import Foundation
import Logging
import RingRelayCore
import ServiceLifecycle

/// The collaborators the composition root builds once, in ``make(configuration:store:adminToken:clock:logger:)``.
///
/// Only ``buildRouter(services:)`` and ``buildApplication(configuration:store:adminToken:clock:logger:services:onServerRunning:)``
/// read it: each controller gets the few collaborators it uses, never this whole set.
struct AppServices: Sendable, DescribedByNameOnly {
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
    /// Push and provider credentials, cached for a few seconds.
    var credentials: CredentialCache
    /// Credential problems reported by the push services.
    var faults: ConfigurationFaults
    /// Sends pushes and applies their dispositions.
    var pusher: BindingPusher
    /// Runs rings' deliveries and tracks those still in flight.
    var executor: RingExecutor
    /// Keeps caches and live connections in step with the other instances sharing the store.
    var cluster: ClusterSync
    /// Per-account rate limit for webhooks and calls.
    var limiter: RateLimiter
    /// Live connections of this instance.
    var hub: LiveHub
    /// Rings a callee's devices: create the call, plan, execute.
    var ringer: Ringer
    /// Refuses new calls while the server is behind (`AdmissionMiddleware`).
    var admission: Admission
    /// Native calls and their commands.
    var calls: CallService
    /// The server's logger.
    var logger: Logger

    /// Long-lived services, in start order; they stop in reverse, after the HTTP server: first the
    /// drain of deliveries in flight, then the pruner, then the push clients.
    var lifecycleServices: [any Service] {
        [
            pusher.apns.client,
            pusher.fcm.client,
            cluster,
            CallPruner(
                store: store, retention: configuration.callRetention, tokenLifetime: TimeInterval(configuration.maxAccessTokenTTL), clock: clock,
                logger: logger),
            RingTimeoutSweeper(calls: calls, hub: hub, executor: executor, metrics: metrics, logger: logger),
            RingDrainService(executor: executor, logger: logger),
            admission.loops,
        ]
    }
}
