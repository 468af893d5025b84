import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import NIOCore
import RingRelayAPNs
@testable import RingRelayServer
import RingRelayTesting
import RingRelayWire
import Testing

/// Provider webhooks end to end: signed as Twilio's and Webex's libraries sign, through the
/// server, to the APNs simulator over HTTP/2+TLS.
@Suite struct WebhookTests {
    static let twilioSID = "AC0123456789abcdef0123456789abcdef"
    static let twilioToken = "twilio-auth-token-for-tests"
    static let webexSecret = "somesupersecretphrase"
    /// The authority router tests give every request.
    static let host = "localhost"
    /// The public host a proxy forwards for.
    static let publicHost = "ringrelay.test"

    /// Signs like twilio-python's RequestValidator: base64 HMAC-SHA1 over the URL (JSON bodies
    /// are covered by the bodySHA256 query parameter).
    static func twilioSignature(url: String, token: String = twilioToken) -> String {
        let mac = HMAC<Insecure.SHA1>.authenticationCode(for: Data(url.utf8), using: SymmetricKey(data: Data(token.utf8)))
        return Data(mac).base64EncodedString()
    }

    static func sha256(_ bytes: [UInt8]) -> String {
        SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
    }

    /// Posts a Twilio Call Notification, signed for `http://ringrelay.test<path>?bodySHA256=…`.
    static func postTwilio(
        _ client: any TestClientProtocol, accountID: String, body: String, signature: String? = nil, extraHeaders: HTTPFields = [:],
        signedHost: String = host
    ) async throws -> TestResponse {
        let bytes = Array(body.utf8)
        let path = "/v1/webhooks/twilio/\(accountID)?bodySHA256=\(sha256(bytes))"
        var headers = extraHeaders
        headers[.contentType] = "application/json"
        headers[HTTPField.Name("X-Twilio-Signature")!] = signature ?? twilioSignature(url: "http://\(signedHost)\(path)")
        return try await client.execute(uri: path, method: .post, headers: headers, body: ByteBuffer(bytes: bytes))
    }

    static func postWebex(_ client: any TestClientProtocol, accountID: String, body: [UInt8], secret: String = webexSecret) async throws -> TestResponse {
        let mac = HMAC<Insecure.SHA1>.authenticationCode(for: body, using: SymmetricKey(data: Data(secret.utf8)))
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[HTTPField.Name("X-Spark-Signature")!] = mac.map { String(format: "%02x", $0) }.joined()
        return try await client.execute(uri: "/v1/webhooks/webex/\(accountID)", method: .post, headers: headers, body: ByteBuffer(bytes: body))
    }

    static func twilioBody(to: String = "client:bob", messageID: String = "WB0001") -> String {
        #"{"twi_account_sid":"\#(twilioSID)","twi_bridge_token":"eyJraXRva2Vu","twi_call_sid":"CA0001","twi_from":"client:alice","twi_message_id":"\#(messageID)","twi_message_type":"twilio.voice.call","twi_to":"\#(to)"}"#
    }

    /// The pushes the simulator has received, once there are at least `count` (or after 20 s): a
    /// webhook answers after --webhook-wait, and on a loaded machine a first push on a new
    /// connection can take longer than that.
    static func received(_ simulator: APNsSimulator, atLeast count: Int) async -> [APNsSimulator.ReceivedPush] {
        let deadline = ContinuousClock.now + .seconds(20)
        while simulator.received.count < count, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        return simulator.received
    }

    /// Uploads Twilio and Webex credentials and returns the account id.
    static func configureProviders(_ client: any TestClientProtocol, key: String, admin: String) async throws -> String {
        #expect(
            try await client.send(.put, "/v1/credentials/twilio", token: key, json: #"{"accountSid":"\#(twilioSID)","authToken":"\#(twilioToken)"}"#)
                .status == .ok)
        #expect(try await client.send(.put, "/v1/credentials/webex", token: key, json: #"{"secret":"\#(webexSecret)"}"#).status == .ok)
        let accounts = try await client.send(.get, "/v1/accounts", token: admin).decode(AccountList.self)
        return try #require(accounts.data.first { $0.name == "acme" }).id
    }

