import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import RingRelayAPNs
import RingRelayCore
import RingRelayFCM
import RingRelayServer
import RingRelayStore
import RingRelayTesting
import RingRelayWire
import Testing

/// `POST /v1/bindings/{id}/test` on FCM bindings, through the real FCM client to the simulator.
@Suite struct FCMTestPushTests {
    static let projectID = "ringrelay-server-test"
    /// One RSA key for every test's service account: generating one per test is slow in debug builds.
    static let sharedKeyPEM = (try? TestCredentials.serviceAccount())?["private_key"]

    /// A server pointed at a started FCM simulator, with an account whose service account the simulator knows.
    static func withFCMServer(
        _ body: @Sendable (TestServer, FCMSimulator, any TestClientProtocol, String) async throws -> Void
    ) async throws {
        let simulator = try FCMSimulator()
        try await simulator.start()
        var configured = try await TestServer.make(start: Date())
        try configured.pushThrough(simulator)
        configured.configuration.fcm.requestTimeout = .seconds(10)
        configured.configuration.fcm.retryBaseDelay = .milliseconds(5)
        let server = configured
        let serviceAccount = try simulator.makeServiceAccount(projectID: projectID, privateKeyPEM: sharedKeyPEM)
        try await server.withClient { client in
            let apiKey = try await client.createAccount("acme", admin: server.adminToken).apiKey
            let uploaded = try await client.send(.put, "/v1/credentials/fcm", token: apiKey, json: try Self.credentialBody(serviceAccount))
            #expect(uploaded.status == .ok, "\(String(buffer: uploaded.body))")
            try await body(server, simulator, client, apiKey)
        }
        try await simulator.shutdown()
    }

