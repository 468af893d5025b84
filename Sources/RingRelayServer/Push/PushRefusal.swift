import Foundation

import RingRelayCore

/// A push refused before sending: its request could not be built (payload too large, bad token),
/// or the account's credential must not be used (``BindingPusher`` reports that as a fault).
struct PushRefusal: Error, Sendable, CustomStringConvertible {
    /// The outcome reason, in the push service's vocabulary (`PayloadTooLarge`, `BadDeviceToken`).
    var reason: String
    /// What is wrong, for the log.
    var description: String
    /// What the refusal means: `drop` (this push) or `fixConfiguration` (every push of the account).
    var disposition: PushDisposition = .drop
}