    @Test func twilioRingsEveryDeviceAndTheDeadOneIsInvalidated() async throws {
        try await TestServer.withPushServer(configure: {
            // Wide margins: a loaded 2-core machine must not turn the good push into "pending".
            $0.webhookWait = .seconds(4)
            $0.apns.requestTimeout = .seconds(10)
        }) { server, simulator, client, key in
            let accountID = try await Self.configureProviders(client, key: key, admin: server.adminToken)
            let good = try await client.createBinding(#"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 1))"}"#, token: key)
            let dead = try await client.createBinding(#"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 2))"}"#, token: key)
            let slow = try await client.createBinding(#"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 3))"}"#, token: key)
            simulator.setBehaviour(.respond(status: 410, reason: "Unregistered", timestamp: Date().addingTimeInterval(60)), forDeviceToken: apnsToken(seed: 2))
            simulator.setBehaviour(.delay(.seconds(7)), forDeviceToken: apnsToken(seed: 3))
            // A first success lifts APNs' one-stream limit on the new connection; before it, the slow
            // device's stream would hold the others back.
            #expect(try await client.send(.post, "/v1/bindings/\(good.id)/test", token: key).decode(TestPushResult.self).outcome == "delivered")
            simulator.reset()
            simulator.setBehaviour(.respond(status: 410, reason: "Unregistered", timestamp: Date().addingTimeInterval(60)), forDeviceToken: apnsToken(seed: 2))
            simulator.setBehaviour(.delay(.seconds(7)), forDeviceToken: apnsToken(seed: 3))

            let body = Self.twilioBody()
            let started = ContinuousClock.now
            let response = try await Self.postTwilio(client, accountID: accountID, body: body)
            let waited = ContinuousClock.now - started
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            let rang = try response.decode(WebhookRingResponse.self)
            let byBinding = Dictionary(uniqueKeysWithValues: rang.deliveries.map { ($0.bindingId, $0) })
            #expect(byBinding[good.id]?.outcome == "delivered")
            #expect(byBinding[dead.id]?.outcome == "invalidate_binding")
            // The slow device did not hold the answer beyond the bounded wait.
            #expect(byBinding[slow.id]?.outcome == "pending")
            #expect(waited < .milliseconds(6500), "the webhook waited \(waited) for a device that answers after 7 s")

            // The exact bytes Twilio sent, with only an empty aps added.
            let pushed = try #require(await Self.received(simulator, atLeast: 1).first { $0.deviceToken == apnsToken(seed: 1) })
            #expect(String(decoding: pushed.payload, as: UTF8.self) == #"{"aps":{},"# + body.dropFirst())
            #expect(pushed.headers["apns-push-type"] == "voip")
            #expect(pushed.headers["apns-expiration"] == "0")

            #expect(try await client.send(.get, "/v1/bindings/\(dead.id)", token: key).decode(BindingResource.self).status == "invalid")

            // The slow one finishes in the background and is recorded.
            var call = try await client.send(.get, "/v1/calls/\(rang.callId)", token: key).decode(CallResource.self)
            for _ in 0..<200 where (call.deliveries ?? []).contains(where: { $0.outcome == "pending" }) {
                try await Task.sleep(for: .milliseconds(100))
                call = try await client.send(.get, "/v1/calls/\(rang.callId)", token: key).decode(CallResource.self)
            }
            #expect(call.source == "twilio")
            #expect(call.to == "bob")
            #expect(call.from == "client:alice")
            #expect(call.deliveries?.first { $0.bindingId == slow.id }?.outcome == "delivered")
            #expect(call.deliveries?.count == 3)

            // Bob's device may read the call; Carol's may not.
            let bob = try await client.accessToken(identity: "bob", key: key)
            let carol = try await client.accessToken(identity: "carol", key: key)
            #expect(try await client.send(.get, "/v1/calls/\(rang.callId)", token: bob).status == .ok)
            #expect(try await client.send(.get, "/v1/calls/\(rang.callId)", token: carol).status == .notFound)

            let metrics = String(buffer: try await client.send(.get, "/metrics").body)
            #expect(metrics.contains(#"ringrelay_webhooks_total{provider="twilio",result="rang"} 1"#))
            #expect(metrics.contains("ringrelay_call_to_first_push_seconds_count 1"))
        }
    }

    @Test func theSameTwilioNotificationRingsOnce() async throws {
        try await TestServer.withPushServer { server, simulator, client, key in
            let accountID = try await Self.configureProviders(client, key: key, admin: server.adminToken)
            _ = try await client.createBinding(#"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 4))"}"#, token: key)
            let first = try await Self.postTwilio(client, accountID: accountID, body: Self.twilioBody(messageID: "WBreplay")).decode(WebhookRingResponse.self)
            let second = try await Self.postTwilio(client, accountID: accountID, body: Self.twilioBody(messageID: "WBreplay"))
            #expect(second.status == .ok)
            #expect(try second.decode(WebhookRingResponse.self).callId == first.callId)
            #expect(await Self.received(simulator, atLeast: 1).count == 1)
            let third = try await Self.postTwilio(client, accountID: accountID, body: Self.twilioBody(messageID: "WBother")).decode(WebhookRingResponse.self)
            #expect(third.callId != first.callId)
            #expect(await Self.received(simulator, atLeast: 2).count == 2)

            // An unknown identity answers 404, and so does its replay.
            for _ in 0..<2 {
                let unknown = try await Self.postTwilio(client, accountID: accountID, body: Self.twilioBody(to: "client:nobody", messageID: "WBnobody"))
                #expect(unknown.status == .notFound)
                #expect(unknown.errorCode == "no_reachable_device")
            }
        }
    }

    @Test func twilioSignaturesAreEnforced() async throws {
        try await TestServer.withPushServer { server, simulator, client, key in
            let accountID = try await Self.configureProviders(client, key: key, admin: server.adminToken)
            _ = try await client.createBinding(#"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 5))"}"#, token: key)
            let body = Self.twilioBody(messageID: "WBsig")
            let wrong = try await Self.postTwilio(client, accountID: accountID, body: body, signature: Self.twilioSignature(url: "http://\(Self.host)/x", token: "wrong"))
            #expect(wrong.status == .forbidden)
            #expect(wrong.errorCode == "invalid_signature")

            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            let unsigned = try await client.execute(uri: "/v1/webhooks/twilio/\(accountID)", method: .post, headers: headers, body: ByteBuffer(string: body))
            #expect(unsigned.status == .forbidden)
            #expect(unsigned.errorCode == "missing_signature")

            // Behind a TLS proxy, Twilio signed https://…; honoured only with --trust-proxy.
            let bytes = Array(body.utf8)
            let path = "/v1/webhooks/twilio/\(accountID)?bodySHA256=\(Self.sha256(bytes))"
            var proxied = HTTPFields()
            proxied[HTTPField.Name("X-Forwarded-Proto")!] = "https"
            proxied[HTTPField.Name("X-Forwarded-Host")!] = Self.publicHost
            proxied[.contentType] = "application/json"
            proxied[HTTPField.Name("X-Twilio-Signature")!] = Self.twilioSignature(url: "https://\(Self.publicHost)\(path)")
            let untrusted = try await client.execute(uri: path, method: .post, headers: proxied, body: ByteBuffer(bytes: bytes))
            #expect(untrusted.status == .forbidden)

            // Another Twilio account's notification signed with our token is still refused.
            let foreign = Self.twilioBody(messageID: "WBforeign").replacingOccurrences(of: Self.twilioSID, with: "AC99999999999999999999999999999999")
            #expect(try await Self.postTwilio(client, accountID: accountID, body: foreign).errorCode == "account_sid_mismatch")
            // An unknown account cannot be told apart from a bad signature.
            #expect(try await Self.postTwilio(client, accountID: "acc_unknown", body: body).errorCode == "invalid_signature")
            #expect(simulator.received.isEmpty)
        }
    }

    /// Twilio's own library (twilio-python's RequestValidator, installed by scripts/test) signs a
    /// notification the way Twilio does, and the server accepts it; and it accepts the signature
    /// the tests' own signer makes for the same URL, so the suite's signer is not a private dialect.
    @Test func twilioOwnLibrarySignsWhatTheServerAccepts() async throws {
        try await TestServer.withPushServer { server, simulator, client, key in
            let accountID = try await Self.configureProviders(client, key: key, admin: server.adminToken)
            _ = try await client.createBinding(#"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 6))"}"#, token: key)
            let body = Self.twilioBody(messageID: "WBlibrary")
            let script = """
                import sys
                from twilio.request_validator import RequestValidator
                token, base, body, ours = sys.argv[1:5]
                validator = RequestValidator(token)
                url = base + "?bodySHA256=" + validator.compute_hash(body)
                print(url)
                print(validator.compute_signature(url, {}))
                print(validator.validate(url, body, ours))
                """
            let base = "http://\(Self.host)/v1/webhooks/twilio/\(accountID)"
            let ours = Self.twilioSignature(url: base + "?bodySHA256=\(Self.sha256(Array(body.utf8)))")
            let lines = try Self.python(script, arguments: [Self.twilioToken, base, body, ours]).split(separator: "\n").map(String.init)
            try #require(lines.count == 3, "twilio-python answered \(lines)")
            #expect(lines[2] == "True", "twilio-python refused the tests' own signature")
            let path = String(lines[0].dropFirst("http://\(Self.host)".count))
            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            headers[HTTPField.Name("X-Twilio-Signature")!] = lines[1]
            let response = try await client.execute(uri: path, method: .post, headers: headers, body: ByteBuffer(string: body))
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            #expect(await Self.received(simulator, atLeast: 1).count == 1)
        }
    }

    /// A form-encoded notification, encoded and signed by Python's `urllib` and twilio-python
    /// (which signs a form by its sorted fields, not its bytes): the server decodes `+`, `%XX` and
    /// UTF-8 as they do, accepts the signature and rings with the fields as they were sent.
    @Test func twilioOwnLibrarySignsAFormTheServerReadsAsSent() async throws {
        try await TestServer.withPushServer { server, simulator, client, key in
            let accountID = try await Self.configureProviders(client, key: key, admin: server.adminToken)
            _ = try await client.createBinding(#"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 8))"}"#, token: key)
            let from = "+1 555 & Zoë 100% = café"
            let script = """
                import sys, urllib.parse
                from twilio.request_validator import RequestValidator
                token, url, sid, caller = sys.argv[1:5]
                params = {"twi_account_sid": sid, "twi_to": "client:bob", "twi_message_id": "WBform",
                          "twi_message_type": "twilio.voice.call", "twi_from": caller}
                print(urllib.parse.urlencode(params))
                print(RequestValidator(token).compute_signature(url, params))
                """
            let path = "/v1/webhooks/twilio/\(accountID)"
            let lines = try Self.python(script, arguments: [Self.twilioToken, "http://\(Self.host)\(path)", Self.twilioSID, from])
                .split(separator: "\n").map(String.init)
            try #require(lines.count == 2, "Python answered \(lines)")
            #expect(lines[0].contains("%26") && lines[0].contains("+") && lines[0].contains("%C3%AB"), "not the encoding under test: \(lines[0])")
            var headers = HTTPFields()
            headers[.contentType] = "application/x-www-form-urlencoded"
            headers[HTTPField.Name("X-Twilio-Signature")!] = lines[1]
            let response = try await client.execute(uri: path, method: .post, headers: headers, body: ByteBuffer(string: lines[0]))
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            let push = try #require(await Self.received(simulator, atLeast: 1).first)
            let payload = try #require(try JSONSerialization.jsonObject(with: push.payload) as? [String: Any])
            #expect(payload["twi_from"] as? String == from)
            #expect(payload["twi_message_id"] as? String == "WBform")
        }
    }

    /// Runs a Python script and returns what it printed.
    static func python(_ script: String, arguments: [String]) throws -> String {
        try Command.run("/usr/bin/env", ["python3", "-c", script] + arguments).output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func credentialChangesApplyAtOnceDespiteTheCache() async throws {
        try await TestServer.withPushServer { server, simulator, client, key in
            let accountID = try await Self.configureProviders(client, key: key, admin: server.adminToken)
            _ = try await client.createBinding(#"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 10))"}"#, token: key)
            #expect(try await Self.postTwilio(client, accountID: accountID, body: Self.twilioBody(messageID: "WBc1")).status == .ok)
            #expect(try await client.send(.delete, "/v1/credentials/twilio", token: key).status == .noContent)
            #expect(try await Self.postTwilio(client, accountID: accountID, body: Self.twilioBody(messageID: "WBc2")).status == .forbidden)
            #expect(try await client.send(.delete, "/v1/credentials/apns", token: key).status == .noContent)
            _ = try await Self.configureProviders(client, key: key, admin: server.adminToken)
            let rang = try await Self.postTwilio(client, accountID: accountID, body: Self.twilioBody(messageID: "WBc3")).decode(WebhookRingResponse.self)
            #expect(rang.deliveries.first?.reason == "apns_not_configured")
            #expect(await Self.received(simulator, atLeast: 1).count == 1)
        }
    }

    @Test func trustProxyUsesTheForwardedURL() async throws {
        try await TestServer.withPushServer(configure: { $0.trustProxy = true }) { server, simulator, client, key in
            let accountID = try await Self.configureProviders(client, key: key, admin: server.adminToken)
            _ = try await client.createBinding(#"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 6))"}"#, token: key)
            let bytes = Array(Self.twilioBody(messageID: "WBproxy").utf8)
            let path = "/v1/webhooks/twilio/\(accountID)?bodySHA256=\(Self.sha256(bytes))"
            var headers = HTTPFields()
            headers[HTTPField.Name("X-Forwarded-Proto")!] = "https"
            headers[HTTPField.Name("X-Forwarded-Host")!] = Self.publicHost
            headers[.contentType] = "application/json"
            // Twilio's own signing sometimes includes the default port: accepted.
            headers[HTTPField.Name("X-Twilio-Signature")!] = Self.twilioSignature(url: "https://\(Self.publicHost):443\(path)")
            let response = try await client.execute(uri: path, method: .post, headers: headers, body: ByteBuffer(bytes: bytes))
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            #expect(await Self.received(simulator, atLeast: 1).count == 1)
        }
    }

    @Test func malformedTwilioBodiesNeverCauseAServerError() async throws {
        try await TestServer.withPushServer { server, simulator, client, key in
            let accountID = try await Self.configureProviders(client, key: key, admin: server.adminToken)
            let cases: [(String, HTTPResponse.Status)] = [
                ("", .badRequest), ("{", .badRequest), ("[]", .badRequest), ("null", .badRequest), ("\"x\"", .badRequest),
                (#"{"twi_to":"client:bob","twi_message_id":"WB1"}"#, .unprocessableContent),
                (#"{"twi_account_sid":"\#(Self.twilioSID)","twi_message_id":"WB1"}"#, .unprocessableContent),
                (#"{"twi_account_sid":"\#(Self.twilioSID)","twi_to":7,"twi_message_id":"WB1"}"#, .unprocessableContent),
                (#"{"twi_account_sid":"\#(Self.twilioSID)","twi_to":"client:","twi_message_id":"WB1"}"#, .unprocessableContent),
                (#"{"twi_account_sid":"\#(Self.twilioSID)","twi_to":"client:\#(String(repeating: "b", count: 300))","twi_message_id":"WB1"}"#, .unprocessableContent),
            ]
            for (body, status) in cases {
                let response = try await Self.postTwilio(client, accountID: accountID, body: body)
                #expect(response.status == status, "\(body) → \(response.status) \(String(buffer: response.body))")
            }
            let big = try await Self.postTwilio(client, accountID: accountID, body: String(repeating: " ", count: 70_000))
            #expect(big.status == .contentTooLarge)
            #expect(simulator.received.isEmpty)
        }
    }

    @Test func webexTelephonyPushRingsWithThePayloadBytesUnchanged() async throws {
        try await TestServer.withPushServer { server, simulator, client, key in
            let accountID = try await Self.configureProviders(client, key: key, admin: server.adminToken)
            let person = "Y2lzY29zcGFyazovL3VzL1BFT1BMRS9TWU5USEVUSUMtQ0FMTEVF"
            _ = try await client.createBinding(#"{"identity":"\#(person)","type":"apns_voip","token":"\#(apnsToken(seed: 7))"}"#, token: key)
            let apnsPayload = #"{ "pushid" : "p-1",  "caller":{"name":"Ann \u00e9"} }"#
            let body = Array(
                #"{"id":"Y2lzY29zcGFyazovL3VzL1dFQkhPT0sv","name":"Firehose","resource":"telephony_push","event":"updated","actorId":"\#(person)","data":{"apnsPayload":\#(apnsPayload),"fcmPayload":{"k":"v"}}}"#.utf8)
            let response = try await Self.postWebex(client, accountID: accountID, body: body)
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            let pushed = try #require(await Self.received(simulator, atLeast: 1).first)
            #expect(String(decoding: pushed.payload, as: UTF8.self) == #"{"aps":{}, "pushid" : "p-1",  "caller":{"name":"Ann \u00e9"} }"#)

            // The same delivery again rings once.
            #expect(try await Self.postWebex(client, accountID: accountID, body: body).status == .ok)
            #expect(simulator.received.count == 1)

            let other = Array(#"{"id":"x","resource":"messages","event":"created","actorId":"someone","data":{}}"#.utf8)
            let ignored = try await Self.postWebex(client, accountID: accountID, body: other)
            #expect(ignored.status == .ok)
            #expect(try ignored.decode(WebhookIgnoredResponse.self).ignored == "messages/created")

            #expect(try await Self.postWebex(client, accountID: accountID, body: body, secret: "wrong").status == .forbidden)
            let noData = Array(#"{"id":"y","resource":"telephony_push","event":"updated","actorId":"\#(person)"}"#.utf8)
            #expect(try await Self.postWebex(client, accountID: accountID, body: noData).status == .unprocessableContent)
            let garbage = Array("not json".utf8)
            #expect(try await Self.postWebex(client, accountID: accountID, body: garbage).status == .badRequest)
            #expect(simulator.received.count == 1)
        }
    }

    /// Signed provider bodies are strict JSON as every other body: a member named twice or a
    /// trailing comma answers 400 `malformed_json` naming it, and nothing rings.
    @Test func providerBodiesAreStrictJSONToo() async throws {
        try await TestServer.withPushServer { server, simulator, client, key in
            let accountID = try await Self.configureProviders(client, key: key, admin: server.adminToken)
            _ = try await client.createBinding(#"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 8))"}"#, token: key)
            let webex = Array(
                #"{"resource":"telephony_push","event":"updated","actorId":"carol","actorId":"bob","data":{"apnsPayload":{"k":"v"}}}"#.utf8)
            let twilio = Self.twilioBody().replacingOccurrences(of: "}", with: ",}")
            for (response, problem) in [
                (try await Self.postWebex(client, accountID: accountID, body: webex), "the member name 'actorId' twice in one object (byte 65)"),
                (try await Self.postTwilio(client, accountID: accountID, body: twilio), "a trailing comma before '}' (byte \(twilio.utf8.count - 2))"),
            ] {
                #expect(response.status == .badRequest, "\(String(buffer: response.body))")
                let error = try response.decode(ErrorBody.self).error
                #expect(error.code == "malformed_json")
                #expect(error.message == "The body is not valid JSON: \(problem).")
            }
            #expect(simulator.received.isEmpty)
        }
    }

    @Test func webhooksAreRateLimitedPerAccount() async throws {
        try await TestServer.withPushServer(configure: { $0.rateLimit = 1; $0.rateLimitBurst = 2 }) { server, _, client, key in
            let accountID = try await Self.configureProviders(client, key: key, admin: server.adminToken)
            _ = try await client.createBinding(#"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 8))"}"#, token: key)
            #expect(try await Self.postTwilio(client, accountID: accountID, body: Self.twilioBody(messageID: "WBr1")).status == .ok)
            #expect(try await Self.postTwilio(client, accountID: accountID, body: Self.twilioBody(messageID: "WBr2")).status == .ok)
            let limited = try await Self.postTwilio(client, accountID: accountID, body: Self.twilioBody(messageID: "WBr3"))
            #expect(limited.status == .tooManyRequests)
            #expect(limited.headers[.retryAfter] == "1")
            server.clock.advance(by: 1)
            #expect(try await Self.postTwilio(client, accountID: accountID, body: Self.twilioBody(messageID: "WBr3")).status == .ok)
        }
    }

    /// A webhook's answer carries the first 500 deliveries and where the rest are, as the calls
    /// API does: a ring of thousands of devices once answered megabytes.
    @Test func aWebhookAnswersTheFirstPageOfDeliveries() async throws {
        try await TestServer.withPushServer { server, _, client, key in
            let accountID = try await Self.configureProviders(client, key: key, admin: server.adminToken)
            for batch in 0..<2 {
                let items = (0..<300).map { #"{"identity":"bob","type":"fcm","token":"t-\#(batch)-\#($0)"}"# }.joined(separator: ",")
                #expect(try await client.send(.post, "/v1/bindings/batch", token: key, json: #"{"upsert":[\#(items)]}"#).status == .ok)
            }
            let answer = try await Self.postTwilio(client, accountID: accountID, body: Self.twilioBody(messageID: "WBpage"))
            #expect(answer.status == .ok)
            let ring = try answer.decode(WebhookRingResponse.self)
            #expect(ring.deliveries.count == 500)
            let cursor = try #require(ring.deliveriesNextCursor)
            let rest = try await client.send(.get, "/v1/calls/\(ring.callId)/deliveries?cursor=\(cursor)", token: key).decode(DeliveryList.self)
            #expect(rest.data.count == 100)
            #expect(Set(ring.deliveries.map(\.id) + rest.data.map(\.id)).count == 600)
        }
    }

    /// An operator's settings for one account (issue 42): its own budget and provider ring time
    /// in place of the server's; another account keeps the server's; `{}` gives them back.
    @Test func anAccountsOwnLimitsReplaceTheServersForItAlone() async throws {
        try await TestServer.withPushServer(configure: { $0.rateLimit = 100; $0.rateLimitBurst = 200 }) { server, _, client, key in
            let accountID = try await Self.configureProviders(client, key: key, admin: server.adminToken)
            let admin = server.adminToken
            let path = "/v1/accounts/\(accountID)/limits"
            _ = try await client.createBinding(#"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 12))"}"#, token: key)
            #expect(try await client.send(.put, path, token: key, json: "{}").status == .forbidden, "the operator's, not the tenant's")
            #expect(try await client.send(.put, path, token: admin, json: #"{"ringTimeoutSeconds":4}"#).errorCode == "invalid_field")
            #expect(try await client.send(.put, path, token: admin, json: #"{"rateLimits":1}"#).errorCode == "unknown_field")
            #expect(try await client.send(.get, "/v1/accounts/acc_unknown/limits", token: admin).status == .notFound)
            #expect(try await client.send(.get, path, token: admin).decode(AccountLimitsBody.self) == AccountLimitsBody())
            let set = try await client.send(.put, path, token: admin, json: #"{"rateLimit":1,"rateLimitBurst":1,"ringTimeoutSeconds":60}"#)
            #expect(set.status == .ok)
            let expected = AccountLimitsBody(rateLimit: 1, rateLimitBurst: 1, ringTimeoutSeconds: 60)
            #expect(try await client.send(.get, path, token: admin).decode(AccountLimitsBody.self) == expected)
            // Its provider call rings 60 s, not the server's 45.
            let first = try await Self.postTwilio(client, accountID: accountID, body: Self.twilioBody(messageID: "WBlim1"))
            #expect(first.status == .ok)
            let ring = try first.decode(WebhookRingResponse.self)
            let call = try await client.send(.get, "/v1/calls/\(ring.callId)", token: key).decode(CallResource.self)
            #expect(call.ringEndsAt.timeIntervalSince(call.createdAt) == 60)
            // Its budget is one: the next webhook is refused.
            #expect(try await Self.postTwilio(client, accountID: accountID, body: Self.twilioBody(messageID: "WBlim2")).status == .tooManyRequests)
            // Another account keeps the server's budget.
            let other = try await client.createAccount("globex", admin: admin).apiKey
            for index in 0..<5 {
                #expect(try await client.send(.post, "/v1/calls", token: other, json: #"{"from":"a","to":"nobody\#(index)"}"#).status == .notFound)
            }
            // `{}` gives the account the server's settings back.
            #expect(try await client.send(.put, path, token: admin, json: "{}").decode(AccountLimitsBody.self) == AccountLimitsBody())
            server.clock.advance(by: 1)
            #expect(try await Self.postTwilio(client, accountID: accountID, body: Self.twilioBody(messageID: "WBlim3")).status == .ok)
        }
    }

    /// One device calling no one in a loop spends its own budget, never the account's webhooks'
    /// (issue 16 item 8: 300 such calls made the next signed Twilio webhook answer 429).
    @Test func aDeviceCallingInALoopCannotBlockTheAccountsWebhooks() async throws {
        try await TestServer.withPushServer(configure: { $0.rateLimit = 10; $0.rateLimitBurst = 20 }) { server, _, client, key in
            let accountID = try await Self.configureProviders(client, key: key, admin: server.adminToken)
            _ = try await client.createBinding(#"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 10))"}"#, token: key)
            let mallory = try await client.accessToken(identity: "mallory", deviceID: "m1", key: key)
            var statuses: [HTTPResponse.Status: Int] = [:]
            for _ in 0..<300 {
                statuses[try await client.send(.post, "/v1/calls", token: mallory, json: #"{"to":"nobody"}"#).status, default: 0] += 1
            }
            // Her identity's budget is a tenth of the account's: two calls, then 429.
            #expect(statuses[.notFound] == 2)
            #expect(statuses[.tooManyRequests] == 298)
            #expect(try await Self.postTwilio(client, accountID: accountID, body: Self.twilioBody(messageID: "WBafter")).status == .ok)
            // Another device of the account still calls, and so does the account's backend.
            let alice = try await client.accessToken(identity: "alice", deviceID: "a1", key: key)
            #expect(try await client.send(.post, "/v1/calls", token: alice, json: #"{"to":"bob"}"#).status == .created)
            #expect(try await client.send(.post, "/v1/calls", token: key, json: #"{"from":"backend","to":"bob"}"#).status == .created)
        }
    }

    /// A replayed webhook rings once even after its call passed a short retention: a provider
    /// call's notification id is kept a day whatever --call-retention says, and nothing else of
    /// it past the retention (issue 16 item 10).
    @Test func aReplayAfterAShortRetentionStillRingsOnce() async throws {
        try await TestServer.withPushServer { server, simulator, client, key in
            let accountID = try await Self.configureProviders(client, key: key, admin: server.adminToken)
            _ = try await client.createBinding(#"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 12))"}"#, token: key)
            let body = Self.twilioBody(messageID: "WBlate")
            let first = try await Self.postTwilio(client, accountID: accountID, body: body).decode(WebhookRingResponse.self)
            #expect(await Self.received(simulator, atLeast: 1).count == 1)
            // The push's answer recorded first: on a loaded machine it can come after the
            // webhook's answer, and a record made after the prune would be the call's again.
            let recorded = await eventually {
                let call = try? await client.send(.get, "/v1/calls/\(first.callId)", token: key).decode(CallResource.self)
                return call?.deliveries?.contains { $0.outcome == "pending" } == false
            }
            #expect(recorded, "the push's answer was recorded")
            let pruner = CallPruner(store: server.store, retention: .seconds(60), tokenLifetime: 86_400, clock: server.clock, logger: TestLogging.logger("test"))
            server.clock.advance(by: 3_600)
            await pruner.prune()
            let replay = try await Self.postTwilio(client, accountID: accountID, body: body)
            #expect(try replay.decode(WebhookRingResponse.self).callId == first.callId)
            try await Task.sleep(for: .milliseconds(300))
            #expect(simulator.received.count == 1, "the replay rang again")
            // Past the retention only what routes the replay is kept: no caller, no deliveries.
            let kept = try await client.send(.get, "/v1/calls/\(first.callId)", token: key).decode(CallResource.self)
            #expect(kept.from == nil)
            #expect(kept.metadata == nil)
            #expect(kept.deliveries?.isEmpty ?? true)
            #expect(kept.to == "bob")
            // After a day, the record goes like any other.
            server.clock.advance(by: 86_400)
            await pruner.prune()
            #expect(try await client.send(.get, "/v1/calls/\(first.callId)", token: key).status == .notFound)
        }
    }

    @Test func callRecordsArePrunedAfterTheRetention() async throws {
        try await TestServer.withPushServer { server, _, client, key in
            let accountID = try await Self.configureProviders(client, key: key, admin: server.adminToken)
            _ = try await client.createBinding(#"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 9))"}"#, token: key)
            let rang = try await Self.postTwilio(client, accountID: accountID, body: Self.twilioBody(messageID: "WBold")).decode(WebhookRingResponse.self)
            let pruner = CallPruner(store: server.store, retention: .seconds(7 * 86_400), tokenLifetime: 86_400, clock: server.clock, logger: TestLogging.logger("test"))
            await pruner.prune()
            #expect(try await client.send(.get, "/v1/calls/\(rang.callId)", token: key).status == .ok)
            server.clock.advance(by: 7 * 86_400 + 1)
            await pruner.prune()
            #expect(try await client.send(.get, "/v1/calls/\(rang.callId)", token: key).status == .notFound)
        }
    }
}
