import Crypto
import Dispatch
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import RingRelayKit
import RingRelayTesting
import RingRelayWire
import SQLiteNIO
import Synchronization
import Testing

@testable import RingRelayCLI
@testable import RingRelayStore

/// A sealed call end to end: Alice's SDK seals an invite to each of Bob's keyed bindings, the
/// server relays each box to its device (live, or as an alert push or FCM message at the
/// simulators), and Bob's SDK, handed the captured payload as his Notification Service Extension
/// would be, opens it and rings one call; nothing about Alice is readable on the way.
@Suite struct SealedSDKLiveTests {
    /// A device with sealed calls: an SDK client, its key and its files.
    struct SealedDevice {
        let client: RingRelayClient
        let ui = RecordingCallUI()
        let identity: SealedCallIdentity
        let configuration: SealedCallConfiguration
        /// What `onDeviceKeysChanged` was told, in order.
        let keyChanges = KeyChangeLog()

        /// A device on the server's clock, so the boxes' times and the server's agree however
        /// long a loaded machine takes.
        init(world: World, identity name: String, deviceID: String, token: String) {
            identity = SealedCallIdentity(accountId: world.accountID, identity: name, deviceId: deviceID, privateKey: .init())
            configuration = SealedCallConfiguration(
                identity: identity, replayStore: InviteReplayStore(fileURL: URL(fileURLWithPath: world.files.appending("\(deviceID)-replays.json"))),
                knownKeys: KnownDeviceKeys(fileURL: URL(fileURLWithPath: world.files.appending("\(deviceID)-known-keys.json"))),
                onDeviceKeysChanged: { [keyChanges] change in keyChanges.append(change) })
            let clock = world.clock
            client = RingRelayClient(
                configuration: .init(
                    serverURL: URL(string: "http://127.0.0.1:\(world.port)")!, deviceId: deviceID,
                    reconnectPolicy: ReconnectPolicy(initialDelay: .milliseconds(100), maximumDelay: .seconds(1)),
                    calls: .init(callbackExecutor: DispatchQueue(label: "sealed-test-\(deviceID)"), now: { clock.now }),
                    sealedCalls: configuration),
                systemUI: ui, accessToken: { token }, http: URLSessionHTTPTransport(), live: NIOLiveTransport())
        }

        /// Registers an `apns_alert` binding with this device's key.
        @discardableResult
        func registerAlertBinding(_ token: String) async throws -> RegisteredBinding {
            try await client.register(token: token, type: .apnsAlert, environment: .sandbox, publicKey: identity.publicKeyBase64)
        }

        /// Opens the live connection and waits until the server has registered it.
        func connect() async {
            await client.connect()
            #expect(await eventually { if case .connected = await client.connectionState { true } else { false } })
        }
    }

    /// A server with both push simulators, an account, and scratch files for the devices.
    struct World {
        let simulator: APNsSimulator
        let fcm: FCMSimulator
        let clock: ManualWallClock
        let client: any TestClientProtocol
        let key: String
        let port: Int
        let accountID: String
        let files: TemporaryDirectory
        /// The server's data directory: its SQLite file and write-ahead log.
        let serverDirectory: TemporaryDirectory

        func device(_ identity: String, _ deviceID: String) async throws -> SealedDevice {
            let token = try await client.accessToken(identity: identity, deviceID: deviceID, key: key)
            return SealedDevice(world: self, identity: identity, deviceID: deviceID, token: token)
        }
    }

    static func withWorld(_ body: @Sendable (World) async throws -> Void) async throws {
        try await SimulatorWorld.with { world in
            let files = try TemporaryDirectory(prefix: "ringrelay-sealed-live")
            defer { files.remove() }
            let server = world.server
            let accounts = try await world.client.send(.get, "/v1/accounts", token: server.adminToken).decode(AccountList.self)
            try await body(
                World(
                    simulator: world.apns, fcm: world.fcm, clock: server.clock, client: world.client, key: world.key, port: world.port,
                    accountID: try #require(accounts.data.first { $0.name == "acme" }?.id), files: files,
                    serverDirectory: server.directory))
        }
    }

