import Foundation

extension BindingType {
    /// The channel a binding of this type is rung on: its push service, or for a `live` binding
    /// the device's live connection.
    public var channel: PushChannel {
        switch self {
        case .apnsVoIP, .apnsAlert: .apns
        case .fcm: .fcm
        case .live: .websocket
        }
    }

    /// The delivery kind, as deliveries and the test-push answer name it: `voip`, `alert` or
    /// `data`; a `live` binding's ring is the live `event`.
    public var pushKind: String {
        switch self {
        case .apnsVoIP: "voip"
        case .apnsAlert: "alert"
        case .fcm: "data"
        case .live: RingPlan.liveKind
        }
    }
}
