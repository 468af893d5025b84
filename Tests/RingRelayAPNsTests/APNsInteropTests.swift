import Crypto
import Foundation
import Logging
import Metrics
import RingRelayCore
import RingRelayTesting
import Testing

@testable import RingRelayAPNs

/// The APNs client against HTTP/2 servers RingRelay did not write: Debian's nginx, and a strict
/// Python `h2` server playing APNs' connection rules. Every check is made at the server too: each
/// push processed exactly once, none lost.
@Suite(.serialized) struct APNsInteropTests {
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"
    static let topic = "com.example.app"

    struct Harness {
        let server: InteropServer
        let client: APNsClient
        let credential: APNsCredential
        /// The client's warnings (a push that waited past its deadline says what the pool looked like).
        let log: LogRecorder

        func push(_ token: String, deadline: TimeInterval = 30) async throws -> (PushOutcome, apnsID: String) {
            let request = try APNsRequest(kind: .voip, bundleID: Self.topic, deviceToken: token, payload: Array(#"{"aps":{}}"#.utf8))
            let outcome = await client.push(
                request, credential: credential, environment: .production, environmentIsCertain: true,
                deadline: Date().addingTimeInterval(deadline))
            return (outcome, request.apnsID)
        }

        /// Pushes to `count` devices at once, as one call's fan-out does.
        func fanOut(_ count: Int) async throws -> [(PushOutcome, apnsID: String)] {
            try await withThrowingTaskGroup(of: (PushOutcome, apnsID: String).self) { group in
                for index in 0..<count { group.addTask { try await push(APNsInteropTests.token(index)) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
        }

        func shutdown() async {
            await client.shutdown()
            server.stop()
        }

        static var topic: String { APNsInteropTests.topic }
    }

    static func harness(
        _ server: InteropServer, keyID: String = keyID, timeout: Duration = .seconds(10), silence: Duration = .seconds(3)
    ) throws -> Harness {
        var configuration = APNsConfiguration()
        configuration.connectionSilenceTimeout = silence
        configuration.productionEndpoint = server.url
        configuration.sandboxEndpoint = server.url
        configuration.extraTrustRootsFile = server.caFile
        configuration.requestTimeout = timeout
        configuration.retryBaseDelay = .milliseconds(10)
        let log = LogRecorder(level: .warning)
        let client = try APNsClient(
            configuration: configuration, clock: SystemWallClock(), logger: log.logger("apns"), metricsFactory: NOOPMetricsHandler.instance)
        let credential = APNsCredential(
            authentication: .token(teamID: teamID, keyID: keyID, privateKeyPEM: P256.Signing.PrivateKey().pemRepresentation), topic: topic)
        return Harness(server: server, client: client, credential: credential, log: log)
    }

    static func token(_ seed: Int) -> String {
        String(format: "%08x", seed) + String(repeating: "ab", count: 28)
    }

    /// Every push delivered once, and the server processed each `apns-id` exactly once.
    static func expectExactlyOnce(_ results: [(PushOutcome, apnsID: String)], at server: InteropServer) async {
        let failed = results.filter { $0.0.disposition != .delivered }
        #expect(failed.isEmpty, "not delivered: \(failed.prefix(3).map { "\($0.0.reason ?? "?") after \($0.0.attempts)" })")
        let processed = await server.processedRequests(atLeast: results.count)
        let counts = Dictionary(processed.map { ($0, 1) }, uniquingKeysWith: +)
        #expect(processed.count == results.count, "the server processed \(processed.count) requests for \(results.count) pushes")
        #expect(counts.values.allSatisfy { $0 == 1 }, "processed twice: \(counts.filter { $0.value > 1 }.keys.prefix(3))")
    }

    // MARK: nginx

    @Test(arguments: [300, 1000]) func nginxReceivesEveryPushOfAFanOutOnce(devices: Int) async throws {
        let harness = try Self.harness(try await InteropServer.nginx())
        let results = try await harness.fanOut(devices)
        let failed = results.filter { $0.0.disposition != .delivered }
        #expect(failed.isEmpty, "not delivered: \(failed.prefix(3).map { "\($0.0.reason ?? "?") after \($0.0.attempts)" }); logged: \(harness.log.lines.prefix(3))")
        #expect(results.allSatisfy { $0.0.attempts == 1 })
        // nginx logs paths (device tokens), one per request.
        let processed = await harness.server.processedRequests(atLeast: devices)
        #expect(processed.count == devices)
        #expect(Set(processed).count == devices)
        await harness.shutdown()
    }

    // MARK: The strict server

    @Test(arguments: [
        "apns", "response-on-data", "rst-after-response", "refused", "goaway", "lower-limit", "close-mid-burst", "data-after-end-stream",
    ])
    func everyPushArrivesExactlyOnce(scenario: String) async throws {
        let server = try await InteropServer.strict(
            scenario: scenario, arguments: ["--goaway-after", "40", "--refuse-every", "7", "--lower-after", "60", "--expect-key-id", Self.keyID])
        let harness = try Self.harness(server)
        let results = try await harness.fanOut(300)
        await Self.expectExactlyOnce(results, at: server)
        let violations = server.events().filter { $0.event == "violation" }
        #expect(violations.isEmpty, "the client broke the server's rules: \(violations.prefix(3))")
        await harness.shutdown()
    }

    @Test func aConnectionThatFallsSilentIsClosedAndItsPushesGoOnAnother() async throws {
        // The first connection stops writing after 40 answers (no answers, no PING ACKs) and
        // keeps its socket open, as a dead path or a hung peer does. Its 260 waiting pushes must
        // not wait for their 10 s request timeout, nor hold the pool.
        // A request timeout of a minute: without the retirement, every one of them would wait
        // out its 30 s deadline on the silent connection.
        let server = try await InteropServer.strict(scenario: "silent", arguments: ["--goaway-after", "40"])
        // Two seconds of silence, not less: on a loaded machine a healthy connection can go half a
        // second without a frame, and was retired as well.
        let harness = try Self.harness(server, timeout: .seconds(60), silence: .seconds(2))
        let started = ContinuousClock.now
        let results = try await harness.fanOut(300)
        let elapsed = ContinuousClock.now - started
        // The silent connection answered none of them, so the server processed each once.
        await Self.expectExactlyOnce(results, at: server)
        #expect(server.events().contains { $0.event == "silent" })
        #expect(elapsed < .seconds(20), "took \(elapsed)")
        let retired = harness.log.lines.filter { $0.contains("APNs connection closed") }
        #expect(retired.count == 1, "\(harness.log.lines.prefix(3))")
        #expect(retired.allSatisfy { $0.contains("no frame within 2000 ms of a PING") }, "\(retired)")
        await harness.shutdown()
    }

    @Test func aPushsOwnFieldsStayOutOfTheConnectionsHPACKTable() async throws {
        // `:path` (the device) and `apns-id` are new on every push. Indexed, each push's would push
        // out the fields every push repeats (the authorization token, the topic), to be sent again
        // in full. The strict server reports its decoder's table after each request.
        let server = try await InteropServer.strict(scenario: "apns")
        let harness = try Self.harness(server)
        var results: [(PushOutcome, apnsID: String)] = []
        for index in 0..<40 { results.append(try await harness.push(Self.token(index))) }
        await Self.expectExactlyOnce(results, at: server)
        let tables = server.events().filter { $0.event == "request" }.compactMap(\.hpackTable)
        #expect(tables.count == 40)
        #expect(
            tables.allSatisfy { !$0.contains(":path") && !$0.contains("apns-id") },
            "single-use fields indexed: \(tables.last ?? [])")
        #expect(tables.allSatisfy { $0.contains("authorization") && $0.contains("apns-topic") }, "repeated fields indexed: \(tables.last ?? [])")
        await harness.shutdown()
    }

    @Test func theFirstStreamWaitsForTheServersSettingsAndLimit() async throws {
        // One stream until the first answer: a burst must not open a second one before it.
        let server = try await InteropServer.strict(scenario: "slow", arguments: ["--delay-ms", "50"])
        let harness = try Self.harness(server)
        let results = try await harness.fanOut(20)
        await Self.expectExactlyOnce(results, at: server)
        #expect(server.events().filter { $0.event == "violation" }.isEmpty)
        await harness.shutdown()
    }

    @Test func aWrongSigningKeyIsAConfigurationFaultAtOnce() async throws {
        let server = try await InteropServer.strict(scenario: "apns", arguments: ["--expect-key-id", "OTHERKEY12"])
        // A request timeout far above the bound below, so the bound tells answers from timeouts
        // even on a loaded machine.
        let harness = try Self.harness(server, timeout: .seconds(60))
        let started = ContinuousClock.now
        let results = try await harness.fanOut(20)
        let elapsed = ContinuousClock.now - started
        for (outcome, _) in results {
            #expect(outcome.disposition == .fixConfiguration)
            #expect(outcome.status == 403)
            #expect(outcome.reason == "InvalidProviderToken")
            #expect(outcome.attempts == 1)
        }
        // Answers, not timeouts.
        #expect(elapsed < .seconds(30))
        #expect(await server.processedRequests(atLeast: 20).count == 20)
        await harness.shutdown()
    }

    @Test func aDeadTokenIsInvalidatedWithTheServersTimestamp() async throws {
        let server = try await InteropServer.strict(scenario: "response-on-data")
        let harness = try Self.harness(server)
        let (outcome, _) = try await harness.push("dead" + String(repeating: "0", count: 60))
        #expect(outcome.disposition == .invalidateBinding)
        #expect(outcome.status == 410)
        #expect(outcome.reason == "Unregistered")
        #expect(outcome.invalidSince != nil)
        await harness.shutdown()
    }

    @Test func aQueuedPushNeverOutlivesItsDeadline() async throws {
        // Every answer takes 2 s and only one stream is allowed until the first: pushes queued
        // behind it with a 1 s deadline fail at their deadline, unsent.
        let server = try await InteropServer.strict(scenario: "slow", arguments: ["--delay-ms", "2000"])
        let harness = try Self.harness(server)
        let first = Task { try await harness.push(Self.token(0)) }
        // Once the client has the server's SETTINGS (it acknowledges them), its one stream is open.
        let deadline = ContinuousClock.now + .seconds(20)
        while !server.events().contains(where: { $0.event == "settings_acked" }), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        try await Task.sleep(for: .milliseconds(100))
        let late = try await withThrowingTaskGroup(of: PushOutcome.self) { group in
            for index in 1...5 { group.addTask { try await harness.push(Self.token(index), deadline: 1).0 } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for outcome in late {
            #expect(outcome.disposition == .retry)
            #expect(outcome.reason == "Timeout")
        }
        // Logged with what the pool looked like, its one connection full at one stream: once for
        // the five, as an outage must not write a line per push.
        let waited = harness.log.lines.filter { $0.contains("no stream was free before the deadline") }
        #expect(waited.count == 1, "\(harness.log.lines)")
        #expect(waited.allSatisfy { $0.contains("connections: [1/1 streams]") }, "\(waited.first ?? "")")
        // A push that reaches the pool after its deadline is never queued, and says so.
        let (tooLate, _) = try await harness.push(Self.token(6), deadline: -1)
        #expect(tooLate.reason == "Timeout")
        #expect(harness.log.lines.contains { $0.contains("the deadline had passed before the request reached the pool") }, "\(harness.log.lines)")
        #expect(try await first.value.0.disposition == .delivered)
        // Only the first was ever sent.
        #expect(await server.processedRequests(atLeast: 1).count == 1)
        await harness.shutdown()
    }
}
