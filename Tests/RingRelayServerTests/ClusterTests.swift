import Foundation
import NIOHTTP1
import NIOWebSocket
import RingRelayCore
import RingRelayPostgres
import RingRelayTesting
import RingRelayWire
import Synchronization
import Testing

/// Instances sharing one PostgreSQL database hear of each other's changes (issue 20): the bus on
/// its own, then real `ringrelay serve` processes whose devices' live connections follow a change
/// made through another instance.
@Suite(.serialized) struct ClusterTests {
    /// What one listener heard, in order.
    final class Heard: Sendable {
        private let deliveries = Mutex<[ClusterDelivery]>([])

        func append(_ delivery: ClusterDelivery) { deliveries.withLock { $0.append(delivery) } }
        var all: [ClusterDelivery] { deliveries.withLock { $0 } }
        var resynchronizations: Int { all.filter { $0 == .resynchronize }.count }
        var notices: [ClusterNotice] { all.compactMap { if case .notice(let notice) = $0 { notice } else { nil } } }
    }

    @Test func noticesReachTheOtherInstancesAndAGapIsResynchronized() async throws {
        let cluster = try await PostgresTestCluster.shared.value
        let database = try await cluster.createDatabase()
        let url = try PostgresDatabaseURL(cluster.url(database: database))
        let first = try await PostgresStore.open(url: url, logger: TestLogging.logger("test"))
        let second = try await PostgresStore.open(url: url, logger: TestLogging.logger("test"))
        let (busA, busB) = (first.clusterBus(), second.clusterBus())
        let (heardA, heardB) = (Heard(), Heard())
        let listeners = [
            Task { try await busA.listen { heardA.append($0) } },
            Task { try await busB.listen { heardB.append($0) } },
        ]
        defer { for listener in listeners { listener.cancel() } }
        // Each listener says it may have missed something as soon as it listens.
        #expect(await eventually { heardA.resynchronizations == 1 && heardB.resynchronizations == 1 })

        let deleted = ClusterNotice.accountDeleted(accountID: "acc_1")
        let unbound = ClusterNotice.devicesUnbound(accountID: "acc_1", identity: "bob", deviceIDs: ["b1", "b2"])
        try await busA.publish(deleted)
        try await busA.publish(unbound)
        try await busB.publish(.credentialsChanged(accountID: "acc_2", kind: .apns))
        #expect(await eventually { heardB.notices.count == 2 && heardA.notices.count == 1 })
        #expect(heardB.notices == [deleted, unbound], "in the order they were published")
        #expect(heardA.notices == [.credentialsChanged(accountID: "acc_2", kind: .apns)], "an instance never hears its own")

        // The listening connections are cut: each listens again and says it may have missed notices.
        let terminated = try await cluster.query(
            "SELECT COUNT(pg_terminate_backend(pid))::bigint FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND datname = current_database()",
            database: database)
        #expect(terminated == 2)
        #expect(await eventually { heardA.resynchronizations == 2 && heardB.resynchronizations == 2 })
        let after = ClusterNotice.devicesUnbound(accountID: "acc_1", identity: "carol", deviceIDs: nil)
        try await busA.publish(after)
        #expect(await eventually { heardB.notices.last == after })
        for listener in listeners { listener.cancel() }
        try await first.close()
        try await second.close()
    }