    static func credentialBody(_ serviceAccount: [String: String]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: ["serviceAccount": serviceAccount]), as: UTF8.self)
    }

    static func fcmToken(_ seed: Int) -> String {
        "device\(seed):APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx" + String(repeating: "Q", count: 100)
    }

    @Test func testPushIsDeliveredAsAHighPriorityDataMessage() async throws {
        try await Self.withFCMServer { _, simulator, client, key in
            let binding = try await client.createBinding(#"{"identity":"bob","type":"fcm","token":"\#(Self.fcmToken(1))"}"#, token: key)
            let response = try await client.send(.post, "/v1/bindings/\(binding.id)/test", token: key)
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            let result = try response.decode(TestPushResult.self)
            #expect(result.outcome == "delivered")
            #expect(result.status == 200)
            #expect(result.channel == "fcm")
            #expect(result.kind == "data")
            #expect(result.attempts == 1)
            #expect(result.binding.status == "active")

            let message = try #require(simulator.received.last)
            #expect(message.projectID == Self.projectID)
            #expect(message.registrationToken == Self.fcmToken(1))
            #expect(message.messageName == result.pushId)
            #expect(message.androidPriority == "HIGH")
            // The test push may ring for 15 seconds; FCM gets exactly that as the TTL.
            #expect(message.androidTTL == "15s")
            #expect(Array(message.data.keys) == ["ringrelay"])
            let ringrelay = try #require(
                message.data["ringrelay"].flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
            #expect(ringrelay["test"] as? Bool == true)
            #expect(ringrelay["v"] as? Int == 1)

            // A device may test its own binding, not another identity's.
            let bob = try await client.accessToken(identity: "bob", key: key)
            let alice = try await client.accessToken(identity: "alice", key: key)
            #expect(try await client.send(.post, "/v1/bindings/\(binding.id)/test", token: bob).status == .ok)
            #expect(try await client.send(.post, "/v1/bindings/\(binding.id)/test", token: alice).status == .notFound)

            let metrics = String(buffer: try await client.send(.get, "/metrics").body)
            #expect(metrics.contains(#"ringrelay_push_total{channel="fcm",kind="data",outcome="delivered",reason="none"} 2"#))
            #expect(metrics.contains("ringrelay_fcm_oauth_mints_total 1"))
            #expect(metrics.contains(#"ringrelay_push_duration_seconds_count{channel="fcm",kind="data"} 2"#))
            #expect(simulator.tokenMints == 1)
        }
    }

    @Test func unregisteredTokenMakesTheBindingInvalid() async throws {
        try await Self.withFCMServer { _, simulator, client, key in
            let token = Self.fcmToken(2)
            let binding = try await client.createBinding(#"{"identity":"bob","type":"fcm","token":"\#(token)"}"#, token: key)
            simulator.setBehaviour(.error(.unregistered), forRegistrationToken: token, times: 1)
            let result = try await client.send(.post, "/v1/bindings/\(binding.id)/test", token: key).decode(TestPushResult.self)
            #expect(result.outcome == "invalidate_binding")
            #expect(result.status == 404)
            #expect(result.reason == "UNREGISTERED")
            #expect(result.binding.status == "invalid")
            #expect(result.binding.invalidReason == "UNREGISTERED")
            #expect(result.binding.invalidatedAt != nil)

            let invalid = try await client.send(.get, "/v1/bindings?status=invalid", token: key).decode(BindingList.self)
            #expect(invalid.data.map(\.id) == [binding.id])

            // The app registering the token again makes it active.
            let again = try await client.createBinding(#"{"identity":"bob","type":"fcm","token":"\#(token)"}"#, token: key, expect: .ok)
            #expect(again.status == "active")
            let metrics = String(buffer: try await client.send(.get, "/metrics").body)
            #expect(metrics.contains(#"ringrelay_push_total{channel="fcm",kind="data",outcome="invalidate_binding",reason="UNREGISTERED"} 1"#))
        }
    }

    @Test func refusedServiceAccountIsReportedInReadinessAndClearedByNewCredentials() async throws {
        try await Self.withFCMServer { _, simulator, client, key in
            let binding = try await client.createBinding(#"{"identity":"bob","type":"fcm","token":"\#(Self.fcmToken(3))"}"#, token: key)
            simulator.setOAuthFailure(.invalidGrant)
            for _ in 0..<2 {
                let result = try await client.send(.post, "/v1/bindings/\(binding.id)/test", token: key).decode(TestPushResult.self)
                #expect(result.outcome == "fix_configuration")
                #expect(result.reason == "OAuthInvalidGrant")
                #expect(result.status == nil)
                #expect(result.binding.status == "active")
            }
            let ready = try await client.send(.get, "/readyz")
            #expect(ready.status == .ok)
            let text = String(buffer: ready.body)
            #expect(text.contains(#""reason":"OAuthInvalidGrant""#))
            #expect(text.contains(#""channel":"fcm""#))
            // The refused account is held off: one token request, not one per push.
            #expect(simulator.tokenRequests.count == 1)
            #expect(simulator.received.isEmpty)

            simulator.clearBehaviours()
            let fresh = try simulator.makeServiceAccount(projectID: Self.projectID, privateKeyPEM: Self.sharedKeyPEM)
            #expect(try await client.send(.put, "/v1/credentials/fcm", token: key, json: try Self.credentialBody(fresh)).status == .ok)
            #expect(!String(buffer: try await client.send(.get, "/readyz").body).contains("OAuthInvalidGrant"))
            let fixed = try await client.send(.post, "/v1/bindings/\(binding.id)/test", token: key).decode(TestPushResult.self)
            #expect(fixed.outcome == "delivered")
        }
    }

    /// A service account stored before token URIs were checked (an older version's database) is
    /// checked again before it is used: a plain-http `token_uri` is never fetched, and the
    /// account's readiness names the fault until the service account is uploaded again.
    @Test func aStoredTokenURIIsCheckedAgainBeforeUse() async throws {
        try await Self.withFCMServer { server, simulator, client, key in
            let accounts = try await client.send(.get, "/v1/accounts", token: server.adminToken).decode(AccountList.self)
            let accountID = try #require(accounts.data.first?.id)
            let stored = try await server.store.credential(kind: .fcm, accountID: accountID)?.credential
            guard case .fcm(let uploaded) = stored else {
                Issue.record("no FCM credential stored")
                return
            }
            var credential = uploaded
            credential.tokenURI = credential.tokenURI.replacingOccurrences(of: "https://", with: "http://")
            try await server.store.putCredential(.fcm(credential), accountID: accountID, at: Date())

            let binding = try await client.createBinding(#"{"identity":"bob","type":"fcm","token":"\#(Self.fcmToken(4))"}"#, token: key)
            let result = try await client.send(.post, "/v1/bindings/\(binding.id)/test", token: key).decode(TestPushResult.self)
            #expect(result.outcome == "fix_configuration")
            #expect(result.reason == "TokenURINotAllowed")
            #expect(simulator.tokenRequests.isEmpty)
            #expect(simulator.received.isEmpty)
            #expect(String(buffer: try await client.send(.get, "/readyz").body).contains("TokenURINotAllowed"))
        }
    }

    @Test func fcmEndpointIsConfigurableAndValidated() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let none = directory.appending("none.env")
        #expect(
            try ServerConfiguration(reader: try await ServerConfiguration.reader(flags: [:], environment: [:], dotEnvPath: none)).fcm.endpoint
                == "https://fcm.googleapis.com")
        let flagged = try ServerConfiguration(
            reader: try await ServerConfiguration.reader(flags: [.fcmEndpoint: "https://127.0.0.1:8443/"], environment: [:], dotEnvPath: none))
        #expect(flagged.fcm.endpoint == "https://127.0.0.1:8443")
        let fromEnvironment = try ServerConfiguration(
            reader: try await ServerConfiguration.reader(
                flags: [:], environment: ["RINGRELAY_FCM_ENDPOINT": "https://fcm.example.test"], dotEnvPath: none))
        #expect(fromEnvironment.fcm.endpoint == "https://fcm.example.test")
        // --push-ca-file is trusted by both push clients.
        let caFile = directory.appending("ca.pem")
        try Data("pem".utf8).write(to: URL(fileURLWithPath: caFile))
        let trusted = try ServerConfiguration(
            reader: try await ServerConfiguration.reader(flags: [.pushCAFile: caFile], environment: [:], dotEnvPath: none))
        #expect(trusted.fcm.extraTrustRootsFile == caFile)
        #expect(trusted.apns.extraTrustRootsFile == caFile)
        do {
            _ = try ServerConfiguration(
                reader: try await ServerConfiguration.reader(flags: [.fcmEndpoint: "http://fcm.example.test/v1"], environment: [:], dotEnvPath: none))
            Issue.record("expected a configuration error")
        } catch let error as ConfigurationError {
            #expect(error.key == .fcmEndpoint)
            #expect("\(error)".contains("--fcm-endpoint / RINGRELAY_FCM_ENDPOINT"))
            #expect("\(error)".contains("https://fcm.googleapis.com"))
        }
    }

    @Test func testPushNeedsAnFCMServiceAccount() async throws {
        let server = try await TestServer.make(start: Date())
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            let binding = try await client.createBinding(#"{"identity":"bob","type":"fcm","token":"\#(Self.fcmToken(4))"}"#, token: key)
            let missing = try await client.send(.post, "/v1/bindings/\(binding.id)/test", token: key)
            #expect(missing.status == .conflict)
            #expect(missing.errorCode == "fcm_not_configured")
        }
    }
}
