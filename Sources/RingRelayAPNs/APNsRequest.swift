import Foundation
import RingRelayCore

/// The two pushes RingRelay sends through APNs.
public enum APNsPushKind: String, Sendable, Hashable, CaseIterable {
    /// A PushKit VoIP push announcing a call: `apns-push-type: voip`, topic `<bundle>.voip`.
    case voip
    /// A user-visible alert carrying a sealed invite for a Notification Service Extension.
    case alert

    /// The `apns-push-type` header value.
    public var pushType: String { rawValue }

    /// Largest payload APNs accepts for this kind, in bytes.
    public var maxPayloadBytes: Int {
        switch self {
        case .voip: 5120
        case .alert: 4096
        }
    }

    /// The `apns-topic` for an app's bundle id.
    public func topic(bundleID: String) -> String {
        switch self {
        case .voip: bundleID + ".voip"
        case .alert: bundleID
        }
    }

    /// The push kind a binding type takes.
    public init?(bindingType: BindingType) {
        switch bindingType {
        case .apnsVoIP: self = .voip
        case .apnsAlert: self = .alert
        case .fcm, .live: return nil
        }
    }
}

/// One APNs request, built and checked before anything is sent.
public struct APNsRequest: Sendable, Hashable {
    /// Lowercase hex device token.
    public var deviceToken: String
    /// Push kind.
    public var kind: APNsPushKind
    /// `apns-topic`.
    public var topic: String
    /// The JSON payload, sent as is (never compressed).
    public var payload: [UInt8]
    /// `apns-id`: canonical lowercase UUID, the same on every retry of this push.
    public var apnsID: String
    /// `apns-priority`: 10 (immediately) for every call push.
    public var priority: Int
    /// `apns-expiration`: 0 for VoIP (deliver now or never), otherwise the ring deadline.
    public var expiration: Int
    /// `apns-collapse-id`, at most 64 bytes.
    public var collapseID: String?

    /// Builds a request for an app's bundle id.
    ///
    /// - Parameters:
    ///   - kind: VoIP or alert.
    ///   - bundleID: the app's bundle id from the account's APNs credential.
    ///   - deviceToken: the binding's token (hex).
    ///   - payload: the JSON body.
    ///   - expiresAt: for alert pushes, when APNs should stop trying; VoIP pushes always use 0.
    ///   - apnsID: the push id; a fresh random one by default.
    /// - Throws: ``APNsRequestError`` when the payload is empty or too large, or the token is not hex.
    public init(
        kind: APNsPushKind, bundleID: String, deviceToken: String, payload: [UInt8], expiresAt: Date? = nil,
        collapseID: String? = nil, apnsID: UUID? = nil
    ) throws(APNsRequestError) {
        guard !payload.isEmpty else { throw .payloadEmpty }
        guard payload.count <= kind.maxPayloadBytes else {
            throw .payloadTooLarge(size: payload.count, limit: kind.maxPayloadBytes)
        }
        guard !deviceToken.isEmpty, deviceToken.utf8.count.isMultiple(of: 2),
            deviceToken.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) || (0x41...0x46).contains($0) })
        else { throw .badDeviceToken }
        if let collapseID, collapseID.utf8.count > 64 { throw .collapseIDTooLong }
        self.kind = kind
        self.topic = kind.topic(bundleID: bundleID)
        self.deviceToken = deviceToken.lowercased()
        self.payload = payload
        self.apnsID = (apnsID ?? .pooledRandom()).uuidString.lowercased()
        self.priority = 10
        self.expiration = kind == .voip ? 0 : Int(expiresAt?.timeIntervalSince1970.rounded(.up) ?? 0)
        self.collapseID = collapseID
    }

    /// The request path, `/3/device/<token>`.
    public var path: String { "/3/device/" + deviceToken }

    /// The fields no other push repeats: the path names a device (pushed to once a ring) and
    /// `apns-id` is new for every push. The others (`authorization`, `apns-topic`, …) repeat on
    /// every push and stay in the connection's HPACK table.
    public static let singleUseFields: Set<String> = [":path", "apns-id"]

    /// The APNs headers, without `authorization`.
    public var headers: [(String, String)] {
        var headers = [
            ("apns-push-type", kind.pushType), ("apns-topic", topic), ("apns-id", apnsID),
            ("apns-priority", String(priority)), ("apns-expiration", String(expiration)),
        ]
        if let collapseID { headers.append(("apns-collapse-id", collapseID)) }
        return headers
    }
}

/// A push that cannot be sent as asked; found before anything goes to Apple.
public enum APNsRequestError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The payload is larger than APNs accepts for the push kind.
    case payloadTooLarge(size: Int, limit: Int)
    /// The payload is empty.
    case payloadEmpty
    /// The device token is not hex digits of even length.
    case badDeviceToken
    /// `apns-collapse-id` is longer than 64 bytes.
    case collapseIDTooLong

    /// The APNs reason this corresponds to.
    public var reason: String {
        switch self {
        case .payloadTooLarge: "PayloadTooLarge"
        case .payloadEmpty: "PayloadEmpty"
        case .badDeviceToken: "BadDeviceToken"
        case .collapseIDTooLong: "BadCollapseId"
        }
    }

    public var description: String {
        switch self {
        case .payloadTooLarge(let size, let limit): "The payload is \(size) bytes; APNs accepts at most \(limit) for this push type."
        case .payloadEmpty: "The payload is empty."
        case .badDeviceToken: "The device token is not an even number of hex digits."
        case .collapseIDTooLong: "apns-collapse-id is longer than 64 bytes."
        }
    }
}
