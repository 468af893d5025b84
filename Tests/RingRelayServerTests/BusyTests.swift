import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import RingRelayKit
import RingRelayWire
import Testing

@testable import RingRelayServer

/// A call to a callee who is in another call: rings with `calleeBusy` (call waiting), or with
/// `ifBusy: reject` (per call, or the account's default) ends at once as `rejected` / `busy`,
/// told to the caller only.
@Suite struct BusyTests {
    /// Alice calls Bob, b1 answers: Bob is busy until the returned call ends.
    static func busyBob(_ world: LiveCallTests.World) async throws -> CallResource {
        let call = try await world.call()
        #expect(try await world.command("accept", call.id, token: world.bob1).status == .ok)
        return call
    }

    @Test func rejectPerCallEndsAtOnceAndRingsNothing() async throws {
        try await LiveCallTests.withWorld { world in
            let bob1 = try await world.connect(world.bob1)
            let bob2 = try await world.connect(world.bob2)
            let carol = try await world.connect(world.carol)
            let first = try await Self.busyBob(world)
            _ = try await bob1.nextEvent()  // incoming
            _ = try await bob1.nextEvent()  // accepted
            _ = try await bob2.nextEvent()  // incoming
            _ = try await bob2.nextEvent()  // answered elsewhere

            let response = try await world.client.send(.post, "/v1/calls", token: world.carol, json: #"{"to":"bob","ifBusy":"reject"}"#)
            #expect(response.status == .created)
            let refused = try response.decode(CallResource.self)
            #expect(refused.state == "rejected")
            #expect(refused.endReason == "busy")
            #expect(refused.deliveries?.isEmpty == true)
            // The caller's devices hear why; the busy callee's devices hear nothing of it.
            let told = try await carol.nextEvent()
            #expect(told.type == .rejected)
            #expect(told.reason == "busy")
            #expect(told.callId == refused.id)
            #expect(try await bob1.receivesNothing())
            #expect(try await bob2.receivesNothing())

            // Without ifBusy (and the built-in default, ring) the busy callee rings, flagged.
            let waiting = try await world.call(#"{"to":"bob"}"#, token: world.carol)
            #expect(waiting.state == "ringing")
            #expect(try await bob2.nextEvent().calleeBusy == true)
            #expect(try await world.command("cancel", waiting.id, token: world.carol).status == .ok)
            #expect(try await world.command("end", first.id, token: world.alice).status == .ok)
            for device in [bob1, bob2, carol] { await device.close() }
        }
    }

    @Test func theAccountDefaultAppliesAndACallOverridesIt() async throws {
        try await LiveCallTests.withWorld { world in
            let bob1 = try await world.connect(world.bob1)
            let bob2 = try await world.connect(world.bob2)
            #expect(try await world.client.send(.get, "/v1/settings/calls", token: world.key).decode(CallSettings.self).ifBusy == "ring")
            let changed = try await world.client.send(.patch, "/v1/settings/calls", token: world.key, json: #"{"ifBusy":"reject"}"#)
            #expect(changed.status == .ok)
            #expect(try changed.decode(CallSettings.self).ifBusy == "reject")
            #expect(try await world.client.send(.get, "/v1/settings/calls", token: world.key).decode(CallSettings.self).ifBusy == "reject")

            // Not busy: the default does not matter, the call rings.
            let free = try await world.call(#"{"to":"bob"}"#, token: world.carol)
            #expect(free.state == "ringing")
            #expect(try await world.command("cancel", free.id, token: world.carol).status == .ok)

            let first = try await Self.busyBob(world)
            let refused = try await world.call(#"{"to":"bob"}"#, token: world.carol)
            #expect(refused.state == "rejected")
            #expect(refused.endReason == "busy")
            let ringsAnyway = try await world.call(#"{"to":"bob","ifBusy":"ring"}"#, token: world.carol)
            #expect(ringsAnyway.state == "ringing")
            #expect(try await world.command("end", first.id, token: world.alice).status == .ok)
            for device in [bob1, bob2] { await device.close() }
        }
    }

    @Test func badSettingsAndPoliciesAreRefused() async throws {
        try await LiveCallTests.withWorld { world in
            let bad = try await world.client.send(.post, "/v1/calls", token: world.carol, json: #"{"to":"bob","ifBusy":"maybe"}"#)
            #expect(bad.status == .unprocessableContent)
            #expect(bad.errorCode == "invalid_field")
            #expect(try await world.client.send(.patch, "/v1/settings/calls", token: world.key, json: #"{"ifBusy":"sometimes"}"#).status == .unprocessableContent)
            #expect(try await world.client.send(.patch, "/v1/settings/calls", token: world.key, json: #"{"ifBusy":"reject","x":1}"#).status.code / 100 == 4)
            #expect(try await world.client.send(.patch, "/v1/settings/calls", token: world.key, json: "{").status == .badRequest)
            #expect(try await world.client.send(.patch, "/v1/settings/calls", token: world.carol, json: #"{"ifBusy":"reject"}"#).status == .forbidden)
            #expect(try await world.client.send(.get, "/v1/settings/calls").status == .unauthorized)
            // Nothing was changed by the refused requests.
            #expect(try await world.client.send(.get, "/v1/settings/calls", token: world.key).decode(CallSettings.self).ifBusy == "ring")
        }
    }
}
