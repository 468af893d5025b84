import Crypto
import Dispatch
import Foundation
import HTTPTypes
import HummingbirdTesting
import protocol RingRelayCore.WallClock
import RingRelayKit
import RingRelayTesting
import RingRelayWire
import Synchronization
import Testing

@testable import RingRelayCLI

/// RingRelayKit against a live server on Linux: real `RingRelayClient`s on the CLI's
/// `NIOLiveTransport` (WebSocket) and `URLSessionHTTPTransport` (REST), each with a recording
/// system call UI. Alice (one device) calls Bob (devices b1 and b2).
@Suite struct SDKLiveTests {
    /// The server and how to make devices on it.
    struct World {
        let client: any TestClientProtocol
        let port: Int
        let key: String
        let account: CreatedAccount
        let clock: ManualWallClock
        let adminToken: String

        /// A connected SDK client for one device.
        func device(_ identity: String, _ deviceID: String) async throws -> SDKDevice {
            let token = try await client.accessToken(identity: identity, deviceID: deviceID, key: key)
            let device = SDKDevice(port: port, deviceID: deviceID, token: token, clock: clock)
            await device.client.connect()
            try await device.waitUntilConnected()
            return device
        }
    }

    static func withWorld(_ body: @Sendable (World) async throws -> Void) async throws {
        let server = try await TestServer.make(start: Date())
        try await server.withClient(.live) { client in
            let account = try await client.createAccount("acme", admin: server.adminToken)
            try await body(
                World(
                    client: client, port: try #require(client.port), key: account.apiKey, account: account, clock: server.clock,
                    adminToken: server.adminToken))
        }
    }

    @Test func everyDeviceRingsTheFirstAnswerWinsAndTheHangUpReachesTheCallee() async throws {
        try await Self.withWorld { world in
            let alice = try await world.device("alice", "a1")
            let bob1 = try await world.device("bob", "b1")
            let bob2 = try await world.device("bob", "b2")

            let outgoing = try await alice.client.startCall(to: "bob")
            let callID = try #require(outgoing.serverCallId)
            #expect(outgoing.state == .ringing)
            #expect(alice.ui.records.contains(.outgoingStarted(outgoing.uuid)))

            // Both of Bob's devices ring, under the same UUID as the caller's call.
            let ringing1 = try await bob1.incomingCall(outgoing.uuid)
            let ringing2 = try await bob2.incomingCall(outgoing.uuid)
            #expect(ringing1.serverCallId == callID)
            #expect(ringing1.remote.identity == "alice")
            #expect(ringing2.state == .ringing)

            // b1 answers: it wins, b2's call ends as answered elsewhere, Alice's connects.
            try await ringing1.answer()
            #expect(ringing1.state == .connected)
            #expect(bob1.ui.records.contains(.fulfilled(outgoing.uuid)))
            #expect(await eventually { bob2.ui.endReasons(for: outgoing.uuid) == [.answeredElsewhere] })
            #expect(ringing2.state == .ended(.answeredElsewhere))
            #expect(bob2.client.calls.calls.isEmpty)
            // The SDK moves the call's state, then tells the system UI: wait for the report itself.
            #expect(await eventually { outgoing.state == .connected && alice.ui.records.contains(.outgoingConnected(outgoing.uuid)) })

            // Alice hangs up: Bob's call ends as remote ended.
            try await outgoing.end()
            #expect(alice.ui.records.contains(.endedByUser(outgoing.uuid)))
            #expect(await eventually { bob1.ui.endReasons(for: outgoing.uuid) == [.remoteEnded] })
            #expect(ringing1.state == .ended(.remoteEnded))
            #expect(bob1.client.calls.calls.isEmpty)

            let record = try await alice.client.fetchCall(id: callID)
            #expect(record.state == "ended")
            #expect(record.answeredBy == "b1")
            // Nothing was reported twice.
            #expect(bob1.ui.records.filter { $0 == .incoming(outgoing.uuid) }.count == 1)
            #expect(bob2.ui.records.filter { $0 == .incoming(outgoing.uuid) }.count == 1)
            for device in [alice, bob1, bob2] { await device.client.disconnect() }
        }
    }

