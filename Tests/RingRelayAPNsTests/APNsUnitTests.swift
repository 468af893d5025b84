import Crypto
import Foundation
import NIOCore
import NIOEmbedded
import NIOHTTP2
import RingRelayCore
import RingRelayTesting
import Synchronization
import Testing

@testable import RingRelayAPNs

@Suite struct APNsRequestTests {
    @Test func voipRequestHasAppleHeaders() throws {
        let id = UUID()
        let request = try APNsRequest(
            kind: .voip, bundleID: "com.example.app", deviceToken: String(repeating: "AB", count: 32), payload: Array(#"{"aps":{}}"#.utf8),
            apnsID: id)
        let headers = Dictionary(uniqueKeysWithValues: request.headers)
        #expect(headers["apns-push-type"] == "voip")
        #expect(headers["apns-topic"] == "com.example.app.voip")
        #expect(headers["apns-priority"] == "10")
        #expect(headers["apns-expiration"] == "0")
        #expect(headers["apns-id"] == id.uuidString.lowercased())
        #expect(headers["authorization"] == nil)
        #expect(request.path == "/3/device/" + String(repeating: "ab", count: 32))
    }

    @Test func alertRequestUsesTheBareTopicAndTheDeadline() throws {
        let deadline = Date(timeIntervalSince1970: 1_800_000_000.2)
        let request = try APNsRequest(
            kind: .alert, bundleID: "com.example.app", deviceToken: String(repeating: "0", count: 64), payload: Array("{}".utf8),
            expiresAt: deadline)
        let headers = Dictionary(uniqueKeysWithValues: request.headers)
        #expect(headers["apns-push-type"] == "alert")
        #expect(headers["apns-topic"] == "com.example.app")
        #expect(headers["apns-expiration"] == "1800000001")
    }

    @Test func payloadLimitsAreCheckedBeforeSending() throws {
        let token = String(repeating: "0", count: 64)
        _ = try APNsRequest(kind: .voip, bundleID: "b", deviceToken: token, payload: Array(repeating: 0x20, count: 5120))
        #expect(throws: APNsRequestError.payloadTooLarge(size: 5121, limit: 5120)) {
            try APNsRequest(kind: .voip, bundleID: "b", deviceToken: token, payload: Array(repeating: 0x20, count: 5121))
        }
        #expect(throws: APNsRequestError.payloadTooLarge(size: 4097, limit: 4096)) {
            try APNsRequest(kind: .alert, bundleID: "b", deviceToken: token, payload: Array(repeating: 0x20, count: 4097))
        }
        #expect(throws: APNsRequestError.badDeviceToken) {
            try APNsRequest(kind: .voip, bundleID: "b", deviceToken: "xyz", payload: Array("{}".utf8))
        }
        #expect(throws: APNsRequestError.payloadEmpty) {
            try APNsRequest(kind: .voip, bundleID: "b", deviceToken: token, payload: [])
        }
    }
}

