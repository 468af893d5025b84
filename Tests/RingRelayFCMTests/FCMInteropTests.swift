import Foundation
import Logging
import Metrics
import RingRelayCore
import RingRelayTesting
import Testing

@testable import RingRelayFCM

/// The FCM client against the strict Python `h2` server (an HTTP/2 server RingRelay did not
/// write), which plays the connection rules of Google's front ends as strictly as APNs' (one
/// stream first, limits that change, GOAWAY, `REFUSED_STREAM`). OAuth tokens come from the FCM
/// simulator's token endpoint, as a service account's `token_uri` would name Google's.
@Suite(.serialized) struct FCMInteropTests {
    /// `silent`: the first connection stops writing after 40 answers; its messages go again on
    /// another within the silence bound (2 s here), and the server processes each once.
    @Test(arguments: ["apns", "response-on-data", "refused", "goaway", "lower-limit", "close-mid-burst", "data-after-end-stream", "silent"])
    func everyMessageArrivesExactlyOnce(scenario: String) async throws {
        let server = try await InteropServer.strict(
            scenario: scenario, arguments: ["--goaway-after", "40", "--refuse-every", "7", "--lower-after", "60"])
        defer { server.stop() }
        try await sendEachOnce(count: 300, to: server, silence: scenario == "silent" ? .seconds(2) : .seconds(3))
    }

    /// Answers of 100,000 bytes each, more than a stream's receive window (65,535) and, together,
    /// a hundred times the connection's: the server sends only what the client's windows allow, so
    /// every answer completes only if the client gives both windows back as it reads.
    @Test func answersLargerThanTheReceiveWindowsAreReadToTheirEnd() async throws {
        let server = try await InteropServer.strict(scenario: "apns", arguments: ["--answer-padding", "100000"])
        defer { server.stop() }
        try await sendEachOnce(count: 60, to: server)
    }

    /// Sends `count` messages at once through one client and checks, at the server, that each was
    /// processed exactly once and no connection rule was broken.
    private func sendEachOnce(count: Int, to server: InteropServer, silence: Duration = .seconds(3)) async throws {
        let oauth = try FCMSimulator()
        try await oauth.start()
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // One trust file for both: the strict server's and the simulator's certificates.
        let caFile = directory.appending("roots.pem")
        try oauth.writeCertificate(toFile: caFile)
        let roots = try String(contentsOfFile: caFile, encoding: .utf8) + String(contentsOfFile: server.caFile, encoding: .utf8)
        try Data(roots.utf8).write(to: URL(fileURLWithPath: caFile))
        let account = try oauth.makeServiceAccount(projectID: FCMClientTests.projectID, privateKeyPEM: FCMClientTests.sharedKeyPEM)
        var configuration = FCMConfiguration()
        configuration.endpoint = server.url
        configuration.extraTrustRootsFile = caFile
        configuration.retryBaseDelay = .milliseconds(10)
        configuration.connectionSilenceTimeout = silence
        let client = try FCMClient(
            configuration: configuration, clock: SystemWallClock(), logger: TestLogging.logger("test"), metricsFactory: NOOPMetricsHandler.instance)
        let credential = try FCMClientTests.credential(account)

        let outcomes = try await withThrowingTaskGroup(of: PushOutcome.self) { group in
            for index in 0..<count {
                group.addTask {
                    let deadline = Date().addingTimeInterval(30)
                    let request = try FCMRequest(token: FCMClientTests.token(index), data: ["ringrelay": #"{"v":1}"#], expiresAt: deadline, now: Date())
                    return await client.push(request, credential: credential, deadline: deadline)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        await client.shutdown()
        try await oauth.shutdown()

        let failed = outcomes.filter { $0.disposition != .delivered }
        #expect(failed.isEmpty, "not delivered: \(failed.prefix(3).map { "\($0.reason ?? "?") after \($0.attempts)" })")
        #expect(Set(outcomes.compactMap(\.providerID)).count == count)
        let processed = await server.processedRequests(atLeast: count)
        #expect(processed.count == count)
        #expect(Set(processed).count == count)
        #expect(server.events().filter { $0.event == "violation" }.isEmpty)
    }
}
