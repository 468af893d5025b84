import Crypto
import Foundation
import RingRelayCore
import Synchronization

/// An APNs token-signing key: the `.p8` key with its key id and team id.
public struct APNsSigningKey: Sendable, Hashable {
    /// 10-character team id (`iss`).
    public var teamID: String
    /// 10-character key id (`kid`).
    public var keyID: String
    /// The `.p8` contents.
    public var privateKeyPEM: String

    /// Creates a key.
    public init(teamID: String, keyID: String, privateKeyPEM: String) {
        self.teamID = teamID
        self.keyID = keyID
        self.privateKeyPEM = privateKeyPEM
    }

    /// Hashes the ids only: a key is looked up on every push, and its PEM is a few hundred bytes
    /// (equality still compares all three).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(teamID)
        hasher.combine(keyID)
    }
}

/// Builds APNs provider tokens: ES256 JWTs with `kid`, `iss` and `iat`.
public enum APNsProviderToken {
    /// Signs a token.
    ///
    /// The signature is the raw 64-byte `R||S` form JWS requires (RFC 7518 §3.4), not DER.
    /// - Throws: when the key is not a P-256 PEM key.
    public static func make(key: APNsSigningKey, issuedAt: Date) throws -> String {
        let privateKey = try P256.Signing.PrivateKey(pemRepresentation: key.privateKeyPEM)
        return try make(teamID: key.teamID, keyID: key.keyID, privateKey: privateKey, issuedAt: issuedAt)
    }

    /// Signs a token with a parsed key.
    public static func make(teamID: String, keyID: String, privateKey: P256.Signing.PrivateKey, issuedAt: Date) throws -> String {
        let header = try JSONSerialization.data(withJSONObject: ["alg": "ES256", "kid": keyID], options: .sortedKeys)
        let claims = try JSONSerialization.data(
            withJSONObject: ["iss": teamID, "iat": Int(issuedAt.timeIntervalSince1970)], options: .sortedKeys)
        let signingInput = header.base64URL + "." + claims.base64URL
        let signature = try privateKey.signature(for: Data(signingInput.utf8))
        return signingInput + "." + signature.rawRepresentation.base64URL
    }
}

/// Hands out one cached provider token per signing key, following Apple's rules.
///
/// A token is reused until it is 40–50 minutes old (the point is jittered per token so many keys
/// do not refresh together), never replaced within 20 minutes of minting (APNs answers
/// `TooManyProviderTokenUpdates`), and replaced early only after APNs says `ExpiredProviderToken`.
///
/// Every push asks for its token, so the cache is a lock rather than an actor: a hit is a
/// dictionary lookup on the caller's thread, not two hops between executors. Minting (an ECDSA
/// signature, about once in 45 minutes per key) runs under the lock.
public final class APNsTokenManager: Sendable {
    private struct Cached {
        var token: String
        var issuedAt: Date
        var refreshAfter: TimeInterval
    }

    private struct State: ~Copyable {
        var cache: [APNsSigningKey: Cached] = [:]
        var parsedKeys: [String: P256.Signing.PrivateKey] = [:]
    }

    /// Youngest age at which a token may be replaced.
    public static let minimumAge: TimeInterval = 20 * 60
    /// Range of ages at which a token is refreshed.
    public static let refreshAge: ClosedRange<TimeInterval> = (40 * 60)...(50 * 60)

    private let clock: any WallClock
    private let state = Mutex(State())
    private let onMint: @Sendable () -> Void

    /// Creates a manager.
    ///
    /// - Parameters:
    ///   - clock: the time source (a manual clock in tests).
    ///   - onMint: called for every new token (metrics).
    public init(clock: any WallClock, onMint: @escaping @Sendable () -> Void = {}) {
        self.clock = clock
        self.onMint = onMint
    }

    /// The current token for `key`, minting one when none is fresh enough.
    public func token(for key: APNsSigningKey) throws -> String {
        let now = clock.now
        let (token, minted) = try state.withLock { state throws -> (String, Bool) in
            if let cached = state.cache[key], now.timeIntervalSince(cached.issuedAt) < cached.refreshAfter {
                return (cached.token, false)
            }
            return (try Self.mint(key, now: now, &state), true)
        }
        if minted { onMint() }
        return token
    }

    /// Reports that APNs answered `ExpiredProviderToken` for `token`.
    ///
    /// - Returns: `true` when the token was dropped and the next call mints a new one; `false`
    ///   when it is too young to replace (a clock problem, not an old token).
    @discardableResult
    public func reportExpired(_ token: String, for key: APNsSigningKey) -> Bool {
        let now = clock.now
        return state.withLock { state in
            guard let cached = state.cache[key], cached.token == token else { return true }  // already replaced
            guard now.timeIntervalSince(cached.issuedAt) >= Self.minimumAge else { return false }
            state.cache[key] = nil
            return true
        }
    }

    private static func mint(_ key: APNsSigningKey, now: Date, _ state: inout State) throws -> String {
        let privateKey: P256.Signing.PrivateKey
        if let parsed = state.parsedKeys[key.privateKeyPEM] {
            privateKey = parsed
        } else {
            privateKey = try P256.Signing.PrivateKey(pemRepresentation: key.privateKeyPEM)
            state.parsedKeys[key.privateKeyPEM] = privateKey
        }
        let token = try APNsProviderToken.make(teamID: key.teamID, keyID: key.keyID, privateKey: privateKey, issuedAt: now)
        state.cache[key] = Cached(token: token, issuedAt: now, refreshAfter: .random(in: Self.refreshAge))
        return token
    }
}

extension Data {
    /// Base64url without padding.
    var base64URL: String {
        base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
