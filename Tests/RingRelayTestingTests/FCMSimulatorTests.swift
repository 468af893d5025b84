import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import RingRelayTesting
import Testing

/// The FCM simulator over real TLS on loopback, driven by AsyncHTTPClient.
@Suite(.timeLimit(.minutes(2)))
struct FCMSimulatorTests {
    static let project = "ringrelay-sim-test"
    static let token = "bk3RNwTe3H0:CI2k_HHwgIpoDKCIZvvDMExUdFQ3P1"
    /// One RSA key for the harness's service accounts, one for strangers: generating keys is slow in debug builds.
    static let sharedKeyPEM = (try? TestCredentials.serviceAccount())?["private_key"]
    static let stranger = (try? TestCredentials.serviceAccount()) ?? [:]

    struct Answer {
        var status: Int
        var json: [String: Any]
        var text: String
        var headers: HTTPHeaders
        var version: HTTPVersion

        /// `error.details[]` entry of a type.
        func detail(_ type: String) -> [String: Any]? {
            ((json["error"] as? [String: Any])?["details"] as? [[String: Any]])?.first { $0["@type"] as? String == "type.googleapis.com/\(type)" }
        }

        var error: [String: Any]? { json["error"] as? [String: Any] }
        var errorCode: String? { detail("google.firebase.fcm.v1.FcmError")?["errorCode"] as? String }
        var message: String? { error?["message"] as? String }
    }

    struct Harness {
        let simulator: FCMSimulator
        let client: HTTPClient
        let account: [String: String]
        let clock: ManualWallClock

        func post(_ path: String, body: String, contentType: String = "application/json", bearer: String? = nil, using: HTTPClient? = nil)
            async throws -> Answer
        {
            var request = HTTPClientRequest(url: simulator.url + path)
            request.method = .POST
            request.headers.add(name: "content-type", value: contentType)
            if let bearer { request.headers.add(name: "authorization", value: "Bearer \(bearer)") }
            request.body = .bytes(ByteBuffer(string: body))
            let response = try await (using ?? client).execute(request, timeout: .seconds(10))
            let data = Data(try await response.body.collect(upTo: 1 << 20).readableBytesView)
            let json = (try? JSONSerialization.jsonObject(with: data) as? [String: Any]) ?? [:]
            return Answer(
                status: Int(response.status.code), json: json, text: String(decoding: data, as: UTF8.self), headers: response.headers,
                version: response.version)
        }

        func exchange(_ assertion: String, grantType: String = "urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer") async throws -> Answer {
            try await post(
                "/token", body: "grant_type=\(grantType)&assertion=\(assertion)", contentType: "application/x-www-form-urlencoded")
        }

        /// A fresh access token for the harness's account.
        func accessToken() async throws -> String {
            let answer = try await exchange(try FCMSimulator.makeAssertion(serviceAccount: account, issuedAt: clock.now))
            return try #require(answer.json["access_token"] as? String)
        }

        func send(_ body: String, project: String = FCMSimulatorTests.project, bearer: String? = nil) async throws -> Answer {
            var token = bearer
            if token == nil { token = try await accessToken() }
            return try await post("/v1/projects/\(project)/messages:send", body: body, bearer: token)
        }
    }

    func withHarness(_ body: (Harness) async throws -> Void) async throws {
        let clock = ManualWallClock(start: Date())
        var configuration = FCMSimulator.Configuration()
        configuration.clock = clock
        let simulator = try FCMSimulator(configuration: configuration)
        try await simulator.start()
        var clientConfiguration = HTTPClient.Configuration()
        clientConfiguration.tlsConfiguration = try simulator.makeClientTLSConfiguration()
        clientConfiguration.httpVersion = .automatic
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
        do {
            let account = try simulator.makeServiceAccount(projectID: Self.project, privateKeyPEM: Self.sharedKeyPEM)
            try await body(Harness(simulator: simulator, client: client, account: account, clock: clock))
        } catch {
            try? await client.shutdown()
            try? await simulator.shutdown()
            throw error
        }
        try await client.shutdown()
        try await simulator.shutdown()
    }

