import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import RingRelayCore
import RingRelayTesting
import RingRelayWire
import Testing

@testable import RingRelayServer

/// Ring groups (issue 17, item 5): `to` names up to 20 identities, rung at once, in mode `first`
/// (the first accept wins) or `all` (each joins on its own). Real WebSocket devices on a live
/// server; every device of every party hears exactly one ending per call.
@Suite struct RingGroupTests {
    /// Alice (a1) calls; Bob (b1, b2), Carol (c1, c2) and Dave (d1) are rung; Erin (e1) is outside.
    struct World {
        let server: TestServer
        let client: any TestClientProtocol
        let key: String
        let tokens: [String: String]
        let devices: [String: LiveDevice]

        static func identity(of device: String) -> String {
            ["a": "alice", "b": "bob", "c": "carol", "d": "dave", "e": "erin"][String(device.prefix(1))] ?? device
        }

        func start(_ body: String, by device: String = "a1") async throws -> CallResource {
            let response = try await client.send(.post, "/v1/calls", token: tokens[device], json: body)
            #expect(response.status == .created, "\(String(buffer: response.body))")
            return try response.decode(CallResource.self)
        }

        @discardableResult
        func command(_ command: String, _ callID: String, by device: String) async throws -> TestResponse {
            try await client.send(.post, "/v1/calls/\(callID)/\(command)", token: tokens[device])
        }

        func record(_ callID: String) async throws -> CallResource {
            try await client.send(.get, "/v1/calls/\(callID)", token: key).decode(CallResource.self)
        }

        func participants(_ callID: String) async throws -> [String: String] {
            Dictionary(uniqueKeysWithValues: (try await record(callID).participants ?? []).map { ($0.identity, $0.state) })
        }

        /// The first event of `type` about `callID` that `device` received, once it has.
        func event(_ device: String, _ type: CallEventType, _ callID: String, participant: String? = nil) async -> CallEvent? {
            await eventuallyValue {
                devices[device]?.events.first { $0.callId == callID && $0.type == type && (participant == nil || $0.participant == participant) }
            }
        }

        /// What breaks the one-ending rule for `callID` on the devices of `identities`: exactly one
        /// ending each and nothing after it, and `call.ended` only to a device that was in the call.
        func violations(_ callID: String, identities: Set<String>) async throws -> [String] {
            let record = try await record(callID)
            let inCall = Set((record.participants ?? []).compactMap(\.answeredBy))
            var broken: [String] = []
            for (name, device) in devices.sorted(by: { $0.key < $1.key }) where identities.contains(Self.identity(of: name)) {
                let events = device.events.filter { $0.callId == callID }
                let endings = events.filter { TerminalEventTests.terminal.contains($0.type) }
                if endings.count != 1 {
                    broken.append("\(name): \(endings.count) endings \(events.map(\.type.rawValue))")
                } else if let last = events.last, !TerminalEventTests.terminal.contains(last.type) {
                    broken.append("\(name): \(last.type.rawValue) after its ending")
                }
                if Self.identity(of: name) != "alice", endings.contains(where: { $0.type == .ended }), !inCall.contains(name) {
                    broken.append("\(name): call.ended but it was not in the call")
                }
            }
            return broken
        }

        func expectOneEndingEach(_ callID: String, identities: Set<String>, sourceLocation: SourceLocation = #_sourceLocation) async throws {
            _ = await eventually { ((try? await violations(callID, identities: identities)) ?? ["?"]).isEmpty }
            try await Task.sleep(for: .milliseconds(300))  // anything late would arrive now
            let broken = try await violations(callID, identities: identities)
            #expect(broken.isEmpty, "\(broken)", sourceLocation: sourceLocation)
        }
    }

    static func withWorld(connected: Set<String>? = nil, _ body: @Sendable (World) async throws -> Void) async throws {
        try await ConnectedDevices.with(
            ["a1": "alice", "b1": "bob", "b2": "bob", "c1": "carol", "c2": "carol", "d1": "dave", "e1": "erin"], connected: connected
        ) { world in
            try await body(World(server: world.server, client: world.client, key: world.key, tokens: world.tokens, devices: world.devices))
        }
    }

