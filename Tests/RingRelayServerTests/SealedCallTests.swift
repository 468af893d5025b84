import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import RingRelayCore
import RingRelayTesting
import RingRelayWire
import Testing

@testable import RingRelayServer

/// A sealed call carries no plaintext about the caller, its boxes go only to the callee's own
/// bindings with a public key, and it rings only those: live, VoIP, alert or FCM, each with its own
/// box (issue 18).
@Suite struct SealedCallTests {
    @Test func sealedCallsRefusePlaintextAndForeignBoxes() async throws {
        try await LiveCallTests.withWorld { world in
            let key = world.key
            let alert = try await world.client.createBinding(
                #"{"identity":"bob","type":"apns_alert","token":"\#(String(repeating: "ab", count: 32))","publicKey":"\#(IdentityKeysTests.publicKey())"}"#,
                token: key)
            let fcm = try await world.client.createBinding(#"{"identity":"bob","type":"fcm","token":"bob-fcm"}"#, token: key)
            let carols = try await world.client.createBinding(
                #"{"identity":"carol","type":"apns_alert","token":"\#(String(repeating: "cd", count: 32))"}"#, token: key)
            func sealed(_ bindingID: String, extra: String = "") -> String {
                #"{"to":"bob"\#(extra),"sealed":[{"bindingId":"\#(bindingID)","box":"AAAA"}]}"#
            }
            let refusals: [(String, String)] = [
                (sealed(alert.id, extra: #","displayName":"Alice""#), "displayName"),
                (sealed(alert.id, extra: #","metadata":{"room":"r1"}"#), "metadata"),
                (sealed(fcm.id), "sealed[0].bindingId"),
                (sealed(carols.id), "sealed[0].bindingId"),
                (sealed("bnd_00000000000000000000000000"), "sealed[0].bindingId"),
            ]
            for (body, field) in refusals {
                let response = try await world.client.send(.post, "/v1/calls", token: world.alice, json: body)
                #expect(response.status == .unprocessableContent, "\(body)")
                let error = try response.decode(ErrorBody.self).error
                #expect(error.code == "invalid_field")
                #expect(error.message.contains("'\(field)'"), "\(error.message)")
            }
            // Nothing was created by the refusals: the history is empty.
            #expect(try await world.client.send(.get, "/v1/calls", token: key).decode(CallList.self).data.isEmpty)

            // A box for the callee's own alert binding, and nothing in clear: the call is placed.
            let placed = try await world.client.send(.post, "/v1/calls", token: world.alice, json: sealed(alert.id))
            #expect(placed.status == .created, "\(String(buffer: placed.body))")
            let call = try placed.decode(CallResource.self)
            #expect(call.displayName == nil)
            #expect(call.metadata == nil)
        }
    }

    /// A caller may choose its call's id (`callId`), as RingRelayKit does so each box can name its
    /// call: the call gets that id, an id in another shape is refused by name, and an id taken
    /// (in this account or another) answers 409 `call_id_taken` without ringing anything.
    @Test func aCallerMayChooseItsCallsID() async throws {
        try await LiveCallTests.withWorld { world in
            let key = world.key
            let alert = try await world.client.createBinding(
                #"{"identity":"bob","type":"apns_alert","token":"\#(String(repeating: "ab", count: 32))","publicKey":"\#(IdentityKeysTests.publicKey())"}"#,
                token: key)
            let callId = "call_06h5p0m3j5ka1xyz0q2w3e4r5t"
            let body = #"{"callId":"\#(callId)","to":"bob","sealed":[{"bindingId":"\#(alert.id)","box":"AAAA"}]}"#
            let placed = try await world.client.send(.post, "/v1/calls", token: world.alice, json: body)
            #expect(placed.status == .created, "\(String(buffer: placed.body))")
            #expect(try placed.decode(CallResource.self).id == callId)
            #expect(try await world.client.send(.get, "/v1/calls/\(callId)", token: key).status == .ok)

            let again = try await world.client.send(.post, "/v1/calls", token: world.alice, json: body)
            #expect(again.status == .conflict && again.errorCode == "call_id_taken", "\(String(buffer: again.body))")
            // Another account's caller gets the same answer for the id: ids are 128 bits, so
            // nobody learns of a call this way without already knowing its id.
            let other = try await world.client.createAccount("other", admin: world.server.adminToken).apiKey
            #expect(try await world.client.createBinding(#"{"identity":"bob","type":"fcm","token":"other-bob"}"#, token: other).identity == "bob")
            let foreign = try await world.client.send(.post, "/v1/calls", token: other, json: #"{"callId":"\#(callId)","from":"zed","to":"bob"}"#)
            #expect(foreign.status == .conflict && foreign.errorCode == "call_id_taken", "\(String(buffer: foreign.body))")
            #expect(try await world.client.send(.get, "/v1/calls", token: other).decode(CallList.self).data.isEmpty)

            for bad in ["call_1", "bnd_06h5p0m3j5ka1xyz0q2w3e4r5t", "call_06H5P0M3J5KA1XYZ0Q2W3E4R5T", String(repeating: "c", count: 5_000)] {
                let refused = try await world.client.send(.post, "/v1/calls", token: world.alice, json: #"{"callId":"\#(bad)","to":"bob"}"#)
                #expect(refused.status == .unprocessableContent && refused.errorCode == "invalid_field", "\(bad.prefix(40))")
                #expect(String(buffer: refused.body).contains("'callId'"), "\(String(buffer: refused.body))")
            }
        }
    }

    /// The largest valid sealed call fits the route's limit: twenty callees with 256-byte
    /// identities and 100 boxes of 3,072 characters (about 320 KB; the general 64 KiB limit
    /// refused it), padded to the limit even. One box more is refused by name, one byte more 413.
    @Test func theLargestSealedCallFitsItsLimit() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            let callees = (0..<RingGroup.maxMembers).map { "callee-\($0)-".padding(toLength: 256, withPad: "x", startingAt: 0) }
            let caller = "caller-".padding(toLength: 256, withPad: "x", startingAt: 0)
            // Five FCM bindings with a key for each callee (FCM is not configured: ringing sends nothing).
            let publicKey = IdentityKeysTests.publicKey()
            let upserts = callees.flatMap { identity in
                (0..<5).map { #"{"identity":"\#(identity)","type":"fcm","token":"\#(identity)-\#($0)","publicKey":"\#(publicKey)"}"# }
            }
            let batch = try await client.send(.post, "/v1/bindings/batch", token: key, json: #"{"upsert":[\#(upserts.joined(separator: ","))]}"#)
            #expect(batch.status == .ok, "\(String(buffer: batch.body).prefix(300))")
            let bindings = try await client.send(.get, "/v1/bindings?limit=500", token: key).decode(BindingList.self).data.map(\.id)
            #expect(bindings.count == CallService.maxSealedInvites)

            let box = Data(repeating: 0xAB, count: 2304).base64EncodedString()
            #expect(box.count == CallService.maxSealedBoxLength)
            func call(boxing ids: [String]) -> String {
                let sealed = ids.map { #"{"bindingId":"\#($0)","box":"\#(box)"}"# }.joined(separator: ",")
                let to = callees.map { #""\#($0)""# }.joined(separator: ",")
                return #"{"from":"\#(caller)","to":[\#(to)],"mode":"all","ringTimeoutSeconds":180,"ifBusy":"ring","notifyMissed":true,"sealed":[\#(sealed)]}"#
            }
            let largest = call(boxing: bindings)
            #expect(largest.utf8.count > 300_000)
            let limit = CallsController.maxStartBodyBytes(general: server.configuration.maxBodyBytes)
            // JSON may have any amount of whitespace: the same call padded to the limit, and past it.
            func padded(_ size: Int) -> String { largest.dropLast() + String(repeating: " ", count: size - largest.utf8.count) + "}" }
            for body in [largest, padded(limit)] {
                let placed = try await client.send(.post, "/v1/calls", token: key, json: body)
                #expect(placed.status == .created, "\(body.utf8.count) bytes: \(String(buffer: placed.body).prefix(300))")
                #expect(try placed.decode(CallResource.self).sealed == true)
            }
            let oneBoxMore = try await client.send(.post, "/v1/calls", token: key, json: call(boxing: bindings + [bindings[0]]))
            #expect(oneBoxMore.status == .unprocessableContent)
            #expect(String(buffer: oneBoxMore.body).contains("The field 'sealed' is invalid: must hold at most 100 invites"), "\(String(buffer: oneBoxMore.body))")
            let oneByteMore = try await client.send(.post, "/v1/calls", token: key, json: padded(limit + 1))
            #expect(oneByteMore.status == .contentTooLarge)
            #expect(oneByteMore.errorCode == "body_too_large")
        }
    }

    /// Boxes for the callee's real keyed bindings, refused for their shape alone: not base64,
    /// empty, or one character over the limit (valid base64, so only the limit can refuse it);
    /// an empty `sealed`, or `media` beside it. Nothing is stored, and nothing rings on the socket
    /// or at either push service; a box of exactly the limit then rings all three.
    @Test func badBoxesForRealBindingsAreRefusedAndNothingRings() async throws {
        try await SimulatorWorld.with { world in
            let key = IdentityKeysTests.publicKey()
            let live = try await world.binding("apns_voip", token: apnsToken(seed: 61), device: "b1", publicKey: key)
            let fcm = try await world.binding("fcm", token: FCMTestPushTests.fcmToken(62), device: "b2", publicKey: key)
            let alert = try await world.binding("apns_alert", token: apnsToken(seed: 63), device: "b3", publicKey: key)
            let b1 = try await LiveDevice.connect(
                port: world.port, token: try await world.client.accessToken(identity: "bob", deviceID: "b1", key: world.key))
            let limit = CallService.maxSealedBoxLength
            func call(_ boxes: [(BindingResource, String)], extra: String = "") -> String {
                let sealed = boxes.map { #"{"bindingId":"\#($0.0.id)","box":"\#($0.1)"}"# }.joined(separator: ",")
                return #"{"from":"alice","to":"bob"\#(extra),"sealed":[\#(sealed)]}"#
            }
            let refusals: [(body: String, field: String, says: String)] = [
                (call([(live, "AAAA"), (alert, "not base64!")]), "sealed[1].box", "must be base64."),
                (call([(live, "AAAA"), (alert, "")]), "sealed[1].box", "this one has 0."),
                (call([(live, "AAAA"), (alert, String(repeating: "AAAA", count: limit / 4 + 1))]), "sealed[1].box", "this one has \(limit + 4)."),
                (call([], extra: #","displayName":"Alice""#), "sealed", "at least one invite"),
                (call([(live, "AAAA")], extra: #","media":"video""#), "media", "must not be given with 'sealed'"),
            ]
            for (body, field, says) in refusals {
                let response = try await world.client.send(.post, "/v1/calls", token: world.key, json: body)
                #expect(response.status == .unprocessableContent, "\(body.prefix(200))")
                guard response.status == .unprocessableContent else { continue }
                let error = try response.decode(ErrorBody.self).error
                #expect(error.code == "invalid_field")
                #expect(error.message.contains("'\(field)' is invalid"), "\(error.message)")
                #expect(error.message.contains(says), "\(error.message)")
            }
            #expect(try await world.client.send(.get, "/v1/calls", token: world.key).decode(CallList.self).data.isEmpty)

            // A box of exactly the limit to each binding rings all three: the first thing the
            // socket and both push services hear of is this call.
            let fullBox = String(repeating: "AAAA", count: limit / 4)
            let placed = try await world.call(call([(live, fullBox), (fcm, fullBox), (alert, fullBox)]))
            let ring = try await b1.nextEvent()
            #expect(ring.callId == placed.id)
            #expect(ring.sealed == fullBox)
            let pushed = try await LiveDeliveryTests.pushes(to: [apnsToken(seed: 63)], at: world.apns)
            #expect(pushed.count == 1)
            #expect(pushed.allSatisfy { $0.payload.range(of: Data(placed.id.utf8)) != nil })
            var messages = world.fcm.received
            for _ in 0..<500 where messages.isEmpty {
                try await Task.sleep(for: .milliseconds(20))
                messages = world.fcm.received
            }
            #expect(messages.count == 1)
            #expect(messages.allSatisfy { $0.body.range(of: Data(placed.id.utf8)) != nil })
            #expect(try await world.client.send(.get, "/v1/calls", token: world.key).decode(CallList.self).data.map(\.id) == [placed.id])
            await b1.close()
        }
    }

    /// A device without a push token (a terminal) carries its key on a `live` binding: it rings
    /// over its socket, with its box on a sealed call, and nothing ever pushes to it; away, it
    /// cannot be rung.
    @Test func aLiveBindingRingsOnlyOverItsSocket() async throws {
        try await SimulatorWorld.with { world in
            let key = IdentityKeysTests.publicKey()
            for (body, code) in [
                (#"{"identity":"bob","type":"live","token":"terminal 1"}"#, "invalid_token"),
                (#"{"identity":"bob","type":"live","token":"terminal-1","environment":"sandbox"}"#, "invalid_field"),
            ] {
                let refused = try await world.client.send(.post, "/v1/bindings", token: world.key, json: body)
                #expect(refused.status == .unprocessableContent, "\(body)")
                #expect(refused.errorCode == code, "\(body)")
            }
            let terminal = try await world.binding("live", token: "terminal-1", device: "t1", publicKey: key)
            #expect(terminal.environment == nil)
            let keys = try await world.client.send(.get, "/v1/identities/bob/keys", token: world.key).decode(DeviceKeyList.self)
            #expect(keys.data.map(\.type) == ["live"])
            let test = try await world.client.send(.post, "/v1/bindings/\(terminal.id)/test", token: world.key)
            #expect(test.status == .unprocessableContent)
            #expect(test.errorCode == "channel_not_supported")

            // Away: neither a plain nor a sealed call finds anything to ring.
            let sealed = #"{"from":"alice","to":"bob","sealed":[{"bindingId":"\#(terminal.id)","box":"AAAA"}]}"#
            for body in [#"{"from":"alice","to":"bob"}"#, sealed] {
                let away = try await world.client.send(.post, "/v1/calls", token: world.key, json: body)
                #expect(away.status == .notFound, "\(body)")
                let error = try away.decode(ErrorBody.self).error
                #expect(error.code == "no_reachable_device")
                #expect(error.message == "The identity 'bob' has no live connection and no active binding this call can ring in this account.")
            }

            // Connected: both ring over the socket, the sealed one with its box.
            let device = try await LiveDevice.connect(
                port: world.port, token: try await world.client.accessToken(identity: "bob", deviceID: "t1", key: world.key))
            let plain = try await world.call(#"{"from":"alice","to":"bob"}"#)
            #expect(try await device.nextEvent().callId == plain.id)
            let boxed = try await world.call(sealed)
            let ring = try await device.nextEvent()
            #expect(ring.callId == boxed.id)
            #expect(ring.sealed == "AAAA")
            let record = try await world.client.send(.get, "/v1/calls/\(boxed.id)", token: world.key).decode(CallResource.self)
            #expect(record.deliveries?.map(\.channel) == ["websocket"])
            #expect(world.apns.received.isEmpty && world.fcm.received.isEmpty)
            await device.close()
        }
    }

    @Test func onlyTheBoxedBindingsRingEachWithItsOwnBox() async throws {
        try await SimulatorWorld.with { world in
            let key = IdentityKeysTests.publicKey()
            // b1: connected, VoIP binding with a box. b2: connected, no box. b3: FCM with a box,
            // offline. b4: alert with a box, offline. A VoIP binding with a key but no box stays quiet.
            let voip = try await world.binding("apns_voip", token: apnsToken(seed: 31), device: "b1", publicKey: key)
            _ = try await world.binding("apns_voip", token: apnsToken(seed: 32), device: "b2", publicKey: key)
            let fcm = try await world.binding("fcm", token: FCMTestPushTests.fcmToken(33), device: "b3", publicKey: key)
            let alert = try await world.binding("apns_alert", token: apnsToken(seed: 34), device: "b4", publicKey: key)
            _ = try await world.binding("apns_voip", token: apnsToken(seed: 35), device: nil, publicKey: key)
            let b1 = try await LiveDevice.connect(
                port: world.port, token: try await world.client.accessToken(identity: "bob", deviceID: "b1", key: world.key))
            let b2 = try await LiveDevice.connect(
                port: world.port, token: try await world.client.accessToken(identity: "bob", deviceID: "b2", key: world.key))
            let boxes = [voip.id: "Ym94LWZvci1iMQ==", fcm.id: "Ym94LWZvci1iMw==", alert.id: "Ym94LWZvci1iNA=="]
            let sealed = boxes.map { #"{"bindingId":"\#($0.key)","box":"\#($0.value)"}"# }.joined(separator: ",")
            let call = try await world.call(#"{"from":"alice","to":"bob","sealed":[\#(sealed)]}"#)
            #expect(call.sealed == true)

            let ring = try await b1.nextEvent()
            #expect(ring.type == .incoming)
            #expect(ring.sealed == boxes[voip.id])
            #expect(ring.call.displayName == nil && ring.call.metadata == nil)
            #expect(try await b2.receivesNothing())

            // The offline boxed bindings are pushed, each with its own box; nothing else is.
            let pushed = try await LiveDeliveryTests.pushes(to: [apnsToken(seed: 34)], at: world.apns)
            struct Push: Decodable { var ringrelay: NativeInvite }
            #expect(try JSONDecoder.ringRelay.decode(Push.self, from: try #require(pushed.first).payload).ringrelay.sealed == boxes[alert.id])
            var messages = world.fcm.received
            for _ in 0..<300 where messages.isEmpty {
                try await Task.sleep(for: .milliseconds(20))
                messages = world.fcm.received
            }
            let message = try #require(messages.first)
            let invite = try JSONDecoder.ringRelay.decode(NativeInvite.self, from: Data(try #require(message.data[NativeInvite.payloadKey]).utf8))
            #expect(invite.sealed == boxes[fcm.id])
            #expect(invite.callId == call.id)
            #expect(world.apns.received.map(\.deviceToken) == [apnsToken(seed: 34)])
            #expect(messages.count == 1)
            // What the push services saw names neither the caller nor its device.
            for body in world.apns.received.map(\.payload) + messages.map(\.body) {
                #expect(!String(decoding: body, as: UTF8.self).contains("alice"))
            }
            await b1.close()
            await b2.close()
        }
    }

    /// The first accept wins across a device rung live with its box and one rung by a sealed push,
    /// accepting at once; the loser hears it was answered elsewhere, and nothing rings after.
    @Test(.serialized, arguments: 0..<5) func theFirstAcceptWinsAcrossASocketAndAPushedDevice(round: Int) async throws {
        try await SimulatorWorld.with { world in
            let key = IdentityKeysTests.publicKey()
            let live = try await world.binding("apns_voip", token: apnsToken(seed: 40 + round), device: "b1", publicKey: key)
            let pushed = try await world.binding("apns_alert", token: apnsToken(seed: 50 + round), device: "b2", publicKey: key)
            let b1 = try await LiveDevice.connect(
                port: world.port, token: try await world.client.accessToken(identity: "bob", deviceID: "b1", key: world.key))
            let b2Token = try await world.client.accessToken(identity: "bob", deviceID: "b2", key: world.key)
            let call = try await world.call(
                #"{"from":"alice","to":"bob","sealed":[{"bindingId":"\#(live.id)","box":"AAAA"},{"bindingId":"\#(pushed.id)","box":"BBBB"}]}"#)
            #expect(try await b1.nextEvent().sealed == "AAAA")
            _ = try await LiveDeliveryTests.pushes(to: [apnsToken(seed: 50 + round)], at: world.apns)

            // Both accept at once: b1 over its socket, b2 (woken by its push) over REST.
            async let rest = world.client.send(.post, "/v1/calls/\(call.id)/accept", token: b2Token)
            try await b1.send(.accept(callId: call.id))
            let restStatus = try await rest.status
            let b1Heard = try await b1.nextEvent()
            let record = try await world.client.send(.get, "/v1/calls/\(call.id)", token: world.key).decode(CallResource.self)
            #expect(record.state == "accepted")
            if record.answeredBy == "b2" {
                #expect(restStatus == .ok)
                #expect(b1Heard.type == .answeredElsewhere)
            } else {
                #expect(record.answeredBy == "b1")
                #expect(restStatus == .conflict)
                #expect(b1Heard.type == .accepted)
            }
            // Nothing more about the call: b1's late accept may be answered with an error frame
            // (409), but no event follows its ending.
            try await Task.sleep(for: .milliseconds(300))
            #expect(b1.events.filter { $0.callId == call.id }.count == 2, "\(b1.events.map(\.type))")
            await b1.close()
        }
    }
}
