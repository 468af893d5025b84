import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import RingRelayTesting
import Testing

/// The simulator over real TLS + HTTP/2 on loopback, driven by AsyncHTTPClient.
@Suite(.timeLimit(.minutes(2)))
struct APNsSimulatorTests {
    static let teamID = "DEF123GHIJ"
    static let keyID = "ABC123DEFG"
    static let bundle = "com.example.ringrelay"
    static let token = "00fc13adff785122b4ad28809a3420982341241421348097878e577c991de8f0"

    // MARK: - Success and protocol

    @Test func validProviderTokenIsAcceptedOverHTTP2() async throws {
        try await withHarness { (harness) async throws in
            let apnsID = "eabeae54-14a8-11e5-b60b-1697f925ec7b"
            let answer = try await harness.push(headers: ["apns-id": apnsID, "apns-expiration": "0", "apns-priority": "10"])
            #expect(answer.status == 200)
            #expect(answer.version == .http2)
            #expect(answer.body.isEmpty)
            #expect(answer.headers["apns-id"].first == apnsID)
            #expect(answer.headers["apns-unique-id"].isEmpty)

            let pushes = harness.simulator.received
            #expect(pushes.count == 1)
            #expect(pushes.first?.deviceToken == Self.token)
            #expect(pushes.first?.status == 200)
            #expect(pushes.first?.reason == nil)
            #expect(pushes.first?.apnsID == apnsID)
            #expect(pushes.first?.headers["apns-topic"] == Self.bundle)
            #expect(pushes.first?.headers[":method"] == "POST")
            #expect(pushes.first.map { String(decoding: $0.payload, as: UTF8.self) } == #"{"aps":{"alert":"Hello"}}"#)
        }
    }

    @Test func apnsIDIsGeneratedWhenAbsentAndUniqueIDAddedInDevelopment() async throws {
        var configuration = APNsSimulator.Configuration()
        configuration.isDevelopmentEnvironment = true
        try await withHarness(configuration: configuration) { (harness) async throws in
            let answer = try await harness.push()
            #expect(answer.status == 200)
            let apnsID = try #require(answer.headers["apns-id"].first)
            #expect(apnsID == UUID(uuidString: apnsID)?.uuidString.lowercased())
            #expect(answer.headers["apns-unique-id"].count == 1)
        }
    }

