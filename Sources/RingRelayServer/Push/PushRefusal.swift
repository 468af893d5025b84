import Foundation

/// A push refused before sending: its request could not be built (payload too large, bad token).
/// ``BindingPusher`` turns it into a `drop` outcome.
struct PushRefusal: Error, Sendable, CustomStringConvertible {
    /// The outcome reason, in the push service's vocabulary (`PayloadTooLarge`, `BadDeviceToken`).
    var reason: String
    /// What is wrong, for the log.
    var description: String
}