    @Test func aSealedCallRingsOverTheSocketAndTheSDKShowsTheCallerFromTheBox() async throws {
        try await Self.withWorld { world in
            let alice = try await world.device("alice", "alice-phone-7f3a")
            let bob = try await world.device("bob", "bob-phone-91c2")
            try await alice.registerAlertBinding(apnsToken(seed: 1))
            try await bob.registerAlertBinding(apnsToken(seed: 2))
            await alice.connect()
            await bob.connect()

            let outgoing = try await alice.client.startCall(to: "bob", sealed: true, displayName: "Alice Liddell")
            // Bob's connected device rings live: reported once, then it shows Alice from the box.
            #expect(await eventually { bob.client.calls.call(uuid: outgoing.uuid)?.remote.displayName == "Alice Liddell" })
            let ringing = try #require(bob.client.calls.call(uuid: outgoing.uuid))
            #expect(bob.ui.records.filter { $0 == .incoming(outgoing.uuid) }.count == 1)
            try await ringing.answer()
            #expect(await eventually { outgoing.state == .connected })
            try await outgoing.end()
            #expect(await eventually { ringing.state == .ended(.remoteEnded) })
            for device in [alice, bob] { await device.client.disconnect() }
        }
    }

    /// Bob has two keyed devices: his phone rings over its socket with its box, his tablet is
    /// offline and its alert push, captured at the simulator, is opened by its SDK as its
    /// extension would. Both answer at once: exactly one wins, the other ends as answered
    /// elsewhere, and Alice's call connects to the winner.
    @Test(.serialized, arguments: 0..<3) func theFirstAcceptWinsAcrossASocketAndAPushOpenedDevice(round: Int) async throws {
        try await Self.withWorld { world in
            let alice = try await world.device("alice", "alice-phone-7f3a")
            let phone = try await world.device("bob", "bob-phone-91c2")
            let tablet = try await world.device("bob", "bob-tablet-52e1")
            try await alice.registerAlertBinding(apnsToken(seed: 1))
            try await phone.registerAlertBinding(apnsToken(seed: 2))
            let tabletToken = apnsToken(seed: 3)
            let tabletBinding = try await tablet.registerAlertBinding(tabletToken)
            await alice.connect()
            await phone.connect()

            let outgoing = try await alice.client.startCall(to: "bob", sealed: true, displayName: "Alice Liddell")
            let callID = try #require(outgoing.serverCallId)
            #expect(await eventually { phone.client.calls.call(uuid: outgoing.uuid)?.remote.displayName == "Alice Liddell" })
            let onPhone = try #require(phone.client.calls.call(uuid: outgoing.uuid))
            let push = try await Self.push(of: callID, to: tabletToken, at: world.simulator)
            let nse = SealedNotificationProcessor(
                opener: SealedInviteOpener(
                    identity: tablet.identity, bindingIds: [tabletBinding.id], senderKeys: tablet.client.keyDirectory,
                    replayStore: tablet.configuration.replayStore, now: { world.clock.now }))
            guard case .reportCall(let voipPayload) = await nse.process(try Self.dictionary(push)) else {
                Issue.record("the tablet's extension did not report the call")
                return
            }
            let payload = try #require(voipPayload.foundationObject as? [AnyHashable: Any])
            let onTablet = try #require(tablet.client.calls.handlePush(payload).call)
            #expect(onTablet.remote.displayName == "Alice Liddell")

            async let phoneAnswered = (try? await onPhone.answer()) != nil
            async let tabletAnswered = (try? await onTablet.answer()) != nil
            let answered = await [phoneAnswered, tabletAnswered]
            #expect(answered.filter { $0 }.count == 1, "\(answered)")
            let (winner, loser, loserUI) = answered[0] ? (onPhone, onTablet, tablet.ui) : (onTablet, onPhone, phone.ui)
            #expect(winner.state == .connected)
            #expect(await eventually { loser.state == .ended(.answeredElsewhere) })
            #expect(loserUI.endReasons(for: outgoing.uuid) == [.answeredElsewhere])
            #expect(await eventually { outgoing.state == .connected })
            let record = try await alice.client.fetchCall(id: callID)
            #expect(record.answeredBy == (answered[0] ? "bob-phone-91c2" : "bob-tablet-52e1"))

            // The winner hangs up (the tablet has no socket to hear Alice do it): Alice hears.
            try await winner.end()
            #expect(await eventually { outgoing.state == .ended(.remoteEnded) })
            for device in [alice, phone] { await device.client.disconnect() }
        }
    }

