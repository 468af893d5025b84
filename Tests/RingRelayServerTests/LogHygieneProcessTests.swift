import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import RingRelayTesting
import RingRelayWire
import Testing

/// What the real executable writes to its output, at the most talkative level and under a flood
/// (issue 42): no secret at any level, and a client that can repeat a refusal thousands of times
/// a second cannot make it write a line each time.
@Suite(.serialized) struct LogHygieneProcessTests {
    let adminToken = "hygiene-admin-token-0123456789abcdef"
    let metricsToken = "hygiene-metrics-token-0123456789abcdef"

    /// Every secret the server is given or makes, at `--log-level trace` (where swift-service-lifecycle
    /// logs each service's description, the start-up announcer's once holding the admin token),
    /// through a start, an account and its key, push and provider credentials, a binding, a
    /// device token, a live connection, refused upgrades and a graceful stop: none in stdout or stderr.
    @Test func noSecretReachesTheOutputAtTrace() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try ServerProcess(
            ["serve", "--port", "0", "--data-dir", "data", "--log-level", "trace", "--access-log"], directory: directory.path,
            environment: ["RINGRELAY_ADMIN_TOKEN": adminToken, "RINGRELAY_METRICS_TOKEN": metricsToken])
        let url = try await server.waitUntilListening()
        let port = try #require(URLComponents(string: url)?.port)
        func send(_ method: HTTPMethod, _ path: String, token: String, body: String? = nil) async throws -> (Int, Data) {
            try await ProcessTests.request(method, url + path, token: token, body: body)
        }

        let (created, accountData) = try await send(.POST, "/v1/accounts", token: adminToken, body: #"{"name":"hygiene"}"#)
        #expect(created == 201)
        let account = try JSONDecoder.ringRelay.decode(CreatedAccount.self, from: accountData)
        let (keyStatus, keyData) = try await send(.POST, "/v1/accounts/\(account.id)/keys", token: adminToken)
        #expect(keyStatus == 201)
        let secondKey = try #require(
            (try JSONSerialization.jsonObject(with: keyData) as? [String: Any])?["apiKey"] as? String, "\(String(decoding: keyData, as: UTF8.self))")

        let p8 = TestCredentials.apnsP8()
        let apns = try JSONSerialization.data(withJSONObject: [
            "teamId": "TEAM123456", "keyId": "KEY1234567", "privateKey": p8, "topic": "com.example.app",
        ])
        #expect(try await send(.PUT, "/v1/credentials/apns", token: account.apiKey, body: String(decoding: apns, as: UTF8.self)).0 == 200)
        let serviceAccount = try TestCredentials.serviceAccount()
        let fcm = try JSONSerialization.data(withJSONObject: ["serviceAccount": serviceAccount])
        #expect(try await send(.PUT, "/v1/credentials/fcm", token: account.apiKey, body: String(decoding: fcm, as: UTF8.self)).0 == 200)
        let twilioToken = "hygiene-twilio-auth-token-0123456789"
        let twilio = #"{"accountSid":"AC0123456789abcdef0123456789abcdef","authToken":"\#(twilioToken)"}"#
        #expect(try await send(.PUT, "/v1/credentials/twilio", token: account.apiKey, body: twilio).0 == 200)
        let webexSecret = "hygiene-webex-secret-0123456789"
        #expect(try await send(.PUT, "/v1/credentials/webex", token: account.apiKey, body: #"{"secret":"\#(webexSecret)"}"#).0 == 200)

