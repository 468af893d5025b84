import Foundation

/// `PUT /v1/credentials/apns` body: a token key (`teamId`, `keyId`, `privateKey`), a PEM certificate
/// (`certificate`, `privateKey`) or a PKCS#12 file (`pkcs12`, `passphrase`), each with the app's `topic`.
public struct APNsCredentialRequest: Sendable, Hashable, Codable {
    /// Apple Developer team id (token auth).
    public var teamId: String?
    /// Key id of the `.p8` key (token auth).
    public var keyId: String?
    /// PEM private key: the `.p8` contents, or the certificate's key.
    public var privateKey: String?
    /// PEM client certificate (certificate auth).
    public var certificate: String?
    /// Base64 of a `.p12` file holding the certificate and its key (certificate auth).
    public var pkcs12: String?
    /// The `.p12` file's passphrase.
    public var passphrase: String?
    /// The app's bundle id.
    public var topic: String

    enum CodingKeys: String, CodingKey, CaseIterable { case teamId, keyId, privateKey, certificate, pkcs12, passphrase, topic }

    /// Creates a token-auth request.
    public init(teamId: String, keyId: String, privateKey: String, topic: String) {
        self.teamId = teamId
        self.keyId = keyId
        self.privateKey = privateKey
        self.topic = topic
    }

    /// Creates a PKCS#12 certificate-auth request.
    public init(pkcs12: String, passphrase: String, topic: String) {
        self.pkcs12 = pkcs12
        self.passphrase = passphrase
        self.topic = topic
    }

    /// Creates a certificate-auth request.
    public init(certificate: String, privateKey: String, topic: String) {
        self.certificate = certificate
        self.privateKey = privateKey
        self.topic = topic
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.strictContainer(keyedBy: CodingKeys.self)
        teamId = try container.decodeIfPresent(String.self, forKey: .teamId)
        keyId = try container.decodeIfPresent(String.self, forKey: .keyId)
        privateKey = try container.decodeIfPresent(String.self, forKey: .privateKey)
        certificate = try container.decodeIfPresent(String.self, forKey: .certificate)
        pkcs12 = try container.decodeIfPresent(String.self, forKey: .pkcs12)
        passphrase = try container.decodeIfPresent(String.self, forKey: .passphrase)
        topic = try container.decode(String.self, forKey: .topic)
    }
}

/// `PUT /v1/credentials/fcm` body.
public struct FCMCredentialRequest: Sendable, Hashable, Codable {
    /// The service account JSON as Google issues it.
    public var serviceAccount: [String: JSONValue]

    enum CodingKeys: String, CodingKey, CaseIterable { case serviceAccount }

    /// Creates a request.
    public init(serviceAccount: [String: JSONValue]) { self.serviceAccount = serviceAccount }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.strictContainer(keyedBy: CodingKeys.self)
        serviceAccount = try container.decode([String: JSONValue].self, forKey: .serviceAccount)
    }
}

/// `PUT /v1/credentials/twilio` body.
public struct TwilioCredentialRequest: Sendable, Hashable, Codable {
    /// `AC…` account SID.
    public var accountSid: String
    /// Auth token that signs Twilio's webhooks.
    public var authToken: String

    enum CodingKeys: String, CodingKey, CaseIterable { case accountSid, authToken }

    /// Creates a request.
    public init(accountSid: String, authToken: String) {
        self.accountSid = accountSid
        self.authToken = authToken
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.strictContainer(keyedBy: CodingKeys.self)
        accountSid = try container.decode(String.self, forKey: .accountSid)
        authToken = try container.decode(String.self, forKey: .authToken)
    }
}

/// `PUT /v1/credentials/webex` body.
public struct WebexCredentialRequest: Sendable, Hashable, Codable {
    /// The webhook secret.
    public var secret: String

    enum CodingKeys: String, CodingKey, CaseIterable { case secret }

    /// Creates a request.
    public init(secret: String) { self.secret = secret }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.strictContainer(keyedBy: CodingKeys.self)
        secret = try container.decode(String.self, forKey: .secret)
    }
}

/// `GET /v1/credentials` answer and the answer to every `PUT`: what is configured, never a secret.
public struct CredentialsResource: Sendable, Hashable, Codable {
    /// APNs summary.
    public struct APNs: Sendable, Hashable, Codable {
        /// `token` or `certificate`.
        public var authentication: String
        /// Team id (token auth).
        public var teamId: String?
        /// Key id (token auth).
        public var keyId: String?
        /// Bundle id.
        public var topic: String
        /// Certificate expiry (certificate auth).
        public var certificateExpiresAt: Date?
        /// Upload time.
        public var updatedAt: Date

        /// Creates the summary.
        public init(
            authentication: String, teamId: String?, keyId: String?, topic: String,
            certificateExpiresAt: Date?, updatedAt: Date
        ) {
            self.authentication = authentication
            self.teamId = teamId
            self.keyId = keyId
            self.topic = topic
            self.certificateExpiresAt = certificateExpiresAt
            self.updatedAt = updatedAt
        }
    }

    /// FCM summary.
    public struct FCM: Sendable, Hashable, Codable {
        /// Firebase project id.
        public var projectId: String
        /// Service account e-mail.
        public var clientEmail: String
        /// Upload time.
        public var updatedAt: Date

        /// Creates the summary.
        public init(projectId: String, clientEmail: String, updatedAt: Date) {
            self.projectId = projectId
            self.clientEmail = clientEmail
            self.updatedAt = updatedAt
        }
    }

    /// Twilio summary.
    public struct Twilio: Sendable, Hashable, Codable {
        /// Account SID.
        public var accountSid: String
        /// Upload time.
        public var updatedAt: Date

        /// Creates the summary.
        public init(accountSid: String, updatedAt: Date) {
            self.accountSid = accountSid
            self.updatedAt = updatedAt
        }
    }

    /// Webex summary.
    public struct Webex: Sendable, Hashable, Codable {
        /// Upload time.
        public var updatedAt: Date

        /// Creates the summary.
        public init(updatedAt: Date) { self.updatedAt = updatedAt }
    }

    /// APNs, if configured.
    public var apns: APNs?
    /// FCM, if configured.
    public var fcm: FCM?
    /// Twilio, if configured.
    public var twilio: Twilio?
    /// Webex, if configured.
    public var webex: Webex?

    /// Creates an empty summary.
    public init(apns: APNs? = nil, fcm: FCM? = nil, twilio: Twilio? = nil, webex: Webex? = nil) {
        self.apns = apns
        self.fcm = fcm
        self.twilio = twilio
        self.webex = webex
    }
}