    static func message(token: String = token, data: String = #"{"type":"incoming_call"}"#, android: String = #"{"priority":"HIGH","ttl":"30s"}"#)
        -> String
    {
        #"{"message":{"token":"\#(token)","data":\#(data),"android":\#(android)}}"#
    }

    // MARK: - OAuth token endpoint

    @Test func validAssertionGetsAnAccessToken() async throws {
        try await withHarness { harness in
            let answer = try await harness.exchange(try FCMSimulator.makeAssertion(serviceAccount: harness.account, issuedAt: harness.clock.now))
            #expect(answer.status == 200)
            #expect((answer.json["access_token"] as? String)?.hasPrefix("ya29.") == true)
            #expect(answer.json["expires_in"] as? Int == 3599)
            #expect(answer.json["token_type"] as? String == "Bearer")
            #expect(harness.simulator.tokenMints == 1)
            let request = try #require(harness.simulator.tokenRequests.first)
            #expect(request.clientEmail == harness.account["client_email"])
            #expect(request.expiresIn == 3599)
            // The service account is shaped like Google's and points its token_uri here.
            #expect(harness.account["type"] == "service_account")
            #expect(harness.account["token_uri"] == harness.simulator.tokenURL)
            #expect(harness.account["private_key"]?.hasPrefix("-----BEGIN PRIVATE KEY-----") == true)
        }
    }

    @Test func assertionsThatGoogleWouldRefuseAreRefused() async throws {
        try await withHarness { harness in
            let now = harness.clock.now
            let other = try #require(Self.stranger["private_key"])
            let cases: [(String, String, String)] = [
                (
                    try FCMSimulator.makeAssertion(serviceAccount: harness.account, issuedAt: now, signingKeyPEM: other), "invalid_grant",
                    "Invalid JWT Signature."
                ),
                (
                    try FCMSimulator.makeAssertion(serviceAccount: harness.account, audience: "https://oauth2.googleapis.com/token", issuedAt: now),
                    "invalid_grant", "Invalid JWT: Failed audience check. The expected value is \(harness.simulator.tokenURL)."
                ),
                (
                    try FCMSimulator.makeAssertion(serviceAccount: harness.account, issuedAt: now, lifetime: 7200), "invalid_grant",
                    "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."
                ),
                (
                    try FCMSimulator.makeAssertion(serviceAccount: harness.account, issuedAt: now.addingTimeInterval(-3700)), "invalid_grant",
                    "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."
                ),
                (
                    try FCMSimulator.makeAssertion(serviceAccount: harness.account, issuedAt: now.addingTimeInterval(600)), "invalid_grant",
                    "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."
                ),
                (
                    try FCMSimulator.makeAssertion(
                        serviceAccount: harness.account, scope: "https://www.googleapis.com/auth/userinfo.email", issuedAt: now),
                    "invalid_scope", "Invalid OAuth scope or ID token audience provided."
                ),
                (
                    try FCMSimulator.makeAssertion(
                        serviceAccount: Self.stranger.merging(["token_uri": harness.simulator.tokenURL]) { $1 }, issuedAt: now),
                    "invalid_grant", "Invalid grant: account not found"
                ),
                ("not.a.jwt", "invalid_grant", "Invalid JWT: Failed to parse the assertion."),
            ]
            for (assertion, error, description) in cases {
                let answer = try await harness.exchange(assertion)
                #expect(answer.status == 400)
                #expect(answer.json["error"] as? String == error)
                #expect(answer.json["error_description"] as? String == description)
            }
            // The cloud-platform scope also allows sending.
            let broad = try FCMSimulator.makeAssertion(
                serviceAccount: harness.account, scope: "https://www.googleapis.com/auth/cloud-platform", issuedAt: now)
            #expect(try await harness.exchange(broad).status == 200)
            #expect(harness.simulator.tokenMints == 1)
        }
    }

    @Test func onlyTheJWTBearerGrantIsAccepted() async throws {
        try await withHarness { harness in
            let assertion = try FCMSimulator.makeAssertion(serviceAccount: harness.account, issuedAt: harness.clock.now)
            let answer = try await harness.exchange(assertion, grantType: "client_credentials")
            #expect(answer.status == 400)
            #expect(answer.json["error"] as? String == "unsupported_grant_type")
            let missing = try await harness.post("/token", body: "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer")
            #expect(missing.json["error"] as? String == "invalid_request")
        }
    }

    @Test func scriptedOAuthFailuresCountDown() async throws {
        try await withHarness { harness in
            harness.simulator.setOAuthFailure(.invalidGrant, forClientEmail: harness.account["client_email"], times: 1)
            let assertion = try FCMSimulator.makeAssertion(serviceAccount: harness.account, issuedAt: harness.clock.now)
            let refused = try await harness.exchange(assertion)
            #expect(refused.status == 400)
            #expect(refused.json["error"] as? String == "invalid_grant")
            #expect(try await harness.exchange(assertion).status == 200)
            harness.simulator.setOAuthFailure(.reject(status: 503, error: "internal_failure", description: "Backend Error"))
            #expect(try await harness.exchange(assertion).status == 503)
            #expect(harness.simulator.tokenRequests.map(\.status) == [400, 200, 503])
        }
    }

    // MARK: - Send: success and authentication

    @Test func validMessageIsAcceptedOverHTTP2AndRecorded() async throws {
        try await withHarness { harness in
            let body = Self.message()
            let answer = try await harness.send(body)
            #expect(answer.status == 200)
            #expect(answer.version == .http2)
            let name = try #require(answer.json["name"] as? String)
            #expect(name.hasPrefix("projects/\(Self.project)/messages/0:"))
            let received = try #require(harness.simulator.received.first)
            #expect(received.body == Data(body.utf8))
            #expect(received.registrationToken == Self.token)
            #expect(received.data == ["type": "incoming_call"])
            #expect(received.androidPriority == "HIGH")
            #expect(received.androidTTL == "30s")
            #expect(received.messageName == name)
            #expect(received.status == 200)
        }
    }

    @Test func http1ClientsAreServedToo() async throws {
        try await withHarness { harness in
            var configuration = HTTPClient.Configuration()
            configuration.tlsConfiguration = try harness.simulator.makeClientTLSConfiguration(http2: false)
            configuration.httpVersion = .http1Only
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            let token = try await harness.accessToken()
            let answer = try await harness.post("/v1/projects/\(Self.project)/messages:send", body: Self.message(), bearer: token, using: client)
            #expect(answer.status == 200)
            #expect(answer.version == .http1_1)
            try await client.shutdown()
        }
    }

    @Test func missingOrExpiredAccessTokenIsUnauthenticated() async throws {
        try await withHarness { harness in
            let missing = try await harness.post("/v1/projects/\(Self.project)/messages:send", body: Self.message())
            #expect(missing.status == 401)
            #expect(missing.error?["status"] as? String == "UNAUTHENTICATED")
            #expect(missing.error?["code"] as? Int == 401)
            #expect(missing.message?.hasPrefix("Request had invalid authentication credentials.") == true)
            #expect(missing.errorCode == nil)

            let token = try await harness.accessToken()
            #expect(try await harness.send(Self.message(), bearer: token).status == 200)
            harness.clock.advance(by: 3600)
            #expect(try await harness.send(Self.message(), bearer: token).status == 401)
            let fresh = try await harness.accessToken()
            harness.simulator.revokeAccessTokens()
            #expect(try await harness.send(Self.message(), bearer: fresh).status == 401)
        }
    }

    @Test func anotherProjectIsPermissionDenied() async throws {
        try await withHarness { harness in
            let answer = try await harness.send(Self.message(), project: "someone-else")
            #expect(answer.status == 403)
            #expect(answer.error?["status"] as? String == "PERMISSION_DENIED")
            #expect(answer.errorCode == nil)
        }
    }

    @Test func validateOnlyIsNotDelivered() async throws {
        try await withHarness { harness in
            let answer = try await harness.send(#"{"validate_only":true,"message":{"token":"\#(Self.token)","data":{"a":"b"}}}"#)
            #expect(answer.status == 200)
            #expect(answer.json["name"] as? String == "projects/\(Self.project)/messages/fake_message_id")
            #expect(harness.simulator.received.first?.validateOnly == true)
        }
    }

    // MARK: - Send: the message rules

    @Test func dataValuesMustBeStrings() async throws {
        try await withHarness { harness in
            // Firebase's documented Example 1, verbatim.
            let answer = try await harness.send(Self.message(data: #"{"count":12,"type":"call"}"#))
            #expect(answer.status == 400)
            #expect(answer.error?["status"] as? String == "INVALID_ARGUMENT")
            #expect(answer.message == "Invalid value at 'message.data[0].value' (TYPE_STRING), 12")
            let violation = (answer.detail("google.rpc.BadRequest")?["fieldViolations"] as? [[String: Any]])?.first
            #expect(violation?["field"] as? String == "message.data[0].value")
            #expect(violation?["description"] as? String == "Invalid value at 'message.data[0].value' (TYPE_STRING), 12")
            #expect(answer.errorCode == nil)

            let second = try await harness.send(Self.message(data: #"{"type":"call","flag":true}"#))
            #expect(second.message == "Invalid value at 'message.data[1].value' (TYPE_STRING), true")
        }
    }

    @Test func exactlyOneTargetIsRequired() async throws {
        try await withHarness { harness in
            let none = try await harness.send(#"{"message":{"data":{"a":"b"}}}"#)
            #expect(none.status == 400)
            #expect(none.message == "Recipient of the message is not set.")
            #expect(none.errorCode == "INVALID_ARGUMENT")
            let two = try await harness.send(#"{"message":{"token":"\#(Self.token)","topic":"news"}}"#)
            #expect(two.status == 400)
            #expect(two.message == "Invalid JSON payload received. oneof field 'target' is already set. Cannot set 'topic'")
        }
    }

    @Test func unknownFieldsAreRejectedLikeProtoJSON() async throws {
        try await withHarness { harness in
            let top = try await harness.send(#"{"message":{"token":"\#(Self.token)"},"dry_run":true}"#)
            #expect(top.message == #"Invalid JSON payload received. Unknown name "dry_run": Cannot find field."#)
            let inner = try await harness.send(#"{"message":{"token":"\#(Self.token)","priority":"high"}}"#)
            #expect(inner.message == #"Invalid JSON payload received. Unknown name "priority" at 'message': Cannot find field."#)
            let android = try await harness.send(Self.message(android: #"{"priority":"HIGH","time_to_live":30}"#))
            #expect(android.message == #"Invalid JSON payload received. Unknown name "time_to_live" at 'message.android': Cannot find field."#)
            let broken = try await harness.send(#"{"message":"#)
            #expect(broken.status == 400)
        }
    }

    @Test func androidPriorityAndTTLAreChecked() async throws {
        try await withHarness { harness in
            for android in [#"{"priority":"high","ttl":"3.000000001s"}"#, #"{"priority":"NORMAL","ttl":"0s"}"#, #"{"ttl":"2419200s"}"#] {
                #expect(try await harness.send(Self.message(android: android)).status == 200, "\(android)")
            }
            let priority = try await harness.send(Self.message(android: #"{"priority":"URGENT"}"#))
            #expect(priority.status == 400)
            #expect(
                priority.message
                    == #"Invalid value at 'message.android.priority' (type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority), "URGENT""#)
            let ttl = try await harness.send(Self.message(android: #"{"ttl":"30"}"#))
            #expect(ttl.message == #"Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), "30""#)
            let number = try await harness.send(Self.message(android: #"{"ttl":30}"#))
            #expect(number.message == "Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), 30")
            let long = try await harness.send(Self.message(android: #"{"ttl":"2419201s"}"#))
            #expect(long.status == 400)
            #expect(long.errorCode == "INVALID_ARGUMENT")
        }
    }

    @Test func notificationsAreCheckedLikeProtoJSON() async throws {
        try await withHarness { harness in
            let shown = try await harness.send(
                #"{"message":{"token":"\#(Self.token)","notification":{"title":"Missed call","body":"From Alice"},"android":{"collapse_key":"c1","notification":{"tag":"c1"}}}}"#
            )
            #expect(shown.status == 200)
            #expect(harness.simulator.received.last?.notification == ["title": "Missed call", "body": "From Alice"])
            let number = try await harness.send(#"{"message":{"token":"\#(Self.token)","notification":{"title":1}}}"#)
            #expect(number.message == "Invalid value at 'message.notification.title' (TYPE_STRING), 1")
            let unknown = try await harness.send(#"{"message":{"token":"\#(Self.token)","notification":{"subtitle":"x"}}}"#)
            #expect(unknown.message == #"Invalid JSON payload received. Unknown name "subtitle" at 'message.notification': Cannot find field."#)
            let tag = try await harness.send(Self.message(android: #"{"notification":{"tag":["c1"]}}"#))
            #expect(tag.message == #"Invalid value at 'message.android.notification.tag' (TYPE_STRING), ["c1"]"#)
            let collapse = try await harness.send(Self.message(android: #"{"collapse_key":7}"#))
            #expect(collapse.status == 400)
        }
    }

    @Test func dataIsLimitedTo4096BytesOfKeysAndValues() async throws {
        try await withHarness { harness in
            let fits = #"{"k":"\#(String(repeating: "x", count: 4095))"}"#
            #expect(try await harness.send(Self.message(data: fits)).status == 200)
            let over = #"{"k":"\#(String(repeating: "x", count: 4096))"}"#
            let answer = try await harness.send(Self.message(data: over))
            #expect(answer.status == 400)
            #expect(answer.message == "Request contains an invalid argument.")
        }
    }

    @Test func reservedDataKeysAreRejected() async throws {
        try await withHarness { harness in
            for key in ["from", "gcm", "google.c.a.e"] {
                let answer = try await harness.send(Self.message(data: #"{"\#(key)":"x"}"#))
                #expect(answer.status == 400, "\(key)")
                #expect(answer.errorCode == "INVALID_ARGUMENT")
            }
            #expect(try await harness.send(Self.message(data: #"{"fromage":"x"}"#)).status == 200)
        }
    }

    @Test func malformedRegistrationTokenGetsFirebasesExample2() async throws {
        try await withHarness { harness in
            let answer = try await harness.send(Self.message(token: "not a token"))
            #expect(answer.status == 400)
            #expect(answer.message == "The registration token is not a valid FCM registration token")
            #expect(answer.error?["status"] as? String == "INVALID_ARGUMENT")
            #expect(answer.errorCode == "INVALID_ARGUMENT")
        }
    }

    // MARK: - Scripted answers

    @Test func everyScriptedErrorUsesGooglesEnvelope() async throws {
        try await withHarness { harness in
            let token = try await harness.accessToken()
            let expected: [(FCMSimulator.ErrorCode, Int, String)] = [
                (.unregistered, 404, "NOT_FOUND"), (.invalidArgument, 400, "INVALID_ARGUMENT"), (.quotaExceeded, 429, "RESOURCE_EXHAUSTED"),
                (.unavailable, 503, "UNAVAILABLE"), (.internal, 500, "INTERNAL"), (.senderIDMismatch, 403, "PERMISSION_DENIED"),
                (.thirdPartyAuthError, 401, "UNAUTHENTICATED"),
            ]
            for (index, (code, status, rpc)) in expected.enumerated() {
                let device = "device\(index):APA91b"
                harness.simulator.setBehaviour(.error(code), forRegistrationToken: device, times: 1)
                let answer = try await harness.send(Self.message(token: device), bearer: token)
                #expect(answer.status == status)
                #expect(answer.error?["code"] as? Int == status)
                #expect(answer.error?["status"] as? String == rpc)
                #expect(answer.errorCode == code.rawValue)
                #expect(answer.headers["retry-after"].isEmpty)
                // times: 1 — the next message is delivered.
                #expect(try await harness.send(Self.message(token: device), bearer: token).status == 200)
            }
            #expect(harness.simulator.received.compactMap(\.errorCode) == expected.map(\.0.rawValue))
        }
    }

    @Test func quotaExceededCarriesRetryAfterAndAQuotaFailure() async throws {
        try await withHarness { harness in
            harness.simulator.setBehaviour(.error(.quotaExceeded, retryAfter: 7), forRegistrationToken: Self.token)
            let answer = try await harness.send(Self.message())
            #expect(answer.status == 429)
            #expect(answer.headers["retry-after"].first == "7")
            #expect(answer.detail("google.rpc.QuotaFailure") != nil)
        }
    }

    @Test func stalledMessageIsNeverAnswered() async throws {
        try await withHarness { harness in
            harness.simulator.setBehaviour(.stall, forRegistrationToken: Self.token, times: 1)
            let token = try await harness.accessToken()
            var request = HTTPClientRequest(url: harness.simulator.url + "/v1/projects/\(Self.project)/messages:send")
            request.method = .POST
            request.headers.add(name: "authorization", value: "Bearer \(token)")
            request.body = .bytes(ByteBuffer(string: Self.message()))
            // Generous: on a loaded machine the new TLS connection alone can take over a second,
            // and the stalled message must have reached the simulator before the client gives up.
            await #expect(throws: (any Error).self) {
                _ = try await harness.client.execute(request, timeout: .seconds(6))
            }
            #expect(harness.simulator.received.first?.status == 0)
            #expect(try await harness.send(Self.message(), bearer: token).status == 200)
        }
    }

    @Test func writtenServiceAccountIsPrivateAndUsable() async throws {
        try await withHarness { harness in
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let path = directory.appending("service-account.json")
            let written = try harness.simulator.writeServiceAccount(toFile: path, projectID: "other-project")
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
            let read = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: String]
            #expect(read == written)
            let assertion = try FCMSimulator.makeAssertion(serviceAccount: written, issuedAt: harness.clock.now)
            let token = try #require(try await harness.exchange(assertion).json["access_token"] as? String)
            #expect(try await harness.send(Self.message(), project: "other-project", bearer: token).status == 200)
        }
    }

    @Test func unknownPathsAreNotFound() async throws {
        try await withHarness { harness in
            let answer = try await harness.post("/v1/projects/\(Self.project)/messages:batchSend", body: "{}")
            #expect(answer.status == 404)
            #expect(answer.error?["status"] as? String == "NOT_FOUND")
        }
    }
}
