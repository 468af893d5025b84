import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import RingRelayAPNs
import RingRelayServer
import RingRelayTesting
import RingRelayWire
import Testing

/// The whole server — a call's fan-out, the test-push endpoint, `/readyz` — against HTTP/2 servers
/// RingRelay did not write: the repro of the interop report (nginx as the APNs endpoint, one call
/// to hundreds of `apns_voip` bindings) and a wrong key against the strict server.
@Suite(.serialized) struct PushInteropTests {
    /// A server whose APNs endpoint is `endpoint`, with token credentials uploaded (any key:
    /// neither peer checks signatures; the strict one checks the key id).
    static func withServer(
        endpoint: InteropServer, requestTimeout: Duration? = nil, _ body: @Sendable (any TestClientProtocol, String) async throws -> Void
    ) async throws {
        try await withServer(url: endpoint.url, caFile: endpoint.caFile, requestTimeout: requestTimeout, body)
    }

    /// A server whose APNs endpoint is `url`, trusting `caFile`, with token credentials uploaded.
    static func withServer(
        url: String, caFile: String, requestTimeout: Duration? = nil, _ body: @Sendable (any TestClientProtocol, String) async throws -> Void
    ) async throws {
        var configured = try await TestServer.make(start: Date())
        if let requestTimeout { configured.configuration.apns.requestTimeout = requestTimeout }
        configured.configuration.apns.productionEndpoint = url
        configured.configuration.apns.sandboxEndpoint = url
        configured.configuration.apns.extraTrustRootsFile = caFile
        configured.configuration.apns.retryBaseDelay = .milliseconds(5)
        let server = configured
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            let credential = try JSONSerialization.data(withJSONObject: [
                "teamId": "TEAM123456", "keyId": "KEY1234567", "privateKey": P256.Signing.PrivateKey().pemRepresentation,
                "topic": TestServer.bundleID,
            ])
            #expect(try await client.send(.put, "/v1/credentials/apns", token: key, json: String(decoding: credential, as: UTF8.self)).status == .ok)
            try await body(client, key)
        }
    }

    @Test func oneCallToThreeHundredDevicesReachesNginxOncePerDevice() async throws {
        let nginx = try await InteropServer.nginx()
        defer { nginx.stop() }
        try await Self.withServer(endpoint: nginx) { client, key in
            let devices = 300
            for index in 0..<devices {
                _ = try await client.createBinding(
                    #"{"identity":"bob","type":"apns_voip","token":"\#(String(format: "%08x", index) + String(repeating: "cd", count: 28))","environment":"production"}"#, token: key)
            }
            let call = try await client.send(.post, "/v1/calls", token: key, json: #"{"from":"alice","to":"bob"}"#).decode(CallResource.self)
            let delivered = await eventually(timeout: .seconds(30)) {
                let record = try? await client.send(.get, "/v1/calls/\(call.id)", token: key).decode(CallResource.self)
                return record?.deliveries?.count == devices && record?.deliveries?.allSatisfy { $0.outcome == "delivered" } == true
            }
            let record = try await client.send(.get, "/v1/calls/\(call.id)", token: key).decode(CallResource.self)
            let outcomes = Dictionary((record.deliveries ?? []).map { ($0.outcome, 1) }, uniquingKeysWith: +)
            #expect(delivered, "outcomes: \(outcomes)")
            #expect(record.deliveries?.allSatisfy { $0.attempts == 1 } == true)
            // At nginx: one request per binding, none twice.
            let received = await nginx.processedRequests(atLeast: devices)
            #expect(received.count == devices)
            #expect(Set(received).count == devices)
        }
    }

    @Test func aWrongKeyIsAConfigurationFaultAtOnceAndShowsInReadiness() async throws {
        let strict = try await InteropServer.strict(scenario: "apns", arguments: ["--expect-key-id", "OTHERKEY12"])
        defer { strict.stop() }
        // A request timeout far above the bound below, so the bound tells an answer from a
        // timeout even on a loaded machine (where the first push's TLS connect took 8.8 s).
        try await Self.withServer(endpoint: strict, requestTimeout: .seconds(60)) { client, key in
            let binding = try await client.createBinding(
                #"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 1))","environment":"production"}"#, token: key)
            let started = ContinuousClock.now
            let result = try await client.send(.post, "/v1/bindings/\(binding.id)/test", token: key).decode(TestPushResult.self)
            // An answer, not a timeout.
            #expect(ContinuousClock.now - started < .seconds(30))
            #expect(result.outcome == "fix_configuration")
            #expect(result.status == 403)
            #expect(result.reason == "InvalidProviderToken")
            #expect(result.attempts == 1)
            let ready = String(buffer: try await client.send(.get, "/readyz").body)
            #expect(ready.contains(#""reason":"InvalidProviderToken""#))
            #expect(await strict.processedRequests(atLeast: 1).count == 1)
        }
    }
}
