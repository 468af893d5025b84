import Foundation
import RingRelayWire

/// The kind of push token a binding holds.
public enum BindingType: String, Sendable, Hashable, Codable, CaseIterable {
    /// A PushKit VoIP token: VoIP pushes that ring at once.
    case apnsVoIP = "apns_voip"
    /// A regular APNs token: alert pushes with sealed invites, for a Notification Service Extension.
    case apnsAlert = "apns_alert"
    /// A Firebase Cloud Messaging registration token.
    case fcm
    /// No push token: a device that rings only while connected (a desktop app, a terminal). It
    /// carries the device's public key for sealed calls and is never pushed; its token is any
    /// id the device keeps (printable ASCII), so registering again updates the same binding.
    case live
}

/// The APNs environment a token belongs to.
public enum PushEnvironment: String, Sendable, Hashable, Codable {
    /// App Store, TestFlight and ad-hoc builds.
    case production
    /// Development builds run from Xcode.
    case sandbox
}

/// A binding this device registered, as remembered between launches.
public struct RegisteredBinding: Sendable, Hashable, Codable {
    /// `bnd_…`
    public var id: String
    /// The token kind.
    public var type: BindingType
    /// The token.
    public var token: String

    /// Creates a record.
    public init(id: String, type: BindingType, token: String) {
        self.id = id
        self.type = type
        self.token = token
    }
}

/// Where the client remembers its bindings, so that a token that changed while the app was not
/// running still gets its old binding deleted. Persist them (the app's keychain or defaults).
public protocol BindingStore: Sendable {
    /// The bindings remembered.
    func load() async -> [RegisteredBinding]
    /// Replaces the bindings remembered.
    func save(_ bindings: [RegisteredBinding]) async
}

/// A ``BindingStore`` that forgets everything when the app quits.
public actor InMemoryBindingStore: BindingStore {
    private var bindings: [RegisteredBinding]

    /// Creates a store holding `bindings`.
    public init(_ bindings: [RegisteredBinding] = []) {
        self.bindings = bindings
    }

    public func load() -> [RegisteredBinding] { bindings }

    public func save(_ bindings: [RegisteredBinding]) { self.bindings = bindings }
}

extension Data {
    /// The token as the push services write it: lowercase hex.
    var hexToken: String {
        let digits = Array("0123456789abcdef")
        return String(flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] })
    }
}
