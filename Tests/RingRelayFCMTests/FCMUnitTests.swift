import Crypto
import Foundation
import RingRelayCore
import RingRelayTesting
import Testing
import _CryptoExtras

@testable import RingRelayFCM

/// Assertions, message building and error mapping, without a network.
@Suite struct FCMUnitTests {
    static let sharedKeyPEM = (try? TestCredentials.serviceAccount())?["private_key"] ?? ""

    static func key() throws -> _RSA.Signing.PrivateKey {
        try _RSA.Signing.PrivateKey(pemRepresentation: sharedKeyPEM)
    }

    static func decodeBase64URL(_ text: Substring) throws -> Data {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.utf8.count % 4) % 4)
        return try #require(Data(base64Encoded: base64))
    }

    // MARK: OAuth assertion

    @Test func assertionCarriesGooglesClaimsAndVerifiesWithThePublicKey() throws {
        let key = try Self.key()
        let account = FCMServiceAccount(
            clientEmail: "firebase-adminsdk-abcde@myproject-b5ae1.iam.gserviceaccount.com", privateKeyPEM: key.pkcs8PEMRepresentation,
            privateKeyID: "0123456789abcdef", tokenURI: "https://oauth2.googleapis.com/token", projectID: "myproject-b5ae1")
        let issuedAt = Date(timeIntervalSince1970: 1_700_000_000.7)
        let assertion = try FCMOAuthAssertion.make(account: account, privateKey: key, issuedAt: issuedAt)

        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        let header = try #require(try JSONSerialization.jsonObject(with: Self.decodeBase64URL(parts[0])) as? [String: Any])
        #expect(header["alg"] as? String == "RS256")
        #expect(header["typ"] as? String == "JWT")
        #expect(header["kid"] as? String == "0123456789abcdef")
        let claims = try #require(try JSONSerialization.jsonObject(with: Self.decodeBase64URL(parts[1])) as? [String: Any])
        #expect(claims["iss"] as? String == "firebase-adminsdk-abcde@myproject-b5ae1.iam.gserviceaccount.com")
        #expect(claims["scope"] as? String == "https://www.googleapis.com/auth/firebase.messaging")
        #expect(claims["aud"] as? String == "https://oauth2.googleapis.com/token")
        #expect(claims["iat"] as? Int == 1_700_000_000)
        #expect(claims["exp"] as? Int == 1_700_003_600)
        #expect(Set(claims.keys) == ["iss", "scope", "aud", "iat", "exp"])

        // RSASSA-PKCS1-v1_5 with SHA-256 over `header.claims`, verifiable with the public key alone.
        let signature = _RSA.Signing.RSASignature(rawRepresentation: try Self.decodeBase64URL(parts[2]))
        let input = Data((parts[0] + "." + parts[1]).utf8)
        #expect(key.publicKey.isValidSignature(signature, for: input, padding: .insecurePKCS1v1_5))
        #expect(!key.publicKey.isValidSignature(signature, for: input, padding: .PSS))
        let other = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        #expect(!other.publicKey.isValidSignature(signature, for: input, padding: .insecurePKCS1v1_5))
    }

    @Test func assertionWithoutKeyIDHasNoKid() throws {
        let key = try Self.key()
        let account = FCMServiceAccount(
            clientEmail: "a@b.iam.gserviceaccount.com", privateKeyPEM: "", privateKeyID: nil, tokenURI: "https://example.test/token",
            projectID: "b")
        let assertion = try FCMOAuthAssertion.make(account: account, privateKey: key, issuedAt: Date())
        let header = try JSONSerialization.jsonObject(with: Self.decodeBase64URL(assertion.split(separator: ".")[0])) as? [String: Any]
        #expect(header?["kid"] == nil)
    }

    @Test func tokenRequestIsAFormEncodedJWTBearerGrant() {
        let body = FCMOAuthAssertion.tokenRequestBody(assertion: "aGVhZGVy.Y2xhaW1z.c2ln-_")
        #expect(body == "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=aGVhZGVy.Y2xhaW1z.c2ln-_")
    }

    @Test func serviceAccountIsReadFromTheStoredCredential() throws {
        let json = try TestCredentials.serviceAccount(projectID: "proj", tokenURI: "https://sim.test/token")
        let text = String(decoding: try JSONSerialization.data(withJSONObject: json), as: UTF8.self)
        let credential = FCMCredential(
            serviceAccountJSON: text, projectID: "proj", clientEmail: json["client_email"] ?? "", tokenURI: "https://sim.test/token")
        let account = try FCMServiceAccount(credential: credential)
        #expect(account.clientEmail == "ringrelay@proj.iam.gserviceaccount.com")
        #expect(account.privateKeyID == json["private_key_id"])
        #expect(account.tokenURI == "https://sim.test/token")
        #expect(account.projectID == "proj")

        let broken = FCMCredential(serviceAccountJSON: #"{"client_email":"x"}"#, projectID: "p", clientEmail: "x", tokenURI: "https://t")
        #expect(throws: FCMOAuthError.invalidCredential("the service account has no private_key")) {
            try FCMServiceAccount(credential: broken)
        }
    }

    // MARK: The call message

    @Test func callMessageIsDataOnlyHighPriorityAndExpiresWithTheRing() throws {
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        let request = try FCMRequest(
            token: "bk3RNwTe3H0:CI2k_HHwgIpoDKCIZvvDMExUdFQ3P1", data: ["ringrelay": #"{"v":1}"#, "type": "incoming_call"],
            expiresAt: now.addingTimeInterval(30.9), now: now)
        #expect(request.ttl == "30s")
        #expect(
            String(decoding: request.body, as: UTF8.self)
                == #"{"message":{"android":{"priority":"HIGH","ttl":"30s"},"data":{"ringrelay":"{\"v\":1}","type":"incoming_call"},"token":"bk3RNwTe3H0:CI2k_HHwgIpoDKCIZvvDMExUdFQ3P1"}}"#
        )
        #expect(request.kind == "data")
    }

    @Test func noticeIsANotificationMessageThatReplacesItsTag() throws {
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        let request = try FCMRequest(
            token: "bk3RNwTe3H0:CI2k", data: ["ringrelay": #"{"v":1}"#],
            notice: .init(title: "Missed call", body: "Missed call from Alice", tag: "call_1"), expiresAt: now.addingTimeInterval(86_400),
            now: now)
        #expect(
            String(decoding: request.body, as: UTF8.self)
                == #"{"message":{"android":{"collapse_key":"call_1","notification":{"tag":"call_1"},"priority":"HIGH","ttl":"86400s"},"data":{"ringrelay":"{\"v\":1}"},"notification":{"body":"Missed call from Alice","title":"Missed call"},"token":"bk3RNwTe3H0:CI2k"}}"#
        )
        #expect(request.kind == "notification")
    }

    @Test func ttlIsRoundedDownAndNeverNegative() throws {
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        #expect(try FCMRequest(token: "t", data: [:], expiresAt: now.addingTimeInterval(0.99), now: now).ttl == "0s")
        #expect(try FCMRequest(token: "t", data: [:], expiresAt: now.addingTimeInterval(-5), now: now).ttl == "0s")
        #expect(try FCMRequest(token: "t", data: [:], expiresAt: now.addingTimeInterval(44.999), now: now).ttl == "44s")
        #expect(try FCMRequest(token: "t", data: [:], expiresAt: now.addingTimeInterval(1e9), now: now).ttl == "2419200s")
    }

    @Test func dataIsCountedAsFCMCountsIt() throws {
        // Keys and values, in UTF-8 bytes: "k" + 4095 bytes is exactly the limit.
        let fits = ["k": String(repeating: "a", count: 4095)]
        #expect(FCMRequest.dataSize(fits) == 4096)
        _ = try FCMRequest(token: "t", data: fits, timeToLive: 30)
        let over = ["k": String(repeating: "a", count: 4094) + "é"]  // é is two bytes
        #expect(throws: FCMRequestError.payloadTooLarge(size: 4097, limit: 4096)) {
            try FCMRequest(token: "t", data: over, timeToLive: 30)
        }
        #expect(FCMRequestError.payloadTooLarge(size: 4097, limit: 4096).reason == "PayloadTooLarge")
    }

    @Test func reservedKeysAndBadTokensAreRefusedBeforeSending() {
        for key in ["from", "gcm", "google", "google.c.a.e", "googleSomething"] {
            #expect(throws: FCMRequestError.reservedKey(key)) { try FCMRequest(token: "t", data: [key: "x"], timeToLive: 1) }
        }
        for key in ["fromage", "gcm.x", "Google", "type"] {
            #expect(throws: Never.self) { try FCMRequest(token: "t", data: [key: "x"], timeToLive: 1) }
        }
        #expect(throws: FCMRequestError.invalidToken) { try FCMRequest(token: "", data: [:], timeToLive: 1) }
        #expect(throws: FCMRequestError.invalidToken) { try FCMRequest(token: "a b", data: [:], timeToLive: 1) }
    }

    // MARK: Errors and dispositions

    /// `fixtures/fcm/response-error-unregistered.json`.
    static let unregistered = """
        {"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND",
        "details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNREGISTERED"}]}}
        """
    /// `fixtures/fcm/response-error-invalid-token-firebase-docs.json` (Firebase docs, Example 2).
    static let invalidToken = """
        {"error":{"code":400,"message":"The registration token is not a valid FCM registration token","status":"INVALID_ARGUMENT",
        "details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"INVALID_ARGUMENT"}]}}
        """
    /// `fixtures/fcm/response-error-invalid-data-value-firebase-docs.json` (Firebase docs, Example 1).
    static let invalidDataValue = """
        {"error":{"code":400,"message":"Invalid value at 'message.data[0].value' (TYPE_STRING), 12","status":"INVALID_ARGUMENT",
        "details":[{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.data[0].value",
        "description":"Invalid value at 'message.data[0].value' (TYPE_STRING), 12"}]}]}}
        """
    /// The shape seen in the wild: a generic message, the token named only in a field violation.
    static let invalidTokenByField = """
        {"error":{"code":400,"message":"Request contains an invalid argument.","status":"INVALID_ARGUMENT","details":[
        {"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"INVALID_ARGUMENT"},
        {"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.token","description":"Invalid registration token"}]}]}}
        """

    static func disposition(_ status: Int, _ json: String) -> (PushDisposition, String) {
        let body = FCMErrorBody(json: Data(json.utf8))
        return (FCMDispositionRules.disposition(status: status, error: body), body?.reason(httpStatus: status) ?? "HTTP\(status)")
    }

    @Test func dispositionsFollowTheFcmErrorDetail() {
        #expect(Self.disposition(404, Self.unregistered) == (.invalidateBinding, "UNREGISTERED"))
        #expect(Self.disposition(400, Self.invalidToken) == (.invalidateBinding, "INVALID_ARGUMENT"))
        #expect(Self.disposition(400, Self.invalidTokenByField) == (.invalidateBinding, "INVALID_ARGUMENT"))
        // An INVALID_ARGUMENT about the payload says nothing about the token.
        #expect(Self.disposition(400, Self.invalidDataValue) == (.drop, "INVALID_ARGUMENT"))
        let tooLarge = #"{"error":{"code":400,"message":"Request contains an invalid argument.","status":"INVALID_ARGUMENT"}}"#
        #expect(Self.disposition(400, tooLarge) == (.drop, "INVALID_ARGUMENT"))

        func envelope(_ status: Int, _ rpc: String, _ code: String?) -> String {
            let details = code.map { #","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#($0)"}]"# } ?? ""
            return #"{"error":{"code":\#(status),"message":"m","status":"\#(rpc)"\#(details)}}"#
        }
        #expect(Self.disposition(429, envelope(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED")) == (.retry, "QUOTA_EXCEEDED"))
        #expect(Self.disposition(503, envelope(503, "UNAVAILABLE", "UNAVAILABLE")) == (.retry, "UNAVAILABLE"))
        #expect(Self.disposition(500, envelope(500, "INTERNAL", "INTERNAL")) == (.retry, "INTERNAL"))
        #expect(Self.disposition(403, envelope(403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH")) == (.fixConfiguration, "SENDER_ID_MISMATCH"))
        #expect(Self.disposition(401, envelope(401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR")) == (.fixConfiguration, "THIRD_PARTY_AUTH_ERROR"))
        #expect(Self.disposition(401, envelope(401, "UNAUTHENTICATED", "APNS_AUTH_ERROR")) == (.fixConfiguration, "APNS_AUTH_ERROR"))
        #expect(Self.disposition(401, envelope(401, "UNAUTHENTICATED", nil)) == (.fixConfiguration, "UNAUTHENTICATED"))
        #expect(Self.disposition(403, envelope(403, "PERMISSION_DENIED", nil)) == (.fixConfiguration, "PERMISSION_DENIED"))
        // A 404 without UNREGISTERED is a wrong project or endpoint, never a dead token.
        #expect(Self.disposition(404, envelope(404, "NOT_FOUND", nil)) == (.fixConfiguration, "NOT_FOUND"))
        // Codes Google adds later are kept verbatim and judged by status.
        #expect(Self.disposition(503, envelope(503, "UNAVAILABLE", "BRAND_NEW")) == (.retry, "BRAND_NEW"))
        #expect(Self.disposition(400, envelope(400, "INVALID_ARGUMENT", "BRAND_NEW")) == (.drop, "BRAND_NEW"))
        // Not Google's envelope at all (an HTML 502 page).
        #expect(Self.disposition(502, "<html>Bad Gateway</html>") == (.retry, "HTTP502"))
        #expect(Self.disposition(200, "{}").0 == .delivered)
    }

    @Test func errorCodesRoundTrip() {
        for code in [
            "UNSPECIFIED_ERROR", "INVALID_ARGUMENT", "UNREGISTERED", "SENDER_ID_MISMATCH", "QUOTA_EXCEEDED", "UNAVAILABLE",
            "INTERNAL", "THIRD_PARTY_AUTH_ERROR", "APNS_AUTH_ERROR", "SOMETHING_NEW",
        ] {
            #expect(FCMErrorCode(code).description == code)
        }
        #expect(FCMErrorCode("SOMETHING_NEW") == .unknown("SOMETHING_NEW"))
    }

    @Test func oauthErrorsBecomeReasons() {
        #expect(FCMOAuthError.reason(forOAuthError: "invalid_grant") == "OAuthInvalidGrant")
        #expect(FCMOAuthError.reason(forOAuthError: "invalid_scope") == "OAuthInvalidScope")
        #expect(FCMOAuthError.reason(forOAuthError: "unauthorized_client") == "OAuthUnauthorizedClient")
        #expect(FCMOAuthError.reason(forOAuthError: "--") == "OAuthError")
        // The endpoint's own text never becomes a reason (it reaches API answers).
        #expect(FCMOAuthError.reason(forOAuthError: "root:x:0:0:root:/root:/bin/bash") == "OAuthError")
    }

    @Test func retryAfterIsReadAsSecondsOrAnHTTPDate() {
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        #expect(FCMClient.retryAfter("7", now: now) == .seconds(7))
        #expect(FCMClient.retryAfter(" 0 ", now: now) == .seconds(0))
        #expect(FCMClient.retryAfter("99999", now: now) == .seconds(3600))
        #expect(FCMClient.retryAfter(nil, now: now) == nil)
        #expect(FCMClient.retryAfter("soon", now: now) == nil)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        #expect(FCMClient.retryAfter(formatter.string(from: now.addingTimeInterval(12)), now: now) == .seconds(12))
    }

    @Test func sendPathNamesTheProject() {
        var configuration = FCMConfiguration()
        #expect(configuration.sendPath(projectID: "myproject-b5ae1") == "/v1/projects/myproject-b5ae1/messages:send")
        configuration.endpoint = "https://127.0.0.1:8443"
        #expect(configuration.sendPath(projectID: "a/b") == "/v1/projects/a%2Fb/messages:send")
        // An endpoint with a path of its own keeps it.
        configuration.endpoint = "https://127.0.0.1:8443/fcm/"
        #expect(configuration.sendPath(projectID: "a/b") == "/fcm/v1/projects/a%2Fb/messages:send")
    }
}
