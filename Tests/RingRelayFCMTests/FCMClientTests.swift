import AsyncHTTPClient
import Foundation
import Logging
import Metrics
import RingRelayCore
import RingRelayTesting
import Synchronization
import Testing

@testable import RingRelayFCM

/// The real client against the FCM simulator over TLS on loopback.
@Suite(.timeLimit(.minutes(2)))
struct FCMClientTests {
    static let projectID = "ringrelay-test"
    /// One RSA key for every test's service account: generating one per test is slow in debug builds.
    static let sharedKeyPEM = (try? TestCredentials.serviceAccount())?["private_key"]

    /// A started simulator, a client trusting it, and a service account the simulator knows.
    struct Harness {
        let simulator: FCMSimulator
        let client: FCMClient
        let credential: FCMCredential
        let serviceAccount: [String: String]
        let directory: TemporaryDirectory
        let sleeps: Sleeps
        let clock: ManualWallClock

        func shutdown() async throws {
            await client.shutdown()
            try await simulator.shutdown()
            directory.remove()
        }

        func push(_ token: String, data: [String: String] = ["ringrelay": #"{"v":1}"#], ring: TimeInterval = 30, credential: FCMCredential? = nil)
            async throws -> PushOutcome
        {
            let deadline = clock.now.addingTimeInterval(ring)
            let request = try FCMRequest(token: token, data: data, expiresAt: deadline, now: clock.now)
            return await client.push(request, credential: credential ?? self.credential, deadline: deadline)
        }
    }

    /// Back-off waits, recorded instead of slept.
    final class Sleeps: Sendable {
        let values = Mutex<[Duration]>([])
        var all: [Duration] { values.withLock { $0 } }
    }

    static func credential(_ account: [String: String]) throws -> FCMCredential {
        FCMCredential(
            serviceAccountJSON: String(decoding: try JSONSerialization.data(withJSONObject: account), as: UTF8.self),
            projectID: account["project_id"] ?? "", clientEmail: account["client_email"] ?? "", tokenURI: account["token_uri"] ?? "")
    }

    /// A client against a fresh simulator. The default request timeout is long (30 s): tests count
    /// attempts, and a test process starved by a build beside it must not turn a slow first
    /// answer (TLS, the access token, the send) into a timeout and one more attempt.
    static func harness(timeout: Duration = .seconds(30), endpointPath: String = "") async throws -> Harness {
        let clock = ManualWallClock(start: Date())
        var simulatorConfiguration = FCMSimulator.Configuration()
        simulatorConfiguration.clock = clock
        let simulator = try FCMSimulator(configuration: simulatorConfiguration)
        try await simulator.start()
        let directory = try TemporaryDirectory()
        let caFile = directory.appending("fcm-simulator.pem")
        try simulator.writeCertificate(toFile: caFile)
        let account = try simulator.makeServiceAccount(projectID: projectID, privateKeyPEM: sharedKeyPEM)
        var configuration = FCMConfiguration()
        configuration.endpoint = simulator.url + endpointPath
        configuration.extraTrustRootsFile = caFile
        configuration.requestTimeout = timeout
        configuration.retryBaseDelay = .milliseconds(10)
        let sleeps = Sleeps()
        let client = try FCMClient(
            configuration: configuration, clock: clock, logger: TestLogging.logger("test"), metricsFactory: NOOPMetricsHandler.instance,
            sleep: { duration in sleeps.values.withLock { $0.append(duration) } })
        return Harness(
            simulator: simulator, client: client, credential: try credential(account), serviceAccount: account, directory: directory,
            sleeps: sleeps, clock: clock)
    }

    static func token(_ seed: Int) -> String {
        "device\(seed):APA91bH" + String(repeating: "x", count: 140)
    }

    // MARK: Success

    @Test func callMessageArrivesExactlyAsBuilt() async throws {
        let harness = try await Self.harness()
        let deadline = harness.clock.now.addingTimeInterval(30)
        let data = ["ringrelay": #"{"callId":"call_1","v":1}"#, "type": "incoming_call"]
        let request = try FCMRequest(token: Self.token(1), data: data, expiresAt: deadline, now: harness.clock.now)
        let outcome = await harness.client.push(request, credential: harness.credential, deadline: deadline)
        #expect(outcome.disposition == .delivered)
        #expect(outcome.status == 200)
        #expect(outcome.attempts == 1)
        #expect(outcome.reason == nil)

        let received = try #require(harness.simulator.received.first)
        #expect(received.body == Data(request.body))
        #expect(received.projectID == Self.projectID)
        #expect(received.registrationToken == Self.token(1))
        #expect(received.data == data)
        #expect(received.androidPriority == "HIGH")
        #expect(received.androidTTL == "30s")
        #expect(received.headers["authorization"]?.hasPrefix("Bearer ya29.") == true)
        #expect(received.headers["content-type"]?.hasPrefix("application/json") == true)
        #expect(received.messageName == outcome.providerID)
        #expect(outcome.providerID?.hasPrefix("projects/\(Self.projectID)/messages/0:") == true)

        let mints = harness.simulator.tokenRequests
        #expect(mints.count == 1)
        #expect(mints.first?.clientEmail == harness.serviceAccount["client_email"])
        #expect(mints.first?.scope == "https://www.googleapis.com/auth/firebase.messaging")
        try await harness.shutdown()
    }

    @Test func manyMessagesShareOneConnectionAndOneAccessToken() async throws {
        // Mints are counted: a generous timeout, so a starved test process never retries an exchange.
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
        #expect(Set(received.compactMap(\.messageName)).count == 50)
        #expect(harness.simulator.tokenMints == 1)
        // The token exchange on its own connection (Google serves it from another host), and all
        // 50 messages as streams of one HTTP/2 connection.
        #expect(harness.simulator.connectionsAccepted == 2)
        try await harness.shutdown()
    }

    @Test func accessTokenIsRefreshedBeforeItExpires() async throws {
        // Mints are counted: a generous timeout, so a starved test process never retries an exchange.
        let harness = try await Self.harness()
        #expect(try await harness.push(Self.token(1)).disposition == .delivered)
        harness.clock.advance(by: 56 * 60)  // under 5 minutes left of 3599 s
        #expect(try await harness.push(Self.token(2)).disposition == .delivered)
        await harness.client.tokens.waitForPendingMint(for: harness.credential)
        #expect(harness.simulator.tokenMints == 2)
        #expect(try await harness.push(Self.token(3)).disposition == .delivered)
        let authorizations = harness.simulator.received.map { $0.headers["authorization"] ?? "" }
        #expect(authorizations[0] == authorizations[1])
        #expect(authorizations[2] != authorizations[0])
        try await harness.shutdown()
    }

    // MARK: Error classes

    @Test func unregisteredTokenInvalidatesTheBinding() async throws {
        let harness = try await Self.harness()
        harness.simulator.setBehaviour(.error(.unregistered), forRegistrationToken: Self.token(2))
        let outcome = try await harness.push(Self.token(2))
        #expect(outcome.disposition == .invalidateBinding)
        #expect(outcome.status == 404)
        #expect(outcome.reason == "UNREGISTERED")
        #expect(outcome.attempts == 1)
        try await harness.shutdown()
    }

    @Test func invalidArgumentNamingTheTokenInvalidatesTheBinding() async throws {
        let harness = try await Self.harness()
        harness.simulator.setBehaviour(.error(.invalidArgument), forRegistrationToken: Self.token(3))
        let scripted = try await harness.push(Self.token(3))
        #expect(scripted.disposition == .invalidateBinding)
        #expect(scripted.reason == "INVALID_ARGUMENT")
        // The simulator's own check of the token's shape answers the same way.
        let malformed = try await harness.push("not!a!token")
        #expect(malformed.disposition == .invalidateBinding)
        #expect(malformed.status == 400)
        #expect(harness.simulator.received.last?.errorMessage == "The registration token is not a valid FCM registration token")
        try await harness.shutdown()
    }

    @Test func configurationErrorsAreFaultsNotDeadTokens() async throws {
        let harness = try await Self.harness()
        harness.simulator.setBehaviour(.error(.senderIDMismatch), forRegistrationToken: Self.token(4))
        harness.simulator.setBehaviour(.error(.thirdPartyAuthError), forRegistrationToken: Self.token(5))
        let mismatch = try await harness.push(Self.token(4))
        #expect(mismatch.disposition == .fixConfiguration)
        #expect(mismatch.status == 403)
        #expect(mismatch.reason == "SENDER_ID_MISMATCH")
        let thirdParty = try await harness.push(Self.token(5))
        #expect(thirdParty.disposition == .fixConfiguration)
        #expect(thirdParty.status == 401)
        #expect(thirdParty.reason == "THIRD_PARTY_AUTH_ERROR")
        #expect(thirdParty.attempts == 1)
        try await harness.shutdown()
    }

    @Test func transientErrorsAreRetriedWithJitter() async throws {
        let harness = try await Self.harness()
        harness.simulator.setBehaviour(.error(.unavailable), forRegistrationToken: Self.token(6), times: 1)
        harness.simulator.setBehaviour(.error(.internal), forRegistrationToken: Self.token(7), times: 5)
        let recovered = try await harness.push(Self.token(6))
        #expect(recovered.disposition == .delivered)
        #expect(recovered.attempts == 2)
        let exhausted = try await harness.push(Self.token(7))
        #expect(exhausted.disposition == .retry)
        #expect(exhausted.attempts == 3)
        #expect(exhausted.status == 500)
        #expect(exhausted.reason == "INTERNAL")
        #expect(harness.simulator.received.filter { $0.registrationToken == Self.token(7) }.count == 3)
        // Full jitter within 0…10 ms·2^(n-1).
        let waits = harness.sleeps.all
        #expect(waits.count == 3)
        #expect(waits.allSatisfy { $0 <= .milliseconds(20) })
        try await harness.shutdown()
    }

    @Test func retryAfterIsHonouredWhileTheRingLasts() async throws {
        // Sleeps are counted: a generous timeout, so a starved test process never times out an
        // attempt and backs off before the Retry-After it is here to see.
        let harness = try await Self.harness()
        // Open the connection and mint the access token first, so that the push below meets the
        // 429 at its first attempt: on a machine loaded past its cores a first connection may need
        // a retry, and this test is about the wait after the 429, not about that retry.
        for _ in 0..<5 where try await harness.push(Self.token(22)).disposition != .delivered {}
        harness.sleeps.values.withLock { $0.removeAll() }
        harness.simulator.setBehaviour(.error(.quotaExceeded, retryAfter: 3), forRegistrationToken: Self.token(8), times: 1)
        let outcome = try await harness.push(Self.token(8))
        // What the simulator saw, should this fail: each attempt's status, and the token requests.
        let seen = "\(harness.simulator.received.map { "\($0.registrationToken.prefix(8)) → \($0.status)" }), tokens: \(harness.simulator.tokenRequests.map(\.status)), sleeps: \(harness.sleeps.all)"
        #expect(outcome.disposition == .delivered, "\(seen)")
        #expect(outcome.attempts == 2, "\(seen)")
        let wait = try #require(harness.sleeps.all.first)
        #expect(wait >= .seconds(3))
        #expect(wait <= .seconds(3) + .milliseconds(10))

        // A Retry-After past the ring's end is not waited for: the message is given up at once.
        harness.simulator.setBehaviour(.error(.quotaExceeded, retryAfter: 60), forRegistrationToken: Self.token(9))
        let late = try await harness.push(Self.token(9), ring: 30)
        #expect(late.disposition == .retry)
        #expect(late.status == 429)
        #expect(late.reason == "QUOTA_EXCEEDED")
        #expect(late.attempts == 1)
        #expect(harness.sleeps.all.count == 1)
        try await harness.shutdown()
    }

    @Test func stalledAnswerTimesOut() async throws {
        let harness = try await Self.harness(timeout: .seconds(1))
        // Open the connection and mint the access token first, so only the stalled stream waits
        // (a loaded machine may need more than one try).
        for _ in 0..<5 where try await harness.push(Self.token(21)).disposition != .delivered {}
        harness.simulator.setBehaviour(.stall, forRegistrationToken: Self.token(10), times: 1)
        let recovered = try await harness.push(Self.token(10))
        #expect(recovered.disposition == .delivered)
        #expect(recovered.attempts >= 2)
        #expect(harness.simulator.received.first { $0.registrationToken == Self.token(10) }?.status == 0)
        harness.simulator.setBehaviour(.stall, forRegistrationToken: Self.token(11))
        let timedOut = try await harness.push(Self.token(11))
        #expect(timedOut.reason == "Timeout")
        #expect(timedOut.status == nil)
        #expect(timedOut.disposition == .retry)
        #expect(timedOut.attempts == 3)
        try await harness.shutdown()
    }

    @Test func wrongProjectOrEndpointIsAConfigurationFault() async throws {
        let harness = try await Self.harness()
        var other = harness.credential
        other.projectID = "someone-elses-project"
        let denied = try await harness.push(Self.token(12), credential: other)
        #expect(denied.disposition == .fixConfiguration)
        #expect(denied.status == 403)
        #expect(denied.reason == "PERMISSION_DENIED")
        try await harness.shutdown()

        // An endpoint with a path answers 404 without UNREGISTERED: never a reason to drop bindings.
        let misrouted = try await Self.harness(endpointPath: "/fcm")
        let notFound = try await misrouted.push(Self.token(13))
        #expect(notFound.disposition == .fixConfiguration)
        #expect(notFound.status == 404)
        #expect(notFound.reason == "NOT_FOUND")
        try await misrouted.shutdown()
    }

    // MARK: OAuth

    @Test func rejectedAssertionIsAConfigurationFault() async throws {
        let harness = try await Self.harness()
        harness.simulator.setOAuthFailure(.invalidGrant, times: 1)
        let outcome = try await harness.push(Self.token(14))
        #expect(outcome.disposition == .fixConfiguration)
        #expect(outcome.reason == "OAuthInvalidGrant")
        #expect(outcome.status == nil)
        #expect(outcome.attempts == 1)
        #expect(harness.simulator.received.isEmpty)
        // Held off: the next push fails without asking the token endpoint again…
        #expect(try await harness.push(Self.token(14)).reason == "OAuthInvalidGrant")
        #expect(harness.simulator.tokenRequests.count == 1)
        // …until the hold-off has passed.
        harness.clock.advance(by: 31)
        #expect(try await harness.push(Self.token(14)).disposition == .delivered)
        try await harness.shutdown()
    }

    @Test func unknownServiceAccountIsRefusedByTheTokenEndpoint() async throws {
        let harness = try await Self.harness()
        let stranger = try Self.credential(
            TestCredentials.serviceAccount(projectID: Self.projectID, tokenURI: harness.simulator.tokenURL))
        let outcome = try await harness.push(Self.token(15), credential: stranger)
        #expect(outcome.disposition == .fixConfiguration)
        #expect(outcome.reason == "OAuthInvalidGrant")
        #expect(harness.simulator.tokenRequests.last?.errorDescription == "Invalid grant: account not found")
        try await harness.shutdown()
    }

    @Test func tokenEndpointOutageIsRetried() async throws {
        let harness = try await Self.harness()
        harness.simulator.setOAuthFailure(.reject(status: 503, error: "internal_failure", description: "Backend Error"), times: 1)
        let outcome = try await harness.push(Self.token(16))
        #expect(outcome.disposition == .delivered)
        #expect(outcome.attempts == 2)
        #expect(harness.simulator.tokenRequests.map(\.status) == [503, 200])
        try await harness.shutdown()
    }

    @Test func revokedAccessTokenIsReplacedOnce() async throws {
        // Mints are counted: a generous timeout, so a starved test process never retries an exchange.
        let harness = try await Self.harness()
        #expect(try await harness.push(Self.token(17)).disposition == .delivered)
        harness.simulator.revokeAccessTokens()
        harness.clock.advance(by: 120)
        let outcome = try await harness.push(Self.token(17))
        #expect(outcome.disposition == .delivered)
        #expect(outcome.attempts == 2)
        #expect(harness.simulator.tokenMints == 2)
        let statuses = harness.simulator.received.filter { $0.registrationToken == Self.token(17) }.map(\.status)
        #expect(statuses == [200, 401, 200])
        try await harness.shutdown()
    }

    @Test func freshAccessTokenRefusedByFCMIsAConfigurationFault() async throws {
        // Mints are counted: a generous timeout, so a starved test process never retries an exchange.
        let harness = try await Self.harness()
        #expect(try await harness.push(Self.token(19)).disposition == .delivered)
        harness.simulator.revokeAccessTokens()
        let outcome = try await harness.push(Self.token(19))
        #expect(outcome.disposition == .fixConfiguration)
        #expect(outcome.status == 401)
        #expect(outcome.reason == "UNAUTHENTICATED")
        #expect(outcome.attempts == 1)
        #expect(harness.simulator.tokenMints == 1)
        try await harness.shutdown()
    }

    @Test func messagesAfterShutdownAreDropped() async throws {
        let harness = try await Self.harness()
        #expect(try await harness.push(Self.token(22)).disposition == .delivered)
        await harness.client.shutdown()
        let outcome = try await harness.push(Self.token(22))
        #expect(outcome.disposition == .drop)
        #expect(outcome.reason == "ClientShutDown")
        #expect(outcome.attempts == 1)
        try await harness.shutdown()
    }

    @Test func oversizedMessageNeverLeavesTheProcess() async throws {
        let harness = try await Self.harness()
        await #expect(throws: FCMRequestError.payloadTooLarge(size: 4097, limit: 4096)) {
            _ = try await harness.push(Self.token(20), data: ["k": String(repeating: "x", count: 4096)])
        }
        #expect(harness.simulator.received.isEmpty)
        try await harness.shutdown()
    }
}
