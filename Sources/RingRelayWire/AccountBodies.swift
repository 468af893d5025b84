import Foundation

/// `POST /v1/accounts` body.
public struct CreateAccountRequest: Sendable, Hashable, Codable {
    /// Unique account name.
    public var name: String

    enum CodingKeys: String, CodingKey, CaseIterable { case name }

    /// Creates a request.
    public init(name: String) { self.name = name }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.strictContainer(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
    }
}

/// `201` answer to `POST /v1/accounts`: the only time the key is shown.
public struct CreatedAccount: Sendable, Hashable, Codable {
    /// `acc_…`
    public var id: String
    /// Account name.
    public var name: String
    /// The account's first API key. Store it now; it is never shown again.
    public var apiKey: String
    /// `key_…` id of that key, for revoking it.
    public var keyId: String
    /// Creation time.
    public var createdAt: Date

    /// Creates the body.
    public init(id: String, name: String, apiKey: String, keyId: String, createdAt: Date) {
        self.id = id
        self.name = name
        self.apiKey = apiKey
        self.keyId = keyId
        self.createdAt = createdAt
    }
}

/// An account as listed.
public struct AccountResource: Sendable, Hashable, Codable {
    /// `acc_…`
    public var id: String
    /// Account name.
    public var name: String
    /// Creation time.
    public var createdAt: Date

    /// Creates the body.
    public init(id: String, name: String, createdAt: Date) {
        self.id = id
        self.name = name
        self.createdAt = createdAt
    }
}

/// `GET /v1/accounts` answer.
public struct AccountList: Sendable, Hashable, Codable {
    /// Every account, oldest first.
    public var data: [AccountResource]

    /// Creates the body.
    public init(data: [AccountResource]) { self.data = data }
}

/// `201` answer to `POST /v1/accounts/{id}/keys`.
public struct CreatedKey: Sendable, Hashable, Codable {
    /// `key_…`
    public var id: String
    /// The account it belongs to.
    public var accountId: String
    /// The secret. Shown once.
    public var apiKey: String
    /// Creation time.
    public var createdAt: Date

    /// Creates the body.
    public init(id: String, accountId: String, apiKey: String, createdAt: Date) {
        self.id = id
        self.accountId = accountId
        self.apiKey = apiKey
        self.createdAt = createdAt
    }
}

/// `POST /v1/access-tokens` body.
public struct AccessTokenRequest: Sendable, Hashable, Codable {
    /// The identity the device acts as.
    public var identity: String
    /// The device the token is for.
    public var deviceId: String
    /// Lifetime in seconds (60–86400, default 3600).
    public var ttlSeconds: Int?

    enum CodingKeys: String, CodingKey, CaseIterable { case identity, deviceId, ttlSeconds }

    /// Creates a request.
    public init(identity: String, deviceId: String, ttlSeconds: Int? = nil) {
        self.identity = identity
        self.deviceId = deviceId
        self.ttlSeconds = ttlSeconds
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.strictContainer(keyedBy: CodingKeys.self)
        identity = try container.decode(String.self, forKey: .identity)
        deviceId = try container.decode(String.self, forKey: .deviceId)
        ttlSeconds = try container.decodeIfPresent(Int.self, forKey: .ttlSeconds)
    }
}

/// `201` answer to `POST /v1/access-tokens`.
public struct AccessTokenResponse: Sendable, Hashable, Codable {
    /// The signed token; send it as `Authorization: Bearer …` or `?access_token=`.
    public var token: String
    /// When it stops working.
    public var expiresAt: Date
    /// The identity it is bound to.
    public var identity: String
    /// The device it is bound to.
    public var deviceId: String

    /// Creates the body.
    public init(token: String, expiresAt: Date, identity: String, deviceId: String) {
        self.token = token
        self.expiresAt = expiresAt
        self.identity = identity
        self.deviceId = deviceId
    }
}

/// `GET`/`PUT /v1/accounts/{accountId}/limits` body: an operator's settings for one account in
/// place of the server's; a field left out (or `null`) is the server's.
public struct AccountLimitsBody: Sendable, Hashable, Codable {
    /// Requests per second of each of the account's budgets (webhooks, calls, binding writes); 0 is no limit.
    public var rateLimit: Double?
    /// The largest burst of each.
    public var rateLimitBurst: Double?
    /// How long a provider call rings, in seconds.
    public var ringTimeoutSeconds: Int?

    enum CodingKeys: String, CodingKey, CaseIterable { case rateLimit, rateLimitBurst, ringTimeoutSeconds }

    /// Creates the body.
    public init(rateLimit: Double? = nil, rateLimitBurst: Double? = nil, ringTimeoutSeconds: Int? = nil) {
        self.rateLimit = rateLimit
        self.rateLimitBurst = rateLimitBurst
        self.ringTimeoutSeconds = ringTimeoutSeconds
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.strictContainer(keyedBy: CodingKeys.self)
        rateLimit = try container.decodeIfPresent(Double.self, forKey: .rateLimit)
        rateLimitBurst = try container.decodeIfPresent(Double.self, forKey: .rateLimitBurst)
        ringTimeoutSeconds = try container.decodeIfPresent(Int.self, forKey: .ringTimeoutSeconds)
    }
}
