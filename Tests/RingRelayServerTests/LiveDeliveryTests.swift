import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
@testable import RingRelayServer
import RingRelayTesting
import RingRelayWire
import Testing

/// Live-first delivery: a connected device rings over its socket, its push bindings follow only
/// when it does not ack in time, and provider calls ride the socket with their payload unchanged.
@Suite struct LiveDeliveryTests {
    @Test func aConnectedDeviceRingsLiveAndItsPushesFollowOnlyWithoutAnAck() async throws {
        try await TestServer.withPushServer(.live, configure: { $0.liveFallback = .seconds(3) }) { server, simulator, client, key in
            let port = try #require(client.port)
            // b1 is connected and has a VoIP binding; b3 has only a binding; the last binding names no device.
            let live = try await client.createBinding(
                #"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 11))","deviceId":"b1"}"#, token: key)
            let offline = try await client.createBinding(
                #"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 13))","deviceId":"b3"}"#, token: key)
            let anonymous = try await client.createBinding(#"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 14))"}"#, token: key)
            #expect(try await client.send(.post, "/v1/bindings/\(offline.id)/test", token: key).status == .ok)
            simulator.reset()
            let b1 = try await LiveDevice.connect(
                port: port, token: try await client.accessToken(identity: "bob", deviceID: "b1", key: key), autoAck: false)

            let posted = Date()
            let response = try await client.send(
                .post, "/v1/calls", token: key, json: #"{"from":"alice","to":"bob","displayName":"Alice","avatarUrl":"https://cdn.example.com/alice.png"}"#)
            #expect(response.status == .created)
            let call = try response.decode(CallResource.self)
            let ring = try await b1.nextEvent()
            #expect(ring.type == .incoming)

            // The devices without a connection are pushed at once; b1's binding only after the window,
            // which cannot have started before the call was posted.
            _ = try await Self.pushes(to: [apnsToken(seed: 13), apnsToken(seed: 14)], at: simulator)
            let fallback = try await Self.pushes(to: [apnsToken(seed: 11)], at: simulator)
            let waited = try #require(fallback.first?.receivedAt).timeIntervalSince(posted)
            #expect(waited >= 2.95, "the fallback came \(waited) s after the call was posted")

            // The native VoIP payload.
            let payload = try JSONDecoder.ringRelay.decode(VoIPPayload.self, from: try #require(fallback.first?.payload))
            #expect(payload.aps.isEmpty)
            #expect(payload.ringrelay.callId == call.id)
            #expect(payload.ringrelay.from == .init(identity: "alice", displayName: "Alice", avatarUrl: "https://cdn.example.com/alice.png"))
            #expect(payload.ringrelay.expiresAt == call.ringEndsAt)
            #expect(fallback.first?.headers["apns-push-type"] == "voip")

            // The record shows the unacknowledged live ring and every push.
            var record = try await client.send(.get, "/v1/calls/\(call.id)", token: key).decode(CallResource.self)
            for _ in 0..<50 where (record.deliveries ?? []).contains(where: { $0.outcome == "pending" }) || (record.deliveries?.count ?? 0) < 4 {
                try await Task.sleep(for: .milliseconds(100))
                record = try await client.send(.get, "/v1/calls/\(call.id)", token: key).decode(CallResource.self)
            }
            let deliveries = record.deliveries ?? []
            #expect(deliveries.first { $0.channel == "websocket" }?.outcome == "unacknowledged")
            #expect(Set(deliveries.filter { $0.channel == "apns" }.compactMap(\.bindingId)) == [live.id, offline.id, anonymous.id])
            #expect(deliveries.filter { $0.channel == "apns" }.allSatisfy { $0.outcome == "delivered" })
            let metrics = String(buffer: try await client.send(.get, "/metrics").body)
            #expect(metrics.contains("ringrelay_live_fallback_pushes_total 1"))

            // Acknowledged in time: b1's binding stays quiet.
            simulator.reset()
            let second = try await client.send(.post, "/v1/calls", token: key, json: #"{"from":"alice","to":"bob"}"#).decode(CallResource.self)
            let secondRing = try await b1.nextEvent()
            #expect(secondRing.callId == second.id)
            try await b1.send(.ack(eventId: secondRing.eventId))
            _ = try await Self.pushes(to: [apnsToken(seed: 13), apnsToken(seed: 14)], at: simulator)
            // Past the 3 s window (a loaded machine gets 3 s for the ack, not 1).
            try await Task.sleep(for: .milliseconds(3500))
            #expect(!simulator.received.contains { $0.deviceToken == apnsToken(seed: 11) })
            await b1.close()
        }
    }

    @Test func aTwilioCallRingsTheLiveDeviceWithTheBodyUnchanged() async throws {
        // The device acks at once; the 10 s window (not the default 1 s) only keeps a starved test
        // process from turning that ack into "unacknowledged".
        try await TestServer.withPushServer(
            .live,
            configure: {
                $0.trustProxy = true
                $0.liveFallback = .seconds(10)
            }
        ) { server, _, client, key in
            let accountID = try await WebhookTests.configureProviders(client, key: key, admin: server.adminToken)
            let bob = try await LiveDevice.connect(port: try #require(client.port), token: try await client.accessToken(identity: "bob", deviceID: "b1", key: key))
            let body = WebhookTests.twilioBody(messageID: "WB-live-1")
            // Behind a proxy, so the signed URL does not depend on the test client's Host header.
            let response = try await WebhookTests.postTwilio(
                client, accountID: accountID, body: body,
                extraHeaders: [HTTPField.Name("X-Forwarded-Host")!: WebhookTests.publicHost, HTTPField.Name("X-Forwarded-Proto")!: "http"],
                signedHost: WebhookTests.publicHost)
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            let rang = try response.decode(WebhookRingResponse.self)
            #expect(rang.deliveries.map(\.channel) == ["websocket"])
            #expect(rang.deliveries.first?.outcome == "delivered")

            let event = try await bob.nextEvent()
            #expect(event.type == .notification)
            #expect(event.provider == "twilio")
            #expect(event.call.source == "twilio")
            #expect(bob.texts.last?.contains(#""payload":\#(body)"#) == true)
            await bob.close()
        }
    }

    /// The native VoIP payload, as a device decodes it.
    struct VoIPPayload: Decodable {
        var aps: [String: Int]
        var ringrelay: NativeInvite
    }

    /// Waits until the simulator has a push for each token; returns them.
    static func pushes(to tokens: [String], at simulator: APNsSimulator) async throws -> [APNsSimulator.ReceivedPush] {
        for _ in 0..<500 {
            let found = simulator.received.filter { tokens.contains($0.deviceToken) }
            if Set(found.map(\.deviceToken)) == Set(tokens) { return found }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("no push for \(tokens)")
        return []
    }
}