    /// `CallOptions` reach the server: a call that must not ring a busy callee ends at once as
    /// unanswered, and a call's own missed-call choice is kept on its record.
    @Test func callOptionsChooseBusyHandlingAndMissedCallNotices() async throws {
        try await Self.withWorld { world in
            let alice = try await world.device("alice", "a1")
            let carol = try await world.device("carol", "c1")
            let bob = try await world.device("bob", "b1")
            // Bob takes Carol's call: he is busy.
            let first = try await carol.client.startCall(to: "bob")
            try await bob.incomingCall(first.uuid).answer()
            #expect(await eventually { first.state == .connected })

            let refused = try await alice.client.startCall(to: "bob", options: CallOptions(ifBusy: .reject, notifyMissed: true))
            #expect(refused.state == .ended(.unanswered))
            let record = try await alice.client.fetchCall(id: try #require(refused.serverCallId))
            #expect(record.state == "rejected" && record.endReason == "busy")
            #expect(record.notifyMissed == true)

            // Ringing anyway, with notices turned off for this call only.
            let waiting = try await alice.client.startCall(to: "bob", options: CallOptions(ifBusy: .ring, notifyMissed: false))
            #expect(waiting.state == .ringing)
            let waitingRecord = try await alice.client.fetchCall(id: try #require(waiting.serverCallId))
            #expect(waitingRecord.state == "ringing" && waitingRecord.notifyMissed == false)
            try await waiting.end()
            try await first.end()
            for device in [alice, carol, bob] { await device.client.disconnect() }
        }
    }

    /// `recentCalls` reads the identity's history page by page, newest first, with its filters.
    @Test func recentCallsReadsTheIdentitysHistory() async throws {
        try await Self.withWorld { world in
            let alice = try await world.device("alice", "a1")
            let bob = try await world.device("bob", "b1")
            // Alice gives up on three calls to Bob.
            var cancelled: [String] = []
            for _ in 0..<3 {
                let outgoing = try await alice.client.startCall(to: "bob")
                let ringing = try await bob.incomingCall(outgoing.uuid)
                try await outgoing.end()
                #expect(await eventually { ringing.state == .ended(.remoteEnded) })
                cancelled.append(try #require(outgoing.serverCallId))
                world.clock.advance(by: 1)
            }
            // Bob calls Alice; she answers and he hangs up 7 s later.
            let answeredSince = world.clock.now
            let outgoing = try await bob.client.startCall(to: "alice")
            let ringing = try await alice.incomingCall(outgoing.uuid)
            try await ringing.answer()
            #expect(await eventually { outgoing.state == .connected })
            world.clock.advance(by: 7)
            try await outgoing.end()
            #expect(await eventually { ringing.state == .ended(.remoteEnded) })
            let answered = try #require(outgoing.serverCallId)

            // Two pages of two, newest first.
            let first = try await alice.client.recentCalls(limit: 2)
            let cursor = try #require(first.nextCursor)
            let second = try await alice.client.recentCalls(limit: 2, cursor: cursor)
            #expect(second.nextCursor == nil)
            #expect((first.data + second.data).map(\.id) == [answered] + cancelled.reversed())

            let placed = try await alice.client.recentCalls(direction: .outgoing, states: [.cancelled, .missed])
            #expect(placed.data.map(\.id) == cancelled.reversed())
            #expect(placed.data.allSatisfy { $0.endReason == "cancelled" && $0.endedBy == "alice" && $0.durationSeconds == nil })
            let received = try await alice.client.recentCalls(direction: .incoming, since: answeredSince)
            let call = try #require(received.data.first)
            #expect(received.data.count == 1)
            #expect(call.id == answered)
            #expect(call.answeredBy == "a1")
            #expect(call.durationSeconds == 7)
            #expect(call.endReason == "hangup")
            #expect(call.endedBy == "bob")
            #expect(try await alice.client.recentCalls(until: answeredSince).data.map(\.id) == cancelled.reversed())
            // Bob's history is his own: the same four calls, seen from his side.
            #expect(try await bob.client.recentCalls(direction: .incoming).data.map(\.id) == cancelled.reversed())

            do {
                _ = try await alice.client.recentCalls(limit: 0)
                Issue.record("limit 0 was accepted")
            } catch let error as RingRelayError {
                #expect(error.serverError?.kind == .unprocessable)
                #expect(error.serverError?.code.rawValue == "invalid_parameter")
            }
            for device in [alice, bob] { await device.client.disconnect() }
        }
    }

    @Test func aCallerReadsTheCalleesDeviceKeys() async throws {
        try await Self.withWorld { world in
            let publicKey = IdentityKeysTests.publicKey()
            let bob = try await world.device("bob", "b1")
            _ = try await bob.client.register(token: "bob-fcm", type: .fcm, publicKey: publicKey)
            let alice = try await world.device("alice", "a1")
            let keys = try await alice.client.deviceKeys(of: "bob")
            #expect(keys.map(\.publicKey) == [publicKey])
            #expect(keys.map(\.deviceId) == ["b1"])
            // An identity without bindings is not found; as a sealed invite's sender it is simply unknown.
            let unknown = await #expect(throws: RingRelayError.self) { try await alice.client.deviceKeys(of: "nobody") }
            #expect(unknown?.serverError?.code == .identityNotFound)
            let anyKey = DeviceKeyID(of: P256.KeyAgreement.PrivateKey().publicKey)
            #expect(try await alice.client.keyDirectory.publicKey(of: "nobody", keyId: anyKey) == nil)
            for device in [alice, bob] { await device.client.disconnect() }
        }
    }

    @Test func aCancelWhileOfflineIsReplayedOnReconnect() async throws {
        try await Self.withWorld { world in
            let alice = try await world.device("alice", "a1")
            let bob = try await world.device("bob", "b1")
            let outgoing = try await alice.client.startCall(to: "bob")
            let ringing = try await bob.incomingCall(outgoing.uuid)

            await bob.client.disconnect()
            try await outgoing.end()  // cancels: Bob's device is offline and misses the event
            #expect(ringing.state == .ringing)

            await bob.client.connect()
            let ready = try await bob.waitUntilConnected()
            #expect(ready.replayed == 1)
            #expect(await eventually { ringing.state == .ended(.remoteEnded) })
            #expect(bob.ui.endReasons(for: outgoing.uuid) == [.remoteEnded])
            #expect(bob.client.calls.calls.isEmpty)
            for device in [alice, bob] { await device.client.disconnect() }
        }
    }

    @Test func anAnswerElsewhereWhileOfflineIsReplayedOnReconnect() async throws {
        try await Self.withWorld { world in
            let alice = try await world.device("alice", "a1")
            let bob1 = try await world.device("bob", "b1")
            let bob2 = try await world.device("bob", "b2")
            let outgoing = try await alice.client.startCall(to: "bob")
            let ringing1 = try await bob1.incomingCall(outgoing.uuid)
            let ringing2 = try await bob2.incomingCall(outgoing.uuid)

            await bob2.client.disconnect()
            try await ringing1.answer()
            #expect(ringing2.state == .ringing)

            await bob2.client.connect()
            _ = try await bob2.waitUntilConnected()
            #expect(await eventually { ringing2.state == .ended(.answeredElsewhere) })
            #expect(bob2.ui.endReasons(for: outgoing.uuid) == [.answeredElsewhere])
            #expect(await eventually { outgoing.state == .connected })
            try await ringing1.end()
            #expect(await eventually { outgoing.state == .ended(.remoteEnded) })
            for device in [alice, bob1, bob2] { await device.client.disconnect() }
        }
    }
}

/// The server ends a live connection when its access token expires, when its account is deleted,
/// and when its device is signed out; RingRelayKit acts on each reason.
@Suite struct SDKCloseReasonTests {
    /// Waits until the client has stopped and returns why.
    static func stopped(_ device: SDKDevice) async -> LiveConnectionClosed? {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if case .stopped(let closed) = await device.client.connectionState { return closed }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }

    @Test func anExpiredTokenEndsTheConnectionAndTheSDKComesBackWithAFreshOne() async throws {
        try await SDKLiveTests.withWorld { world in
            // The first token has two seconds left when the device connects.
            let first = try await world.client.accessToken(identity: "bob", deviceID: "b1", key: world.key, ttl: 60)
            world.clock.advance(by: 58)
            let minted = Counter()
            let client = world.client
            let key = world.key
            let bob = SDKDevice(port: world.port, deviceID: "b1", clock: world.clock) {
                return minted.increment() == 1 ? first : try await client.accessToken(identity: "bob", deviceID: "b1", key: key, ttl: 3600)
            }
            await bob.client.connect()
            try await bob.waitUntilConnected()
            // The server closes at the token's expiry (4002); the SDK asks for a new token at once.
            #expect(await eventually { minted.value == 2 })
            try await bob.waitUntilConnected()
            #expect(minted.value == 2)

            // Calls still reach the device on its new connection.
            let alice = try await world.device("alice", "a1")
            let outgoing = try await alice.client.startCall(to: "bob")
            _ = try await bob.incomingCall(outgoing.uuid)
            for device in [alice, bob] { await device.client.disconnect() }
        }
    }

    @Test func aDeletedAccountStopsItsDevices() async throws {
        try await SDKLiveTests.withWorld { world in
            let bob = try await world.device("bob", "b1")
            #expect(try await world.client.send(.delete, "/v1/accounts/\(world.account.id)", token: world.adminToken).status == .noContent)
            let closed = await Self.stopped(bob)
            #expect(closed?.closeCode == .accountDeleted)
            // Stopped means stopped: no attempt to come back with a token that cannot work.
            try await Task.sleep(for: .milliseconds(300))
            #expect(await bob.client.connectionState == .stopped(try #require(closed)))
        }
    }

    @Test func removingADevicesLastBindingSignsItOut() async throws {
        try await SDKLiveTests.withWorld { world in
            let bob1 = try await world.device("bob", "b1")
            let bob2 = try await world.device("bob", "b2")
            let first = try await bob1.client.register(token: "fcm-b1-old", type: .fcm)
            // Re-registering replaces the old binding (the SDK deletes it): the device keeps one, stays.
            _ = try await bob1.client.register(token: "fcm-b1-new", type: .fcm)
            #expect(try await world.client.send(.get, "/v1/bindings/\(first.id)", token: world.key).status == .notFound)
            _ = try await bob2.client.register(token: "fcm-b2", type: .fcm)
            try await Task.sleep(for: .milliseconds(200))
            #expect(await bob1.client.connectionState.isConnected)

            // The backend removes b1's binding: b1 is signed out (4004); b2 is untouched.
            try await bob1.client.unregister(type: .fcm)
            #expect(await Self.stopped(bob1)?.closeCode == .deviceUnbound)
            #expect(await bob2.client.connectionState.isConnected)

            // Deleting the identity's bindings signs out every device of it.
            #expect(try await world.client.send(.delete, "/v1/bindings?identity=bob", token: world.key).status == .ok)
            #expect(await Self.stopped(bob2)?.closeCode == .deviceUnbound)
        }
    }

    @Test func aReplacedConnectionDoesNotFightForTheDevice() async throws {
        try await SDKLiveTests.withWorld { world in
            let older = try await world.device("bob", "b1")
            let newer = try await world.device("bob", "b1")
            #expect(await Self.stopped(older)?.closeCode == .replaced)
            // The newer one keeps the device: the older does not come back and take it (4001 both ways).
            try await Task.sleep(for: .milliseconds(500))
            #expect(await newer.client.connectionState.isConnected)
            for device in [older, newer] { await device.client.disconnect() }
        }
    }
}

/// A count shared with `@Sendable` closures.
final class Counter: Sendable {
    private let state = Mutex(0)
    var value: Int { state.withLock { $0 } }
    /// Adds one; returns the new count.
    func increment() -> Int {
        state.withLock { count in
            count += 1
            return count
        }
    }
}

extension RingRelayClient.ConnectionState {
    var isConnected: Bool {
        if case .connected = self { return true }
        return false
    }
}

/// One device on RingRelayKit, as an app on Linux would run it.
struct SDKDevice: Sendable {
    let client: RingRelayClient
    let ui = RecordingCallUI()

    init(port: Int, deviceID: String, token: String, clock: (any WallClock)? = nil) {
        self.init(port: port, deviceID: deviceID, clock: clock, accessToken: { token })
    }

    /// A device; with `clock` (the test server's), it judges ring expiry by the server's time, so
    /// a frozen test clock and a slow, loaded machine do not make a fresh ring look stale.
    init(port: Int, deviceID: String, clock: (any WallClock)? = nil, accessToken: @escaping @Sendable () async throws -> String) {
        let now: @Sendable () -> Date
        if let clock { now = { clock.now } } else { now = { Date() } }
        client = RingRelayClient(
            configuration: .init(
                serverURL: URL(string: "http://127.0.0.1:\(port)")!, deviceId: deviceID,
                reconnectPolicy: ReconnectPolicy(initialDelay: .milliseconds(100), maximumDelay: .seconds(1)),
                calls: .init(callbackExecutor: DispatchQueue(label: "sdk-test-\(deviceID)"), now: now)),
            systemUI: ui,
            accessToken: accessToken,
            http: URLSessionHTTPTransport(), live: NIOLiveTransport())
    }

    /// Waits until the live connection is registered and returns its `ready` frame.
    @discardableResult
    func waitUntilConnected(sourceLocation: SourceLocation = #_sourceLocation) async throws -> LiveReady {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if case .connected(let ready) = await client.connectionState { return ready }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("not connected within 20 s", sourceLocation: sourceLocation)
        throw CancellationError()
    }

    /// Waits until the call with `uuid` rings here and returns it.
    func incomingCall(_ uuid: UUID, sourceLocation: SourceLocation = #_sourceLocation) async throws -> Call {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if ui.records.contains(.incoming(uuid)), let call = client.calls.call(uuid: uuid) { return call }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("no incoming call within 20 s", sourceLocation: sourceLocation)
        throw CancellationError()
    }
}

/// A system call UI that records what the SDK told it, by UUID.
final class RecordingCallUI: SystemCallUI {
    enum Record: Sendable, Hashable {
        case incoming(UUID)
        case outgoingStarted(UUID)
        case outgoingConnected(UUID)
        case ended(UUID, CallEndReason)
        case endedByUser(UUID)
        case held(UUID, Bool)
        case fulfilled(UUID)
        case failed(UUID)
    }

    private let state = Mutex<[Record]>([])

    var records: [Record] { state.withLock { $0 } }

    func endReasons(for uuid: UUID) -> [CallEndReason] {
        records.compactMap { if case .ended(uuid, let reason) = $0 { reason } else { nil } }
    }

    private func append(_ record: Record) { state.withLock { $0.append(record) } }

    func reportIncomingCall(_ report: IncomingCallReport, completion: @escaping @Sendable ((any Error)?) -> Void) {
        append(.incoming(report.uuid))
        completion(nil)
    }

    func reportOutgoingCallStarted(_ report: OutgoingCallReport) { append(.outgoingStarted(report.uuid)) }
    func reportOutgoingCallConnected(uuid: UUID) { append(.outgoingConnected(uuid)) }
    func reportCallEnded(uuid: UUID, reason: CallEndReason) { append(.ended(uuid, reason)) }
    func reportCallEndedByUser(uuid: UUID) { append(.endedByUser(uuid)) }
    func reportCallHeld(uuid: UUID, onHold: Bool) { append(.held(uuid, onHold)) }
    func fulfillAnswer(uuid: UUID) { append(.fulfilled(uuid)) }
    func failAnswer(uuid: UUID) { append(.failed(uuid)) }
}

/// Polls `condition` until it holds or `timeout` passes.
func eventually(timeout: Duration = .seconds(20), _ condition: @Sendable () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return await condition()
}
