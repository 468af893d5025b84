import Foundation

extension BindingType {
    /// The channel a binding of this type is pushed on.
    public var channel: PushChannel {
        switch self {
        case .apnsVoIP, .apnsAlert: .apns
        case .fcm: .fcm
        }
    }

    /// The push kind, as deliveries and the test-push answer name it: `voip`, `alert` or `data`.
    public var pushKind: String {
        switch self {
        case .apnsVoIP: "voip"
        case .apnsAlert: "alert"
        case .fcm: "data"
        }
    }
}