    /// A binding removed or an account deleted through instance A ends the live connections its
    /// devices hold on instance B (4004, 4003), as it would on A.
    @Test func aChangeMadeThroughOneInstanceEndsTheLiveConnectionsOnAnother() async throws {
        let cluster = try await PostgresTestCluster.shared.value
        let url = cluster.url(database: try await cluster.createDatabase())
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let adminToken = "cluster-test-admin-token-0123456789"
        func serve(_ dataDir: String) throws -> ServerProcess {
            try ServerProcess(
                ["serve", "--port", "0", "--data-dir", dataDir, "--admin-token", adminToken, "--rate-limit", "0"], directory: directory.path,
                environment: ["RINGRELAY_DATABASE_URL": url])
        }
        let a = try serve("a")
        let b = try serve("b")
        let (baseA, baseB) = (try await a.waitUntilListening(), try await b.waitUntilListening())
        let portB = try #require(URL(string: baseB)?.port)

        let (_, accountData) = try await ProcessTests.request(.POST, baseA + "/v1/accounts", token: adminToken, body: #"{"name":"acme"}"#)
        let account = try JSONDecoder.ringRelay.decode(CreatedAccount.self, from: accountData)
        func device(_ identity: String, _ deviceID: String) async throws -> (binding: BindingResource, live: LiveDevice) {
            let body = #"{"identity":"\#(identity)","type":"fcm","token":"\#(identity)-token-\#(deviceID)","deviceId":"\#(deviceID)"}"#
            let (status, data) = try await ProcessTests.request(.POST, baseA + "/v1/bindings", token: account.apiKey, body: body)
            #expect(status == 201)
            let (_, tokenData) = try await ProcessTests.request(
                .POST, baseA + "/v1/access-tokens", token: account.apiKey, body: #"{"identity":"\#(identity)","deviceId":"\#(deviceID)"}"#)
            let token = try JSONDecoder.ringRelay.decode(AccessTokenResponse.self, from: tokenData).token
            // Connected to the other instance.
            return (try JSONDecoder.ringRelay.decode(BindingResource.self, from: data), try await LiveDevice.connect(port: portB, token: token))
        }
        let bob = try await device("bob", "b1")
        let carol = try await device("carol", "c1")

        #expect(try await ProcessTests.request(.DELETE, baseA + "/v1/bindings/\(bob.binding.id)", token: account.apiKey).0 == 204)
        #expect(try await bob.live.closeCode(timeout: .seconds(30)) == .unknown(LiveCloseCode.deviceUnbound.rawValue))

        #expect(try await ProcessTests.request(.DELETE, baseA + "/v1/accounts/\(account.id)", token: adminToken).0 == 204)
        #expect(try await carol.live.closeCode(timeout: .seconds(30)) == .unknown(LiveCloseCode.accountDeleted.rawValue))

        for server in [a, b] {
            server.signal(SIGTERM)
            #expect(try await server.waitForExit() == 0)
            #expect(!server.stderr.contains(PostgresTestCluster.password), "the database password reached the log")
        }
    }

    /// `scripts/cluster --check`, as the README shows it: PostgreSQL from Debian's packages, three
    /// instances sharing it and nginx balancing them, each answering, a write through the balancer
    /// read back through every instance, and everything stopped and removed afterwards.
    @Test func theClusterScriptStartsThreeInstancesBehindNginx() async throws {
        let base = Int.random(in: 30_000...60_000)
        let script = DeploymentFilesTests.repository.appendingPathComponent("scripts/cluster").path
        let run = try ServerProcess(
            [script, "--check"], directory: DeploymentFilesTests.repository.path,
            environment: ["RINGRELAY_BIN": ServerProcess.binary.path, "CLUSTER_PORT": "\(base)"], executable: URL(fileURLWithPath: "/bin/bash"))
        let status = try await run.waitForExit(timeout: .seconds(240))
        #expect(status == 0, "\(run.stdout)\n\(run.stderr)")
        #expect(run.stdout.contains("cluster ok: 3 instances on PostgreSQL behind nginx"), "\(run.stdout)\n\(run.stderr)")
        let answered = (try? await ProcessTests.request(.GET, "http://127.0.0.1:\(base)/healthz", token: "-")) != nil
        #expect(!answered, "the balancer still answers after the script ended")
    }

    /// A call spans instances (issue 20): the caller on A, the callee's phone connected to B and
    /// its tablet to C. Both ring live through their instances, each acknowledgement relayed back
    /// to A; the phone's accept on B reaches the caller on A and ends the tablet's ring on C; the
    /// caller's hang-up reaches the phone. Every device hears one ending.
    @Test func aCallRingsDevicesOnEveryInstanceAndEachHearsItsEnding() async throws {
        let cluster = try await PostgresTestCluster.shared.value
        let database = try await cluster.createDatabase()
        let url = cluster.url(database: database)
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let adminToken = "cluster-test-admin-token-0123456789"
        var servers: [ServerProcess] = []
        var listening: [String] = []
        for name in ["a", "b", "c"] {
            let server = try ServerProcess(
                ["serve", "--port", "0", "--data-dir", name, "--admin-token", adminToken, "--rate-limit", "0", "--live-fallback", "20s"],
                directory: directory.path, environment: ["RINGRELAY_DATABASE_URL": url])
            servers.append(server)
            listening.append(try await server.waitUntilListening())
        }
        let bases = listening
        let (_, accountData) = try await ProcessTests.request(.POST, bases[0] + "/v1/accounts", token: adminToken, body: #"{"name":"acme"}"#)
        let key = try JSONDecoder.ringRelay.decode(CreatedAccount.self, from: accountData).apiKey
        func token(_ identity: String, _ deviceID: String) async throws -> String {
            let (_, data) = try await ProcessTests.request(
                .POST, bases[0] + "/v1/access-tokens", token: key, body: #"{"identity":"\#(identity)","deviceId":"\#(deviceID)"}"#)
            return try JSONDecoder.ringRelay.decode(AccessTokenResponse.self, from: data).token
        }
        let aliceToken = try await token("alice", "a1")
        let alice = try await LiveDevice.connect(port: try #require(URL(string: bases[0])?.port), token: aliceToken)
        let phone = try await LiveDevice.connect(port: try #require(URL(string: bases[1])?.port), token: try await token("bob", "b1"))
        let tablet = try await LiveDevice.connect(port: try #require(URL(string: bases[2])?.port), token: try await token("bob", "b2"))
        // The instances have said where their devices are, and that they are alive.
        let registered = await eventually {
            let devices = try? await cluster.query("SELECT COUNT(*)::bigint FROM live_devices", database: database)
            let instances = try? await cluster.query("SELECT COUNT(*)::bigint FROM cluster_instances", database: database)
            return devices == 3 && instances == 3
        }
        #expect(registered)

        let (status, callData) = try await ProcessTests.request(.POST, bases[0] + "/v1/calls", token: aliceToken, body: #"{"to":"bob"}"#)
        #expect(status == 201, "\(String(decoding: callData, as: UTF8.self))")
        let call = try JSONDecoder.ringRelay.decode(CallResource.self, from: callData)
        #expect(try await phone.nextEvent(timeout: .seconds(30)).type == .incoming)
        #expect(try await tablet.nextEvent(timeout: .seconds(30)).type == .incoming)
        // Both acknowledgements came back to A: both live deliveries are delivered, nothing pushed.
        let relayed = await eventually {
            guard let (_, data) = try? await ProcessTests.request(.GET, bases[0] + "/v1/calls/\(call.id)", token: key),
                let record = try? JSONDecoder.ringRelay.decode(CallResource.self, from: data)
            else { return false }
            let deliveries = record.deliveries ?? []
            return deliveries.count == 2 && deliveries.allSatisfy { $0.channel == "websocket" && $0.outcome == "delivered" }
        }
        #expect(relayed)

        try await phone.send(.accept(callId: call.id))
        let accepted = try await alice.nextEvent(timeout: .seconds(30))
        #expect(accepted.type == .accepted)
        #expect(accepted.call.answeredBy == "b1")
        #expect(try await tablet.nextEvent(timeout: .seconds(30)).type == .answeredElsewhere)
        #expect(try await phone.nextEvent(timeout: .seconds(30)).type == .accepted)

        try await alice.send(.end(callId: call.id))
        #expect(try await phone.nextEvent(timeout: .seconds(30)).type == .ended)
        #expect(try await alice.nextEvent(timeout: .seconds(30)).type == .ended)
        try await Task.sleep(for: .milliseconds(500))
        for device in [alice, phone, tablet] {
            let events = device.events.filter { $0.callId == call.id }
            #expect(events.filter { TerminalEventTests.terminal.contains($0.type) }.count == 1, "\(events.map(\.type))")
            await device.close()
        }
        // Gone devices leave the directory; stopped instances leave it too.
        let unregistered = await eventually { (try? await cluster.query("SELECT COUNT(*)::bigint FROM live_devices", database: database)) == 0 }
        #expect(unregistered)
        for server in servers {
            server.signal(SIGTERM)
            #expect(try await server.waitForExit() == 0)
        }
        #expect(try await cluster.query("SELECT COUNT(*)::bigint FROM cluster_instances", database: database) == 0)
    }
}
