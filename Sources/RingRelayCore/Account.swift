import Foundation

/// A tenant of RingRelay: an app developer's project with its own keys, credentials and bindings.
public struct Account: Sendable, Hashable {
    /// `acc_…` identifier.
    public var id: String
    /// Human-readable unique name, e.g. `default`.
    public var name: String
    /// When the account was created.
    public var createdAt: Date

    /// Creates an account value.
    public init(id: String, name: String, createdAt: Date) {
        self.id = id
        self.name = name
        self.createdAt = createdAt
    }

    /// Checks an account name: 1–64 characters of letters, digits, `-`, `_` and `.`.
    public static func validateName(_ name: String) throws(RingRelayError) {
        let allowed = name.unicodeScalars.allSatisfy {
            CharacterSet.alphanumerics.contains($0) && $0.isASCII || "-_.".unicodeScalars.contains($0)
        }
        guard (1...64).contains(name.count), allowed else {
            throw .invalidField("name", "use 1–64 ASCII letters, digits, '-', '_' or '.'.")
        }
    }
}

/// An account API key as stored: only a hash of the secret is kept.
public struct APIKeyRecord: Sendable, Hashable {
    /// `key_…` identifier.
    public var id: String
    /// The account the key belongs to.
    public var accountID: String
    /// SHA-256 of the secret, hex. The secret itself is shown once and never stored.
    public var secretHash: String
    /// Last characters of the secret, so a user can tell keys apart.
    public var hint: String
    /// When the key was created.
    public var createdAt: Date
    /// When the key was revoked, if it was.
    public var revokedAt: Date?

    /// Creates a key record.
    public init(id: String, accountID: String, secretHash: String, hint: String, createdAt: Date, revokedAt: Date? = nil) {
        self.id = id
        self.accountID = accountID
        self.secretHash = secretHash
        self.hint = hint
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }
}
