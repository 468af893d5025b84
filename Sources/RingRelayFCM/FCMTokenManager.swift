import Foundation
import RingRelayCore
import _CryptoExtras

/// An OAuth 2.0 access token for FCM and its lifetime.
public struct FCMAccessToken: Sendable, Hashable {
    /// The bearer token. A secret: never log it.
    public var value: String
    /// When it was asked for (the assertion's `iat`).
    public var issuedAt: Date
    /// When the token endpoint said it stops working.
    public var expiresAt: Date

    /// Creates a token value.
    public init(value: String, issuedAt: Date, expiresAt: Date) {
        self.value = value
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
    }

    /// How long it was issued for.
    public var lifetime: TimeInterval { expiresAt.timeIntervalSince(issuedAt) }
}

/// What the token endpoint granted.
public struct FCMTokenGrant: Sendable, Hashable {
    /// `access_token`.
    public var accessToken: String
    /// `expires_in`, in seconds.
    public var expiresIn: TimeInterval

    /// Creates a grant.
    public init(accessToken: String, expiresIn: TimeInterval) {
        self.accessToken = accessToken
        self.expiresIn = expiresIn
    }
}

/// Hands out one cached access token per service account, minting through the account's token
/// endpoint only when needed.
///
/// - A token is used until less than the refresh margin (5 minutes) is left; then the next caller
///   starts one refresh in the background and keeps using the current token until it expires, so
///   no push waits for a refresh.
/// - Without a usable token, callers wait for one mint: a burst of concurrent pushes mints once
///   (single flight).
/// - When the token endpoint rejects the account (`fixConfiguration`), pushes fail at once for a
///   hold-off instead of hammering it; new credentials are a new account and are tried at once.
public actor FCMTokenManager {
    /// Exchanges a signed assertion at the account's token endpoint.
    public typealias Exchange = @Sendable (_ account: FCMServiceAccount, _ assertion: String) async throws(FCMOAuthError) -> FCMTokenGrant

    /// A token younger than this that FCM calls invalid is not replaced: the credentials are at
    /// fault, and minting again would only repeat the failure.
    public static let minimumAgeForReplacement: TimeInterval = 60

    private struct Entry {
        var token: FCMAccessToken?
        var minting: Task<FCMAccessToken, any Error>?
        var rejection: FCMOAuthError?
        var rejectedUntil: Date?
        var nextRefreshAttempt: Date?
        var privateKey: _RSA.Signing.PrivateKey?
    }

    private let clock: any WallClock
    private let refreshMargin: TimeInterval
    private let holdOff: TimeInterval
    private let exchange: Exchange
    private let onMint: @Sendable () -> Void
    private var entries: [FCMCredential: Entry] = [:]

    /// Creates a manager.
    ///
    /// - Parameters:
    ///   - clock: the time source (a manual clock in tests).
    ///   - refreshMargin: refresh when less than this is left of a token's lifetime.
    ///   - rejectionHoldOff: how long a rejected account fails without asking again.
    ///   - exchange: performs the token request (``FCMClient`` posts to the account's `token_uri`).
    ///   - onMint: called for every new token (metrics).
    public init(
        clock: any WallClock, refreshMargin: Duration = .seconds(300), rejectionHoldOff: Duration = .seconds(30),
        exchange: @escaping Exchange, onMint: @escaping @Sendable () -> Void = {}
    ) {
        self.clock = clock
        self.refreshMargin = refreshMargin.timeInterval
        self.holdOff = rejectionHoldOff.timeInterval
        self.exchange = exchange
        self.onMint = onMint
    }

    /// The current token for a credential, minting one when none is usable.
    ///
    /// - Throws: ``FCMOAuthError`` when no token could be had; its disposition says whether the
    ///   credentials are at fault or the token endpoint was unreachable.
    public func token(for credential: FCMCredential) async throws(FCMOAuthError) -> FCMAccessToken {
        let now = clock.now
        var entry = entries[credential] ?? Entry()
        if let token = entry.token, now < hardExpiry(of: token) {
            if now >= refreshPoint(of: token), entry.minting == nil, entry.nextRefreshAttempt.map({ now >= $0 }) ?? true {
                entry.minting = startMint(credential)
                entries[credential] = entry
            }
            return token
        }
        if let rejection = entry.rejection, let until = entry.rejectedUntil, now < until { throw rejection }
        let task = entry.minting ?? startMint(credential)
        entry.minting = task
        entries[credential] = entry
        do {
            return try await task.value
        } catch let error as FCMOAuthError {
            throw error
        } catch {
            throw FCMOAuthError(reason: "OAuthError", disposition: .retry, detail: "minting was interrupted")
        }
    }

    /// Reports that FCM answered 401 to a request carrying `token`.
    ///
    /// - Returns: `true` when the token was dropped (or already replaced) and the next call mints
    ///   a new one; `false` when it is too young to replace (the credentials are at fault).
    @discardableResult
    public func reportRejected(_ token: String, for credential: FCMCredential) -> Bool {
        guard var entry = entries[credential], let current = entry.token, current.value == token else { return true }
        guard clock.now.timeIntervalSince(current.issuedAt) >= Self.minimumAgeForReplacement else { return false }
        entry.token = nil
        entries[credential] = entry
        return true
    }

    /// Waits for a mint in flight for `credential`, if any (tests use it to observe background refreshes).
    func waitForPendingMint(for credential: FCMCredential) async {
        _ = try? await entries[credential]?.minting?.value
    }

    // MARK: Minting

    private func refreshPoint(of token: FCMAccessToken) -> Date {
        token.issuedAt.addingTimeInterval(max(token.lifetime - refreshMargin, token.lifetime / 2))
    }

    /// Slightly before the stated expiry, so a token is not sent in its last seconds.
    private func hardExpiry(of token: FCMAccessToken) -> Date {
        token.issuedAt.addingTimeInterval(max(token.lifetime - 30, token.lifetime * 0.9))
    }

    private func startMint(_ credential: FCMCredential) -> Task<FCMAccessToken, any Error> {
        Task { () async throws -> FCMAccessToken in
            do throws(FCMOAuthError) {
                return try await self.mint(credential)
            } catch {
                self.mintFailed(credential, error)
                throw error
            }
        }
    }

    private func mint(_ credential: FCMCredential) async throws(FCMOAuthError) -> FCMAccessToken {
        let issuedAt = clock.now
        let account = try FCMServiceAccount(credential: credential)
        let privateKey = try privateKey(for: credential, pem: account.privateKeyPEM)
        let assertion: String
        do {
            assertion = try FCMOAuthAssertion.make(account: account, privateKey: privateKey, issuedAt: issuedAt)
        } catch {
            throw .invalidCredential("the service account's private key cannot sign")
        }
        let grant = try await exchange(account, assertion)
        let token = FCMAccessToken(
            value: grant.accessToken, issuedAt: issuedAt, expiresAt: issuedAt.addingTimeInterval(max(0, grant.expiresIn)))
        var entry = entries[credential] ?? Entry()
        entry.token = token
        entry.minting = nil
        entry.rejection = nil
        entry.rejectedUntil = nil
        entry.nextRefreshAttempt = nil
        entries[credential] = entry
        onMint()
        pruneExpired(except: credential)
        return token
    }

    private func mintFailed(_ credential: FCMCredential, _ error: FCMOAuthError) {
        let now = clock.now
        var entry = entries[credential] ?? Entry()
        entry.minting = nil
        if error.disposition == .fixConfiguration {
            entry.rejection = error
            entry.rejectedUntil = now.addingTimeInterval(holdOff)
        }
        // A background refresh failed while the current token still works: try again later,
        // not on every push.
        if entry.token != nil { entry.nextRefreshAttempt = now.addingTimeInterval(holdOff) }
        entries[credential] = entry
    }

    private func privateKey(for credential: FCMCredential, pem: String) throws(FCMOAuthError) -> _RSA.Signing.PrivateKey {
        if let key = entries[credential]?.privateKey { return key }
        let key: _RSA.Signing.PrivateKey
        do {
            key = try _RSA.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw .invalidCredential("the service account's private_key is not a PEM RSA key of 2048 bits or more")
        }
        entries[credential, default: Entry()].privateKey = key
        return key
    }

    /// Forgets accounts whose tokens have expired and that nobody is using (replaced credentials).
    private func pruneExpired(except kept: FCMCredential) {
        let now = clock.now
        entries = entries.filter { credential, entry in
            if credential == kept || entry.minting != nil { return true }
            if let until = entry.rejectedUntil, now < until { return true }
            guard let token = entry.token else { return false }
            return now < token.expiresAt
        }
    }
}
