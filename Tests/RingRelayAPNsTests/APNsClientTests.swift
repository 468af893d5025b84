import Crypto
import Foundation
import Logging
import Metrics
import RingRelayCore
import RingRelayTesting
import Synchronization
import Testing

@testable import RingRelayAPNs

/// The real client against the simulator over HTTP/2 and TLS on loopback.
@Suite struct APNsClientTests {
    static let bundleID = "com.example.app"
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"

    /// A started simulator, a client trusting it, and a token credential the simulator knows.
    struct Harness {
        let simulator: APNsSimulator
        let client: APNsClient
        let credential: APNsCredential
        let directory: TemporaryDirectory
        let sleeps: Sleeps
        let clock: ManualWallClock

        func shutdown() async throws {
            await client.shutdown()
            try await simulator.shutdown()
            directory.remove()
        }

        func push(_ token: String, kind: APNsPushKind = .voip, certain: Bool = true, payload: String = #"{"aps":{}}"#, credential: APNsCredential? = nil) async throws -> PushOutcome {
            let request = try APNsRequest(kind: kind, bundleID: (credential ?? self.credential).topic, deviceToken: token, payload: Array(payload.utf8))
            return await client.push(
                request, credential: credential ?? self.credential, environment: .sandbox, environmentIsCertain: certain,
                deadline: Date().addingTimeInterval(30))
        }
    }

    /// Back-off waits, recorded instead of slept.
    final class Sleeps: Sendable {
        let values = Mutex<[Duration]>([])
        var all: [Duration] { values.withLock { $0 } }
    }

    /// A client against a fresh simulator. The default request timeout is long (30 s): tests count
    /// attempts and connections, and a test process starved by a build beside it must not turn a
    /// slow first answer into a timeout and one more attempt.
    static func harness(timeout: Duration = .seconds(30), clock: ManualWallClock = ManualWallClock(start: Date())) async throws -> Harness {
        let simulator = try APNsSimulator()
        try await simulator.start()
        let directory = try TemporaryDirectory()
        let caFile = directory.appending("apns-simulator.pem")
        try simulator.writeCertificate(toFile: caFile)
        let key = P256.Signing.PrivateKey()
        simulator.registerSigningKey(teamID: teamID, keyID: keyID, publicKey: key.publicKey, topics: [bundleID])
        var configuration = APNsConfiguration()
        configuration.productionEndpoint = simulator.url
        configuration.sandboxEndpoint = simulator.url
        configuration.extraTrustRootsFile = caFile
        configuration.requestTimeout = timeout
        configuration.retryBaseDelay = .milliseconds(10)
        let sleeps = Sleeps()
        let client = try APNsClient(
            configuration: configuration, clock: clock, logger: TestLogging.logger("test"), metricsFactory: NOOPMetricsHandler.instance,
            sleep: { duration in sleeps.values.withLock { $0.append(duration) } })
        let credential = APNsCredential(
            authentication: .token(teamID: teamID, keyID: keyID, privateKeyPEM: key.pemRepresentation), topic: bundleID)
        return Harness(simulator: simulator, client: client, credential: credential, directory: directory, sleeps: sleeps, clock: clock)
    }

    static func token(_ seed: Int) -> String {
        (0..<32).map { String(format: "%02x", ($0 * 13 + seed) & 0xFF) }.joined()
    }

