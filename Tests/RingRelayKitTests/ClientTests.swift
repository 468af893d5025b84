import Foundation
import RingRelayKit
import RingRelayTesting
import RingRelayWire
import Synchronization
import Testing

@Suite("Client")
struct ClientTests {
    let ui = RecordingSystemUI()
    let http = FakeHTTP()
    let live = FakeLiveTransport()
    let tokens = Counter()

    private func makeClient(now: Date = Dates.ringing) -> RingRelayClient {
        RingRelayClient(
            configuration: .init(
                serverURL: URL(string: "https://ring.example.com")!, deviceId: "phone",
                reconnectPolicy: ReconnectPolicy(initialDelay: .milliseconds(1), maximumDelay: .milliseconds(5)),
                calls: .init(callbackExecutor: InlineExecutor(), now: { now })),
            systemUI: ui,
            accessToken: { [tokens] in "token-\(tokens.next())" },
            http: http, live: live)
    }

    @Test("Reconnect resumes from the last event: lastEventId sent, every event acked, repeats ignored")
    func reconnectWithReplay() async throws {
        let client = makeClient()
        await client.connect()
        let first = try #require(await live.connection(0))
        first.ready()
        first.serve(Make.event(.incoming, "evt_1", callId: "call_a"))
        first.serve(Make.event(.incoming, "evt_2", callId: "call_b"))
        #expect(await eventually { first.acks == ["evt_1", "evt_2"] })
        first.drop()

        let second = try #require(await live.connection(1))
        #expect(live.attempts[0].url.absoluteString == "wss://ring.example.com/v1/connect")
        #expect(live.attempts[1].url.absoluteString == "wss://ring.example.com/v1/connect?lastEventId=evt_2")
        #expect(live.attempts[1].headers["Authorization"]?.hasPrefix("Bearer token-") == true)
        second.ready(replayed: 1)
        second.serve(Make.event(.incoming, "evt_2", callId: "call_b"))
        second.serve(Make.event(.cancelled, "evt_3", callId: "call_b", state: "cancelled", reason: "cancelled"))
        #expect(await eventually { second.acks == ["evt_2", "evt_3"] })

        let callB = CallKey.ringRelay(callId: "call_b").uuid
        #expect(ui.incomingReports.filter { $0.uuid == callB }.count == 1)
        #expect(ui.endReasons(for: callB) == [.remoteEnded])
        #expect(client.calls.calls.map(\.serverCallId) == ["call_a"])
        await client.disconnect()
        #expect(await client.connectionState == .disconnected)
    }

    @Test("The connection state stream reports ready and back-off")
    func connectionStates() async throws {
        let client = makeClient()
        let states = await client.connectionStates()
        await client.connect()
        let connection = try #require(await live.connection(0))
        connection.ready()
        connection.drop()
        var seen: [RingRelayClient.ConnectionState] = []
        for await state in states {
            seen.append(state)
            if case .waitingToReconnect = state { break }
        }
        #expect(seen.prefix(3) == [.disconnected, .connecting, .connected(LiveReady(identity: "bob", deviceId: "phone", replayed: 0))])
        await client.disconnect()
    }

    @Test("Close reasons: 4002 gets a fresh token at once, 1001 reconnects with the same one, 4003 stops")
    func closeReasons() async throws {
        let client = makeClient()
        await client.connect()
        let first = try #require(await live.connection(0))
        first.ready()
        first.close(by: .tokenExpired)
        let second = try #require(await live.connection(1))
        #expect(live.attempts[0].headers["Authorization"] == "Bearer token-1")
        #expect(live.attempts[1].headers["Authorization"] == "Bearer token-2", "a fresh token after 4002")
        second.ready()
        second.close(by: .goingAway)
        let third = try #require(await live.connection(2))
        #expect(live.attempts[2].headers["Authorization"] == "Bearer token-2", "the token is still good after 1001")
        third.ready()
        third.close(by: .accountDeleted)
        #expect(await eventually { await client.connectionState == .stopped(LiveConnectionClosed(code: 4003, reason: "account_deleted")) })
        try await Task.sleep(for: .milliseconds(100))
        #expect(live.attempts.count == 3, "no attempt after 4003")
        await client.disconnect()
    }