@Suite struct APNsProviderTokenTests {
    @Test func tokenIsAnES256JWTWithKidIssAndIatVerifiableWithThePublicKey() throws {
        let key = P256.Signing.PrivateKey()
        let issuedAt = Date(timeIntervalSince1970: 1_790_000_000)
        let token = try APNsProviderToken.make(teamID: "TEAM123456", keyID: "KEY1234567", privateKey: key, issuedAt: issuedAt)
        let parts = token.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        let header = try JSONSerialization.jsonObject(with: try #require(Data(base64URL: parts[0]))) as? [String: Any]
        let claims = try JSONSerialization.jsonObject(with: try #require(Data(base64URL: parts[1]))) as? [String: Any]
        #expect(header?["alg"] as? String == "ES256")
        #expect(header?["kid"] as? String == "KEY1234567")
        #expect(header?.count == 2)
        #expect(claims?["iss"] as? String == "TEAM123456")
        #expect(claims?["iat"] as? Int == 1_790_000_000)
        #expect(claims?.count == 2)
        let signature = try #require(Data(base64URL: parts[2]))
        #expect(signature.count == 64)  // raw R||S, not DER
        let ecdsa = try P256.Signing.ECDSASignature(rawRepresentation: signature)
        #expect(key.publicKey.isValidSignature(ecdsa, for: Data("\(parts[0]).\(parts[1])".utf8)))
        #expect(!P256.Signing.PrivateKey().publicKey.isValidSignature(ecdsa, for: Data("\(parts[0]).\(parts[1])".utf8)))
    }

    @Test func tokensAreReusedThenRefreshedAfterFortyToFiftyMinutes() async throws {
        let clock = ManualWallClock()
        let mints = Counter()
        let manager = APNsTokenManager(clock: clock, onMint: { mints.increment() })
        let key = APNsSigningKey(teamID: "TEAM123456", keyID: "KEY1234567", privateKeyPEM: TestCredentials.apnsP8())
        let first = try manager.token(for: key)
        clock.advance(by: 39 * 60 + 59)
        #expect(try manager.token(for: key) == first)
        #expect(mints.value == 1)
        clock.advance(by: 10 * 60 + 2)  // past 50 minutes: always refreshed
        let second = try manager.token(for: key)
        #expect(second != first)
        #expect(mints.value == 2)
        // Another key gets its own token.
        let other = APNsSigningKey(teamID: "TEAM123456", keyID: "OTHER12345", privateKeyPEM: TestCredentials.apnsP8())
        #expect(try manager.token(for: other) != second)
        // A new .p8 under the same ids (a rotated key file) is another key, though it hashes alike.
        let rotated = APNsSigningKey(teamID: "TEAM123456", keyID: "KEY1234567", privateKeyPEM: P256.Signing.PrivateKey().pemRepresentation)
        #expect(rotated.hashValue == key.hashValue)
        #expect(try manager.token(for: rotated) != second)
        #expect(mints.value == 4)
    }

    @Test func expiredProviderTokenRemintsOnlyWhenTwentyMinutesOld() async throws {
        let clock = ManualWallClock()
        let manager = APNsTokenManager(clock: clock)
        let key = APNsSigningKey(teamID: "TEAM123456", keyID: "KEY1234567", privateKeyPEM: TestCredentials.apnsP8())
        let first = try manager.token(for: key)
        clock.advance(by: 5 * 60)
        #expect(manager.reportExpired(first, for: key) == false)
        #expect(try manager.token(for: key) == first)
        clock.advance(by: 16 * 60)
        #expect(manager.reportExpired(first, for: key) == true)
        let second = try manager.token(for: key)
        #expect(second != first)
        // A stale report about the replaced token changes nothing.
        #expect(manager.reportExpired(first, for: key) == true)
        #expect(try manager.token(for: key) == second)
    }
}

@Suite struct APNsDispositionTests {
    @Test(arguments: [
        (200, nil, true, PushDisposition.delivered),
        (410, "Unregistered", false, .invalidateBinding),
        (410, "ExpiredToken", false, .invalidateBinding),
        (400, "DeviceTokenNotForTopic", false, .invalidateBinding),
        (400, "BadDeviceToken", true, .invalidateBinding),
        (400, "BadDeviceToken", false, .drop),
        (403, "InvalidProviderToken", false, .fixConfiguration),
        (403, "BadCertificate", false, .fixConfiguration),
        (400, "TopicDisallowed", false, .fixConfiguration),
        (429, "TooManyRequests", false, .retry),
        (500, "InternalServerError", false, .retry),
        (503, "ServiceUnavailable", false, .retry),
        (503, "Shutdown", false, .retry),
        (403, "ExpiredProviderToken", false, .retry),
        (413, "PayloadTooLarge", false, .drop),
        (400, "BadPriority", false, .drop),
        (410, "SomethingNew", false, .invalidateBinding),
        (503, "SomethingNew", false, .retry),
        (400, "SomethingNew", false, .drop),
    ] as [(Int, String?, Bool, PushDisposition)])
    func everyReasonHasADisposition(status: Int, reason: String?, certain: Bool, expected: PushDisposition) {
        #expect(APNsDispositionRules.disposition(status: status, reason: reason.map(APNsReason.init), environmentIsCertain: certain) == expected)
    }

    @Test func unknownReasonsAreKeptVerbatim() {
        #expect(APNsReason("BrandNewReason").description == "BrandNewReason")
        #expect(APNsReason("Unregistered") == .unregistered)
        #expect(APNsReason("Unregistered").description == "Unregistered")
    }

    @Test func everyReasonInAppleTableIsKnown() throws {
        // A bundled copy of the reference fixture (see Fixtures/README.md).
        let url = try #require(Bundle.module.url(forResource: "error-reasons", withExtension: "json", subdirectory: "Fixtures"))
        let text = try String(contentsOf: url, encoding: .utf8)
        let reasons = try #require(text.matches(of: /"reason"\s*:\s*"([A-Za-z]+)"/).map { String($0.1) }.nilIfEmpty)
        for reason in reasons {
            if case .unknown = APNsReason(reason) { Issue.record("unknown APNs reason \(reason)") }
        }
    }
}

/// A thread-safe tally for callbacks.
final class Counter: Sendable {
    private let count = Synchronization.Mutex(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

extension Data {
    init?(base64URL text: String) {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        self.init(base64Encoded: base64)
    }
}

extension Array {
    var nilIfEmpty: Self? { isEmpty ? nil : self }
}
