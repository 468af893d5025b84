import Foundation
import RingRelayCore

/// How RingRelay reaches APNs.
public struct APNsConfiguration: Sendable {
    /// Base URL of the production service.
    public var productionEndpoint = "https://api.push.apple.com"
    /// Base URL of the development (sandbox) service.
    public var sandboxEndpoint = "https://api.sandbox.push.apple.com"
    /// PEM file of extra certificates to trust, for a local simulator. Apple's own roots are
    /// always trusted.
    public var extraTrustRootsFile: String?
    /// Longest wait for one answer.
    public var requestTimeout: Duration = .seconds(10)
    /// Attempts per push for transient failures (429, 5xx, timeouts, dropped connections).
    public var maxAttempts = 3
    /// First back-off; each retry doubles it, with full jitter.
    public var retryBaseDelay: Duration = .milliseconds(100)
    /// Idle time after which a connection is PINGed to keep it alive.
    public var keepAliveInterval: Duration = .seconds(3600)
    /// A connection whose pushes get no frame for this long is PINGed, and closed if nothing
    /// comes within as long again; its unanswered pushes go again on another connection.
    public var connectionSilenceTimeout: Duration = .seconds(3)
    /// Connections per credential and environment at most; more open only when every stream of
    /// the open ones is in use (Apple suggests several connections for volume).
    public var maxConnections = 4
    /// A connection pool unused this long is closed.
    public var poolIdleLifetime: Duration = .seconds(2 * 3600)

    /// The defaults: Apple's endpoints.
    public init() {}

    /// The base URL for an environment.
    public func endpoint(for environment: PushEnvironment) -> String {
        environment == .production ? productionEndpoint : sandboxEndpoint
    }
}