    @Test("An answer from the system UI waits for the server, and call.accepted fulfils it")
    func answerBeforeServerConfirms() async throws {
        let gate = Gate()
        http.setHandler { request in
            switch (request.method, request.url.path) {
            case ("GET", "/v1/calls/call_a"): return FakeHTTP.json(200, Make.call("call_a"))
            case ("POST", "/v1/calls/call_a/accept"):
                await gate.wait()
                return FakeHTTP.json(200, Make.call("call_a", state: "accepted", answeredBy: "phone"))
            default: return HTTPResponse(status: 404)
            }
        }
        let client = makeClient()
        await client.connect()
        let connection = try #require(await live.connection(0))
        connection.ready()
        let call = try #require(client.calls.handlePush(Make.invite("call_a")).call)
        let answering = Task { try await client.calls.answer(uuid: call.uuid) }
        #expect(await eventually { http.requests("POST", "/v1/calls/call_a/accept").count == 1 })
        #expect(call.state == .connecting)
        #expect(ui.count(.fulfilled(call.uuid)) == 0)

        connection.serve(Make.event(.accepted, "evt_1", callId: "call_a", state: "accepted"))
        #expect(await eventually { call.state == .connected })
        #expect(ui.count(.fulfilled(call.uuid)) == 1)
        gate.open()
        try await answering.value
        #expect(ui.count(.fulfilled(call.uuid)) == 1)
        #expect(http.requests("POST", "/v1/calls/call_a/accept").first?.headers["Authorization"] == "Bearer token-1")
        await client.disconnect()
    }

