import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOWebSocket
import RingRelayCore
import RingRelayPostgres
import RingRelayServer
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

    /// `ringrelay serve` processes sharing one new database, an account made through the first.
    struct Instances: Sendable {
        static let adminToken = "cluster-test-admin-token-0123456789"
        let cluster: PostgresTestCluster
        let database: String
        /// Each instance's base URL.
        let bases: [String]
        let servers: [ServerProcess]
        let account: CreatedAccount

        func port(_ index: Int) throws -> Int { try #require(URL(string: bases[index])?.port) }

        /// A device access token minted through the first instance (any would do).
        func token(_ identity: String, _ deviceID: String) async throws -> String {
            let (_, data) = try await ProcessTests.request(
                .POST, bases[0] + "/v1/access-tokens", token: account.apiKey, body: #"{"identity":"\#(identity)","deviceId":"\#(deviceID)"}"#)
            return try JSONDecoder.ringRelay.decode(AccessTokenResponse.self, from: data).token
        }

        /// The first column of `sql`'s first row in the instances' database.
        func count(_ sql: String) async -> Int? { try? await cluster.query(sql, database: database) }

        /// Starts `count` instances, runs `body`, and stops them (each must exit cleanly).
        static func with(_ count: Int, arguments: [String] = [], _ body: (Instances) async throws -> Void) async throws {
            let cluster = try await PostgresTestCluster.shared.value
            let database = try await cluster.createDatabase()
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            var servers: [ServerProcess] = []
            // A test that throws midway leaves no instance running behind it (SIGKILL: it failed anyway).
            var stopped = false
            defer { if !stopped { for server in servers where server.isRunning { server.signal(SIGKILL) } } }
            var bases: [String] = []
            for index in 0..<count {
                let server = try ServerProcess(
                    ["serve", "--port", "0", "--data-dir", "instance\(index)", "--admin-token", adminToken, "--rate-limit", "0"] + arguments,
                    directory: directory.path, environment: ["RINGRELAY_DATABASE_URL": cluster.url(database: database)])
                servers.append(server)
                bases.append(try await server.waitUntilListening())
            }
            let (_, accountData) = try await ProcessTests.request(.POST, bases[0] + "/v1/accounts", token: adminToken, body: #"{"name":"acme"}"#)
            let account = try JSONDecoder.ringRelay.decode(CreatedAccount.self, from: accountData)
            try await body(Instances(cluster: cluster, database: database, bases: bases, servers: servers, account: account))
            stopped = true
            let killed = servers.filter { !$0.isRunning }.count
            for server in servers where server.isRunning {
                server.signal(SIGTERM)
                let status = try await server.waitForExit()
                #expect(status == 0, "exit \(status); the instance's log: \(server.crashReport)")
                #expect(!server.stderr.contains(PostgresTestCluster.password), "the database password reached the log")
            }
            // A stopped instance leaves the directory at once (a killed one stays until it is found silent).
            let left = try await cluster.query("SELECT COUNT(*)::bigint FROM cluster_instances", database: database)
            #expect(left == killed)
        }
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
    /// devices hold on instance B (4004, 4003), as it would on A; a key revoked through A is
    /// refused by B at once.
    @Test func aChangeMadeThroughOneInstanceEndsTheLiveConnectionsOnAnother() async throws {
        try await Instances.with(2) { instances in
            let (a, account) = (instances.bases[0], instances.account)
            func device(_ identity: String, _ deviceID: String) async throws -> (binding: BindingResource, live: LiveDevice) {
                let body = #"{"identity":"\#(identity)","type":"fcm","token":"\#(identity)-token-\#(deviceID)","deviceId":"\#(deviceID)"}"#
                let (status, data) = try await ProcessTests.request(.POST, a + "/v1/bindings", token: account.apiKey, body: body)
                #expect(status == 201)
                // Connected to the other instance.
                let live = try await LiveDevice.connect(port: try instances.port(1), token: try await instances.token(identity, deviceID))
                return (try JSONDecoder.ringRelay.decode(BindingResource.self, from: data), live)
            }
            let bob = try await device("bob", "b1")
            let carol = try await device("carol", "c1")

            #expect(try await ProcessTests.request(.DELETE, a + "/v1/bindings/\(bob.binding.id)", token: account.apiKey).0 == 204)
            #expect(try await bob.live.closeCode(timeout: .seconds(30)) == .unknown(LiveCloseCode.deviceUnbound.rawValue))

            // A key revoked through A is refused by B on the very next request (no instance caches keys).
            let (_, keyData) = try await ProcessTests.request(.POST, a + "/v1/accounts/\(account.id)/keys", token: Instances.adminToken, body: "{}")
            let key = try JSONDecoder.ringRelay.decode(CreatedKey.self, from: keyData)
            let b = instances.bases[1]
            #expect(try await ProcessTests.request(.GET, b + "/v1/bindings", token: key.apiKey).0 == 200)
            #expect(try await ProcessTests.request(.DELETE, a + "/v1/accounts/\(account.id)/keys/\(key.id)", token: Instances.adminToken).0 == 204)
            #expect(try await ProcessTests.request(.GET, b + "/v1/bindings", token: key.apiKey).0 == 401)

            #expect(try await ProcessTests.request(.DELETE, a + "/v1/accounts/\(account.id)", token: Instances.adminToken).0 == 204)
            #expect(try await carol.live.closeCode(timeout: .seconds(30)) == .unknown(LiveCloseCode.accountDeleted.rawValue))
        }
    }

    /// `scripts/cluster --check`, as the README shows it: PostgreSQL from Debian's packages, three
    /// instances sharing it and nginx balancing them, each answering, a write through the balancer
    /// read back through every instance, and everything stopped and removed afterwards.
    @Test func theClusterScriptStartsThreeInstancesBehindNginx() async throws {
        // Below Linux's ephemeral range (32768-60999), where the other tests' servers and connections take ports.
        let base = Int.random(in: 20_000...32_000)
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
    /// caller's hang-up reaches the phone. The next call is declined on C: the caller on A and the
    /// phone on B hear it. Every device hears one ending of each call.
    @Test func aCallRingsDevicesOnEveryInstanceAndEachHearsItsEnding() async throws {
        try await Instances.with(3, arguments: ["--live-fallback", "20s"]) { instances in
            let (bases, key) = (instances.bases, instances.account.apiKey)
            let aliceToken = try await instances.token("alice", "a1")
            let alice = try await LiveDevice.connect(port: try instances.port(0), token: aliceToken)
            let phone = try await LiveDevice.connect(port: try instances.port(1), token: try await instances.token("bob", "b1"))
            let tablet = try await LiveDevice.connect(port: try instances.port(2), token: try await instances.token("bob", "b2"))
            // The instances have said where their devices are, and that they are alive.
            let registered = await eventually {
                let devices = await instances.count("SELECT COUNT(*)::bigint FROM live_devices")
                let alive = await instances.count("SELECT COUNT(*)::bigint FROM cluster_instances")
                return devices == 3 && alive == 3
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

            // The next call is declined on C: the caller on A hears it, the phone on B is told.
            let (_, nextData) = try await ProcessTests.request(.POST, bases[0] + "/v1/calls", token: aliceToken, body: #"{"to":"bob"}"#)
            let next = try JSONDecoder.ringRelay.decode(CallResource.self, from: nextData)
            #expect(try await phone.nextEvent(timeout: .seconds(30)).type == .incoming)
            #expect(try await tablet.nextEvent(timeout: .seconds(30)).type == .incoming)
            try await tablet.send(.reject(callId: next.id))
            #expect(try await alice.nextEvent(timeout: .seconds(30)).type == .rejected)
            #expect(try await phone.nextEvent(timeout: .seconds(30)).type == .declinedElsewhere)
            #expect(try await tablet.nextEvent(timeout: .seconds(30)).type == .rejected)
            try await Task.sleep(for: .milliseconds(500))
            for device in [alice, phone, tablet] {
                for id in [call.id, next.id] {
                    let events = device.events.filter { $0.callId == id }
                    #expect(events.filter { TerminalEventTests.terminal.contains($0.type) }.count == 1, "\(events.map(\.type))")
                }
                await device.close()
            }
            // Gone devices leave the directory.
            let unregistered = await eventually { await instances.count("SELECT COUNT(*)::bigint FROM live_devices") == 0 }
            #expect(unregistered)
        }
    }

    /// Fifty devices accept one call at once through three instances: one conditional update in
    /// the shared database, so exactly one wins and every other gets 409.
    /// A ring relayed to another instance waits there for its device's acknowledgement, up to the
    /// live window; the instance must go on reading the other instances' notices meanwhile. It once
    /// handled them one at a time: a device that did not acknowledge held back every ring for the
    /// devices behind it, and at a few hundred calls a second the backlog outlived the calls.
    @Test func aRingWaitingForItsAcknowledgementHoldsBackNoOtherRing() async throws {
        try await Instances.with(2, arguments: ["--live-fallback", "8s"]) { instances in
            let (bases, key) = (instances.bases, instances.account.apiKey)
            let silent = try await LiveDevice.connect(port: try instances.port(1), token: try await instances.token("carol", "c1"), autoAck: false)
            let bob = try await LiveDevice.connect(port: try instances.port(1), token: try await instances.token("bob", "b1"))
            #expect(await eventually { await instances.count("SELECT COUNT(*)::bigint FROM live_devices") == 2 })

            let (first, _) = try await ProcessTests.request(.POST, bases[0] + "/v1/calls", token: key, body: #"{"from":"alice","to":"carol"}"#)
            #expect(first == 201)
            #expect(try await silent.nextEvent(timeout: .seconds(30)).type == .incoming)
            // Carol's ring now waits up to 8 s on B for an acknowledgement that never comes.
            let started = ContinuousClock.now
            let (second, _) = try await ProcessTests.request(.POST, bases[0] + "/v1/calls", token: key, body: #"{"from":"alice","to":"bob"}"#)
            #expect(second == 201)
            #expect(try await bob.nextEvent(timeout: .seconds(30)).type == .incoming)
            let waited = ContinuousClock.now - started
            #expect(waited < .seconds(4), "bob's ring came \(waited) after the call: it waited behind carol's")
        }
    }

    /// A relayed ring the other instance cannot send comes back refused with its reason at once,
    /// rather than waiting out the window: here the directory names instance B for a device B
    /// does not hold. One B holds but that never acknowledges is recorded `relay_unconfirmed`.
    @Test func aRelayedRingThatCannotBeSentSaysWhyAtOnce() async throws {
        try await Instances.with(2, arguments: ["--live-fallback", "20s"]) { instances in
            let (bases, key) = (instances.bases, instances.account.apiKey)
            let silent = try await LiveDevice.connect(port: try instances.port(1), token: try await instances.token("carol", "c1"), autoAck: false)
            #expect(await eventually { await instances.count("SELECT COUNT(*)::bigint FROM live_devices") == 1 })
            // Dave's device is said to be on B (the instance holding carol's), and is not.
            _ = await instances.count(
                """
                INSERT INTO live_devices (account_id, identity, device_id, instance_id, connection, connected_at)
                SELECT account_id, 'dave', 'd1', instance_id, 1, connected_at FROM live_devices WHERE device_id = 'c1' RETURNING 1
                """)
            let started = ContinuousClock.now
            let (status, data) = try await ProcessTests.request(.POST, bases[0] + "/v1/calls", token: key, body: #"{"from":"alice","to":"dave"}"#)
            #expect(status == 201, "\(String(decoding: data, as: UTF8.self))")
            let call = try JSONDecoder.ringRelay.decode(CallResource.self, from: data)
            let refused = try await Self.firstAnswer(of: call.id, base: bases[0], key: key)
            #expect(refused?.outcome == "unacknowledged")
            #expect(refused?.reason == "not_connected")
            #expect(ContinuousClock.now - started < .seconds(10), "the origin waited out its 20 s window")
            await silent.close()
        }
        // Carol's device is on B but never acknowledges: no word comes back within the window.
        try await Instances.with(2, arguments: ["--live-fallback", "1s"]) { instances in
            let (bases, key) = (instances.bases, instances.account.apiKey)
            let silent = try await LiveDevice.connect(port: try instances.port(1), token: try await instances.token("carol", "c1"), autoAck: false)
            #expect(await eventually { await instances.count("SELECT COUNT(*)::bigint FROM live_devices") == 1 })
            let (status, data) = try await ProcessTests.request(.POST, bases[0] + "/v1/calls", token: key, body: #"{"from":"alice","to":"carol"}"#)
            #expect(status == 201)
            let call = try JSONDecoder.ringRelay.decode(CallResource.self, from: data)
            #expect(try await silent.nextEvent(timeout: .seconds(30)).type == .incoming)
            let unconfirmed = try await Self.firstAnswer(of: call.id, base: bases[0], key: key)
            #expect(unconfirmed?.outcome == "unacknowledged")
            #expect(unconfirmed?.reason == "relay_unconfirmed")
            await silent.close()
        }
    }

    /// The first of a call's deliveries with an answer, within 30 s.
    static func firstAnswer(of callID: String, base: String, key: String) async throws -> DeliveryResource? {
        for _ in 0..<300 {
            if let (_, data) = try? await ProcessTests.request(.GET, base + "/v1/calls/\(callID)", token: key),
                let answered = try? JSONDecoder.ringRelay.decode(CallResource.self, from: data).deliveries?.first(where: { $0.outcome != "pending" })
            {
                return answered
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        return nil
    }

    /// An instance whose database falls behind refuses new calls at once (`503 overloaded`,
    /// `Retry-After`) instead of accepting calls it would ring late; the calls it had accepted
    /// still complete, and it takes new ones as soon as the line is gone.
    @Test func anInstanceBehindItsDatabaseRefusesNewCallsAndTakesThemAgainAfter() async throws {
        try await Instances.with(1, arguments: ["--overload-delay", "0.2s"]) { instances in
            let (base, key) = (instances.bases[0], instances.account.apiKey)
            // A client of its own: the shared one opens 8 connections to a host, fewer than it takes to fill the line.
            var configuration = HTTPClient.Configuration()
            configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 64
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            defer { _ = client.shutdown() }
            @Sendable func post(timeout: TimeAmount = .seconds(60)) async throws -> (status: Int, retryAfter: String?, body: String) {
                var request = HTTPClientRequest(url: base + "/v1/calls")
                request.method = .POST
                request.headers.add(name: "Authorization", value: "Bearer \(key)")
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(string: #"{"from":"alice","to":"bob"}"#))
                let response = try await client.execute(request, timeout: timeout)
                let body = String(buffer: try await response.body.collect(upTo: 1 << 16))
                return (Int(response.status.code), response.headers.first(name: "Retry-After"), body)
            }
            let (accepted, refused) = try await instances.cluster.whileLocked("calls", database: instances.database) {
                // More calls than the instance has database connections: each holds one, waiting on the lock.
                let accepted = (0..<14).map { _ in Task { try await post() } }
                var refused: (status: Int, retryAfter: String?, body: String)?
                // A look while the line forms may itself join it: each gives up after a while.
                for _ in 0..<20 where refused == nil {
                    try await Task.sleep(for: .milliseconds(300))
                    if let answer = try? await post(timeout: .seconds(2)), answer.status == 503 { refused = answer }
                }
                return (accepted, refused)
            }
            #expect(refused?.retryAfter == "1")
            #expect(refused?.body.contains(#""code":"overloaded""#) == true, "\(refused?.body ?? "")")
            // The calls taken before the line formed are answered as usual (bob has nothing to ring).
            for call in accepted { #expect(try await call.value.status == 404) }
            let after = await eventually { (try? await post().status) == 404 }
            #expect(after, "new calls are taken again once the database keeps up")
        }
    }

    @Test func fiftyAcceptsSpreadOverThreeInstancesHaveOneWinner() async throws {
        try await Instances.with(3) { instances in
            let key = instances.account.apiKey
            let binding = #"{"identity":"bob","type":"fcm","token":"\#(FCMTestPushTests.fcmToken(9))"}"#
            #expect(try await ProcessTests.request(.POST, instances.bases[0] + "/v1/bindings", token: key, body: binding).0 == 201)
            var tokens: [String] = []
            for index in 0..<50 { tokens.append(try await instances.token("bob", "b\(index)")) }
            let (_, callData) = try await ProcessTests.request(.POST, instances.bases[0] + "/v1/calls", token: key, body: #"{"from":"alice","to":"bob"}"#)
            let call = try JSONDecoder.ringRelay.decode(CallResource.self, from: callData)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for (index, token) in tokens.enumerated() {
                    let base = instances.bases[index % 3]
                    group.addTask { try await ProcessTests.request(.POST, base + "/v1/calls/\(call.id)/accept", token: token).0 }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 200 }.count == 1)
            #expect(statuses.filter { $0 == 409 }.count == 49)
        }
    }

    /// Twilio retries a webhook that got no timely answer, and the retry may reach another instance
    /// behind the balancer: the same notification delivered to A and to B at once rings once.
    @Test func theSameWebhookToTwoInstancesRingsOnce() async throws {
        try await Instances.with(2) { instances in
            let (bases, account) = (instances.bases, instances.account)
            let authToken = "twilio-auth-token-secret"
            let credential = #"{"accountSid":"AC0123456789abcdef0123456789abcdef","authToken":"\#(authToken)"}"#
            #expect(try await ProcessTests.request(.PUT, bases[0] + "/v1/credentials/twilio", token: account.apiKey, body: credential).0 == 200)
            let binding = #"{"identity":"bob","type":"fcm","token":"\#(FCMTestPushTests.fcmToken(7))","deviceId":"b1"}"#
            #expect(try await ProcessTests.request(.POST, bases[1] + "/v1/bindings", token: account.apiKey, body: binding).0 == 201)

            let body = Array(
                #"{"twi_account_sid":"AC0123456789abcdef0123456789abcdef","twi_bridge_token":"t","twi_call_sid":"CA1","twi_from":"client:alice","#
                    .utf8) + Array(#""twi_message_id":"WB0123456789abcdef0123456789abcdef","twi_message_type":"twilio.voice.call","twi_to":"client:bob"}"#.utf8)
            let answers = try await withThrowingTaskGroup(of: (Int, String).self) { group in
                for base in bases {
                    group.addTask {
                        // Each instance checks the signature against the URL it was called at.
                        let signed = TwilioSignature.signingJSON(body, url: base + "/v1/webhooks/twilio/\(account.id)", authToken: authToken)
                        var request = HTTPClientRequest(url: signed.url)
                        request.method = .POST
                        request.headers.add(name: "Content-Type", value: "application/json")
                        request.headers.add(name: "X-Twilio-Signature", value: signed.signature)
                        request.body = .bytes(ByteBuffer(bytes: body))
                        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
                        return (Int(response.status.code), String(buffer: try await response.body.collect(upTo: 1 << 20)))
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.map(\.0) == [200, 200], "\(answers)")
            let callIDs = try answers.map { try JSONDecoder.ringRelay.decode(WebhookRingResponse.self, from: Data($0.1.utf8)).callId }
            #expect(Set(callIDs).count == 1)
            let (_, listData) = try await ProcessTests.request(.GET, bases[0] + "/v1/calls", token: account.apiKey)
            #expect(try JSONDecoder.ringRelay.decode(CallList.self, from: listData).data.count == 1)
            let (_, callData) = try await ProcessTests.request(.GET, bases[1] + "/v1/calls/\(callIDs[0])", token: account.apiKey)
            #expect(try JSONDecoder.ringRelay.decode(CallResource.self, from: callData).deliveries?.count == 1, "one push for one binding")
        }
    }

    /// An instance killed mid-ring loses nothing of the call: another instance's sweep ends it on
    /// time, and the directory stops counting the dead instance's devices once it is silent (a
    /// call placed then pushes to them instead of ringing them through it).
    @Test func anInstanceKilledMidRingLeavesTheCallToTheOthers() async throws {
        try await Instances.with(2) { instances in
            let key = instances.account.apiKey
            let phone = try await LiveDevice.connect(port: try instances.port(1), token: try await instances.token("bob", "b1"))
            let registered = await eventually { await instances.count("SELECT COUNT(*)::bigint FROM live_devices") == 1 }
            #expect(registered)
            let (status, callData) = try await ProcessTests.request(
                .POST, instances.bases[0] + "/v1/calls", token: key, body: #"{"from":"alice","to":"bob","ringTimeoutSeconds":5}"#)
            #expect(status == 201, "\(String(decoding: callData, as: UTF8.self))")
            let call = try JSONDecoder.ringRelay.decode(CallResource.self, from: callData)
            #expect(try await phone.nextEvent(timeout: .seconds(30)).type == .incoming)

            instances.servers[1].signal(SIGKILL)
            _ = try await instances.servers[1].waitForExit()
            let missed = await eventually(timeout: .seconds(60)) {
                guard let (_, data) = try? await ProcessTests.request(.GET, instances.bases[0] + "/v1/calls/\(call.id)", token: key) else {
                    return false
                }
                return (try? JSONDecoder.ringRelay.decode(CallResource.self, from: data))?.state == "missed"
            }
            #expect(missed, "the surviving instance's sweep ends the ring")

            // Once the dead instance is silent, its device is nobody's: a new call finds nothing to ring.
            let forgotten = await eventually(timeout: .seconds(60)) {
                guard let (status, _) = try? await ProcessTests.request(.POST, instances.bases[0] + "/v1/calls", token: key, body: #"{"from":"alice","to":"bob"}"#)
                else { return false }
                return status == 404
            }
            #expect(forgotten)
            await phone.close()
        }
    }

    /// A device whose instance died gets what it missed from the instance it reconnects to
    /// (issue 20): a ring it had not acknowledged while the call still rings, then the call's end
    /// as it happens; and the end of a call that ended while it was away, whose ring it had
    /// acknowledged. Each event once, with the id it had.
    @Test func aDeviceWhoseInstanceDiedGetsWhatItMissedWhereItReconnects() async throws {
        try await Instances.with(3) { instances in
            let bases = instances.bases
            let aliceToken = try await instances.token("alice", "a1")
            let bobToken = try await instances.token("bob", "b1")
            func call() async throws -> CallResource {
                let (status, data) = try await ProcessTests.request(.POST, bases[0] + "/v1/calls", token: aliceToken, body: #"{"to":"bob","ringTimeoutSeconds":60}"#)
                #expect(status == 201, "\(String(decoding: data, as: UTF8.self))")
                return try JSONDecoder.ringRelay.decode(CallResource.self, from: data)
            }
            /// Whether the instance keeps the event where the others can take it over (it writes
            /// them a few milliseconds behind; one killed before would take it along).
            func kept(_ eventID: String, acknowledged: Bool) async -> Bool {
                await eventually {
                    await instances.count(
                        "SELECT COUNT(*)::bigint FROM live_events WHERE event_id = '\(eventID)' AND acknowledged = \(acknowledged)") == 1
                }
            }

            // Bob on B does not acknowledge the ring; B dies; Bob comes back on C and rings there.
            let onB = try await LiveDevice.connect(port: try instances.port(1), token: bobToken, autoAck: false)
            let first = try await call()
            let ring = try await onB.nextEvent(timeout: .seconds(30))
            #expect(ring.type == .incoming)
            #expect(await kept(ring.eventId, acknowledged: false))
            instances.servers[1].signal(SIGKILL)
            _ = try await instances.servers[1].waitForExit()
            let onC = try await LiveDevice.connect(port: try instances.port(2), token: bobToken)
            let replayed = try await onC.nextEvent(timeout: .seconds(30))
            #expect(replayed.type == .incoming)
            #expect(replayed.eventId == ring.eventId)
            #expect(try await ProcessTests.request(.POST, bases[0] + "/v1/calls/\(first.id)/cancel", token: aliceToken).0 == 200)
            #expect(try await onC.nextEvent(timeout: .seconds(30)).type == .cancelled)

            // Bob on C acknowledges the next ring; C dies; the call is cancelled while he is away;
            // back on A, he hears how it ended.
            let second = try await call()
            let secondRing = try await onC.nextEvent(timeout: .seconds(30))
            #expect(secondRing.callId == second.id)
            #expect(await kept(secondRing.eventId, acknowledged: true))
            instances.servers[2].signal(SIGKILL)
            _ = try await instances.servers[2].waitForExit()
            #expect(try await ProcessTests.request(.POST, bases[0] + "/v1/calls/\(second.id)/cancel", token: aliceToken).0 == 200)
            let onA = try await LiveDevice.connect(port: try instances.port(0), token: bobToken, lastEventID: secondRing.eventId)
            let ending = try await onA.nextEvent(timeout: .seconds(30))
            #expect(ending.type == .cancelled)
            #expect(ending.callId == second.id)
            #expect(try await onA.receivesNothing(within: .seconds(1)))
            for device in [onB, onC, onA] { await device.close() }
        }
    }

    /// `bench live --instances 3 --kill-one-after`, tiny: calls posted to every instance ring
    /// devices on the others, the killed instance's devices reconnect elsewhere, no call is lost on
    /// the way (a call to the dead instance goes to the next), and every call ends.
    @Test func benchLiveAcrossThreeInstancesSurvivesAKill() async throws {
        let cluster = try await PostgresTestCluster.shared.value
        let database = try await cluster.createDatabase()
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let run = try await ServerProcess.run(
            ["bench", "live", "--instances", "3", "--devices", "30", "--rate", "20", "--duration", "4", "--settle", "1", "--kill-one-after", "2", "--json"],
            directory: directory.path, environment: ["RINGRELAY_DATABASE_URL": cluster.url(database: database)])
        #expect(run.status == 0, "\(run.stderr.suffix(3000))")
        let result = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run.stdout)")
        #expect(result["instances"] as? Int == 3)
        #expect(result["callsNotCreated"] as? Int == 0, "\(run.stdout)")
        #expect(result["callsNotFinal"] as? Int == 0, "\(run.stdout)")
        #expect((result["crossRings"] as? Int ?? 0) > 0, "\(run.stdout)")
        #expect((result["failovers"] as? Int ?? 0) > 0, "calls after the kill went to the next instance: \(run.stdout)")
        // A third of the devices were on the killed instance; each came back on another.
        #expect(result["dropped"] as? Int == 10, "\(run.stdout)")
        #expect(result["reconnected"] as? Int == 10, "\(run.stdout)")
        #expect(!run.stderr.contains(cluster.url(database: database)), "the database URL stays out of the output")
    }
}
