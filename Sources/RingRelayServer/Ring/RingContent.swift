import Foundation
import RingRelayCore
import RingRelayWire

/// The content of one ring, in each channel's form. A binding whose channel has no content is not
/// rung (a plain call has nothing for alert bindings; a sealed call rings only its boxed bindings).
struct RingContent: Sendable {
    /// The event sent over live connections: `call.incoming` for native calls,
    /// `call.notification` (with the provider's payload, byte for byte) for provider calls.
    var liveEvent: CallEventType = .incoming
    /// The provider's payload carried by `call.notification`.
    var livePayload: [UInt8]?
    /// Body of a VoIP push to `apns_voip` bindings.
    var apnsVoIP: [UInt8]?
    /// Data of an FCM message to `fcm` bindings.
    var fcmData: [String: String]?
    /// A sealed call's boxed bindings, `nil` for a plain call: only these ring (their devices
    /// live, and the pushed ones in ``sealedPushes``).
    var sealedBindingIDs: Set<String>?
    /// A sealed call's pushes by binding id, each carrying that binding's own box (a `live`
    /// binding, never pushed, has none).
    var sealedPushes: [String: BindingPusher.Payload] = [:]
    /// A sealed call's box for each connected device's live ring, by device id.
    var sealedLive: [String: String] = [:]

    /// The payload for `binding`, in its channel's form; `nil` when there is none.
    func payload(for binding: Binding) -> BindingPusher.Payload? {
        if sealedBindingIDs != nil { return sealedPushes[binding.id] }
        switch binding.type {
        case .apnsVoIP: return apnsVoIP.map(BindingPusher.Payload.apns)
        case .apnsAlert, .live: return nil
        case .fcm: return fcmData.map(BindingPusher.Payload.fcm)
        }
    }

    /// Which bindings this content can ring, for planning.
    var coverage: RingPlan.Content {
        RingPlan.Content(apnsVoIP: apnsVoIP != nil, fcm: fcmData != nil, sealedBindingIDs: sealedBindingIDs)
    }
}
