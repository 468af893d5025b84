import Foundation

/// How a binding reaches its device.
public enum BindingType: String, Sendable, Hashable, CaseIterable, Codable {
    /// A PushKit VoIP token (`apns-push-type: voip`).
    case apnsVoIP = "apns_voip"
    /// A regular APNs token, used for sealed invites to a Notification Service Extension.
    case apnsAlert = "apns_alert"
    /// A Firebase Cloud Messaging registration token.
    case fcm
    /// A device that rings only over its live connection (a terminal, a desktop app): never
    /// pushed, it exists to carry the device's public key for sealed calls. Its token is any id
    /// the device keeps, so registering again updates the same binding.
    case live

    /// Whether the token is an APNs device token.
    public var isAPNs: Bool { self == .apnsVoIP || self == .apnsAlert }

    /// Whether a push service is ever asked to deliver to it: every type but ``live``.
    public var isPushed: Bool { self != .live }
}

/// The APNs environment a token was issued for.
public enum PushEnvironment: String, Sendable, Hashable, CaseIterable, Codable {
    /// `api.push.apple.com`: App Store, TestFlight and ad-hoc builds.
    case production
    /// `api.sandbox.push.apple.com`: development builds.
    case sandbox
}

/// Whether a binding is pushed to.
public enum BindingStatus: String, Sendable, Hashable, CaseIterable, Codable {
    /// Pushed to on every ring.
    case active
    /// Reported dead by Apple or Google; kept for inspection, never pushed to.
    case invalid
}

/// One device push token of an identity.
public struct Binding: Sendable, Hashable {
    /// `bnd_…` identifier.
    public var id: String
    /// Owning account.
    public var accountID: String
    /// The user the device belongs to, as the app names it.
    public var identity: String
    /// Push channel.
    public var type: BindingType
    /// The push token as the platform issued it.
    public var token: String
    /// APNs environment; `nil` for FCM.
    public var environment: PushEnvironment?
    /// Whether the app stated the environment (rather than it defaulting to production). Only a
    /// stated environment lets APNs' `BadDeviceToken` invalidate the binding.
    public var environmentIsExplicit: Bool
    /// The app's identifier for the device, if given.
    public var deviceID: String?
    /// The device's P-256 public key (base64, X9.63) for sealed invites, if given.
    public var publicKey: String?
    /// Whether the binding is pushed to.
    public var status: BindingStatus
    /// Why the binding was invalidated, verbatim from the push service.
    public var invalidReason: String?
    /// When the binding was invalidated.
    public var invalidatedAt: Date?
    /// When the token was last registered (created or re-posted); compared with APNs' 410 timestamp.
    public var registeredAt: Date
    /// When the binding was first created.
    public var createdAt: Date
    /// When the binding last changed.
    public var updatedAt: Date

    /// Creates a binding value.
    public init(
        id: String, accountID: String, identity: String, type: BindingType, token: String,
        environment: PushEnvironment?, environmentIsExplicit: Bool = false, deviceID: String?, publicKey: String?,
        status: BindingStatus, invalidReason: String?, invalidatedAt: Date?, registeredAt: Date, createdAt: Date, updatedAt: Date
    ) {
        self.environmentIsExplicit = environmentIsExplicit
        self.id = id
        self.accountID = accountID
        self.identity = identity
        self.type = type
        self.token = token
        self.environment = environment
        self.deviceID = deviceID
        self.publicKey = publicKey
        self.status = status
        self.invalidReason = invalidReason
        self.invalidatedAt = invalidatedAt
        self.registeredAt = registeredAt
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// A validated request to register a token: what `POST /v1/bindings` and batch upserts store.
public struct BindingRegistration: Sendable, Hashable {
    /// Owning account.
    public var accountID: String
    /// The identity the token now belongs to.
    public var identity: String
    /// Push channel.
    public var type: BindingType
    /// The token, normalised (APNs tokens lowercased).
    public var token: String
    /// APNs environment (defaults to production for APNs types).
    public var environment: PushEnvironment?
    /// Whether the environment was given rather than defaulted.
    public var environmentIsExplicit: Bool
    /// Optional device identifier.
    public var deviceID: String?
    /// Optional sealed-invite public key.
    public var publicKey: String?

    /// Validates raw input and builds a registration.
    ///
    /// - Throws: ``RingRelayError`` with kind `unprocessable` naming the first bad field.
    public init(
        accountID: String, identity: String, type: BindingType, token: String,
        environment: PushEnvironment?, deviceID: String?, publicKey: String?
    ) throws(RingRelayError) {
        try BindingRules.validateIdentity(identity)
        let normalised = try BindingRules.validateToken(token, type: type)
        self.environmentIsExplicit = environment != nil
        if type.isAPNs {
            self.environment = environment ?? .production
        } else {
            guard environment == nil else {
                throw .invalidField("environment", "only APNs bindings (apns_voip, apns_alert) have an environment.")
            }
            self.environment = nil
        }
        if let deviceID { try BindingRules.validateDeviceID(deviceID) }
        if let publicKey { try BindingRules.validatePublicKey(publicKey) }
        self.accountID = accountID
        self.identity = identity
        self.type = type
        self.token = normalised
        self.deviceID = deviceID
        self.publicKey = publicKey
    }
}

/// The answer to a registration: the stored binding and whether it was new.
public struct BindingUpsert: Sendable, Hashable {
    /// The binding as stored now.
    public var binding: Binding
    /// `true` when the `(type, token)` pair was not known to the account before.
    public var created: Bool

    /// Creates an upsert result.
    public init(binding: Binding, created: Bool) {
        self.binding = binding
        self.created = created
    }
}

/// Filters and position for listing bindings.
public struct BindingQuery: Sendable, Hashable {
    /// Only this identity's bindings.
    public var identity: String?
    /// Only this type.
    public var type: BindingType?
    /// Only this status.
    public var status: BindingStatus?
    /// Page size, 1–500.
    public var limit: Int
    /// Return bindings with ids after this one (keyset pagination).
    public var after: String?

    /// Default page size.
    public static let defaultLimit = 100
    /// Largest page size.
    public static let maxLimit = 500

    /// Creates a query.
    public init(identity: String? = nil, type: BindingType? = nil, status: BindingStatus? = nil, limit: Int = defaultLimit, after: String? = nil) {
        self.identity = identity
        self.type = type
        self.status = status
        self.limit = limit
        self.after = after
    }
}

/// One page of a listing.
public struct Page<Item: Sendable & Hashable>: Sendable, Hashable {
    /// The items, in id order.
    public var items: [Item]
    /// The id to continue after, or `nil` on the last page.
    public var nextAfter: String?

    /// Creates a page.
    public init(items: [Item], nextAfter: String?) {
        self.items = items
        self.nextAfter = nextAfter
    }
}

/// Count of bindings in one (type, status) cell, for metrics.
public struct BindingCount: Sendable, Hashable {
    /// Binding type.
    public var type: BindingType
    /// Binding status.
    public var status: BindingStatus
    /// How many.
    public var count: Int

    /// Creates a count.
    public init(type: BindingType, status: BindingStatus, count: Int) {
        self.type = type
        self.status = status
        self.count = count
    }
}
