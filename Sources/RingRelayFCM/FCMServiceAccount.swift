import Foundation
import RingRelayCore
import _CryptoExtras

/// The parts of a Google service account RingRelay uses to mint access tokens.
public struct FCMServiceAccount: Sendable, Hashable {
    /// `client_email`: the assertion's `iss`.
    public var clientEmail: String
    /// `private_key`: the PEM RSA key that signs assertions.
    public var privateKeyPEM: String
    /// `private_key_id`: the assertion's `kid`, when present.
    public var privateKeyID: String?
    /// `token_uri`: where assertions are exchanged, and the assertion's `aud`.
    public var tokenURI: String
    /// `project_id`: the project messages are sent through.
    public var projectID: String

    /// Creates a service account from its parts.
    public init(clientEmail: String, privateKeyPEM: String, privateKeyID: String?, tokenURI: String, projectID: String) {
        self.clientEmail = clientEmail
        self.privateKeyPEM = privateKeyPEM
        self.privateKeyID = privateKeyID
        self.tokenURI = tokenURI
        self.projectID = projectID
    }

    /// Reads the service account JSON stored in a credential.
    ///
    /// - Throws: ``FCMOAuthError`` (`InvalidCredential`) when the JSON lacks a field; the
    ///   message names the field, never its value.
    public init(credential: FCMCredential) throws(FCMOAuthError) {
        let object: [String: Any]
        do {
            guard let parsed = try JSONSerialization.jsonObject(with: Data(credential.serviceAccountJSON.utf8)) as? [String: Any] else {
                throw FCMOAuthError.invalidCredential("the service account is not a JSON object")
            }
            object = parsed
        } catch let error as FCMOAuthError {
            throw error
        } catch {
            throw .invalidCredential("the service account is not valid JSON")
        }
        guard let privateKey = object["private_key"] as? String, !privateKey.isEmpty else {
            throw .invalidCredential("the service account has no private_key")
        }
        let keyID = (object["private_key_id"] as? String).flatMap { $0.isEmpty ? nil : $0 }
        self.init(
            clientEmail: credential.clientEmail, privateKeyPEM: privateKey, privateKeyID: keyID, tokenURI: credential.tokenURI,
            projectID: credential.projectID)
    }
}

/// Builds the RS256 JWT assertion a service account exchanges for an access token (the OAuth 2.0
/// JWT-bearer grant, RFC 7523).
public enum FCMOAuthAssertion {
    /// The scope FCM sends need.
    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    /// `exp - iat`: Google accepts at most an hour.
    public static let lifetime: TimeInterval = 3600
    /// `grant_type` of the token request.
    public static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"

    /// Signs an assertion.
    ///
    /// Header `{"alg":"RS256","kid":…,"typ":"JWT"}`; claims `iss` (client e-mail), `scope`, `aud`
    /// (the token URI), `iat`, `exp = iat + 3600`; signature RSASSA-PKCS1-v1_5 with SHA-256.
    /// - Throws: when the key cannot sign.
    public static func make(account: FCMServiceAccount, privateKey: _RSA.Signing.PrivateKey, issuedAt: Date) throws -> String {
        var header = ["alg": "RS256", "typ": "JWT"]
        if let keyID = account.privateKeyID { header["kid"] = keyID }
        let iat = Int(issuedAt.timeIntervalSince1970.rounded(.down))
        let claims: [String: Any] = [
            "iss": account.clientEmail, "scope": scope, "aud": account.tokenURI, "iat": iat, "exp": iat + Int(lifetime),
        ]
        let headerJSON = try JSONSerialization.data(withJSONObject: header, options: [.sortedKeys, .withoutEscapingSlashes])
        let claimsJSON = try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys, .withoutEscapingSlashes])
        let signingInput = headerJSON.fcmBase64URL + "." + claimsJSON.fcmBase64URL
        let signature = try privateKey.signature(for: Data(signingInput.utf8), padding: .insecurePKCS1v1_5)
        return signingInput + "." + signature.rawRepresentation.fcmBase64URL
    }

    /// The form body of the token request: `grant_type=…&assertion=…`.
    public static func tokenRequestBody(assertion: String) -> String {
        "grant_type=" + formEncode(grantType) + "&assertion=" + formEncode(assertion)
    }

    /// `application/x-www-form-urlencoded` encoding of one value.
    static func formEncode(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: .fcmPathSegment) ?? value
    }
}

extension Data {
    /// Base64url without padding.
    var fcmBase64URL: String {
        base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