    @Test("An answer the server refuses with 409 fails the system action and ends the call")
    func answerConflict() async throws {
        http.setHandler { request in
            switch (request.method, request.url.path) {
            case ("GET", _): return FakeHTTP.json(200, Make.call("call_a"))
            default: return FakeHTTP.error(409, "call_not_ringing", state: "accepted")
            }
        }
        let client = makeClient()
        let call = try #require(client.calls.handlePush(Make.invite("call_a")).call)
        await #expect(throws: RingRelayError.server(ServerError(status: 409, code: .callNotRinging, message: "test", callState: "accepted"))) {
            try await call.answer()
        }
        #expect(call.state == .ended(.answeredElsewhere))
        #expect(ui.records.suffix(2) == [.failed(call.uuid), .ended(call.uuid, .answeredElsewhere)])
    }

    @Test("Answered elsewhere while the answer is on its way fails the answer")
    func answeredElsewhereDuringAnswer() async throws {
        let gate = Gate()
        http.setHandler { request in
            if request.method == "GET" { return FakeHTTP.json(200, Make.call("call_a")) }
            await gate.wait()
            return FakeHTTP.error(409, "call_not_ringing", state: "accepted")
        }
        let client = makeClient()
        await client.connect()
        let connection = try #require(await live.connection(0))
        connection.ready()
        let call = try #require(client.calls.handlePush(Make.invite("call_a")).call)
        let answering = Task { try await call.answer() }
        #expect(await eventually { call.state == .connecting })
        connection.serve(Make.event(.answeredElsewhere, "evt_1", callId: "call_a", state: "accepted", reason: "answered_elsewhere"))
        #expect(await eventually { call.state == .ended(.answeredElsewhere) })
        #expect(ui.count(.failed(call.uuid)) == 1)
        gate.open()
        await #expect(throws: RingRelayError.self) { try await answering.value }
        #expect(ui.count(.failed(call.uuid)) == 1)
        #expect(ui.endReasons(for: call.uuid) == [.answeredElsewhere])
        await client.disconnect()
    }

    @Test("A pushed call the server no longer rings ends at once")
    func serverSaysNotRinging() async throws {
        http.setHandler { _ in FakeHTTP.json(200, Make.call("call_a", state: "cancelled")) }
        let client = makeClient()
        let call = try #require(client.calls.handlePush(Make.invite("call_a")).call)
        #expect(await eventually { call.state == .ended(.remoteEnded) })
        // The state changes before the system UI hears of the end, on the thread that ended it.
        #expect(await eventually { ui.endReasons(for: call.uuid) == [.remoteEnded] })
    }

    @Test("A changed push token registers the new binding, then deletes the old one")
    func bindingRotation() async throws {
        let counter = Counter()
        http.setHandler { request in
            guard request.method == "POST" else { return HTTPResponse(status: 204) }
            let body = try JSONDecoder().decode(BindingRequest.self, from: request.body ?? Data())
            let id = "bnd_\(counter.next())"
            let binding = BindingResource(
                id: id, identity: "bob", type: body.type, token: body.token, environment: body.environment, deviceId: body.deviceId,
                publicKey: nil, status: "active", invalidReason: nil, invalidatedAt: nil, createdAt: Dates.sent, updatedAt: Dates.sent)
            return FakeHTTP.json(201, binding)
        }
        let store = InMemoryBindingStore()
        let client = RingRelayClient(
            configuration: .init(serverURL: URL(string: "https://ring.example.com")!, deviceId: "phone"), systemUI: ui,
            accessToken: { "token" }, http: http, live: nil, bindingStore: store)
        let first = try await client.register(pushToken: Data([0xAB, 0x01]), type: .apnsVoIP, environment: .sandbox)
        #expect(first == RegisteredBinding(id: "bnd_1", type: .apnsVoIP, token: "ab01"))
        try await client.register(token: "fcm-token", type: .fcm)
        let second = try await client.register(pushToken: Data([0xCD]), type: .apnsVoIP, environment: .sandbox)

        let posted = try http.requests("POST", "/v1/bindings").map { try JSONDecoder().decode(BindingRequest.self, from: $0.body ?? Data()) }
        #expect(posted.map(\.token) == ["ab01", "fcm-token", "cd"])
        #expect(posted[0] == BindingRequest(identity: nil, type: "apns_voip", token: "ab01", environment: "sandbox", deviceId: "phone"))
        #expect(posted[1].environment == nil)
        #expect(http.requests.map { "\($0.method) \($0.url.path)" }.last == "DELETE /v1/bindings/bnd_1")
        #expect(await store.load().sorted { $0.id < $1.id } == [RegisteredBinding(id: "bnd_2", type: .fcm, token: "fcm-token"), second])

        try await client.unregister(type: .fcm)
        #expect(http.requests.last.map { "\($0.method) \($0.url.path)" } == "DELETE /v1/bindings/bnd_2")
        #expect(await store.load() == [second])
    }

    @Test("A refused token is replaced once; the request is retried with the new one")
    func tokenRefresh() async throws {
        http.setHandler { request in
            request.headers["Authorization"] == "Bearer token-1" ? FakeHTTP.error(401, "invalid_credentials") : FakeHTTP.json(200, Make.call("call_a"))
        }
        let client = makeClient()
        let call = try await client.fetchCall(id: "call_a")
        #expect(call.id == "call_a")
        #expect(http.requests.compactMap { $0.headers["Authorization"] } == ["Bearer token-1", "Bearer token-2"])
    }

    @Test("Server errors come back typed")
    func typedErrors() async throws {
        http.setHandler { _ in FakeHTTP.error(404, "call_not_found") }
        let client = makeClient()
        do {
            _ = try await client.fetchCall(id: "call_x")
            Issue.record("expected an error")
        } catch {
            #expect(error.serverError?.kind == .notFound)
            #expect(error.serverError?.code == .callNotFound)
        }
    }

    @Test("An outgoing call is created, rings, and connects on call.accepted")
    func outgoingCall() async throws {
        http.setHandler { request in
            FakeHTTP.json(201, Make.call("call_out", from: "bob", to: "carol"))
        }
        let client = makeClient()
        await client.connect()
        let connection = try #require(await live.connection(0))
        connection.ready()
        let call = try await client.startCall(to: "carol", media: .video)
        let body = try JSONDecoder().decode(CreateCallRequest.self, from: http.requests.last?.body ?? Data())
        #expect(body == CreateCallRequest(to: "carol", media: "video"))
        #expect(call.direction == .outgoing)
        #expect(call.state == .ringing)
        #expect(ui.records.first == .outgoingStarted(OutgoingCallReport(uuid: call.uuid, callee: CallParty(identity: "carol"), hasVideo: false)))
        connection.serve(Make.event(.accepted, "evt_1", callId: "call_out", state: "accepted"))
        #expect(await eventually { call.state == .connected })
        #expect(ui.records.last == .outgoingConnected(call.uuid))
        try await call.end()
        #expect(http.requests.last.map { "\($0.method) \($0.url.path)" } == "POST /v1/calls/call_out/end")
        await client.disconnect()
    }

    @Test("A call.accepted that arrives before POST /v1/calls has answered still connects the call")
    func acceptedBeforeTheCreateAnswered() async throws {
        let client = makeClient()
        await client.connect()
        let connection = try #require(await live.connection(0))
        connection.ready()
        // The callee answers so fast that the event overtakes the answer to the create.
        http.setHandler { _ in
            connection.serve(Make.event(.accepted, "evt_early", callId: "call_fast", state: "accepted"))
            try? await Task.sleep(for: .milliseconds(200))
            return FakeHTTP.json(201, Make.call("call_fast", from: "bob", to: "carol"))
        }
        let call = try await client.startCall(to: "carol")
        #expect(await eventually { call.state == .connected })
        #expect(ui.records.last == .outgoingConnected(call.uuid))
        await client.disconnect()
    }

    @Test("Back-off grows exponentially up to the ceiling, with the jitter inside it")
    func backOff() {
        let policy = ReconnectPolicy(initialDelay: .milliseconds(500), maximumDelay: .seconds(30), multiplier: 2)
        #expect(policy.ceiling(forAttempt: 1) == .milliseconds(500))
        #expect(policy.ceiling(forAttempt: 4) == .seconds(4))
        #expect(policy.ceiling(forAttempt: 40) == .seconds(30))
        #expect(policy.delay(forAttempt: 4, unitRandom: 0.5) == .seconds(2))
        #expect(policy.delay(forAttempt: 4, unitRandom: 0) == .zero)
    }
}
