import Foundation

/// `POST /v1/bindings` body, and one `upsert` item of a batch.
public struct BindingRequest: Sendable, Hashable, Codable {
    /// The identity; a device token may omit it (its own identity is used).
    public var identity: String?
    /// `apns_voip`, `apns_alert`, `fcm` or `live` (never pushed: a device that rings only while connected).
    public var type: String
    /// The push token.
    public var token: String
    /// `production` or `sandbox`; APNs only, default `production`.
    public var environment: String?
    /// The app's device id.
    public var deviceId: String?
    /// Base64 X9.63 P-256 public key for sealed invites.
    public var publicKey: String?

    enum CodingKeys: String, CodingKey, CaseIterable { case identity, type, token, environment, deviceId, publicKey }

    /// Creates a request.
    public init(
        identity: String?, type: String, token: String, environment: String? = nil, deviceId: String? = nil,
        publicKey: String? = nil
    ) {
        self.identity = identity
        self.type = type
        self.token = token
        self.environment = environment
        self.deviceId = deviceId
        self.publicKey = publicKey
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.strictContainer(keyedBy: CodingKeys.self)
        identity = try container.decodeIfPresent(String.self, forKey: .identity)
        type = try container.decode(String.self, forKey: .type)
        token = try container.decode(String.self, forKey: .token)
        environment = try container.decodeIfPresent(String.self, forKey: .environment)
        deviceId = try container.decodeIfPresent(String.self, forKey: .deviceId)
        publicKey = try container.decodeIfPresent(String.self, forKey: .publicKey)
    }
}

/// A binding as the API shows it.
public struct BindingResource: Sendable, Hashable, Codable {
    /// `bnd_…`
    public var id: String
    /// Owning identity.
    public var identity: String
    /// `apns_voip`, `apns_alert`, `fcm` or `live` (never pushed: a device that rings only while connected).
    public var type: String
    /// The push token.
    public var token: String
    /// APNs environment.
    public var environment: String?
    /// Device id.
    public var deviceId: String?
    /// Sealed-invite public key.
    public var publicKey: String?
    /// `active` or `invalid`.
    public var status: String
    /// Why it was invalidated, verbatim from Apple or Google.
    public var invalidReason: String?
    /// When it was invalidated.
    public var invalidatedAt: Date?
    /// First registration.
    public var createdAt: Date
    /// Last change.
    public var updatedAt: Date

    /// Creates the body.
    public init(
        id: String, identity: String, type: String, token: String, environment: String?, deviceId: String?,
        publicKey: String?, status: String, invalidReason: String?, invalidatedAt: Date?, createdAt: Date,
        updatedAt: Date
    ) {
        self.id = id
        self.identity = identity
        self.type = type
        self.token = token
        self.environment = environment
        self.deviceId = deviceId
        self.publicKey = publicKey
        self.status = status
        self.invalidReason = invalidReason
        self.invalidatedAt = invalidatedAt
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// `GET /v1/bindings` answer.
public struct BindingList: Sendable, Hashable, Codable {
    /// This page.
    public var data: [BindingResource]
    /// Pass as `cursor` for the next page; absent on the last page.
    public var nextCursor: String?

    /// Creates the body.
    public init(data: [BindingResource], nextCursor: String?) {
        self.data = data
        self.nextCursor = nextCursor
    }
}

/// `DELETE /v1/bindings?identity=` answer.
public struct DeletedBindings: Sendable, Hashable, Codable {
    /// How many bindings were removed.
    public var deleted: Int

    /// Creates the body.
    public init(deleted: Int) { self.deleted = deleted }
}

/// `POST /v1/bindings/batch` body: at most 500 items in all.
public struct BindingBatchRequest: Sendable, Hashable, Codable {
    /// Registrations, processed in order.
    public var upsert: [JSONValue]?
    /// Binding ids to remove.
    public var delete: [String]?

    enum CodingKeys: String, CodingKey, CaseIterable { case upsert, delete }

    /// Creates a request.
    public init(upsert: [JSONValue]? = nil, delete: [String]? = nil) {
        self.upsert = upsert
        self.delete = delete
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.strictContainer(keyedBy: CodingKeys.self)
        // Items stay raw so one bad item fails alone instead of failing the whole batch.
        upsert = try container.decodeIfPresent([JSONValue].self, forKey: .upsert)
        delete = try container.decodeIfPresent([String].self, forKey: .delete)
    }
}

/// `POST /v1/bindings/batch` answer: one result per item, in request order.
public struct BindingBatchResponse: Sendable, Hashable, Codable {
    /// Result of one upsert item.
    public struct UpsertResult: Sendable, Hashable, Codable {
        /// Position in the request's `upsert` array.
        public var index: Int
        /// The status the item would have had alone: 201, 200 or a 4xx.
        public var status: Int
        /// The binding, on success.
        public var binding: BindingResource?
        /// The error, on failure.
        public var error: ErrorBody.Detail?

        /// Creates a result.
        public init(index: Int, status: Int, binding: BindingResource? = nil, error: ErrorBody.Detail? = nil) {
            self.index = index
            self.status = status
            self.binding = binding
            self.error = error
        }
    }

    /// Result of one delete item.
    public struct DeleteResult: Sendable, Hashable, Codable {
        /// The id from the request.
        public var id: String
        /// 204 when deleted, 404 when unknown.
        public var status: Int
        /// The error, on failure.
        public var error: ErrorBody.Detail?

        /// Creates a result.
        public init(id: String, status: Int, error: ErrorBody.Detail? = nil) {
            self.id = id
            self.status = status
            self.error = error
        }
    }

    /// Upsert results.
    public var upsert: [UpsertResult]
    /// Delete results.
    public var delete: [DeleteResult]

    /// Creates the body.
    public init(upsert: [UpsertResult], delete: [DeleteResult]) {
        self.upsert = upsert
        self.delete = delete
    }
}

/// One device key in an identity's key directory (`GET /v1/identities/{identity}/keys`): what a
/// caller seals an invite to.
public struct DeviceKeyResource: Sendable, Hashable, Codable {
    /// The binding the key was registered with (`bnd_…`); a sealed box names it.
    public var bindingId: String
    /// The device, when the binding names one.
    public var deviceId: String?
    /// The binding's type (`apns_voip`, `apns_alert`, `fcm`, `live`).
    public var type: String
    /// The P-256 public key, base64 of the uncompressed point (X9.63).
    public var publicKey: String
    /// When the key was last registered (a re-registration with a new key changes it).
    public var registeredAt: Date

    /// Creates the body.
    public init(bindingId: String, deviceId: String?, type: String, publicKey: String, registeredAt: Date) {
        self.bindingId = bindingId
        self.deviceId = deviceId
        self.type = type
        self.publicKey = publicKey
        self.registeredAt = registeredAt
    }
}

/// `GET /v1/identities/{identity}/keys` answer.
public struct DeviceKeyList: Sendable, Hashable, Codable {
    /// The identity asked about.
    public var identity: String
    /// Its active bindings that carry a public key, by registration time; empty when it has none.
    public var data: [DeviceKeyResource]

    /// Creates the body.
    public init(identity: String, data: [DeviceKeyResource]) {
        self.identity = identity
        self.data = data
    }
}
