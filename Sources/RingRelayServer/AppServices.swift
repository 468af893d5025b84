import Foundation
import Logging
import RingRelayAPNs
import RingRelayCore

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
}