    /// An endpoint nobody listens on fails every push, and the log says so once per interval, not
    /// once a push (an outage would otherwise write a warning per push and attempt).
    @Test func anUnreachableEndpointIsWarnedAboutOncePerInterval() async throws {
        let simulator = try APNsSimulator()
        try await simulator.start()
        let url = simulator.url
        try await simulator.shutdown()  // nothing listens there now
        var configuration = APNsConfiguration()
        configuration.productionEndpoint = url
        configuration.sandboxEndpoint = url
        configuration.retryBaseDelay = .milliseconds(1)
        let log = LogRecorder(level: .warning)
        let client = try APNsClient(
            configuration: configuration, clock: SystemWallClock(), logger: log.logger("apns"), metricsFactory: NOOPMetricsHandler.instance,
            sleep: { _ in })
        let key = P256.Signing.PrivateKey()
        let credential = APNsCredential(authentication: .token(teamID: Self.teamID, keyID: Self.keyID, privateKeyPEM: key.pemRepresentation), topic: Self.bundleID)
        for seed in 0..<20 {
            let request = try APNsRequest(kind: .voip, bundleID: Self.bundleID, deviceToken: Self.token(seed), payload: Array(#"{"aps":{}}"#.utf8))
            let outcome = await client.push(
                request, credential: credential, environment: .sandbox, environmentIsCertain: true, deadline: Date().addingTimeInterval(5))
            #expect(outcome.disposition != .delivered)
        }
        await client.shutdown()
        // One line per cause (the message; the pool's state in `push.reason` varies).
        let messages = log.lines.map { $0.components(separatedBy: " push.reason=")[0] }
        #expect(messages.contains { $0.contains("cannot connect to APNs") || $0.contains("not sent before its deadline") }, "\(log.lines)")
        #expect(Set(messages).count == messages.count, "\(log.lines)")
    }

    @Test func voipPushIsDeliveredWithAppleHeaders() async throws {
        let harness = try await Self.harness()
        let outcome = try await harness.push(Self.token(1))
        #expect(outcome.disposition == .delivered)
        #expect(outcome.status == 200)
        #expect(outcome.attempts == 1)
        let received = try #require(harness.simulator.received.first)
        #expect(received.deviceToken == Self.token(1))
        #expect(received.headers["apns-push-type"] == "voip")
        #expect(received.headers["apns-topic"] == "com.example.app.voip")
        #expect(received.headers["apns-priority"] == "10")
        #expect(received.headers["apns-expiration"] == "0")
        #expect(received.headers["apns-id"] == outcome.providerID)
        #expect(received.headers["authorization"]?.hasPrefix("bearer ") == true)
        #expect(received.payload == Data(#"{"aps":{}}"#.utf8))
        try await harness.shutdown()
    }

    @Test func manyPushesShareOneConnectionAndOneProviderToken() async throws {
        let harness = try await Self.harness()
        try await withThrowingTaskGroup(of: PushOutcome.self) { group in
            for index in 0..<50 {
                group.addTask { try await harness.push(Self.token(index)) }
            }
            for try await outcome in group { #expect(outcome.disposition == .delivered) }
        }
        let received = harness.simulator.received
        #expect(received.count == 50)
        #expect(Set(received.map { $0.headers["authorization"] ?? "" }).count == 1)
        #expect(Set(received.compactMap { $0.headers["apns-id"] }).count == 50)
        #expect(harness.simulator.connectionsAccepted == 1)
        try await harness.shutdown()
    }

    @Test func unregisteredTokenIsInvalidatedWithAppleTimestamp() async throws {
        let harness = try await Self.harness()
        let since = Date(timeIntervalSince1970: 1_790_000_000)
        harness.simulator.setBehaviour(.respond(status: 410, reason: "Unregistered", timestamp: since), forDeviceToken: Self.token(2))
        let outcome = try await harness.push(Self.token(2))
        #expect(outcome.disposition == .invalidateBinding)
        #expect(outcome.status == 410)
        #expect(outcome.reason == "Unregistered")
        #expect(outcome.invalidSince == since)
        #expect(outcome.attempts == 1)
        try await harness.shutdown()
    }

    @Test func badDeviceTokenInvalidatesOnlyWhenTheEnvironmentIsCertain() async throws {
        let harness = try await Self.harness()
        harness.simulator.setBehaviour(.respond(status: 400, reason: "BadDeviceToken"), forDeviceToken: Self.token(3))
        #expect(try await harness.push(Self.token(3), certain: true).disposition == .invalidateBinding)
        #expect(try await harness.push(Self.token(3), certain: false).disposition == .drop)
        try await harness.shutdown()
    }

    @Test func unknownSigningKeyIsAConfigurationFault() async throws {
        let harness = try await Self.harness()
        let stranger = APNsCredential(
            authentication: .token(teamID: Self.teamID, keyID: "UNKNOWN123", privateKeyPEM: TestCredentials.apnsP8()), topic: Self.bundleID)
        let outcome = try await harness.push(Self.token(4), credential: stranger)
        #expect(outcome.disposition == .fixConfiguration)
        #expect(outcome.status == 403)
        #expect(outcome.reason == "InvalidProviderToken")
        try await harness.shutdown()
    }

    @Test func topicOutsideTheKeyIsAConfigurationFault() async throws {
        let harness = try await Self.harness()
        var other = harness.credential
        other.topic = "com.example.other"
        let outcome = try await harness.push(Self.token(5), credential: other)
        #expect(outcome.disposition == .fixConfiguration)
        #expect(outcome.reason == "TopicDisallowed")
        try await harness.shutdown()
    }

    @Test func transientFailuresAreRetriedWithTheSameApnsID() async throws {
        let harness = try await Self.harness()
        harness.simulator.setBehaviour(.respond(status: 503, reason: "ServiceUnavailable"), forDeviceToken: Self.token(6), times: 1)
        harness.simulator.setBehaviour(.respond(status: 429, reason: "TooManyRequests"), forDeviceToken: Self.token(7), times: 5)
        let recovered = try await harness.push(Self.token(6))
        #expect(recovered.disposition == .delivered)
        #expect(recovered.attempts == 2)
        let exhausted = try await harness.push(Self.token(7))
        #expect(exhausted.disposition == .retry)
        #expect(exhausted.attempts == 3)
        #expect(exhausted.reason == "TooManyRequests")
        let ids = harness.simulator.received.filter { $0.deviceToken == Self.token(7) }.compactMap { $0.headers["apns-id"] }
        #expect(ids.count == 3)
        #expect(Set(ids).count == 1)
        // Jittered exponential back-off: each wait is within 0…10 ms·2^(n-1).
        let waits = harness.sleeps.all
        #expect(waits.count == 3)
        #expect(waits.allSatisfy { $0 <= .milliseconds(20) })
        try await harness.shutdown()
    }

    @Test func noRetryStartsAfterTheRingDeadline() async throws {
        let harness = try await Self.harness()
        harness.simulator.setBehaviour(.respond(status: 503, reason: "ServiceUnavailable"), forDeviceToken: Self.token(8))
        let request = try APNsRequest(kind: .voip, bundleID: Self.bundleID, deviceToken: Self.token(8), payload: Array("{}".utf8))
        let outcome = await harness.client.push(
            request, credential: harness.credential, environment: .sandbox, environmentIsCertain: true, deadline: harness.clock.now)
        #expect(outcome.attempts == 1)
        #expect(outcome.disposition == .retry)
        try await harness.shutdown()
    }

    @Test func stalledAnswerTimesOut() async throws {
        // Long enough that only the stalled stream times out, even on a loaded machine.
        let harness = try await Self.harness(timeout: .seconds(3))
        // A first success lifts APNs' one-stream limit on the new connection.
        #expect(try await harness.push(Self.token(19)).disposition == .delivered)
        harness.simulator.setBehaviour(.stall, forDeviceToken: Self.token(9), times: 1)
        let outcome = try await harness.push(Self.token(9))
        #expect(outcome.disposition == .delivered)
        // The stalled attempt times out and the next one is answered; on a machine starved by a
        // build beside the tests, that next one can time out too before the third is answered.
        #expect((2...3).contains(outcome.attempts), "\(outcome.attempts) attempts")
        harness.simulator.setBehaviour(.stall, forDeviceToken: Self.token(10))
        let timedOut = try await harness.push(Self.token(10))
        #expect(timedOut.reason == "Timeout")
        #expect(timedOut.status == nil)
        #expect(timedOut.disposition == .retry)
        try await harness.shutdown()
    }

    @Test func droppedConnectionIsReopenedAndThePushResent() async throws {
        let harness = try await Self.harness()
        #expect(try await harness.push(Self.token(11)).disposition == .delivered)
        harness.simulator.setBehaviour(.dropConnection, forDeviceToken: Self.token(12), times: 1)
        let outcome = try await harness.push(Self.token(12))
        #expect(outcome.disposition == .delivered)
        // The pool may hand out the dying connection once more before it notices the close.
        #expect((2...3).contains(outcome.attempts))
        #expect(harness.simulator.connectionsAccepted == 2)
        try await harness.shutdown()
    }

    @Test func goAwayIsSurvived() async throws {
        let harness = try await Self.harness()
        #expect(try await harness.push(Self.token(13)).disposition == .delivered)
        harness.simulator.setBehaviour(.goAway(reason: "Shutdown"), forDeviceToken: Self.token(14), times: 1)
        let outcome = try await harness.push(Self.token(14))
        #expect(outcome.disposition == .delivered)
        #expect(try await harness.push(Self.token(15)).disposition == .delivered)
        #expect(harness.simulator.connectionsAccepted >= 2)
        try await harness.shutdown()
    }

    @Test func pushesAfterShutdownFailWithoutOpeningConnections() async throws {
        let harness = try await Self.harness()
        await harness.client.shutdown()
        let outcome = try await harness.push(Self.token(20))
        #expect(outcome.reason == "ClientShutDown")
        #expect(outcome.disposition == .drop)
        #expect(harness.simulator.connectionsAccepted == 0)
        try await harness.shutdown()
    }

    @Test func certificateAuthenticationSendsNoProviderToken() async throws {
        let harness = try await Self.harness()
        try harness.simulator.registerClientCertificate(pem: TestCredentials.apnsCertificatePEM, topics: ["com.example.ringrelay"])
        let credential = APNsCredential(
            authentication: .certificate(certificatePEM: TestCredentials.apnsCertificatePEM, privateKeyPEM: TestCredentials.apnsCertificateKeyPEM),
            topic: "com.example.ringrelay")
        let outcome = try await harness.push(Self.token(16), credential: credential)
        #expect(outcome.disposition == .delivered)
        let received = try #require(harness.simulator.received.last)
        #expect(received.headers["authorization"] == nil)
        #expect(received.headers["apns-topic"] == "com.example.ringrelay.voip")
        try await harness.shutdown()
    }

    @Test func pkcs12CertificateAuthenticates() async throws {
        let harness = try await Self.harness()
        try harness.simulator.registerClientCertificate(pem: TestCredentials.apnsCertificatePEM, topics: ["com.example.ringrelay"])
        let p12 = try #require(Data(base64Encoded: TestCredentials.apnsCertificatePKCS12Base64))
        let credential = APNsCredential(
            authentication: .pkcs12(data: p12, passphrase: TestCredentials.apnsCertificatePKCS12Passphrase), topic: "com.example.ringrelay")
        let outcome = try await harness.push(Self.token(21), credential: credential)
        #expect(outcome.disposition == .delivered)
        #expect(harness.simulator.received.last?.headers["authorization"] == nil)
        try await harness.shutdown()
    }

    @Test func providerTokenFromASkewedClockIsAConfigurationFault() async throws {
        // Our clock says 65 minutes ago: APNs sees an hour-old iat on a token we just minted.
        let harness = try await Self.harness(clock: ManualWallClock(start: Date().addingTimeInterval(-65 * 60)))
        let outcome = try await harness.push(Self.token(17))
        #expect(outcome.reason == "ExpiredProviderToken")
        #expect(outcome.disposition == .fixConfiguration)
        #expect(outcome.attempts == 1)
        try await harness.shutdown()
    }

    @Test func alertPushForSealedInvites() async throws {
        let harness = try await Self.harness()
        let payload = #"{"aps":{"alert":{"title":"Incoming call"},"mutable-content":1}}"#
        let outcome = try await harness.push(Self.token(18), kind: .alert, payload: payload)
        #expect(outcome.disposition == .delivered)
        let received = try #require(harness.simulator.received.last)
        #expect(received.headers["apns-push-type"] == "alert")
        #expect(received.headers["apns-topic"] == Self.bundleID)
        try await harness.shutdown()
    }
}