    @Test func http1OnlyClientGetsNoAnswer() async throws {
        try await withHarness { (harness) async throws in
            let client = harness.makeClient(httpVersion: .http1Only)
            await #expect(throws: (any Error).self) {
                _ = try await harness.push(using: client)
            }
            try await client.shutdown()
            #expect(harness.simulator.received.isEmpty)
            #expect(harness.simulator.connectionsAccepted >= 1)
        }
    }

    // MARK: - Provider tokens

    @Test func badSignatureIsRejected() async throws {
        try await withHarness { (harness) async throws in
            let otherKey = P256.Signing.PrivateKey()
            let forged = try Self.providerToken(key: otherKey)
            #expect(try await harness.push(auth: .jwt(forged)).reason == "InvalidProviderToken")

            // The DER signature form is not the JWS form.
            let der = try Self.providerToken(key: harness.key, derSignature: true)
            let answer = try await harness.push(auth: .jwt(der))
            #expect(answer.status == 403)
            #expect(answer.reason == "InvalidProviderToken")
            #expect(answer.headers["content-type"].first == "application/json")
        }
    }

    @Test func unknownKeyIDIsRejected() async throws {
        try await withHarness { (harness) async throws in
            let answer = try await harness.push(auth: .jwt(try Self.providerToken(key: harness.key, keyID: "ZZZ999ZZZZ")))
            #expect(answer.status == 403)
            #expect(answer.reason == "InvalidProviderToken")
            #expect(harness.simulator.received.first?.reason == "InvalidProviderToken")
        }
    }

    @Test func tokenShapeAndAgeAreChecked() async throws {
        try await withHarness { (harness) async throws in
            let expired = try Self.providerToken(key: harness.key, issuedAt: Date().addingTimeInterval(-3601))
            #expect(try await harness.push(auth: .jwt(expired)).reason == "ExpiredProviderToken")
        }
        try await withHarness { (harness) async throws in
            let future = try Self.providerToken(key: harness.key, issuedAt: Date().addingTimeInterval(600))
            #expect(try await harness.push(auth: .jwt(future)).reason == "InvalidProviderToken")
        }
        try await withHarness { (harness) async throws in
            let hs256 = try Self.providerToken(key: harness.key, algorithm: "HS256")
            #expect(try await harness.push(auth: .jwt(hs256)).reason == "InvalidProviderToken")
            #expect(try await harness.push(auth: .jwt("not.a.jwt")).reason == "InvalidProviderToken")
            let missing = try await harness.push(auth: .missing)
            #expect(missing.status == 403)
            #expect(missing.reason == "MissingProviderToken")
        }
    }

    @Test func changingTokenWithinTwentyMinutesOnOneConnectionIsTooManyUpdates() async throws {
        try await withHarness { (harness) async throws in
            let now = Date()
            let first = try Self.providerToken(key: harness.key, issuedAt: now.addingTimeInterval(-3000))
            let tooSoon = try Self.providerToken(key: harness.key, issuedAt: now.addingTimeInterval(-2500))
            let later = try Self.providerToken(key: harness.key, issuedAt: now.addingTimeInterval(-1700))

            #expect(try await harness.push(auth: .jwt(first)).status == 200)
            #expect(try await harness.push(auth: .jwt(first)).status == 200)
            let rejected = try await harness.push(auth: .jwt(tooSoon))
            #expect(rejected.status == 429)
            #expect(rejected.reason == "TooManyProviderTokenUpdates")
            #expect(try await harness.push(auth: .jwt(later)).status == 200)

            let connections = Set(harness.simulator.received.map(\.connectionID))
            #expect(connections.count == 1)
        }
    }

    @Test func anotherTeamsTokenOnTheSameConnectionIsRefused() async throws {
        try await withHarness { (harness) async throws in
            let otherTeamKey = TestCredentials.apnsP8()
            try harness.simulator.registerSigningKey(teamID: "XYZ987TEAM", keyID: "KEY0000002", p8PEM: otherTeamKey, topics: nil)
            let otherTeamToken = try Self.providerToken(
                key: P256.Signing.PrivateKey(pemRepresentation: otherTeamKey), teamID: "XYZ987TEAM", keyID: "KEY0000002",
                issuedAt: Date().addingTimeInterval(1))

            #expect(try await harness.push().status == 200)
            let answer = try await harness.push(auth: .jwt(otherTeamToken))
            #expect(answer.status == 403)
            #expect(answer.reason == "UnrelatedKeyIdInToken")

            // On its own connection the other team's token is fine.
            let client = harness.makeClient()
            #expect(try await harness.push(auth: .jwt(otherTeamToken), using: client).status == 200)
            try await client.shutdown()
        }
    }

    @Test func oneStreamAtATimeUntilATokenPushSucceeds() async throws {
        try await withHarness { (harness) async throws in
            // Open the connection with a request that authenticates but fails, so the limit stays at 1.
            #expect(try await harness.push(headers: ["apns-priority": "7"]).reason == "BadPriority")

            let tokens = ["aa01", "aa02", "bb01", "bb02"]
            for token in tokens {
                harness.simulator.setBehaviour(.delay(.seconds(1)), forDeviceToken: token, times: 1)
            }
            async let first = harness.push(token: tokens[0])
            async let second = harness.push(token: tokens[1])
            #expect(try await [first.status, second.status] == [200, 200])

            async let third = harness.push(token: tokens[2])
            async let fourth = harness.push(token: tokens[3])
            #expect(try await [third.status, fourth.status] == [200, 200])

            let pushes = harness.simulator.received
            #expect(Set(pushes.map(\.connectionID)).count == 1)
            func gap(_ a: String, _ b: String) throws -> TimeInterval {
                let x = try #require(pushes.first { $0.deviceToken == a })
                let y = try #require(pushes.first { $0.deviceToken == b })
                return abs(x.receivedAt.timeIntervalSince(y.receivedAt))
            }
            // Serialised while only one stream was allowed (the second waits out the first's delay),
            // concurrent after the first success (the second arrives while the first is delayed).
            #expect(try gap(tokens[0], tokens[1]) >= 0.95)
            #expect(try gap(tokens[2], tokens[3]) < 0.9)
        }
    }

    @Test func anyWellFormedTokenIsAcceptedInCLIMode() async throws {
        let simulator = try APNsSimulator()
        simulator.acceptAnyProviderToken(topics: [Self.bundle])
        try await withHarness(simulator: simulator) { (harness) async throws in
            let unregistered = try Self.providerToken(key: P256.Signing.PrivateKey(), keyID: "KEY0000001")
            #expect(try await harness.push(auth: .jwt(unregistered)).status == 200)
            #expect(try await harness.push(topic: "com.other.app", auth: .jwt(unregistered)).reason == "TopicDisallowed")
            let expired = try Self.providerToken(
                key: P256.Signing.PrivateKey(), keyID: "KEY0000001", issuedAt: Date().addingTimeInterval(-4000))
            #expect(try await harness.push(auth: .jwt(expired)).reason == "ExpiredProviderToken")
        }
    }

    // MARK: - Certificate authentication

    @Test func registeredClientCertificateAuthenticatesWithoutToken() async throws {
        let certificate = try SelfSignedCertificate(commonName: "Apple Push Services: \(Self.bundle)", isCertificateAuthority: false)
        let simulator = try APNsSimulator()
        try simulator.registerClientCertificate(pem: certificate.certificatePEM, topics: [Self.bundle])
        try await withHarness(simulator: simulator) { (harness) async throws in
            let client = harness.makeClient(clientCertificate: certificate)
            // One topic: apns-topic may be omitted, and the authorization header is ignored.
            #expect(try await harness.push(topic: nil, auth: .missing, using: client).status == 200)
            #expect(try await harness.push(topic: "\(Self.bundle).voip", pushType: "voip", auth: .jwt("bearer-garbage"), using: client).status == 200)
            #expect(try await harness.push(topic: "com.other.app", auth: .missing, using: client).reason == "TopicDisallowed")
            try await client.shutdown()

            let stranger = harness.makeClient(clientCertificate: try SelfSignedCertificate(isCertificateAuthority: false))
            #expect(try await harness.push(auth: .missing, using: stranger).reason == "BadCertificate")
            try await stranger.shutdown()
        }
    }

    // MARK: - Request validation

    @Test func topicMustMatchPushType() async throws {
        try await withHarness { (harness) async throws in
            let voipWithoutSuffix = try await harness.push(topic: Self.bundle, pushType: "voip")
            #expect(voipWithoutSuffix.status == 400)
            #expect(voipWithoutSuffix.reason == "InvalidPushType")
            #expect(try await harness.push(topic: "\(Self.bundle).voip", pushType: "alert").reason == "BadTopic")
            #expect(try await harness.push(topic: Self.bundle, pushType: "liveactivity").reason == "BadTopic")
            #expect(try await harness.push(topic: "\(Self.bundle).voip", pushType: "voip").status == 200)
            #expect(try await harness.push(topic: "com.other.app", pushType: "alert").reason == "TopicDisallowed")
            #expect(try await harness.push(pushType: "call").reason == "InvalidPushType")
            #expect(try await harness.push(topic: nil).reason == "MissingTopic")
        }
    }

    @Test func payloadLimits() async throws {
        try await withHarness { (harness) async throws in
            let voip = "\(Self.bundle).voip"
            let tooLarge = try await harness.push(body: Self.payload(size: 4097))
            #expect(tooLarge.status == 413)
            #expect(tooLarge.reason == "PayloadTooLarge")
            #expect(try await harness.push(body: Self.payload(size: 4096)).status == 200)
            #expect(try await harness.push(topic: voip, pushType: "voip", body: Self.payload(size: 5121)).status == 413)
            #expect(try await harness.push(topic: voip, pushType: "voip", body: Self.payload(size: 5120)).status == 200)
            #expect(try await harness.push(body: []).reason == "PayloadEmpty")
        }
    }

    @Test func pathAndMethodAndDeviceToken() async throws {
        try await withHarness { (harness) async throws in
            let nonHex = try await harness.push(token: "zz" + Self.token.dropFirst(2))
            #expect(nonHex.status == 400)
            #expect(nonHex.reason == "BadDeviceToken")
            #expect(try await harness.push(token: "abc").reason == "BadDeviceToken")
            #expect(try await harness.push(token: "").reason == "MissingDeviceToken")
            let badPath = try await harness.push(path: "/3/devices/\(Self.token)")
            #expect(badPath.status == 404)
            #expect(badPath.reason == "BadPath")
            let get = try await harness.push(method: .GET)
            #expect(get.status == 405)
            #expect(get.reason == "MethodNotAllowed")
        }
    }

    @Test func headerValuesAreChecked() async throws {
        try await withHarness { (harness) async throws in
            #expect(try await harness.push(headers: ["apns-priority": "7"]).reason == "BadPriority")
            #expect(try await harness.push(pushType: "background", headers: ["apns-priority": "10"]).reason == "BadPriority")
            #expect(try await harness.push(pushType: "background", headers: ["apns-priority": "5"]).status == 200)
            #expect(try await harness.push(headers: ["apns-expiration": "tomorrow"]).reason == "BadExpirationDate")
            #expect(try await harness.push(headers: ["apns-id": "EABEAE54-14A8-11E5-B60B-1697F925EC7B"]).reason == "BadMessageId")
            #expect(try await harness.push(headers: ["apns-collapse-id": String(repeating: "c", count: 65)]).reason == "BadCollapseId")
            #expect(try await harness.push(headers: ["apns-collapse-id": String(repeating: "c", count: 64)]).status == 200)
            let duplicate = try await harness.push(extraHeaders: [("apns-priority", "10"), ("apns-priority", "5")])
            #expect(duplicate.reason == "DuplicateHeaders")
        }
    }

    // MARK: - Scripted behaviours

    @Test func scriptedUnregisteredCarriesTimestampInMilliseconds() async throws {
        try await withHarness { (harness) async throws in
            let when = Date(timeIntervalSince1970: 1_700_000_000)
            harness.simulator.setBehaviour(
                .respond(status: 410, reason: "Unregistered", timestamp: when), forDeviceToken: Self.token.uppercased(), times: 1)
            let answer = try await harness.push()
            #expect(answer.status == 410)
            let json = try #require(try JSONSerialization.jsonObject(with: answer.body) as? [String: Any])
            #expect(json["reason"] as? String == "Unregistered")
            #expect((json["timestamp"] as? NSNumber)?.int64Value == 1_700_000_000_000)
            #expect(harness.simulator.received.last?.status == 410)

            // `times: 1` is used up: the next push is validated normally.
            #expect(try await harness.push().status == 200)
        }
    }

    @Test func stalledRequestTimesOut() async throws {
        try await withHarness { (harness) async throws in
            harness.simulator.setBehaviour(.stall, forDeviceToken: Self.token)
            // Generous: on a loaded machine the TLS handshake alone can take a second or two, and
            // the stalled request must have reached the simulator before the client gives up.
            await #expect(throws: (any Error).self) {
                _ = try await harness.push(timeout: .seconds(6))
            }
            let push = try #require(harness.simulator.received.first)
            #expect(push.status == 0)
            #expect(push.reason == nil)
        }
    }

    @Test func droppedConnectionFailsTheRequest() async throws {
        try await withHarness { (harness) async throws in
            harness.simulator.setBehaviour(.dropConnection, forDeviceToken: Self.token, times: 1)
            await #expect(throws: (any Error).self) {
                _ = try await harness.push()
            }
            #expect(harness.simulator.received.first?.status == 0)
            // The client reconnects for the next push.
            #expect(try await harness.push().status == 200)
            #expect(harness.simulator.connectionsAccepted == 2)
        }
    }

    @Test func goAwayEndsTheConnection() async throws {
        try await withHarness { (harness) async throws in
            harness.simulator.setBehaviour(.goAway(reason: "Shutdown"), forDeviceToken: Self.token, times: 1)
            await #expect(throws: (any Error).self) {
                _ = try await harness.push()
            }
            #expect(harness.simulator.received.first?.status == 0)
            #expect(harness.simulator.received.first?.reason == "Shutdown")
            #expect(try await harness.push().status == 200)
            #expect(Set(harness.simulator.received.map(\.connectionID)).count == 2)
        }
    }

    @Test func resetClearsReceivedAndBehaviours() async throws {
        try await withHarness { (harness) async throws in
            harness.simulator.setBehaviour(.respond(status: 500, reason: "InternalServerError"), forDeviceToken: Self.token)
            #expect(try await harness.push().status == 500)
            #expect(try await harness.push().status == 500)
            harness.simulator.reset()
            #expect(harness.simulator.received.isEmpty)
            #expect(try await harness.push().status == 200)
        }
    }

    // MARK: - Helpers

    /// A running simulator with one registered key and a client that trusts it.
    struct Harness {
        let simulator: APNsSimulator
        let key: P256.Signing.PrivateKey
        let client: HTTPClient
        /// One token for the whole test: APNs refuses a new token on a connection within 20 minutes.
        let validToken: String

        func makeClient(
            httpVersion: HTTPClient.Configuration.HTTPVersion = .automatic, clientCertificate: SelfSignedCertificate? = nil
        ) -> HTTPClient {
            var configuration = HTTPClient.Configuration()
            configuration.tlsConfiguration = try? simulator.makeClientTLSConfiguration(clientCertificate: clientCertificate)
            configuration.httpVersion = httpVersion
            return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        }

        struct Answer {
            var status: Int
            var reason: String?
            var headers: HTTPHeaders
            var body: Data
            var version: HTTPVersion
        }

        /// What a push carries in `authorization`.
        enum Authorization {
            /// A freshly signed token from the registered key.
            case valid
            /// `bearer <this>`.
            case jwt(String)
            /// No authorization header.
            case missing
        }

        /// Sends one push.
        func push(
            method: HTTPMethod = .POST,
            path: String? = nil,
            token: String = APNsSimulatorTests.token,
            topic: String? = APNsSimulatorTests.bundle,
            pushType: String? = nil,
            auth: Authorization = .valid,
            headers: [String: String] = [:],
            extraHeaders: [(String, String)] = [],
            body: [UInt8] = Array(#"{"aps":{"alert":"Hello"}}"#.utf8),
            timeout: TimeAmount = .seconds(10),
            using client: HTTPClient? = nil
        ) async throws -> Answer {
            var request = HTTPClientRequest(url: simulator.url + (path ?? "/3/device/\(token)"))
            request.method = method
            switch auth {
            case .valid:
                request.headers.add(name: "authorization", value: "bearer \(validToken)")
            case .jwt(let jwt):
                request.headers.add(name: "authorization", value: "bearer \(jwt)")
            case .missing:
                break
            }
            if let topic { request.headers.add(name: "apns-topic", value: topic) }
            let inferredType = topic?.hasSuffix(".voip") == true ? "voip" : "alert"
            request.headers.add(name: "apns-push-type", value: pushType ?? inferredType)
            for (name, value) in headers { request.headers.add(name: name, value: value) }
            for (name, value) in extraHeaders { request.headers.add(name: name, value: value) }
            request.body = .bytes(ByteBuffer(bytes: body))
            let response = try await (client ?? self.client).execute(request, timeout: timeout)
            let bytes = try await response.body.collect(upTo: 1 << 16)
            let data = Data(bytes.readableBytesView)
            let reason = (try? JSONSerialization.jsonObject(with: data) as? [String: Any])?["reason"] as? String
            return Answer(
                status: Int(response.status.code), reason: reason, headers: response.headers, body: data,
                version: response.version)
        }
    }

    func withHarness(
        configuration: APNsSimulator.Configuration = .init(),
        simulator: APNsSimulator? = nil,
        _ body: (Harness) async throws -> Void
    ) async throws {
        let simulator = try simulator ?? APNsSimulator(configuration: configuration)
        let key = P256.Signing.PrivateKey()
        simulator.registerSigningKey(teamID: Self.teamID, keyID: Self.keyID, publicKey: key.publicKey, topics: [Self.bundle])
        try await simulator.start()
        var configuration = HTTPClient.Configuration()
        configuration.tlsConfiguration = try simulator.makeClientTLSConfiguration()
        configuration.httpVersion = .automatic
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        do {
            try await body(
                Harness(simulator: simulator, key: key, client: client, validToken: try Self.providerToken(key: key)))
        } catch {
            try? await client.shutdown()
            try? await simulator.shutdown()
            throw error
        }
        try await client.shutdown()
        try await simulator.shutdown()
    }

    /// A JSON payload of exactly `size` bytes.
    static func payload(size: Int) -> [UInt8] {
        let frame = Array(#"{"aps":{},"pad":""}"#.utf8)
        return Array(frame.dropLast(2)) + Array(repeating: UInt8(ascii: "x"), count: size - frame.count) + Array(frame.suffix(2))
    }

    /// An APNs provider token: ES256 over `header.claims`, signature as raw R||S (or DER when asked).
    static func providerToken(
        key: P256.Signing.PrivateKey,
        teamID: String = teamID,
        keyID: String = keyID,
        issuedAt: Date = Date(),
        algorithm: String = "ES256",
        derSignature: Bool = false
    ) throws -> String {
        let header = base64URL(Data(#"{"alg":"\#(algorithm)","kid":"\#(keyID)"}"#.utf8))
        let claims = base64URL(Data(#"{"iss":"\#(teamID)","iat":\#(Int(issuedAt.timeIntervalSince1970))}"#.utf8))
        let signingInput = "\(header).\(claims)"
        let signature = try key.signature(for: Data(signingInput.utf8))
        return "\(signingInput).\(base64URL(derSignature ? signature.derRepresentation : signature.rawRepresentation))"
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
