import Foundation

/// The kinds of push and provider credentials an account can hold, one of each.
public enum CredentialKind: String, Sendable, Hashable, CaseIterable, Codable {
    /// Apple Push Notification service.
    case apns
    /// Firebase Cloud Messaging.
    case fcm
    /// Twilio webhook signing (account SID and auth token).
    case twilio
    /// Webex webhook signing secret.
    case webex
}

/// APNs credentials: a token-signing key (`.p8`) or a client certificate, plus the app's topic.
public struct APNsCredential: Sendable, Hashable, Codable {
    /// How RingRelay authenticates to APNs.
    public enum Authentication: Sendable, Hashable, Codable {
        /// ES256 provider tokens signed with a `.p8` key.
        case token(teamID: String, keyID: String, privateKeyPEM: String)
        /// TLS client certificate and its private key, both PEM.
        case certificate(certificatePEM: String, privateKeyPEM: String)
        /// TLS client certificate and key in a PKCS#12 file (a `.p12` exported from Keychain Access).
        case pkcs12(data: Data, passphrase: String)
    }

    /// The authentication material.
    public var authentication: Authentication
    /// The app's bundle id; VoIP pushes go to `<topic>.voip`.
    public var topic: String

    /// Creates an APNs credential.
    public init(authentication: Authentication, topic: String) {
        self.authentication = authentication
        self.topic = topic
    }
}

/// FCM credentials: a Google service account.
public struct FCMCredential: Sendable, Hashable, Codable {
    /// The service account JSON exactly as Google issued it.
    public var serviceAccountJSON: String
    /// `project_id` from the service account.
    public var projectID: String
    /// `client_email` from the service account.
    public var clientEmail: String
    /// `token_uri` from the service account (a simulator's in tests).
    public var tokenURI: String

    /// Creates an FCM credential.
    public init(serviceAccountJSON: String, projectID: String, clientEmail: String, tokenURI: String) {
        self.serviceAccountJSON = serviceAccountJSON
        self.projectID = projectID
        self.clientEmail = clientEmail
        self.tokenURI = tokenURI
    }

    /// Hashes the account's names only: the token cache and the connection pools look a
    /// credential up on every push, and its JSON (with the private key) is a few kilobytes.
    /// Equality still compares it all, so a new key for the same account is another credential.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(clientEmail)
        hasher.combine(projectID)
        hasher.combine(tokenURI)
    }
}

/// Twilio credentials for verifying `X-Twilio-Signature`.
public struct TwilioCredential: Sendable, Hashable, Codable {
    /// `AC…` account SID; webhooks for other SIDs are refused.
    public var accountSID: String
    /// The auth token that signs webhooks.
    public var authToken: String

    /// Creates a Twilio credential.
    public init(accountSID: String, authToken: String) {
        self.accountSID = accountSID
        self.authToken = authToken
    }
}

/// Webex credentials for verifying `X-Spark-Signature`.
public struct WebexCredential: Sendable, Hashable, Codable {
    /// The webhook secret set when the webhook was created.
    public var secret: String

    /// Creates a Webex credential.
    public init(secret: String) {
        self.secret = secret
    }
}

/// One stored credential of an account.
public enum Credential: Sendable, Hashable, Codable {
    /// APNs key or certificate.
    case apns(APNsCredential)
    /// FCM service account.
    case fcm(FCMCredential)
    /// Twilio signing material.
    case twilio(TwilioCredential)
    /// Webex signing secret.
    case webex(WebexCredential)

    /// Which kind this is.
    public var kind: CredentialKind {
        switch self {
        case .apns: .apns
        case .fcm: .fcm
        case .twilio: .twilio
        case .webex: .webex
        }
    }
}

/// A credential with its bookkeeping, as the store returns it.
public struct StoredCredential: Sendable, Hashable {
    /// The credential.
    public var credential: Credential
    /// When it was last uploaded.
    public var updatedAt: Date

    /// Creates a stored credential.
    public init(credential: Credential, updatedAt: Date) {
        self.credential = credential
        self.updatedAt = updatedAt
    }
}
