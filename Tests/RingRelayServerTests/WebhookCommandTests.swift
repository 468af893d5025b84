import Foundation
import HTTPTypes
import HummingbirdTesting
import RingRelayServer
import RingRelayTesting
import RingRelayWire
import Testing

/// `ringrelay webhook twilio|webex`, the real executable against a live server: a signed test
/// webhook rings a phone, and every refusal is said plainly.
@Suite struct WebhookCommandTests {
    static let twilioToken = "0123456789abcdef0123456789abcdef"
    static let webexSecret = "my-webhook-secret"

    @Test func signedTestWebhooksRingThePhone() async throws {
        // The clock runs: the phone ignores a ring that is over by its own clock.
        var made = try await TestServer.make(start: Date(), running: true)
        // The phone acks at once; 10 s (not the default 1 s) keeps a phone process starved by a
        // build beside the tests from turning its ack into "unacknowledged".
        made.configuration.liveFallback = .seconds(10)
        let server = made
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try await server.withClient(.live) { client in
            let account = try await client.createAccount("acme", admin: server.adminToken)
            let key = account.apiKey
            let twilio = #"{"accountSid":"AC0123456789abcdef0123456789abcdef","authToken":"\#(Self.twilioToken)"}"#
            #expect(try await client.send(.put, "/v1/credentials/twilio", token: key, json: twilio).status == .ok)
            #expect(try await client.send(.put, "/v1/credentials/webex", token: key, json: #"{"secret":"\#(Self.webexSecret)"}"#).status == .ok)
            let url = "http://127.0.0.1:\(try #require(client.port))"
            let bob = try PhoneProcessTests.Phone(
                ["--server", url, "--identity", "bob", "--device-id", "bob-1"], directory: directory.path, environment: ["RINGRELAY_TOKEN": key])
            try await bob.waitFor("ready") { $0["event"] == "ready" }

            // The account SID comes from GET /v1/credentials with the key in the environment.
            let environment = ["RINGRELAY_URL": url, "RINGRELAY_TOKEN": key]
            func webhook(_ provider: String, to identity: String = "bob", _ secrets: [String: String]) async throws -> (
                status: Int32, stdout: String, stderr: String
            ) {
                try await ServerProcess.run(
                    ["webhook", provider, "--account", account.id, "--to", identity], directory: directory.path,
                    environment: environment.merging(secrets) { $1 })
            }
            let fromTwilio = try await webhook("twilio", ["RINGRELAY_TWILIO_AUTH_TOKEN": Self.twilioToken])
            #expect(fromTwilio.status == 0, "\(fromTwilio.stderr)")
            let twilioCall = try #require(fromTwilio.stdout.firstMatch(of: /Rang: call (call_\w+), 1 device\(s\)\./)?.1).description
            #expect(fromTwilio.stdout.contains("websocket event to bob-1: delivered"), "\(fromTwilio.stdout)")
            let incoming = try await bob.waitFor("the Twilio call") { $0["event"] == "incoming" && $0["callId"] == twilioCall }
            #expect(incoming["from"] == "alice")

            let fromWebex = try await webhook("webex", ["RINGRELAY_WEBEX_SECRET": Self.webexSecret])
            #expect(fromWebex.status == 0, "\(fromWebex.stderr)")
            let webexCall = try #require(fromWebex.stdout.firstMatch(of: /Rang: call (call_\w+)/)?.1).description
            try await bob.waitFor("the Webex call") { $0["event"] == "incoming" && $0["callId"] == webexCall }
            let record = try await client.send(.get, "/v1/calls/\(webexCall)", token: key).decode(CallResource.self)
            #expect(record.source == "webex")
            #expect(record.to == "bob")

            let wrongSecret = try await webhook("webex", ["RINGRELAY_WEBEX_SECRET": "not-the-secret"])
            #expect(wrongSecret.status == 1)
            #expect(wrongSecret.stderr.hasPrefix("error (403 invalid_signature): "))
            #expect(wrongSecret.stderr.contains("Check that RINGRELAY_WEBEX_SECRET holds the secret"))
            let nobody = try await webhook("twilio", to: "carol", ["RINGRELAY_TWILIO_AUTH_TOKEN": Self.twilioToken])
            #expect(nobody.status == 1)
            #expect(nobody.stderr.hasPrefix("error (404 no_reachable_device): "))
            let noSecret = try await webhook("twilio", [:])
            #expect(noSecret.status == 64)
            #expect(noSecret.stderr.contains("Set RINGRELAY_TWILIO_AUTH_TOKEN"))
            #expect(noSecret.stderr.contains("Usage: ringrelay webhook twilio "))
            try await bob.stop()
        }
    }
}
