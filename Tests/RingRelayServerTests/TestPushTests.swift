import Crypto
import Foundation
import RingRelayCore
import HTTPTypes
import HummingbirdTesting
import NIOCore
import RingRelayAPNs
import RingRelayServer
import RingRelayTesting
import RingRelayWire
import Testing

/// `POST /v1/bindings/{id}/test` through the real APNs client to the simulator.
@Suite struct TestPushTests {
    static let bundleID = "com.example.app"

    /// Test pushes have a budget of their own: a burst of 10, then 429 with Retry-After.
    @Test func testPushesAreRateLimitedPerAccount() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            let path = "/v1/bindings/\(ResourceID.make(ResourceID.binding))/test"
            for _ in 0..<10 { #expect(try await client.send(.post, path, token: key).status == .notFound) }
            let limited = try await client.send(.post, path, token: key)
            #expect(limited.status == .tooManyRequests)
            #expect(limited.errorCode == "rate_limited")
            #expect(limited.headers[.retryAfter] != nil)
        }
    }

    @Test func testPushIsDeliveredAndReportsWhatAPNsSaid() async throws {
        try await TestServer.withPushServer { _, simulator, client, key in
            let binding = try await client.createBinding(
                #"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 1))","environment":"sandbox"}"#, token: key)
            let response = try await client.send(.post, "/v1/bindings/\(binding.id)/test", token: key)
            #expect(response.status == .ok)
            let result = try response.decode(TestPushResult.self)
            #expect(result.outcome == "delivered")
            #expect(result.status == 200)
            #expect(result.channel == "apns")
            #expect(result.kind == "voip")
            #expect(result.attempts == 1)
            let pushed = try #require(simulator.received.last)
            #expect(pushed.headers["apns-id"] == result.pushId)
            #expect(pushed.headers["apns-topic"] == "com.example.app.voip")
            let payload = try JSONSerialization.jsonObject(with: pushed.payload) as? [String: Any]
            #expect((payload?["aps"] as? [String: Any])?.isEmpty == true)
            #expect((payload?["ringrelay"] as? [String: Any])?["test"] as? Bool == true)

            // A device may test its own binding, not another identity's.
            let bob = try await client.accessToken(identity: "bob", key: key)
            let alice = try await client.accessToken(identity: "alice", key: key)
            #expect(try await client.send(.post, "/v1/bindings/\(binding.id)/test", token: bob).status == .ok)
            #expect(try await client.send(.post, "/v1/bindings/\(binding.id)/test", token: alice).status == .notFound)

            let metrics = String(buffer: try await client.send(.get, "/metrics").body)
            #expect(metrics.contains(#"ringrelay_push_total{channel="apns",kind="voip",outcome="delivered",reason="none"} 2"#))
            #expect(metrics.contains("ringrelay_apns_jwt_mints_total 1"))
        }
    }

    @Test func unregisteredTokenInvalidatesTheBindingUnlessRegisteredAgainSince() async throws {
        try await TestServer.withPushServer { server, simulator, client, key in
            let token = apnsToken(seed: 2)
            let binding = try await client.createBinding(#"{"identity":"bob","type":"apns_voip","token":"\#(token)"}"#, token: key)

            // Apple's timestamp is older than our registration: the app registered again since, keep it.
            simulator.setBehaviour(.respond(status: 410, reason: "Unregistered", timestamp: server.clock.now.addingTimeInterval(-60)), forDeviceToken: token, times: 1)
            let kept = try await client.send(.post, "/v1/bindings/\(binding.id)/test", token: key).decode(TestPushResult.self)
            #expect(kept.outcome == "invalidate_binding")
            #expect(kept.binding.status == "active")

            simulator.setBehaviour(.respond(status: 410, reason: "Unregistered", timestamp: server.clock.now.addingTimeInterval(60)), forDeviceToken: token, times: 1)
            let result = try await client.send(.post, "/v1/bindings/\(binding.id)/test", token: key).decode(TestPushResult.self)
            #expect(result.status == 410)
            #expect(result.reason == "Unregistered")
            #expect(result.binding.status == "invalid")
            #expect(result.binding.invalidReason == "Unregistered")
            #expect(result.binding.invalidatedAt != nil)

            let invalid = try await client.send(.get, "/v1/bindings?status=invalid", token: key).decode(BindingList.self)
            #expect(invalid.data.map(\.id) == [binding.id])
            #expect(try await client.send(.get, "/v1/bindings?status=active", token: key).decode(BindingList.self).data.isEmpty)

            // Registering the same token again makes it active.
            server.clock.advance(by: 120)
            let again = try await client.createBinding(#"{"identity":"bob","type":"apns_voip","token":"\#(token)"}"#, token: key, expect: .ok)
            #expect(again.status == "active")
            #expect(again.invalidReason == nil)
        }
    }

    @Test func rejectedKeyIsReportedInReadinessOnceAndClearedByNewCredentials() async throws {
        try await TestServer.withPushServer { server, simulator, client, key in
            let binding = try await client.createBinding(#"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 3))"}"#, token: key)
            let stranger = try JSONSerialization.data(withJSONObject: [
                "teamId": "TEAM123456", "keyId": "UNKNOWN123", "privateKey": TestCredentials.apnsP8(), "topic": Self.bundleID,
            ])
            _ = try await client.send(.put, "/v1/credentials/apns", token: key, json: String(decoding: stranger, as: UTF8.self))
            for _ in 0..<2 {
                let result = try await client.send(.post, "/v1/bindings/\(binding.id)/test", token: key).decode(TestPushResult.self)
                #expect(result.outcome == "fix_configuration")
                #expect(result.reason == "InvalidProviderToken")
                #expect(result.binding.status == "active")
            }
            let ready = try await client.send(.get, "/readyz")
            #expect(ready.status == .ok)
            let text = String(buffer: ready.body)
            #expect(text.contains(#""reason":"InvalidProviderToken""#))
            #expect(text.contains(#""channel":"apns""#))
            // Account ids are for the operator: anonymous callers see the fault, not whose it is.
            #expect(!text.contains("accountId"))
            #expect(String(buffer: try await client.send(.get, "/readyz", token: server.adminToken).body).contains(#""accountId":"acc_"#))
            #expect(simulator.received.count == 2)

            let key2 = P256.Signing.PrivateKey()
            simulator.registerSigningKey(teamID: "TEAM123456", keyID: "KEY7654321", publicKey: key2.publicKey, topics: [Self.bundleID])
            let fixed = try JSONSerialization.data(withJSONObject: [
                "teamId": "TEAM123456", "keyId": "KEY7654321", "privateKey": key2.pemRepresentation, "topic": Self.bundleID,
            ])
            _ = try await client.send(.put, "/v1/credentials/apns", token: key, json: String(decoding: fixed, as: UTF8.self))
            #expect(!String(buffer: try await client.send(.get, "/readyz").body).contains("InvalidProviderToken"))
            #expect(try await client.send(.post, "/v1/bindings/\(binding.id)/test", token: key).decode(TestPushResult.self).outcome == "delivered")
        }
    }

    @Test func testPushNeedsCredentialsAndAnAPNsBinding() async throws {
        let server = try await TestServer.make(start: Date())
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            let apns = try await client.createBinding(#"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 4))"}"#, token: key)
            let missing = try await client.send(.post, "/v1/bindings/\(apns.id)/test", token: key)
            #expect(missing.status == .conflict)
            #expect(missing.errorCode == "apns_not_configured")
            #expect(try await client.send(.post, "/v1/bindings/bnd_unknown/test", token: key).status == .notFound)
        }
    }
}
