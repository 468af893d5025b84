import Crypto
import Foundation
import RingRelayCore

/// What a device access token grants: one identity and device within one account, until `expiresAt`.
struct AccessTokenClaims: Sendable, Hashable, Codable {
    /// Issuer, always `ringrelay`.
    var iss: String
    /// The account (`acc_…`).
    var acc: String
    /// The identity.
    var sub: String
    /// The device id.
    var did: String
    /// Issued at, seconds since the epoch.
    var iat: Int
    /// Expires at, seconds since the epoch.
    var exp: Int
    /// Issued at, milliseconds since the epoch: what a sign-out of the device is compared with
    /// (a token minted just after a sign-out, in the same second, must work). Tokens minted
    /// before this claim existed lack it.
    var iatMs: Int?

    /// When the token was issued, in milliseconds; a token without `iatMs` counts as issued at the
    /// end of its second.
    var issuedAtMillis: Int { iatMs ?? iat * 1000 + 999 }
}

/// Mints and verifies device access tokens: compact JWTs signed with HMAC-SHA256.
///
/// The key is 256 random bits kept in the store's settings, so every instance sharing a store
/// accepts every other instance's tokens.
struct AccessTokenSigner: Sendable, DescribedByNameOnly {
    private let key: SymmetricKey
    private static let header = Data(#"{"alg":"HS256","typ":"JWT"}"#.utf8).base64URLEncoded()

    init(key: Data) {
        self.key = SymmetricKey(data: key)
    }

    /// Signs claims into a token.
    func sign(_ claims: AccessTokenClaims) throws -> String {
        let payload = try JSONEncoder.sortedKeys.encode(claims).base64URLEncoded()
        let signingInput = Self.header + "." + payload
        let mac = HMAC<SHA256>.authenticationCode(for: Data(signingInput.utf8), using: key)
        return signingInput + "." + Data(mac).base64URLEncoded()
    }

    /// Verifies a token's signature and lifetime.
    ///
    /// - Throws: ``RingRelayError`` `invalid_access_token` or `expired_access_token` (401).
    func verify(_ token: String, now: Date) throws(RingRelayError) -> AccessTokenClaims {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == Self.header[...],
            let signature = Data(base64URLEncoded: parts[2]),
            // Only the canonical encoding: otherwise the unused low bits of the last character
            // would let several spellings of one signature pass.
            signature.base64URLEncoded() == parts[2],
            HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: Data("\(parts[0]).\(parts[1])".utf8), using: key),
            let payload = Data(base64URLEncoded: parts[1]),
            let claims = try? JSONDecoder().decode(AccessTokenClaims.self, from: payload),
            claims.iss == "ringrelay"
        else {
            throw RingRelayError(.unauthenticated, code: .invalidAccessToken, "The access token is not valid; mint a new one with POST /v1/access-tokens.")
        }
        guard Double(claims.exp) > now.timeIntervalSince1970 else {
            throw RingRelayError(.unauthenticated, code: .expiredAccessToken, "The access token has expired; mint a new one with POST /v1/access-tokens.")
        }
        return claims
    }
}

extension JSONEncoder {
    static var sortedKeys: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return encoder
    }
}
