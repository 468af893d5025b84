import Foundation
import Hummingbird
import Logging
import RingRelayCore

/// Resolves the bearer credential of a request into a ``Principal``.
///
/// A request without credentials passes with no principal (health checks and webhooks need none);
/// a request with credentials that are not valid stops here with 401, so a typo never silently
/// downgrades to anonymous.
struct AuthMiddleware: RouterMiddleware, DescribedByNameOnly {
    typealias Context = RingRelayRequestContext

    let adminToken: String
    /// `--metrics-token`, when set.
    let metricsToken: String?
    let store: any DataStore
    let signer: AccessTokenSigner
    let clock: any WallClock

    /// API keys start with this prefix.
    static let apiKeyPrefix = "rrk_"

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let credential = try Self.credential(of: request) else {
            return try await next(request, context)
        }
        var context = context
        (context.principal, context.credentialExpiresAt) = try await principal(for: credential)
        if case .device(let accountID, let identity, _) = context.principal {
            context.logger[metadataKey: "account.id"] = .string(accountID)
            context.logger[metadataKey: "device.identity"] = .string(identity)
        } else if case .account(let accountID, _) = context.principal {
            context.logger[metadataKey: "account.id"] = .string(accountID)
        }
        return try await next(request, context)
    }

    private func principal(for credential: Credential) async throws -> (Principal, expiresAt: Date?) {
        let token = credential.token
        if credential.fromQuery, !token.hasPrefix("eyJ") {
            // Query strings end up in proxy and access logs: only short-lived device tokens may travel there.
            throw RingRelayError(
                .unauthenticated, code: .invalidCredentials,
                "Only device access tokens may be passed as ?access_token=; send API keys and the admin token in the Authorization header.")
        }
        if token.hasPrefix(Self.apiKeyPrefix) {
            guard let key = try await store.activeKey(secretHash: Secrets.hash(token)) else {
                throw RingRelayError(.unauthenticated, code: .invalidAPIKey, "The API key is not valid or has been revoked.")
            }
            return (.account(accountID: key.accountID, keyID: key.id), nil)
        }
        if token.hasPrefix("eyJ") {
            let claims = try signer.verify(token, now: clock.now)
            // A deleted account's tokens die with it, even before they expire.
            guard try await store.account(id: claims.acc) != nil else {
                throw RingRelayError(.unauthenticated, code: .invalidAccessToken, "The access token's account no longer exists.")
            }
            // A device signed out (its last binding removed) keeps no access through older tokens.
            if let signedOut = try await store.signedOut(accountID: claims.acc, identity: claims.sub, deviceID: claims.did),
                claims.issuedAtMillis <= signedOut.millis
            {
                throw RingRelayError(
                    .unauthenticated, code: .deviceSignedOut,
                    "The device was signed out (its bindings were removed) after this access token was minted; mint a new one.")
            }
            return (.device(accountID: claims.acc, identity: claims.sub, deviceID: claims.did), Date(timeIntervalSince1970: TimeInterval(claims.exp)))
        }
        if let metricsToken, Secrets.constantTimeEqual(token, metricsToken) {
            return (.metrics, nil)
        }
        guard Secrets.constantTimeEqual(token, adminToken) else {
            throw RingRelayError(.unauthenticated, code: .invalidCredentials, "The bearer token is not a valid admin token, API key or access token.")
        }
        return (.admin, nil)
    }

    /// A presented bearer token and where it came from.
    struct Credential {
        var token: String
        var fromQuery: Bool
    }

    /// The token from `Authorization: Bearer …`, or from `?access_token=` (for WebSocket clients
    /// that cannot set headers).
    ///
    /// - Throws: 401 for an `Authorization` header that is not a bearer token.
    static func credential(of request: Request) throws(RingRelayError) -> Credential? {
        if let header = request.headers[.authorization] {
            let parts = header.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "bearer" else {
                throw RingRelayError(.unauthenticated, code: .invalidCredentials, "Use 'Authorization: Bearer <token>'.")
            }
            return Credential(token: String(parts[1]).trimmingCharacters(in: .whitespaces), fromQuery: false)
        }
        // Parsed only when the query names it (names are matched as written, undecoded), not for
        // every signed webhook's `?bodySHA256=`.
        guard let query = request.uri.query, query.contains("access_token") else { return nil }
        return request.uri.queryParameters["access_token"].map { Credential(token: String($0), fromQuery: true) }
    }
}