        let pushToken = String(repeating: "5e", count: 32)
        let binding = #"{"identity":"bob","type":"apns_voip","token":"\#(pushToken)","deviceId":"b1","environment":"sandbox"}"#
        #expect(try await send(.POST, "/v1/bindings", token: secondKey, body: binding).0 == 201)
        let (minted, tokenData) = try await send(.POST, "/v1/access-tokens", token: account.apiKey, body: #"{"identity":"bob","deviceId":"b1"}"#)
        #expect(minted == 201)
        let device = try JSONDecoder.ringRelay.decode(AccessTokenResponse.self, from: tokenData).token
        #expect(try await send(.GET, "/v1/bindings", token: device).0 == 200)
        #expect(try await send(.GET, "/metrics", token: metricsToken).0 == 200)

        // A live connection (token in the query, as WebSocket clients without headers send it),
        // and upgrades refused for an API key and a forged token.
        let live = try RawWebSocket(port: port, path: "/v1/connect?access_token=\(device)", receiveBuffer: 1 << 16)
        #expect(live.handshake.hasPrefix("HTTP/1.1 101"), "\(live.handshake)")
        let forged = String(device.dropLast(4)) + "AAAA"
        for refused in [account.apiKey, forged] {
            let socket = try RawWebSocket(port: port, path: "/v1/connect?access_token=\(refused)", receiveBuffer: 1 << 16)
            #expect(socket.handshake.hasPrefix("HTTP/1.1 401"), "\(socket.handshake)")
            socket.close()
        }
        try await Task.sleep(for: .milliseconds(300))
        live.close()

        server.signal(SIGTERM)
        #expect(try await server.waitForExit() == 0)
        try await Task.sleep(for: .milliseconds(100))
        let output = server.stdout + server.stderr
        // The run did log at trace: service starts and stops, connections, requests.
        #expect(server.stderr.contains(" trace "), "\(server.stderr.suffix(2000))")
        #expect(server.stderr.contains("StartupAnnouncer"), "\(server.stderr.suffix(2000))")
        let pemLines = { (pem: String) in pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.map(String.init) }
        let secrets: [(String, String)] =
            [
                ("the admin token", adminToken), ("the metrics token", metricsToken), ("the API key", account.apiKey),
                ("the second API key", secondKey), ("the device token", device),
                ("the device token's signature", String(device.split(separator: ".").last ?? "")),
                ("the forged token", forged), ("the Twilio auth token", twilioToken), ("the Webex secret", webexSecret),
                ("the push token", pushToken),
            ] + pemLines(p8).map { ("a line of the APNs key", $0) }
            + pemLines(serviceAccount["private_key"] ?? "").map { ("a line of the FCM key", $0) }
        for (what, secret) in secrets where !secret.isEmpty {
            #expect(!output.contains(secret), "\(what) is in the output")
        }
    }

    /// Requests the HTTP/1 parser refuses (a 90 KB header, the first request of each connection)
    /// are each answered 400, and logged at most once a minute: 50 of them write one line (they
    /// wrote an `error` line each).
    @Test func parserRefusalsAreLoggedOnceAMinute() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try ServerProcess(
            ["serve", "--port", "0", "--data-dir", "data", "--admin-token", adminToken], directory: directory.path)
        let url = try await server.waitUntilListening()
        let port = try #require(URLComponents(string: url)?.port)
        let before = server.stderr.split(separator: "\n").count
        let huge = Array("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: \(String(repeating: "a", count: 90_000))\r\n\r\n".utf8)
        // And one later on a kept-alive connection, after a request that was answered.
        let later = [Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8), huge]
        var answered = 0
        for index in 0..<50 {
            let answer = try await RawSocket.exchange(port: port, index == 0 ? later : [huge], pause: .milliseconds(50), timeout: .seconds(10))
            if answer.text.contains("HTTP/1.1 400 ") && answer.text.contains(#""code":"invalid_request""#) && answer.closed { answered += 1 }
        }
        #expect(answered == 50)
        try await Task.sleep(for: .milliseconds(300))
        let lines = server.stderr.split(separator: "\n").dropFirst(before)
        #expect(lines.count <= 2, "\(lines.joined(separator: "\n"))")
        #expect(lines.allSatisfy { !$0.contains(" error ") }, "\(lines.joined(separator: "\n"))")
        #expect(lines.contains { $0.contains("refused a request the HTTP/1 parser could not read") }, "\(lines.joined(separator: "\n"))")
        #expect(try await ProcessTests.request(.GET, url + "/healthz", token: adminToken).0 == 200)
        server.signal(SIGTERM)
        #expect(try await server.waitForExit() == 0)
    }
}