    @Test func inModeFirstTheFirstAcceptWinsAndEveryOtherDeviceOfEveryCalleeStops() async throws {
        try await Self.withWorld { world in
            let call = try await world.start(#"{"to":["bob","carol","dave"],"displayName":"Alice"}"#)
            #expect(call.mode == "first")
            #expect(call.to == "bob")
            #expect(call.participants?.map(\.identity) == ["bob", "carol", "dave"])
            #expect(call.participants?.allSatisfy { $0.state == "ringing" } == true)
            for device in ["b1", "b2", "c1", "c2", "d1"] {
                let ring = await world.event(device, .incoming, call.id)
                #expect(ring?.call.displayName == "Alice", "\(device)")
            }

            try await world.devices["c2"]?.send(.accept(callId: call.id))
            let accepted = await world.event("a1", .accepted, call.id)
            #expect(accepted?.participant == "carol")
            for device in ["b1", "b2", "c1", "d1"] {
                #expect(await world.event(device, .answeredElsewhere, call.id) != nil, "\(device)")
            }
            #expect(await world.event("c2", .accepted, call.id) != nil)
            #expect(try await world.participants(call.id) == ["bob": "answered_elsewhere", "carol": "accepted", "dave": "answered_elsewhere"])
            let late = try await world.command("accept", call.id, by: "b1")
            #expect(late.status == .conflict)

            #expect(try await world.command("end", call.id, by: "a1").status == .ok)
            #expect(await world.event("c2", .ended, call.id) != nil)
            let record = try await world.record(call.id)
            #expect(record.state == "ended")
            #expect(record.answeredBy == "c2")
            try await world.expectOneEndingEach(call.id, identities: ["alice", "bob", "carol", "dave"])
            // Erin was never part of it, and may not see it.
            #expect(world.devices["e1"]?.events.isEmpty == true)
            #expect(try await world.client.send(.get, "/v1/calls/\(call.id)", token: world.tokens["e1"]).status == .notFound)
        }
    }

    @Test func racingAcceptsInModeFirstHaveOneWinner() async throws {
        try await Self.withWorld { world in
            for round in 0..<3 {
                let call = try await world.start(#"{"to":["bob","carol","dave"]}"#)
                for device in ["b1", "b2", "c1", "c2", "d1"] { _ = await world.event(device, .incoming, call.id) }
                // Every callee device accepts at once, half over REST, half over the socket.
                let results = try await withThrowingTaskGroup(of: Bool?.self) { group in
                    for (index, device) in ["b1", "b2", "c1", "c2", "d1"].enumerated() {
                        group.addTask {
                            if (index + round) % 2 == 0 {
                                try await world.devices[device]?.send(.accept(callId: call.id))
                                return nil
                            }
                            return try await world.command("accept", call.id, by: device).status == .ok
                        }
                    }
                    return try await group.reduce(into: [Bool?]()) { $0.append($1) }
                }
                #expect(results.filter { $0 == true }.count <= 1)
                _ = await world.event("a1", .accepted, call.id)
                let participants = try await world.participants(call.id)
                #expect(participants.values.filter { $0 == "accepted" }.count == 1, "\(participants)")
                #expect(participants.values.filter { $0 == "answered_elsewhere" }.count == 2, "\(participants)")
                #expect(try await world.command("end", call.id, by: "a1").status == .ok)
                try await world.expectOneEndingEach(call.id, identities: ["alice", "bob", "carol", "dave"])
            }
        }
    }

    @Test func inModeAllEachCalleeJoinsOnItsOwnAndTheLastOneOutEndsTheCall() async throws {
        try await Self.withWorld { world in
            let call = try await world.start(#"{"to":["bob","carol","dave"],"mode":"all"}"#)
            #expect(call.mode == "all")
            for device in ["b1", "b2", "c1", "c2", "d1"] { _ = await world.event(device, .incoming, call.id) }

            #expect(try await world.command("accept", call.id, by: "b1").status == .ok)
            #expect(await world.event("a1", .accepted, call.id, participant: "bob") != nil)
            #expect(await world.event("b2", .answeredElsewhere, call.id) != nil)
            // Carol and Dave ring on: nothing reaches them.
            try await Task.sleep(for: .milliseconds(300))
            #expect(world.devices["c1"]?.events.filter { $0.callId == call.id }.map(\.type) == [.incoming])

            try await world.devices["c2"]?.send(.accept(callId: call.id))
            let joined = await world.event("a1", .participantUpdated, call.id, participant: "carol")
            #expect(joined?.reason == "accepted")
            #expect(await world.event("c1", .answeredElsewhere, call.id) != nil)

            #expect(try await world.command("reject", call.id, by: "d1").status == .ok)
            #expect(await world.event("a1", .participantUpdated, call.id, participant: "dave")?.reason == "declined")
            #expect(try await world.participants(call.id) == ["bob": "accepted", "carol": "accepted", "dave": "declined"])

            // Bob leaves; the call goes on with Carol. Then Carol leaves, and the call is over.
            #expect(try await world.command("end", call.id, by: "b1").status == .ok)
            #expect(await world.event("a1", .participantUpdated, call.id, participant: "bob")?.reason == "left")
            #expect(await world.event("b1", .ended, call.id) != nil)
            #expect(try await world.record(call.id).state == "accepted")
            #expect(try await world.command("end", call.id, by: "b1").status == .conflict)

            try await world.devices["c2"]?.send(.end(callId: call.id))
            #expect(await world.event("a1", .ended, call.id) != nil)
            let record = try await world.record(call.id)
            #expect(record.state == "ended")
            #expect(record.endedBy == "carol")
            #expect(record.participants?.first { $0.identity == "bob" }?.state == "left")
            #expect(record.participants?.first { $0.identity == "carol" }?.state == "left")
            try await world.expectOneEndingEach(call.id, identities: ["alice", "bob", "carol", "dave"])
        }
    }

    @Test func theRingTimeoutMissesOnlyThoseStillRingingAndTheCallerEndingCancelsTheRest() async throws {
        try await Self.withWorld { world in
            let timedOut = try await world.start(#"{"to":["bob","carol","dave"],"mode":"all","ringTimeoutSeconds":20}"#)
            let cancelled = try await world.start(#"{"to":["bob","carol","dave"],"mode":"all","ringTimeoutSeconds":60}"#)
            for call in [timedOut, cancelled] {
                for device in ["b1", "b2", "c1", "c2", "d1"] { _ = await world.event(device, .incoming, call.id) }
                #expect(try await world.command("accept", call.id, by: "b1").status == .ok)
            }

            world.server.clock.advance(by: 21)
            for device in ["c1", "c2", "d1"] {
                #expect(await world.event(device, .missed, timedOut.id) != nil, "\(device)")
            }
            #expect(await world.event("a1", .participantUpdated, timedOut.id, participant: "dave")?.reason == "unanswered")
            #expect(try await world.participants(timedOut.id) == ["bob": "accepted", "carol": "missed", "dave": "missed"])
            #expect(try await world.record(timedOut.id).state == "accepted")
            #expect(try await world.command("accept", timedOut.id, by: "c1").status == .conflict)

            // The caller hangs up the other call while Carol and Dave still ring: their rings end as cancelled.
            #expect(try await world.command("end", cancelled.id, by: "a1").status == .ok)
            for device in ["c1", "c2", "d1"] {
                #expect(await world.event(device, .cancelled, cancelled.id) != nil, "\(device)")
            }
            #expect(await world.event("b1", .ended, cancelled.id) != nil)
            #expect(try await world.participants(cancelled.id) == ["bob": "accepted", "carol": "cancelled", "dave": "cancelled"])

            #expect(try await world.command("end", timedOut.id, by: "b1").status == .ok)
            for call in [timedOut, cancelled] {
                try await world.expectOneEndingEach(call.id, identities: ["alice", "bob", "carol", "dave"])
            }
        }
    }

    @Test func busyAppliesToEachCallee() async throws {
        try await Self.withWorld { world in
            // Dave is in a call with Erin.
            let busyCall = try await world.start(#"{"to":"dave"}"#, by: "e1")
            _ = await world.event("d1", .incoming, busyCall.id)
            #expect(try await world.command("accept", busyCall.id, by: "d1").status == .ok)

            // Ringing anyway: only Dave's ring says he is busy.
            let ringing = try await world.start(#"{"to":["bob","dave"]}"#)
            #expect(await world.event("d1", .incoming, ringing.id)?.calleeBusy == true)
            #expect(await world.event("b1", .incoming, ringing.id)?.calleeBusy == nil)
            #expect(try await world.command("cancel", ringing.id, by: "a1").status == .ok)

            // `ifBusy: reject`: Dave is not rung, Bob is.
            let skipping = try await world.start(#"{"to":["bob","dave"],"ifBusy":"reject"}"#)
            #expect(skipping.state == "ringing")
            #expect(Dictionary(uniqueKeysWithValues: (skipping.participants ?? []).map { ($0.identity, $0.state) }) == ["bob": "ringing", "dave": "busy"])
            _ = await world.event("b1", .incoming, skipping.id)
            try await Task.sleep(for: .milliseconds(300))
            #expect(world.devices["d1"]?.events.contains { $0.callId == skipping.id } == false)

            // In mode `all`, Bob answering makes Bob busy but not Carol, who was rung too: her
            // next call rings without the flag, Bob's says he is busy.
            let group = try await world.start(#"{"to":["carol","bob"],"mode":"all"}"#)
            _ = await world.event("b1", .incoming, group.id)
            #expect(try await world.command("accept", group.id, by: "b1").status == .ok)
            let toCarol = try await world.start(#"{"to":"carol"}"#, by: "e1")
            #expect(await world.event("c1", .incoming, toCarol.id)?.calleeBusy == nil)
            let toBob = try await world.start(#"{"to":"bob"}"#, by: "e1")
            #expect(await world.event("b1", .incoming, toBob.id)?.calleeBusy == true)

            // Everyone busy, with `ifBusy: reject`: the call ends at once, told to the caller.
            let refused = try await world.start(#"{"to":["bob","dave"],"ifBusy":"reject"}"#)
            #expect(refused.state == "rejected")
            #expect(refused.endReason == "busy")
            #expect(await world.event("a1", .rejected, refused.id)?.reason == "busy")
        }
    }

    @Test func identitiesWithNothingToRingAreUnreachable() async throws {
        try await Self.withWorld(connected: ["a1", "b1"]) { world in
            let call = try await world.start(#"{"to":["bob","carol"]}"#)
            #expect(Dictionary(uniqueKeysWithValues: (call.participants ?? []).map { ($0.identity, $0.state) }) == ["bob": "ringing", "carol": "unreachable"])
            #expect(try await world.command("reject", call.id, by: "b1").status == .ok)
            #expect(try await world.record(call.id).state == "rejected")

            let nobody = try await world.client.send(.post, "/v1/calls", token: world.tokens["a1"], json: #"{"to":["carol","dave"]}"#)
            #expect(nobody.status == .notFound)
            #expect(nobody.errorCode == "no_reachable_device")
        }
    }

    @Test func badGroupsAreRefusedByField() async throws {
        try await Self.withWorld(connected: []) { world in
            let tooMany = "[" + (1...21).map { #""u\#($0)""# }.joined(separator: ",") + "]"
            for (body, field) in [
                (#"{"to":\#(tooMany)}"#, "to"), (#"{"to":[]}"#, "to"), (#"{"to":["bob","bob"]}"#, "to[1]"),
                (#"{"to":["bob","alice"]}"#, "to[1]"), (#"{"to":["bob",""]}"#, "to[1]"), (#"{"to":["bob","carol"],"mode":"any"}"#, "mode"),
                (#"{"to":["bob",7]}"#, nil),
            ] as [(String, String?)] {
                let response = try await world.client.send(.post, "/v1/calls", token: world.tokens["a1"], json: body)
                #expect(response.status == .unprocessableContent, "\(body)")
                if let field { #expect(String(buffer: response.body).contains("The field '\(field)'"), "\(body): \(String(buffer: response.body))") }
            }
            // A list of one is a call to one.
            _ = try await world.client.createBinding(#"{"identity":"bob","type":"fcm","token":"\#(FCMTestPushTests.fcmToken(1))"}"#, token: world.key)
            let one = try await world.client.send(.post, "/v1/calls", token: world.tokens["a1"], json: #"{"to":["bob"],"mode":"all"}"#)
            #expect(one.status == .created)
            let resource = try one.decode(CallResource.self)
            #expect(resource.to == "bob")
            #expect(resource.participants == nil)
        }
    }

    @Test func everyIdentityRungFindsTheCallInItsHistory() async throws {
        try await Self.withWorld { world in
            let call = try await world.start(#"{"to":["bob","carol","dave"]}"#)
            #expect(try await world.command("cancel", call.id, by: "a1").status == .ok)
            for (identity, device) in [("bob", "b1"), ("carol", "c1"), ("dave", "d1"), ("alice", "a1")] {
                let mine = try await world.client.send(.get, "/v1/calls", token: world.tokens[device]).decode(CallList.self)
                #expect(mine.data.map(\.id) == [call.id], "\(identity)")
                let asKey = try await world.client.send(.get, "/v1/calls?identity=\(identity)", token: world.key).decode(CallList.self)
                #expect(asKey.data.map(\.id) == [call.id], "\(identity)")
            }
            let incoming = try await world.client.send(.get, "/v1/calls?identity=dave&direction=incoming&state=cancelled", token: world.key)
                .decode(CallList.self)
            #expect(incoming.data.map(\.id) == [call.id])
            #expect(try await world.client.send(.get, "/v1/calls", token: world.tokens["e1"]).decode(CallList.self).data.isEmpty)
        }
    }
}

/// Ring groups through the push simulators: each callee's missed-call notices on their own, and a
/// sealed group ringing each boxed binding of every callee.
@Suite struct RingGroupPushTests {
    @Test func eachCalleeWhoseRingEndsUnansweredIsNotifiedOnItsOwn() async throws {
        try await SimulatorWorld.with { world in
            // Bob takes the ring live on b1 and answers; Carol (an alert binding) and Dave (FCM) are offline.
            _ = try await world.binding("apns_alert", token: apnsToken(seed: 61), device: "b1")
            _ = try await world.binding("apns_alert", token: apnsToken(seed: 62), device: "c9", identity: "carol")
            _ = try await world.binding("apns_voip", token: apnsToken(seed: 63), device: "c9", identity: "carol")
            _ = try await world.binding("fcm", token: FCMTestPushTests.fcmToken(64), device: "d9", identity: "dave")
            let bobToken = try await world.client.accessToken(identity: "bob", deviceID: "b1", key: world.key)
            let b1 = try await LiveDevice.connect(port: world.port, token: bobToken)

            let call = try await world.call(
                #"{"from":"alice","to":["bob","carol","dave"],"mode":"all","displayName":"Alice","notifyMissed":true,"ringTimeoutSeconds":20}"#)
            #expect(try await b1.nextEvent().type == .incoming)
            #expect(try await world.client.send(.post, "/v1/calls/\(call.id)/accept", token: bobToken).status == .ok)

            // The ring times out for Carol and Dave while Bob stays in the call: one notice each.
            world.server.clock.advance(by: 21)
            let record = try await world.record(call.id, notices: 2)
            #expect(record.state == "accepted")
            let notices = (record.deliveries ?? []).filter { $0.kind == MissedCallNotices.kind }
            #expect(Set(notices.compactMap(\.deviceId)) == ["c9", "d9"])
            #expect(notices.allSatisfy { $0.outcome == "delivered" })
            #expect(world.alerts.map(\.deviceToken) == [apnsToken(seed: 62)])
            #expect(world.notifications.map(\.registrationToken) == [FCMTestPushTests.fcmToken(64)])

            // Ending the call tells nobody else anything: Bob answered, the others were told once.
            #expect(try await world.client.send(.post, "/v1/calls/\(call.id)/end", token: bobToken).status == .ok)
            try await Task.sleep(for: .milliseconds(300))
            #expect(world.alerts.count == 1 && world.notifications.count == 1)
            await b1.close()
        }
    }

    @Test func aSealedGroupRingsEachBoxedBindingOfEveryCallee() async throws {
        try await SimulatorWorld.with { world in
            let key = IdentityKeysTests.publicKey()
            let bob = try await world.binding("apns_voip", token: apnsToken(seed: 71), device: "b1", publicKey: key)
            let carol = try await world.binding("apns_alert", token: apnsToken(seed: 72), device: "c1", publicKey: key, identity: "carol")
            _ = try await world.binding("apns_voip", token: apnsToken(seed: 73), device: "d1", publicKey: key, identity: "dave")
            let boxes = [bob.id: "Ym94LWZvci1ib2I=", carol.id: "Ym94LWZvci1jYXJvbA=="]
            let sealed = boxes.map { #"{"bindingId":"\#($0.key)","box":"\#($0.value)"}"# }.joined(separator: ",")
            // Dave has no box: nothing can ring for him.
            let call = try await world.call(#"{"from":"alice","to":["bob","carol","dave"],"sealed":[\#(sealed)]}"#)
            #expect(call.sealed == true)
            #expect(call.participants?.first { $0.identity == "dave" }?.state == "unreachable")

            let pushed = try await LiveDeliveryTests.pushes(to: [apnsToken(seed: 71), apnsToken(seed: 72)], at: world.apns)
            struct Push: Decodable { var ringrelay: NativeInvite }
            var opened: [String: String] = [:]
            for push in pushed { opened[push.deviceToken] = try JSONDecoder.ringRelay.decode(Push.self, from: push.payload).ringrelay.sealed }
            #expect(opened == [apnsToken(seed: 71): boxes[bob.id], apnsToken(seed: 72): boxes[carol.id]])
            try await Task.sleep(for: .milliseconds(300))
            #expect(!world.apns.received.contains { $0.deviceToken == apnsToken(seed: 73) })

            // A box for a binding of nobody called is refused by its position.
            let outsider = try await world.binding("apns_alert", token: apnsToken(seed: 74), device: "e1", publicKey: key, identity: "erin")
            let refused = try await world.client.send(
                .post, "/v1/calls", token: world.key,
                json: #"{"from":"alice","to":["bob","carol"],"sealed":[{"bindingId":"\#(outsider.id)","box":"Ym94"}]}"#)
            #expect(refused.status == .unprocessableContent)
            #expect(String(buffer: refused.body).contains("sealed[0].bindingId"))
        }
    }
}
