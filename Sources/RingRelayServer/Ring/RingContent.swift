import Foundation
import RingRelayCore
import RingRelayWire

/// The content of one ring, in each channel's form. A binding whose channel has no content is not
/// rung (a provider call has no sealed invite for alert bindings, for example).
struct RingContent: Sendable {
    /// The event sent over live connections: `call.incoming` for native calls,
    /// `call.notification` (with the provider's payload, byte for byte) for provider calls.
    var liveEvent: CallEventType = .incoming
    /// The provider's payload carried by `call.notification`.
    var livePayload: [UInt8]?
    /// Body of a VoIP push to `apns_voip` bindings.
    var apnsVoIP: [UInt8]?
    /// Bodies of alert pushes to `apns_alert` bindings, by binding id (sealed invites).
    var apnsAlert: [String: [UInt8]] = [:]
    /// Data of an FCM message to `fcm` bindings.
    var fcmData: [String: String]?

    /// The payload for `binding`, in its channel's form; `nil` when there is none.
    func payload(for binding: Binding) -> BindingPusher.Payload? {
        switch binding.type {
        case .apnsVoIP: apnsVoIP.map(BindingPusher.Payload.apns)
        case .apnsAlert: apnsAlert[binding.id].map(BindingPusher.Payload.apns)
        case .fcm: fcmData.map(BindingPusher.Payload.fcm)
        }
    }

    /// Which bindings this content can ring, for planning.
    var coverage: RingPlan.Content {
        RingPlan.Content(apnsVoIP: apnsVoIP != nil, apnsAlertBindingIDs: Set(apnsAlert.keys), fcm: fcmData != nil)
    }
}
