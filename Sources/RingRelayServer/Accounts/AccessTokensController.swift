import Foundation
import Hummingbird
import Logging
import RingRelayCore
import RingRelayWire

/// `POST /v1/access-tokens`: an app backend mints a short-lived token for one of its devices.
struct AccessTokensController {
    let signer: AccessTokenSigner
    let clock: any WallClock
    /// Longest token lifetime, in seconds.
    let maxTTL: Int
    /// Largest request body accepted.
    let maxBodyBytes: Int

    /// Default token lifetime.
    static let defaultTTL = 3600
    /// Shortest lifetime.
    static let minimumTTL = 60

    func register(on router: Router<RingRelayRequestContext>) {
        router.post("/v1/access-tokens") { request, context in try await mint(request, context) }
    }

    func mint(_ request: Request, _ context: RingRelayRequestContext) async throws -> JSONResponse<AccessTokenResponse> {
        let accountID = try context.requireAccountKey()
        let body = try await request.decodeJSON(AccessTokenRequest.self, maxBytes: maxBodyBytes)
        try BindingRules.validateIdentity(body.identity)
        try BindingRules.validateDeviceID(body.deviceId)
        let ttl = body.ttlSeconds ?? Self.defaultTTL
        guard (Self.minimumTTL...maxTTL).contains(ttl) else {
            throw RingRelayError.invalidField("ttlSeconds", "must be from \(Self.minimumTTL) to \(maxTTL) seconds.")
        }
        let issued = clock.now
        let now = Int(issued.timeIntervalSince1970)
        let claims = AccessTokenClaims(
            iss: "ringrelay", acc: accountID, sub: body.identity, did: body.deviceId, iat: now, exp: now + ttl, iatMs: issued.millis)
        let token = try signer.sign(claims)
        return JSONResponse(
            .created,
            AccessTokenResponse(
                token: token, expiresAt: Date(timeIntervalSince1970: TimeInterval(claims.exp)), identity: body.identity,
                deviceId: body.deviceId))
    }
}
