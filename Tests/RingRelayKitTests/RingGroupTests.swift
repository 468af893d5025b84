import Foundation
import RingRelayKit
import RingRelayWire
import Testing

/// Ring groups in RingRelayKit: placing one, following its participants, and the endings of a
/// group call, on the fake server and live connection.
@Suite("Ring groups")
struct RingGroupTests {
    let ui = RecordingSystemUI()
    let http = FakeHTTP()
    let live = FakeLiveTransport()

    private func makeClient() -> RingRelayClient {
        RingRelayClient(
            configuration: .init(
                serverURL: URL(string: "https://ring.example.com")!, deviceId: "phone",
                calls: .init(callbackExecutor: InlineExecutor(), now: { Dates.ringing })),
            systemUI: ui, accessToken: { "token" }, http: http, live: live)
    }

    /// A connected client whose `POST /v1/calls` answers `created`.
    private func connectedClient(creating created: CallResource) async throws -> (RingRelayClient, FakeLiveConnection) {
        http.setHandler { request in
            request.url.path == "/v1/calls" ? FakeHTTP.json(201, created) : FakeHTTP.json(200, created)
        }
        let client = makeClient()
        await client.connect()
        let connection = try #require(await live.connection(0))
        connection.ready()
        return (client, connection)
    }

    /// Collects a call's updates until it ends.
    private static func collect(_ updates: AsyncStream<CallUpdate>) -> Task<[CallUpdate], Never> {
        Task { await updates.reduce(into: []) { $0.append($1) } }
    }