    /// A sealed call placed by Alice's SDK with her name, picture, media and metadata, to Bob's
    /// FCM tablet and alert-push phone: neither push service, nor the server's rows for the call,
    /// hold any of them or Alice's device; the tablet's SDK opening its FCM message shows they
    /// were all there, inside the box.
    @Test func neitherPushServiceNorTheCallsRowsSeeWhatTheBoxHolds() async throws {
        try await Self.withWorld { world in
            let alice = try await world.device("alice", "alice-phone-7f3a")
            let tablet = try await world.device("bob", "bob-tablet-52e1")
            let phone = try await world.device("bob", "bob-phone-91c2")
            try await alice.registerAlertBinding(apnsToken(seed: 1))
            let fcmToken = FCMTestPushTests.fcmToken(3)
            try await tablet.client.register(token: fcmToken, type: .fcm, publicKey: tablet.identity.publicKeyBase64)
            let phoneToken = apnsToken(seed: 2)
            try await phone.registerAlertBinding(phoneToken)
            await alice.connect()

            let metadata = JSONValue.object(["room": .string("secret-room-4242")])
            let avatar = try #require(URL(string: "https://cdn.example.com/u/alice-4242.png"))
            let outgoing = try await alice.client.startCall(
                to: "bob", sealed: true, media: .video, displayName: "Alice Liddell", avatarURL: avatar, metadata: metadata)
            let callID = try #require(outgoing.serverCallId)
            let described = ["Alice Liddell", "secret-room-4242", "alice-4242.png", "alice-phone-7f3a", alice.identity.keyId.description]

            // What each push service received, headers and body, names none of it (nor alice, nor video).
            let push = try await Self.push(of: callID, to: phoneToken, at: world.simulator)
            let message = try await Self.message(of: callID, to: fcmToken, at: world.fcm)
            for (service, bytes) in [("APNs", push.payload + Data(push.headers.values.joined().utf8)), ("FCM", message.body)] {
                for secret in described + ["alice", "video"] {
                    #expect(bytes.range(of: Data(secret.utf8)) == nil, "\(secret) at \(service): \(String(decoding: bytes, as: UTF8.self))")
                }
            }

            // The call's rows (call, ring-group members, deliveries, once every delivery has its
            // answer) hold none of it; the whole store holds no name, picture or metadata.
            #expect(
                await eventually {
                    let deliveries = (try? await alice.client.fetchCall(id: callID))?.deliveries ?? []
                    return deliveries.count == 2 && deliveries.allSatisfy { $0.outcome != "pending" }
                })
            let rows = try await Self.storedRows(of: callID, in: world.serverDirectory.appending("ringrelay.sqlite"))
            #expect(rows.contains { $0.range(of: Data(callID.utf8)) != nil } && rows.count >= 3, "the call and its deliveries are stored")
            for secret in described + ["video"] {
                #expect(rows.allSatisfy { $0.range(of: Data(secret.utf8)) == nil }, "\(secret) in the call's rows")
            }
            let stored = try FileManager.default.contentsOfDirectory(atPath: world.serverDirectory.path)
                .filter { $0.hasPrefix("ringrelay.sqlite") }
                .map { try Data(contentsOf: URL(fileURLWithPath: world.serverDirectory.appending($0))) }
            for secret in ["Alice Liddell", "secret-room-4242", "alice-4242.png"] {
                #expect(stored.allSatisfy { $0.range(of: Data(secret.utf8)) == nil }, "\(secret) is stored")
            }

            // Bob's tablet, handed its FCM message's data, opens the box: everything was in it.
            let ringing = try #require(tablet.client.calls.handlePush(message.data).call)
            #expect(await eventually { ringing.remote.displayName == "Alice Liddell" })
            #expect(ringing.remote == CallParty(identity: "alice", displayName: "Alice Liddell", avatarURL: avatar))
            #expect(ringing.media == .video)
            #expect(ringing.metadata == metadata)
            try await outgoing.end()
            await alice.client.disconnect()
        }
    }

    /// Waits for the FCM simulator's message of call `callID` to `token`.
    static func message(of callID: String, to token: String, at simulator: FCMSimulator) async throws -> FCMSimulator.ReceivedMessage {
        try await first("FCM message of \(callID)", in: { simulator.received }) {
            $0.registrationToken == token && $0.body.range(of: Data(callID.utf8)) != nil
        }
    }

    /// Each stored row of call `callID` (`calls`, `call_members`, `deliveries`) as the bytes of
    /// its values, read from the server's SQLite file beside it.
    static func storedRows(of callID: String, in path: String) async throws -> [Data] {
        let handle = try await SQLiteHandle.open(path: path, readOnly: true)
        let rows = try await handle.offloaded { handle in
            try ["SELECT * FROM calls WHERE id = ?", "SELECT * FROM call_members WHERE call_id = ?", "SELECT * FROM deliveries WHERE call_id = ?"]
                .flatMap { try handle.query($0, [.text(callID)]) }
        }
        try await handle.close()
        return rows.map { row in
            row.values.reduce(into: Data()) { bytes, value in
                switch value {
                case .text(let text): bytes += Data(text.utf8)
                case .blob(let blob): bytes += Data(blob.readableBytesView)
                case .integer, .float, .null: bytes += Data(value.description.utf8)
                }
                bytes += Data([0])
            }
        }
    }

    /// Waits for the simulator's push of call `callID` to `token`.
    static func push(of callID: String, to token: String, at simulator: APNsSimulator) async throws -> APNsSimulator.ReceivedPush {
        try await first("push of \(callID)", in: { simulator.received }) {
            $0.deviceToken == token && $0.payload.range(of: Data(callID.utf8)) != nil
        }
    }

    /// Waits up to 20 s for the first of what a simulator `received` that `matches`.
    static func first<Received>(
        _ what: String, in received: () -> [Received], where matches: (Received) -> Bool
    ) async throws -> Received {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if let found = received().first(where: matches) { return found }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("no \(what) within 20 s")
        throw CancellationError()
    }

    /// A captured payload as iOS hands it over (`userInfo`, `dictionaryPayload`).
    static func dictionary(_ push: APNsSimulator.ReceivedPush) throws -> [AnyHashable: Any] {
        try #require(try JSONSerialization.jsonObject(with: push.payload) as? [AnyHashable: Any])
    }

    @Test func aSealedAlertPushOpensInTheCalleesSDKAndRingsOneCall() async throws {
        try await Self.withWorld { world in
            let simulator = world.simulator
            let alice = try await world.device("alice", "alice-phone-7f3a")
            let bob = try await world.device("bob", "bob-phone-91c2")
            // Each registers an alert binding with its key; Alice connects, Bob stays offline.
            try await alice.registerAlertBinding(apnsToken(seed: 1))
            let bobToken = apnsToken(seed: 2)
            let bobBinding = try await bob.registerAlertBinding(bobToken)
            await alice.connect()

            let metadata = JSONValue.object(["room": .string("secret-room-4242")])
            let outgoing = try await alice.client.startCall(to: "bob", sealed: true, media: .video, displayName: "Alice Liddell", metadata: metadata)
            let callID = try #require(outgoing.serverCallId)
            #expect(outgoing.remote.identity == "bob")
            #expect(outgoing.media == .video)

            // The alert push the simulator captured carries nothing about the caller in clear.
            let push = try await Self.push(of: callID, to: bobToken, at: simulator)
            #expect(push.headers["apns-push-type"] == "alert")
            for secret in ["Alice Liddell", "secret-room-4242", "alice-phone-7f3a", "alice", "video", alice.identity.keyId.description] {
                #expect(push.payload.range(of: Data(secret.utf8)) == nil, "\(secret) in \(String(decoding: push.payload, as: UTF8.self))")
            }
            // Nor does the server's record of the call, nor any byte it stored (the call row is
            // committed before the 201, the deliveries before the record is read).
            let record = try await alice.client.fetchCall(id: callID)
            #expect(record.displayName == nil)
            #expect(record.metadata == nil)
            #expect(record.sealed == true)
            let stored = try FileManager.default.contentsOfDirectory(atPath: world.serverDirectory.path)
                .filter { $0.hasPrefix("ringrelay.sqlite") }
                .map { try Data(contentsOf: URL(fileURLWithPath: world.serverDirectory.appending($0))) }
            #expect(stored.contains { $0.range(of: Data(callID.utf8)) != nil }, "the call is in the store")
            // (Alice's device id is stored, in her own binding that carries her key; no call names it.)
            for secret in ["Alice Liddell", "secret-room-4242"] {
                #expect(stored.allSatisfy { $0.range(of: Data(secret.utf8)) == nil }, "\(secret) is stored")
            }

            // Bob's Notification Service Extension opens it: one VoIP payload for CallKit.
            let userInfo = try Self.dictionary(push)
            let nse = SealedNotificationProcessor(
                opener: SealedInviteOpener(
                    identity: bob.identity, bindingIds: [bobBinding.id], senderKeys: bob.client.keyDirectory,
                    replayStore: bob.configuration.replayStore, now: { world.clock.now }))
            guard case .reportCall(let voipPayload) = await nse.process(userInfo) else {
                Issue.record("the extension did not report the call")
                return
            }
            // CallKit wakes Bob's app with it: one call, Alice's, on video.
            let report = bob.client.calls.handlePush(try #require(voipPayload.foundationObject as? [AnyHashable: Any]))
            let ringing = try #require(report.call)
            #expect(ringing.uuid == outgoing.uuid)
            #expect(ringing.serverCallId == callID)
            #expect(ringing.remote == CallParty(identity: "alice", displayName: "Alice Liddell"))
            #expect(ringing.media == .video)
            #expect(ringing.metadata == metadata)
            #expect(bob.ui.records.filter { $0 == .incoming(outgoing.uuid) }.count == 1)

            // The same push again (redelivered) is refused: the app and extension share the file.
            #expect(await nse.process(userInfo) == .suppress(.replayed))
            // The raw push handed to Bob's own SDK is the same call, not a second one.
            #expect(bob.client.calls.handlePush(userInfo).call === ringing)
            #expect(bob.ui.records.filter { $0 == .incoming(outgoing.uuid) }.count == 2)
            #expect(bob.client.calls.calls.count == 1)

            // Bob answers: Alice's call connects.
            try await ringing.answer()
            #expect(ringing.state == .connected)
            #expect(await eventually { outgoing.state == .connected })
            try await outgoing.end()
            try await ringing.end()

            // A second sealed call whose push reaches Bob's app itself (a VoIP push carrying the
            // box): reported at once, then it shows Alice once the box opens with the directory's key.
            let second = try await alice.client.startCall(to: "bob", sealed: true, displayName: "Alice Liddell")
            let secondPush = try await Self.push(of: try #require(second.serverCallId), to: bobToken, at: simulator)
            let secondRinging = try #require(bob.client.calls.handlePush(try Self.dictionary(secondPush)).call)
            #expect(await eventually { secondRinging.remote.displayName == "Alice Liddell" })
            #expect(secondRinging.state == .ringing)
            try await secondRinging.end()
            #expect(await eventually { second.state.isEnded })

            // Bob's phone comes back with a new key: Alice's next sealed call reports the change first.
            #expect(alice.keyChanges.all.isEmpty)
            let newKey = P256.KeyAgreement.PrivateKey()
            try await bob.client.register(token: bobToken, type: .apnsAlert, environment: .sandbox, publicKey: newKey.publicKey.base64X963)
            let third = try await alice.client.startCall(to: "bob", sealed: true)
            let change = try #require(alice.keyChanges.all.first)
            #expect(change.identity == "bob")
            #expect(change.added.isEmpty && change.removed.isEmpty)
            #expect(change.changed.map(\.now.keyId) == [DeviceKeyID(of: newKey.publicKey)])
            #expect(change.changed.map(\.before.keyId) == [bob.identity.keyId])
            // Bob's app still holds its old key: the box sealed to the new one is refused, the call ends as failed.
            let thirdPush = try await Self.push(of: try #require(third.serverCallId), to: bobToken, at: simulator)
            let thirdRinging = try #require(bob.client.calls.handlePush(try Self.dictionary(thirdPush)).call)
            #expect(await eventually { thirdRinging.state == .ended(.failed) })
            #expect(await eventually { bob.ui.endReasons(for: thirdRinging.uuid) == [.failed] })
            try await third.end()
            await alice.client.disconnect()
        }
    }
}

/// What a device's `onDeviceKeysChanged` was told, in order.
final class KeyChangeLog: Sendable {
    private let changes = Mutex<[DeviceKeyChange]>([])

    var all: [DeviceKeyChange] { changes.withLock { $0 } }

    func append(_ change: DeviceKeyChange) { changes.withLock { $0.append(change) } }
}