    @Test("Mode all, the caller: connected once, at the first answer; later joins, declines and leaves only change the participants")
    func modeAllCaller() async throws {
        let (client, connection) = try await connectedClient(
            creating: Make.groupCall("call_g", parts: ["bob": "ringing", "carol": "ringing", "dave": "ringing"]))
        let heard = Transcript()
        let token = client.calls.addObserver(heard.record)
        let call = try await client.startCall(to: ["bob", "carol", "dave"], mode: .all, displayName: "Alice")
        let updates = Self.collect(call.updates())
        let sent = try JSONDecoder.ringRelay.decode(CreateCallRequest.self, from: try #require(http.requests.last?.body))
        #expect(sent.to == ["bob", "carol", "dave"])
        #expect(sent.mode == "all")
        #expect(call.ringMode == .all)
        #expect(call.remote.identity == "bob")
        #expect(call.participants == ["bob", "carol", "dave"].map { CallParticipant(identity: $0, state: .ringing) })

        connection.serve(
            Make.groupEvent(
                .accepted, "evt_1", Make.groupCall("call_g", state: "accepted", parts: ["bob": "accepted", "carol": "ringing", "dave": "ringing"]),
                participant: "bob"))
        #expect(await eventually { call.state == .connected })
        for (eventId, parts, who, reason) in [
            ("evt_2", ["bob": "accepted", "carol": "accepted", "dave": "ringing"] as KeyValuePairs, "carol", "accepted"),
            ("evt_3", ["bob": "accepted", "carol": "accepted", "dave": "declined"], "dave", "declined"),
            ("evt_4", ["bob": "left", "carol": "accepted", "dave": "declined"], "bob", "left"),
        ] {
            connection.serve(
                Make.groupEvent(
                    .participantUpdated, eventId, Make.groupCall("call_g", state: "accepted", parts: parts), participant: who, reason: reason))
        }
        // Acknowledged once handled.
        #expect(await eventually { connection.acks.count == 4 })
        #expect(call.state == .connected)
        #expect(ui.count(.outgoingConnected(call.uuid)) == 1)
        #expect(call.participants.map(\.state) == [.left, .accepted, .declined])

        connection.serve(
            Make.groupEvent(
                .ended, "evt_5", Make.groupCall("call_g", state: "ended", parts: ["bob": "left", "carol": "left", "dave": "declined"]),
                reason: "hangup"))
        #expect(await eventually { call.state == .ended(.remoteEnded) })
        // The state changes before the system UI hears of the end, on the thread that ended it.
        #expect(await eventually { ui.endReasons(for: call.uuid) == [.remoteEnded] })
        #expect(
            heard.all.dropLast() == [
                "outgoing call_g", "call_g participants bob accepted", "call_g connected", "call_g participants carol accepted",
                "call_g participants dave declined", "call_g participants bob left", "call_g participants carol left",
            ])
        #expect(heard.all.last?.hasPrefix("call_g ended") == true)
        let participant = { (identity: String, state: CallParticipant.State) in [CallParticipant(identity: identity, state: state)] }
        #expect(
            await updates.value == [
                .stateChanged(.ringing), .participantsChanged(participant("bob", .accepted)), .stateChanged(.connected),
                .participantsChanged(participant("carol", .accepted)), .participantsChanged(participant("dave", .declined)),
                .participantsChanged(participant("bob", .left)), .participantsChanged(participant("carol", .left)),
                .stateChanged(.ended(.remoteEnded)),
            ])
        token.cancel()
        await client.disconnect()
    }

    @Test("Mode first, the caller: the first answer connects the call, the others stop ringing; hanging up ends it on the server")
    func modeFirstCaller() async throws {
        let (client, connection) = try await connectedClient(
            creating: Make.groupCall("call_f", mode: "first", parts: ["bob": "ringing", "carol": "ringing", "dave": "ringing"]))
        let heard = Transcript()
        let token = client.calls.addObserver(heard.record)
        let call = try await client.startCall(to: ["bob", "carol", "dave"])
        #expect(try JSONDecoder.ringRelay.decode(CreateCallRequest.self, from: try #require(http.requests.last?.body)).mode == "first")
        #expect(call.ringMode == .first)

        let answered = Make.groupCall(
            "call_f", state: "accepted", mode: "first", parts: ["bob": "answered_elsewhere", "carol": "accepted", "dave": "answered_elsewhere"],
            answeredBy: "c2")
        connection.serve(Make.groupEvent(.accepted, "evt_1", answered, participant: "carol"))
        #expect(await eventually { call.state == .connected })
        #expect(call.participants.first { $0.state == .accepted }?.identity == "carol")
        #expect(
            heard.all == [
                "outgoing call_f", "call_f participants bob answered_elsewhere, carol accepted, dave answered_elsewhere", "call_f connected",
            ])

        try await call.end()
        #expect(http.requests.last.map { "\($0.method) \($0.url.path)" } == "POST /v1/calls/call_f/end")
        #expect(call.state == .ended(nil))
        token.cancel()
        await client.disconnect()
    }

    @Test("A list of one is a call to one: no mode sent, no ring group")
    func listOfOne() async throws {
        let (client, _) = try await connectedClient(creating: Make.call("call_1", from: "bob", to: "carol"))
        let call = try await client.startCall(to: ["carol"], mode: .all)
        let body = String(decoding: try #require(http.requests.last?.body), as: UTF8.self)
        #expect(body.contains(#""to":"carol""#), "\(body)")
        #expect(!body.contains("mode"), "\(body)")
        #expect(call.ringMode == nil)
        #expect(call.participants.isEmpty)
        await client.disconnect()
    }

    @Test("A callee of a ring group sees the group; an answer another identity won ends as answered elsewhere, a declined part as declined elsewhere")
    func calleeOfAGroup() async throws {
        let client = makeClient()
        await client.connect()
        let connection = try #require(await live.connection(0))
        connection.ready()
        let parts: KeyValuePairs = ["bob": "ringing", "carol": "ringing"]
        connection.serve(Make.groupEvent(.incoming, "evt_1", Make.groupCall("call_a", mode: "first", parts: parts)))
        connection.serve(Make.groupEvent(.incoming, "evt_2", Make.groupCall("call_b", parts: parts)))
        #expect(await eventually { client.calls.calls.count == 2 })
        let (first, second) = (client.calls.calls[0], client.calls.calls[1])
        #expect(first.ringMode == .first)
        #expect(first.participants.map(\.identity) == ["bob", "carol"])
        #expect(first.remote.identity == "alice")

        // The server refuses each answer with the state of this identity's part of the call.
        http.setHandler { request in
            request.url.path.hasPrefix("/v1/calls/call_a")
                ? FakeHTTP.error(409, "call_not_ringing", state: "answered_elsewhere") : FakeHTTP.error(409, "call_not_ringing", state: "declined")
        }
        await #expect(throws: RingRelayError.self) { try await first.answer() }
        await #expect(throws: RingRelayError.self) { try await second.answer() }
        #expect(first.state == .ended(.answeredElsewhere))
        #expect(second.state == .ended(.declinedElsewhere))
        await client.disconnect()
    }

    @Test("A pushed ring-group call keeps ringing while the server says the group still rings, and ends once nobody rings")
    func pushCheckOfAGroup() async throws {
        http.setHandler { request in
            switch request.url.path {
            case "/v1/calls/call_on":
                // Bob joined; Carol (maybe this device's identity) still rings.
                FakeHTTP.json(200, Make.groupCall("call_on", state: "accepted", parts: ["bob": "accepted", "carol": "ringing"], answeredBy: "b1"))
            default:
                FakeHTTP.json(
                    200,
                    Make.groupCall(
                        "call_over", state: "accepted", mode: "first", parts: ["bob": "accepted", "carol": "answered_elsewhere"], answeredBy: "b1"))
            }
        }
        let client = makeClient()
        let ringing = try #require(client.calls.handlePush(Make.invite("call_on")).call)
        #expect(await eventually { http.requests("GET", "/v1/calls/call_on").count == 1 })
        let over = try #require(client.calls.handlePush(Make.invite("call_over")).call)
        #expect(await eventually { over.state == .ended(.answeredElsewhere) })
        #expect(ringing.state == .ringing)
        #expect(ui.endReasons(for: ringing.uuid).isEmpty)
    }

    @Test("History entries show a ring group's mode and participants; a state this version does not know is kept by name")
    func historyOfGroups() async throws {
        var entry = Make.groupCall("call_g", state: "ended", parts: ["bob": "left", "carol": "on_hold"])
        entry.participants?[0].answeredBy = "b1"
        let group = entry
        http.setHandler { _ in FakeHTTP.json(200, CallList(data: [group, Make.call("call_1", state: "missed")], nextCursor: nil)) }
        let client = makeClient()
        let page = try await client.recentCalls()
        #expect(page.data[0].ringMode == .all)
        #expect(
            page.data[0].ringGroup == [
                CallParticipant(identity: "bob", state: .left, answeredBy: "b1"), CallParticipant(identity: "carol", state: .unknown("on_hold")),
            ])
        #expect(page.data[0].ringGroup[1].state.wireValue == "on_hold")
        #expect(page.data[1].ringMode == nil)
        #expect(page.data[1].ringGroup.isEmpty)
        #expect(CallParticipant.State(wireValue: "answered_elsewhere") == .answeredElsewhere)
    }
}
